// `trainsim roofline`: arithmetic intensity, ridge point, bound and predicted time of one
// GEMM or of every op of a model layer; --plot draws the roofline with the ops on it.
#include <cmath>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/plot.hpp"
#include "cli/resolve.hpp"
#include "common/errors.hpp"
#include "common/units.hpp"
#include "model/ops.hpp"
#include "simulate/roofline.hpp"

namespace trainsim::cli {
namespace {

struct RooflineOptions {
  MachineOptions machine;
  ModelOptions model;
  SetupOptions setup;
  PlanOptions plan;
  std::string op;
  std::int64_t m = 0, n = 0, k = 0;
  std::string dtype = "bf16";
  std::string plot;
  OutputOptions out;
};

struct Row {
  std::string name;
  double flops, bytes;
  sim::OpCost cost;
};

int run_roofline(const RooflineOptions& o) {
  if (!o.plot.empty())
    check_plot_file(o.plot);
  const Machine mc = resolve_machine(o.machine, 1);
  std::vector<Row> rows;
  Dtype dtype = Dtype::bf16;
  if (!o.op.empty()) {
    if (o.op != "gemm")
      throw ConfigError(fmt::format("--op = {}: only gemm is supported here "
                                    "(use --model for a model's ops)",
                                    o.op));
    if (!o.model.model.empty())
      throw ConfigError("--op and --model: give only one");
    for (auto [name, v] : {std::pair{"--m", o.m}, {"--n", o.n}, {"--k", o.k}})
      if (v <= 0 || v > (std::int64_t{1} << 24))
        throw ConfigError(fmt::format("{} = {}: must be in 1..16777216", name, v));
    const auto d = parse_dtype(o.dtype);
    if (!d)
      throw ConfigError(
          fmt::format("--dtype = {}: must be fp32, tf32, fp16, bf16 or fp8", o.dtype));
    dtype = *d;
    // As `time` does: a dtype the GPU lacks has no peak to draw (fp8 on a V100).
    if (mc.gpu.peak_flops_per_s[dtype] <= 0)
      throw ConfigError(fmt::format("--dtype = {}: {} has no {} peak (see its preset)", o.dtype,
                                    mc.gpu.name, o.dtype));
    const auto c = sim::gemm_cost(o.m, o.n, o.k, dtype, mc.gpu, mc.profile);
    rows.push_back({fmt::format("gemm {}x{}x{}", o.m, o.n, o.k), c.flops, c.bytes, c});
  } else if (!o.model.model.empty()) {
    const auto m = resolve_model(o.model);
    const auto s = resolve_setup(o.setup, m);
    auto plan_opts = o.plan;
    if (plan_opts.dp == 0)
      plan_opts.dp = 1;
    const auto p = resolve_plan(plan_opts, m, s, 0, 0); // the ops, not model states
    dtype = model::compute_dtype(s.precision);
    const auto ops = model::build_ops(m, model::make_op_context(p, s));
    std::vector<const std::vector<model::Op>*> lists{&ops.embedding};
    for (const auto& kind : ops.layers)
      lists.push_back(&kind.ops);
    lists.push_back(&ops.head);
    lists.push_back(&ops.mtp);
    for (const auto* list : lists)
      for (const auto& op : *list) {
        if (model::is_communication(op.kind))
          continue;
        for (auto pass : {sim::Pass::forward, sim::Pass::backward}) {
          const auto c = sim::op_cost(op, pass, mc.gpu, mc.profile);
          rows.push_back({c.name, c.flops, c.bytes, c});
        }
      }
  } else {
    throw ConfigError("--op gemm (with --m --n --k) or --model: one is required");
  }
  const double peak = sim::effective_peak_flops_per_s(mc.gpu, dtype);
  const double bw = mc.gpu.hbm_bandwidth_bytes_per_s;
  const double ridge = peak / bw;
  Sink sink(o.out);
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& r : rows)
    ops.push_back({{"name", r.name},
                   {"flops", r.flops},
                   {"bytes", r.bytes},
                   {"intensity_flops_per_byte", r.bytes > 0 ? r.flops / r.bytes : 0},
                   {"bound", r.cost.compute_bound ? "compute" : "memory"},
                   {"efficiency", r.cost.efficiency},
                   {"time_s", r.cost.time_s},
                   {"achieved_flops_per_s", r.cost.time_s > 0 ? r.flops / r.cost.time_s : 0}});
  check_finite(ops); // every printed figure below is one of these
  if (sink.format() == Format::json) {
    sink.json({{"gpu", mc.gpu.name},
               {"dtype", std::string(dtype_name(dtype))},
               {"peak_flops_per_s", peak},
               {"hbm_bandwidth_bytes_per_s", bw},
               {"ridge_flops_per_byte", ridge},
               {"ops", ops}});
  } else {
    sink.comment(fmt::format("{}: {} peak {:.1f} TFLOP/s, HBM {:.0f} GB/s, ridge point {:.1f} "
                             "FLOP/byte; profile {}",
                             mc.gpu.name, dtype_name(dtype), peak / 1e12, bw / 1e9, ridge,
                             mc.profile.name));
    Table t({"op", "GFLOP", "MB moved", "FLOP/byte", "bound", "efficiency", "time (us)", "TFLOP/s"},
            {"op", "flops", "bytes", "intensity_flops_per_byte", "bound", "efficiency", "time_s",
             "achieved_flops_per_s"});
    for (const auto& r : rows) {
      const double ai = r.bytes > 0 ? r.flops / r.bytes : 0;
      t.add_row({r.name, fmt::format("{:.3f}", r.flops / 1e9), fmt::format("{:.2f}", r.bytes / 1e6),
                 fmt::format("{:.1f}", ai), r.cost.compute_bound ? "compute" : "memory",
                 fmt::format("{:.2f}", r.cost.efficiency),
                 fmt::format("{:.1f}", r.cost.time_s * 1e6),
                 fmt::format("{:.1f}", r.flops / r.cost.time_s / 1e12)},
                {r.name, fmt::format("{:.0f}", r.flops), fmt::format("{:.0f}", r.bytes),
                 fmt::format("{:.4f}", ai), r.cost.compute_bound ? "compute" : "memory",
                 fmt::format("{:.4f}", r.cost.efficiency), fmt::format("{:.9g}", r.cost.time_s),
                 fmt::format("{:.6g}", r.flops / r.cost.time_s)});
    }
    t.print(sink);
  }
  if (!o.plot.empty()) {
    Series roof{"roofline (datasheet)", {}, "lines", {}};
    for (double ai = 1.0 / 64; ai <= 65536; ai *= 2)
      roof.points.emplace_back(ai, std::min(peak, ai * bw) / 1e12);
    Series pts{"ops (predicted)", {}, "points pt 7 ps 1.2", {}};
    for (const auto& r : rows) {
      if (r.flops <= 0 || r.bytes <= 0)
        continue;
      pts.points.emplace_back(r.flops / r.bytes, r.flops / r.cost.time_s / 1e12);
      pts.labels.push_back(r.name);
    }
    PlotSpec spec = plot_spec(o.plot,
                              fmt::format("Roofline of {} ({}), ridge {:.0f} FLOP/byte",
                                          mc.gpu.name, dtype_name(dtype), ridge),
                              "arithmetic intensity (FLOP/byte)", "TFLOP/s");
    spec.logx = spec.logy = true;
    spec.yrange = {0.01, 3 * peak / 1e12};
    plot_xy(spec, {roof, pts});
  }
  return 0;
}

} // namespace

