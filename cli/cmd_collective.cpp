// `trainsim collective`: predicted collective times in nccl-tests' columns, one size or a
// sweep of sizes.
#include <cmath>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/resolve.hpp"
#include "common/errors.hpp"
#include "common/units.hpp"
#include "simulate/collectives.hpp"
#include "simulate/step.hpp"

namespace trainsim::cli {
namespace {

struct CollectiveOptions {
  MachineOptions machine;
  std::string op = "all-reduce";
  std::string bytes = "1G";
  bool sweep = false;
  std::string min_bytes = "8", max_bytes = "4G";
  double factor = 2;
  std::string algorithm = "auto";
  OutputOptions out;
};

// Sizes of one sweep: doubling from 8 B to 4 GiB (the defaults) is 30 rows; 1000 allows fine
// factors (1.03 over that range: 681 rows) but not 1.001 (20,112) or an endless 1.0000001.
constexpr double kMaxSweepRows = 1000;

int run_collective(const CollectiveOptions& o) {
  sim::Collective op;
  if (!sim::parse_collective(o.op, op))
    throw ConfigError(fmt::format("--op = {}: must be all-reduce, reduce-scatter, all-gather, "
                                  "broadcast, all-to-all or send-recv",
                                  o.op));
  sim::Algorithm algo = sim::Algorithm::automatic;
  if (o.algorithm == "tree")
    algo = sim::Algorithm::tree;
  else if (o.algorithm == "ring")
    algo = sim::Algorithm::ring;
  else if (o.algorithm != "auto")
    throw ConfigError(fmt::format("--algorithm = {}: must be auto, ring or tree", o.algorithm));
  const Machine mc = resolve_machine(o.machine, 8);
  // All GPUs in one group, in rank order: members per node = gpus_per_node.
  const sim::Group group{mc.num_gpus, std::min(mc.num_gpus, mc.cluster.gpus_per_node)};
  std::vector<double> sizes;
  if (o.sweep) {
    const double lo = parse_bytes(o.min_bytes, "--min-bytes"),
                 hi = parse_bytes(o.max_bytes, "--max-bytes");
    if (lo < 1 || hi < lo || hi > 1e13)
      throw ConfigError(fmt::format("--min-bytes/--max-bytes = {}/{}: need 1 <= min <= max <= 1e13",
                                    o.min_bytes, o.max_bytes));
    if (!(o.factor > 1 && o.factor <= 1024))
      throw ConfigError(fmt::format("--factor = {}: must be in (1, 1024]", o.factor));
    // Rows of the sweep, counted before any is made: lo x factor^k <= hi.
    const double rows = std::floor(std::log(hi / lo) / std::log(o.factor) + 1e-9) + 1;
    if (rows > kMaxSweepRows)
      throw ConfigError(fmt::format("--factor = {}: {:.0f} sizes from {} to {}; at most {} (use a "
                                    "larger --factor or a narrower range)",
                                    o.factor, rows, o.min_bytes, o.max_bytes, kMaxSweepRows));
    for (double b = lo; b <= hi * (1 + 1e-9); b *= o.factor)
      sizes.push_back(b);
  } else {
    const double b = parse_bytes(o.bytes, "--bytes");
    if (b <= 0 || b > 1e13)
      throw ConfigError(fmt::format("--bytes = {}: must be in (0, 1e13]", o.bytes));
    sizes.push_back(b);
  }
  Sink sink(o.out);
  nlohmann::json rows = nlohmann::json::array();
  Table t({"size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "level"},
          {"bytes", "count", "type", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "level"});
  const double factor = sim::busbw_factor(op, op == sim::Collective::send_recv ? 2 : mc.num_gpus);
  for (double b : sizes) {
    const auto c = sim::collective_cost(op, b, group, mc.cluster, mc.profile, algo);
    const double algbw = c.time_s > 0 ? b / c.time_s : 0;
    rows.push_back({{"bytes", b},
                    {"time_s", c.time_s},
                    {"algbw_bytes_per_s", algbw},
                    {"busbw_bytes_per_s", algbw * factor},
                    {"level", sim::to_string(c.level)}});
    t.add_row({fmt::format("{:.0f}", b), fmt::format("{:.0f}", b / 4), "float",
               fmt::format("{:.2f}", c.time_s * 1e6), fmt::format("{:.2f}", algbw / 1e9),
               fmt::format("{:.2f}", algbw * factor / 1e9), std::string(sim::to_string(c.level))},
              {fmt::format("{:.0f}", b), fmt::format("{:.0f}", b / 4), "float",
               fmt::format("{:.9g}", c.time_s), fmt::format("{:.6g}", algbw),
               fmt::format("{:.6g}", algbw * factor), std::string(sim::to_string(c.level))});
  }
  check_finite(rows); // every printed figure below is one of these
  if (sink.format() == Format::json) {
    sink.json({{"op", o.op},
               {"num_gpus", mc.num_gpus},
               {"cluster", mc.cluster.name},
               {"algorithm", o.algorithm},
               {"busbw_factor", factor},
               {"rows", rows}});
    return 0;
  }
  sink.comment(fmt::format("predicted {} ({}) over {} GPUs of {} ({} per node); busbw = algbw x "
                           "{:.4f}; profile {}",
                           o.op, o.algorithm, mc.num_gpus, mc.cluster.name,
                           std::min(mc.num_gpus, mc.cluster.gpus_per_node), factor,
                           mc.profile.name));
  if (mc.num_gpus == 1)
    sink.comment("P = 1: no communication, the predicted time is zero");
  t.print(sink);
  return 0;
}

} // namespace

void add_collective(CLI::App& app) {
  auto o = std::make_shared<CollectiveOptions>();
  auto* cmd = app.add_subcommand("collective", "Predicted collective time (alpha-beta model), "
                                               "nccl-tests columns");
  add_machine_options(*cmd, o->machine, true);
  cmd->add_option("--op", o->op,
                  "all-reduce | reduce-scatter | all-gather | broadcast | "
                  "all-to-all | send-recv")
      ->capture_default_str();
  cmd->add_option("--bytes,-b", o->bytes, "Message size (binary suffixes K, M, G)")
      ->capture_default_str();
  cmd->add_flag("--sweep", o->sweep, "Sweep sizes from --min-bytes to --max-bytes by --factor");
  cmd->add_option("--min-bytes", o->min_bytes, "Sweep start")->capture_default_str();
  cmd->add_option("--max-bytes", o->max_bytes, "Sweep end")->capture_default_str();
  cmd->add_option("--factor", o->factor, "Sweep multiplier")->capture_default_str();
  cmd->add_option("--algorithm", o->algorithm,
                  "auto (faster of ring and tree) | ring | tree (all-reduce)")
      ->capture_default_str();
  add_output_options(*cmd, o->out);
  cmd->footer(
      "Example: trainsim collective --op all-reduce --bytes 1G --num-gpus 64 --cluster dgx-h100");
  cmd->callback([o] { run_collective(*o); });
}

} // namespace trainsim::cli
