// Printing of a StepEstimate (table/CSV/JSON) and its breakdown chart, shared by
// `estimate`, `sweep` and `validate-published`; plus the step-model flags.
#pragma once

#include <nlohmann/json.hpp>

#include "cli/output.hpp"
#include "cli/resolve.hpp"
#include "common/checks.hpp"
#include "simulate/step.hpp"

namespace trainsim::cli {

/// Gradient bucket sizes (--bucket-mb of estimate, plan, sweep and memory): from 1 KiB, below
/// which per-call latency is all a bucket costs, to ~98 GiB, above every model's gradients.
inline constexpr Interval kBucketMb{0.001, 1e5, "MiB"};

/// Training tokens (--tokens of time, estimate and plan; "15T", "300e9"): at most 1e18, a
/// thousand times the largest runs published, so days and dollars stay finite numbers.
[[nodiscard]] double parse_tokens(const std::string& text);

struct StepFlags {
  double bucket_mb = 25;
  bool no_dp_overlap = false;
  bool tp_overlap = false;
  bool ep_overlap = false;
  std::string dp_algorithm = "auto";
  std::string framework = "megatron";
  std::string torch_compile = "none";
};
void add_step_flags(CLI::App& cmd, StepFlags& f);
/// --torch-compile none|blocks|blocks+loss (eager PyTorch profiles, as torchtitan compiles).
void add_torch_compile_option(CLI::App& cmd, std::string& torch_compile);
/// The named profile under --torch-compile (sim::with_torch_compile).
[[nodiscard]] sim::FrameworkProfile resolve_framework(const std::string& framework,
                                                      const std::string& torch_compile);
/// --framework NAME|FILE (the step flags include it; `memory` adds it on its own).
void add_framework_option(CLI::App& cmd, std::string& framework);
/// "+-6% (1 sigma over 21 pytorch runs)" or why there is no band.
[[nodiscard]] std::string band_text(const sim::StepEstimate& e);
[[nodiscard]] sim::StepOptions resolve_step_flags(const StepFlags& f);
/// --ep-overlap on one plan (estimate, sweep): an error naming the rule the plan breaks
/// (sim::ep_overlap_rule); the plan search instead merges where a candidate allows it.
void require_ep_overlap_applies(const sim::StepOptions& o, const model::ParallelPlan& p);
/// --recompute selective-op is torchtitan's per-op policy, a PyTorch framework's option: an
/// error naming the framework for a profile that does not model PyTorch (megatron, deepspeed,
/// trainsim: no caching allocator in their profile).
void require_recompute_supported(model::Recompute r, const sim::FrameworkProfile& fw);
/// --recompute-modules (TrainingSetup::recompute_modules other than the attention core alone)
/// shapes selective recompute only: an error under another policy.
void require_modules_recompute(model::Recompute r, const model::TrainingSetup& s);
/// A ZeRO stage the framework cannot run (FrameworkProfile::zero_stages): ConfigError naming
/// the stages it can and why (`option` is what precedes the stage: "--zero ", "--fix zero=").
void require_zero_supported(std::int64_t zero, const sim::FrameworkProfile& fw,
                            const char* option = "--zero ");
/// A layout the framework does not run (FrameworkProfile::parallelisms: a parallelism it has
/// not, or one it runs only with other ZeRO stages): ConfigError with the rule and its source.
void require_layout_supported(const model::ParallelPlan& p, const sim::FrameworkProfile& fw);
/// --grad-reduce-dtype fp32|bf16 picks Megatron-Core's main_grad dtype: an error naming the
/// framework for a profile without them (FrameworkProfile::megatron_main_grads) or for a
/// precision with no separate gradient dtype (fp32, pure bf16).
void require_setup_supported(const model::TrainingSetup& s, const sim::FrameworkProfile& fw);

/// " (layers 7,8x14,7)" for a plan with an explicit stage split, "" otherwise.
[[nodiscard]] std::string stage_split_note(const model::ParallelPlan& p);
/// " ep 8", " ep 32 (etp 1: experts folded over tp x dp x cp)", or "" without expert parallelism.
[[nodiscard]] std::string expert_note(const model::ParallelPlan& p);
[[nodiscard]] nlohmann::json breakdown_json(const sim::StepBreakdown& b);
[[nodiscard]] nlohmann::json memory_json(const sim::MemoryBreakdown& b);
/// `zero_note`: where an unset --zero's stage came from (zero_default_note), printed under
/// the layout and given in JSON as "zero_stage_note"; empty when --zero was given.
[[nodiscard]] nlohmann::json estimate_json(const model::ModelSpec& m, const Machine& mc,
                                           const model::ParallelPlan& p,
                                           const model::TrainingSetup& s,
                                           const sim::StepEstimate& e, double tokens,
                                           const std::string& zero_note = {});

void print_estimate(Sink& sink, const model::ModelSpec& m, const Machine& mc,
                    const model::ParallelPlan& p, const model::TrainingSetup& s,
                    const sim::StepEstimate& e, double tokens, const std::string& zero_note = {});

void plot_breakdown(const std::string& file, const model::ModelSpec& m, const Machine& mc,
                    const model::ParallelPlan& p, const sim::StepEstimate& e);

} // namespace trainsim::cli