void add_roofline(CLI::App& app) {
  auto o = std::make_shared<RooflineOptions>();
  auto* cmd = app.add_subcommand("roofline", "Roofline of one GEMM or of a model's operators");
  add_machine_options(*cmd, o->machine, false, false);
  cmd->add_option("--op", o->op, "gemm (with --m --n --k --dtype)");
  cmd->add_option("--m", o->m, "GEMM rows of A and C");
  cmd->add_option("--n", o->n, "GEMM columns of B and C");
  cmd->add_option("--k", o->k, "GEMM inner dimension");
  cmd->add_option("--dtype", o->dtype, "GEMM dtype: fp32, tf32, fp16, bf16, fp8")
      ->capture_default_str();
  add_model_options(*cmd, o->model, false, false);
  add_setup_options(*cmd, o->setup);
  add_plan_options(*cmd, o->plan);
  cmd->add_option("--plot", o->plot, "Write the roofline chart (.png or .svg)");
  add_output_options(*cmd, o->out);
  cmd->footer("Examples:\n  trainsim roofline --gpu h100-sxm --op gemm --m 8192 --n 8192 --k 8192\n"
              "  trainsim roofline --gpu h200 --model llama3-8b --seq-len 4096 --plot roof.png");
  cmd->callback([o, cmd] {
    if (o->op == "gemm")
      refuse_unused_flags(*cmd,
                          {"--model", "--micro-batch", "--global-batch", "--seq-len", "--precision",
                           "--attention", "--optimizer", "--tp", "--pp", "--dp", "--cp", "--ep",
                           "--etp", "--zero", "--interleave", "--sequence-parallel", "--recompute"},
                          "roofline --op gemm (one GEMM: --m --n --k --dtype)");
    else
      refuse_unused_flags(
          *cmd,
          {"--m", "--n", "--k", "--dtype", "--global-batch", "--optimizer", "--pp", "--dp",
           "--zero", "--interleave", "--recompute", "--pp-layers",
           "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"},
          "roofline --model (one GPU's operators for one micro-batch, shaped by --tp --cp --ep "
          "--etp --sequence-parallel, --micro-batch, --seq-len, --precision and --attention; "
          "pipelines, data parallelism, ZeRO, recompute and the optimizer are the step's: "
          "trainsim estimate)");
    run_roofline(*o);
  });
}

} // namespace trainsim::cli
