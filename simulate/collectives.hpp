// Alpha-beta cost of collectives on a hierarchical cluster (docs/model.md; NCCL's
// nccl-tests doc/PERFORMANCE.md). A group of P ranks inside one node runs over NVLink; a
// group spanning nodes is bound by the slower of NVLink and the node's network links
// shared among the group's members on that node. Ring: T = steps x alpha + factor(P) x n /
// busbw; tree all-reduce: 2 log2(P) x alpha + 2 n / busbw. Measured fits in the profile
// (collective_fits) replace the datasheet model for their op and level, with the size regime
// that covers the message (hw::regime_for).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"

namespace trainsim::sim {

enum class Collective { all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, send_recv };
/// automatic: the faster of ring and tree for all-reduce (NCCL tunes per size the same way).
enum class Algorithm { ring, tree, automatic };

[[nodiscard]] std::string_view to_string(Collective c);
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

/// Placement of a group: its size and how many of its members share a node.
struct Group {
  std::int64_t size = 1;
  std::int64_t per_node = 1; // members on each node (== size when inside one node)
  [[nodiscard]] bool spans_nodes() const { return size > per_node; }
};

struct CollectiveCost {
  Collective op = Collective::all_reduce;
  double bytes = 0; // payload n (nccl-tests "size")
  std::int64_t num_ranks = 1;
  double latency_s = 0;   // alpha part
  double bandwidth_s = 0; // beta part
  double time_s = 0;
  double busbw_bytes_per_s = 0; // achieved bus bandwidth the model used
  double algbw_bytes_per_s = 0; // bytes / time
  LinkLevel level = LinkLevel::none;
  bool from_fit = false;
};

[[nodiscard]] CollectiveCost collective_cost(Collective op, double bytes, const Group& group,
                                             const hw::ClusterSpec& cluster,
                                             const hw::HardwareProfile& profile,
                                             Algorithm algorithm = Algorithm::automatic);

} // namespace trainsim::sim
