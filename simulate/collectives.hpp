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

#include "hardware/collective.hpp"
#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"

namespace trainsim::sim {

// The collectives, link levels, their names and nccl-tests' busbw factor are defined once in
// hardware/collective.hpp (the measured fits in a profile need them too); the simulator speaks of
// them as sim::Collective, sim::LinkLevel, ...
using hw::busbw_factor;
using hw::Collective;
using hw::LinkLevel;
using hw::parse_collective;
using hw::to_string;

/// automatic: the faster of ring and tree for all-reduce (NCCL tunes per size the same way).
enum class Algorithm { ring, tree, automatic };

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
