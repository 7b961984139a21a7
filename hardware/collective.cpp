// Names and bus-bandwidth factors of the collectives (collective.hpp).
#include "hardware/collective.hpp"

#include <algorithm>

namespace trainsim::hw {

std::string_view to_string(Collective c) {
  switch (c) {
  case Collective::all_reduce: return "all-reduce";
  case Collective::reduce_scatter: return "reduce-scatter";
  case Collective::all_gather: return "all-gather";
  case Collective::broadcast: return "broadcast";
  case Collective::all_to_all: return "all-to-all";
  case Collective::send_recv: return "send-recv";
  }
  return "?";
}

bool parse_collective(std::string_view s, Collective& out) {
  for (Collective c : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                       Collective::broadcast, Collective::all_to_all, Collective::send_recv}) {
    if (to_string(c) == s) {
      out = c;
      return true;
    }
  }
  return false;
}

double busbw_factor(Collective c, std::int64_t p) {
  const double P = static_cast<double>(std::max<std::int64_t>(p, 1));
  switch (c) {
  case Collective::all_reduce: return 2.0 * (P - 1) / P;
  case Collective::reduce_scatter:
  case Collective::all_gather:
  case Collective::all_to_all: return (P - 1) / P;
  case Collective::broadcast: return 1.0; // nccl-tests: busbw = algbw at any P
  case Collective::send_recv: return 1.0;
  }
  return 1.0;
}

std::string_view to_string(LinkLevel level) {
  switch (level) {
  case LinkLevel::none: return "none";
  case LinkLevel::intra_node: return "intra-node";
  case LinkLevel::inter_node: return "inter-node";
  }
  return "?";
}

bool parse_link_level(std::string_view s, LinkLevel& out) {
  for (LinkLevel l : {LinkLevel::none, LinkLevel::intra_node, LinkLevel::inter_node}) {
    if (to_string(l) == s) {
      out = l;
      return true;
    }
  }
  return false;
}

} // namespace trainsim::hw
