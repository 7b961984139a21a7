// `trainsim estimate`: bottom-up step time on a cluster with its breakdown, MFU/HFU,
// tokens/s, days to train, the top-down 6ND figure beside it, and the memory verdict.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/estimate_print.hpp"
#include "cli/output.hpp"
#include "cli/plot.hpp"
#include "cli/resolve.hpp"
#include "common/errors.hpp"
#include "common/units.hpp"
#include "model/count.hpp"
#include "simulate/step.hpp"

namespace trainsim::cli {
namespace {

struct EstimateOptions {
  ModelOptions model;
  MachineOptions machine;
  PlanOptions plan;
  SetupOptions setup;
  StepFlags step;
  std::string tokens;
  std::string plot;
  OutputOptions out;
};

int run_estimate(const EstimateOptions& o) {
  if (!o.plot.empty())
    check_plot_file(o.plot);
  const model::ModelSpec m = resolve_model(o.model);
  const Machine mc = resolve_machine(o.machine, 8);
  const model::TrainingSetup s = resolve_setup(o.setup, m);
  const sim::StepOptions so = resolve_step_flags(o.step);
  const model::ParallelPlan p = resolve_plan(o.plan, m, s, mc.num_gpus, so.fw().default_zero_stage);
  require_recompute_supported(p.recompute, so.fw());
  require_zero_supported(p.zero_stage, so.fw());
  require_layout_supported(p, so.fw());
  require_ep_overlap_applies(so, p);
  require_setup_supported(s, so.fw());
  require_modules_recompute(p.recompute, s);
  const double tokens = o.tokens.empty() ? 0 : parse_tokens(o.tokens);
  const auto est = sim::estimate_step(m, mc.cluster, mc.gpu, mc.profile, p, s, so);
  Sink sink(o.out);
  print_estimate(sink, m, mc, p, s, est, tokens, zero_default_note(o.plan, so.fw()));
  if (!o.plot.empty())
    plot_breakdown(o.plot, m, mc, p, est);
  return 0;
}

} // namespace

void add_estimate(CLI::App& app) {
  auto o = std::make_shared<EstimateOptions>();
  auto* cmd = app.add_subcommand(
      "estimate", "Bottom-up step time with its breakdown, MFU, tokens/s and days to train");
  add_model_options(*cmd, o->model, true);
  add_machine_options(*cmd, o->machine, true);
  add_plan_options(*cmd, o->plan);
  add_setup_options(*cmd, o->setup);
  add_framework_setup_options(*cmd, o->setup);
  add_step_flags(*cmd, o->step);
  cmd->add_option("--tokens,-t", o->tokens, "Training tokens for days and GPU-hours (e.g. 15T)");
  cmd->add_option("--plot", o->plot, "Write the step-time breakdown chart (.png or .svg)");
  add_output_options(*cmd, o->out);
  cmd->footer("Example: trainsim estimate --model llama3-70b --cluster dgx-h100 --num-gpus 1024 "
              "--tp 8 --pp 4 --micro-batch 1 --global-batch 1024 --seq-len 8192 "
              "--recompute selective --sequence-parallel --tokens 15T");
  cmd->callback([o] { run_estimate(*o); });
}

} // namespace trainsim::cli
