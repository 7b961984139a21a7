// Alpha-beta collective costs (collectives.hpp).
#include "simulate/collectives.hpp"

#include <algorithm>
#include <cmath>

namespace trainsim::sim {

namespace {
// Sequential algorithm steps of a ring (each pays the per-step latency).
double ring_steps(Collective c, double P) {
  switch (c) {
  case Collective::all_reduce: return 2 * (P - 1);
  case Collective::reduce_scatter:
  case Collective::all_gather:
  case Collective::all_to_all: return P - 1;
  case Collective::broadcast: return P - 1;
  case Collective::send_recv: return 1;
  }
  return P - 1;
}
} // namespace

CollectiveCost collective_cost(Collective op, double bytes, const Group& group,
                               const hw::ClusterSpec& cluster, const hw::HardwareProfile& profile,
                               Algorithm algorithm) {
  if (algorithm == Algorithm::automatic) {
    const auto ring = collective_cost(op, bytes, group, cluster, profile, Algorithm::ring);
    if (op != Collective::all_reduce)
      return ring;
    const auto tree = collective_cost(op, bytes, group, cluster, profile, Algorithm::tree);
    return tree.time_s < ring.time_s ? tree : ring;
  }
  CollectiveCost c;
  c.op = op;
  c.bytes = bytes;
  c.num_ranks = group.size;
  if ((group.size <= 1 && op != Collective::send_recv) || bytes <= 0) {
    c.level = LinkLevel::none;
    return c;
  }
  const bool inter = group.spans_nodes() ||
                     (op == Collective::send_recv && group.per_node <= 1 && cluster.num_nodes > 1);
  c.level = inter ? LinkLevel::inter_node : LinkLevel::intra_node;
  const double P = static_cast<double>(std::max<std::int64_t>(group.size, 2));
  const double factor = busbw_factor(op, op == Collective::send_recv ? 2 : group.size);
  // A measured fit for this op and level wins over the datasheet model; its regime is the one
  // covering this message size (NCCL's protocol/algorithm for that size: profile.hpp).
  for (const auto& f : profile.collective_fits) {
    if (f.op == op && f.level == c.level) {
      const hw::CollectiveRegime r = hw::regime_for(f, bytes);
      c.from_fit = true;
      c.latency_s = r.alpha_s;
      c.busbw_bytes_per_s = r.busbw_bytes_per_s;
      break;
    }
  }
  if (!c.from_fit) {
    const double intra =
        cluster.intra_node_bandwidth_bytes_per_s * profile.intra_node_busbw_fraction;
    double busbw = intra;
    double step_latency = profile.intra_node_step_latency_s;
    if (inter) {
      // The node's network links are shared by its members of this group's rings: each
      // member contributes its own NIC, so the per-ring crossing gets per_node NICs' worth.
      const double nic = cluster.inter_node_bandwidth_bytes_per_s *
                         profile.inter_node_busbw_fraction *
                         static_cast<double>(std::max<std::int64_t>(group.per_node, 1));
      busbw = std::min(intra, nic);
      if (op == Collective::all_to_all) {
        // Not a ring: every member sends its own (P - per_node) / P share off the node through
        // the node's NICs (one per member), so a member's NIC carries that share whatever the
        // algorithm; as nccl-tests busbw ((P - 1) / P of the bytes) that is this rate.
        const double m = static_cast<double>(std::max<std::int64_t>(group.per_node, 1));
        const double off_node = std::max(P - m, 1.0);
        busbw = std::min(intra, nic / m * (P - 1) / off_node);
      }
      step_latency = profile.inter_node_step_latency_s;
    }
    c.busbw_bytes_per_s = busbw;
    const double steps = algorithm == Algorithm::tree && op == Collective::all_reduce
                             ? 2 * std::ceil(std::log2(P))
                             : ring_steps(op, P);
    c.latency_s = steps * step_latency;
  }
  // Tree all-reduce: reduce then broadcast, each moving n over the slowest link.
  const double volume = algorithm == Algorithm::tree && op == Collective::all_reduce ? 2.0 : factor;
  c.bandwidth_s = bytes * volume / c.busbw_bytes_per_s;
  c.time_s = c.latency_s + c.bandwidth_s;
  c.algbw_bytes_per_s = bytes / c.time_s;
  return c;
}

} // namespace trainsim::sim
