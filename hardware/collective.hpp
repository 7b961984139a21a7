// The collectives and link levels, named once for every layer: the cost model (simulate/), the
// measured fits in a HardwareProfile (hardware/profile.hpp) and the NCCL benchmarks (validate/).
// Names and bus-bandwidth factors follow nccl-tests (doc/PERFORMANCE.md). Pure: no I/O.
#pragma once

#include <cstdint>
#include <string_view>

namespace trainsim::hw {

enum class Collective { all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, send_recv };

/// "all-reduce", "reduce-scatter", "all-gather", "broadcast", "all-to-all", "send-recv" (the
/// spelling of profile fits, flags and JSON output).
[[nodiscard]] std::string_view to_string(Collective c);
/// Inverse of to_string(Collective); false (and `out` untouched) for an unknown name.
[[nodiscard]] bool parse_collective(std::string_view s, Collective& out);

/// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md), the one definition the model, the
/// fits and the benchmarks use: all-reduce 2(P-1)/P; reduce-scatter, all-gather and all-to-all
/// (P-1)/P; broadcast and send/recv 1. P = 1 gives 0 for the first two groups.
[[nodiscard]] double busbw_factor(Collective c, std::int64_t num_ranks);

/// Where a collective runs: inside one node (NVLink), across nodes (network), or nowhere (one
/// rank, or no bytes).
enum class LinkLevel { none, intra_node, inter_node };
/// "none", "intra-node", "inter-node" (the spelling of profile fits and JSON output).
[[nodiscard]] std::string_view to_string(LinkLevel level);
/// Inverse of to_string(LinkLevel); false (and `out` untouched) for an unknown name.
[[nodiscard]] bool parse_link_level(std::string_view s, LinkLevel& out);

} // namespace trainsim::hw
