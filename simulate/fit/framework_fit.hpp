// Recorded training runs of a framework (JSON lines; docs/frameworks.md gives the format):
// reading them, predicting each with a framework profile, and fitting a profile's free
// parameters on the fit half of the runs (the split rule is declared in docs/frameworks.md and
// applied here, by file order, before any fit). Pure: no GPU; reads files only through the
// loaders of model/ and hardware/.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"
#include "model/spec.hpp"
#include "simulate/framework.hpp"
#include "simulate/step.hpp"

namespace trainsim::fitting {

enum class Split { fit, test };

/// One recorded run: what was trained where, and what was measured.
struct FrameworkRun {
  std::string id, source, file;
  std::string framework;    // profile handle the run was made with
  std::string model_name;   // as recorded (a preset handle, or a published name)
  std::string skip_reason;  // non-empty: trainsim cannot model this run (yet), and why
  Split split = Split::fit; // by the declared rule (file order)
  model::ModelSpec model;
  hw::ClusterSpec cluster;
  hw::GpuSpec gpu;
  hw::HardwareProfile profile;
  model::ParallelPlan plan;
  model::TrainingSetup setup;
  bool tp_overlap = false; // tensor-parallel collectives overlapped (torchtitan's async TP)
  bool ep_overlap = false; // Megatron-Core's combined 1F1B (the row's "moe_a2a_overlap")
  // Run under torch.compile (torchtitan's other.torch_compile): the per-op checkpointing
  // policy is traced into the graph, so its eager dispatch cost does not apply.
  bool compiled = false;
  // The loss compiled too (other.compiled_loss; torchtitan since April 2025 compiles its
  // cross-entropy when training.compile is set): the loss chain of the pytorch-compile profile
  // (one 16-bit logits tensor, its gradient in place) replaces the eager one.
  bool compiled_loss = false;
  // Measured (0 = not recorded).
  double step_time_s = 0;
  double tokens_per_s_per_gpu = 0;
  double peak_allocated_bytes = 0, peak_reserved_bytes = 0;
  double memory_cap_bytes = 0;  // OOM-boundary runs: the allocator cap
  std::int64_t time_passes = 1; // passes whose step times make step_time_s (geometric mean)
  // OOM-boundary runs: the largest micro-batch that trained under memory_cap_bytes, the scored
  // boundary. Measured by a user's training loop where the row has one (loop_boundary: one
  // fresh process per batch size, the model and optimizer built, four steps, PyTorch's cache
  // never emptied, as `trainsim memory --allocator-cap-gb` predicts it), else by the recorded
  // search's probes (two steps after emptying the cache).
  std::int64_t max_micro_batch = -1;
  bool loop_boundary = false;
  // The boundary of the search's probes where a loop boundary or a fresh-process one replaced
  // the search's own answer (-1: not replaced); the row's peaks are those of its probe at
  // setup.micro_batch_size, two steps after emptying the cache.
  std::int64_t searched_max_micro_batch = -1;
  // OOM-boundary runs where a batch ran under the cap: the peaks are those of the largest that
  // did, at setup.micro_batch_size (two steps after emptying the cache).
  bool boundary_peaks = false;
  // Where the row contradicts itself (its printed gradient-accumulation count against its
  // layout): the run is predicted from its layout, and `compare` prints these beside it.
  std::vector<std::string> notes;
  [[nodiscard]] bool is_oom_search() const { return max_micro_batch >= 0; }
  // An OOM-search configuration, measured or not ("oom_search": true on a failed search):
  // it takes its configuration's fit/test side either way.
  bool oom_config = false;
  // Recompute-boundary runs (measured.min_recompute_layers; scripts/peer_recompute_boundary.py):
  // at this micro-batch and under memory_cap_bytes, the least number of layers whose full
  // recompute lets the step run (0: it runs without recompute; -1: not even with every layer).
  // The row's recompute and peaks are those of that answer's probe. A check only: never fitted.
  bool recompute_boundary = false;
  std::int64_t min_recompute_layers = 0;
};

/// Reads JSON lines from each file in order, assigning the split (docs/frameworks.md):
/// within a file, runs of one framework alternate fit, test, fit, ... in file order (published
/// files: every row, modelled or not, counts); OOM-boundary rows alternate per configuration
/// (their caps together). Malformed lines throw ConfigError naming file:line and the field;
/// runs trainsim cannot model are kept with skip_reason set.
[[nodiscard]] std::vector<FrameworkRun> read_framework_runs(const std::vector<std::string>& files);
/// One runs file's text, read as read_framework_runs reads a file (without a model map beside
/// it): for the fuzz target.
[[nodiscard]] std::vector<FrameworkRun> read_framework_runs_text(std::string_view text,
                                                                 const std::string& file);

/// Merges further passes of runs already read (same id; rows of `repeat_files` in the same
/// format): a run's measured step time becomes the geometric mean of all its passes, and
/// time_passes counts them; its side stays the first pass's. A repeated row whose id matches
/// no run, or that has no step time, throws ConfigError naming file:line.
void merge_repeat_runs(std::vector<FrameworkRun>& runs,
                       const std::vector<std::string>& repeat_files);

/// One run from a JSON object in that format (split: fit), e.g. the configuration a kernel
/// profile records with its measured figures; `where` names it in errors.
[[nodiscard]] FrameworkRun parse_framework_run(const nlohmann::json& j, const std::string& where);

/// Predicted figures of one run under a framework profile.
struct RunPrediction {
  double step_time_s = 0, tokens_per_s_per_gpu = 0;
  double peak_allocated_bytes = 0, peak_reserved_bytes = 0;
  // OOM-boundary runs: the largest micro-batch under the cap (sim::max_micro_batch, what
  // `trainsim memory --allocator-cap-gb` answers: a training loop's).
  std::int64_t max_micro_batch = -1;
  // Recompute-boundary runs: the least number of fully recomputed layers that fits under the
  // cap (sim::min_recompute_layers, as `trainsim memory` answers it).
  std::int64_t min_recompute_layers = 0;
  // ... and where it lies within the profile's memory band: the same answer under the cap
  // scaled by 1 / (1 - sigma) (low) and 1 / (1 + sigma) (high), as `trainsim memory` gives it.
  std::int64_t min_recompute_layers_low = 0, min_recompute_layers_high = 0;
  sim::StepEstimate step;
};
[[nodiscard]] RunPrediction predict_run(const FrameworkRun& run, const sim::FrameworkProfile& fw);

/// Relative error (predicted - measured) / measured of the run's headline figure: step time
/// (or tokens/s/GPU for published rows, which give no step time), NaN when not measured.
[[nodiscard]] double time_error(const FrameworkRun& run, const RunPrediction& p);
/// Relative error of peak reserved (peak allocated when reserved was not recorded), or NaN.
[[nodiscard]] double memory_error(const FrameworkRun& run, const RunPrediction& p);

/// Which parameters a fit may move. Time: host cost per kernel and per layer, GEMM efficiency;
/// memory: activation factor, allocator overhead. Parameters with no fit run informing them
/// stay as they are.
struct FitOptions {
  bool host_per_kernel = false, host_per_checkpoint = false;
  bool host_per_sac_kernel = false; // runs with per-op checkpointing (selective-op) to fit on
  bool gemm_efficiency = false, expert_efficiency = false, moe_dispatch = false;
  // A GEMM scale per GPU preset beside the shared one, for every GPU but the one with most
  // fit rows that has at least 3 fit rows of its own (gpu_gemm_efficiency_scale).
  bool gemm_efficiency_per_gpu = false;
  bool activation_factor = false, activation_factor_fp32 = false, allocator_overhead = false;
};
/// The default choice per framework: queue-model profiles fit their host costs (and fsdp its
/// per-layer hooks); per-op profiles their GEMM efficiency; every profile its memory factors
/// when runs recorded memory.
[[nodiscard]] FitOptions default_fit_options(const sim::FrameworkProfile& base,
                                             const std::vector<FrameworkRun>& runs);

struct FitResult {
  sim::FrameworkProfile profile; // base with the fitted parameters and fit residuals
  std::int64_t fit_time_runs = 0, fit_memory_runs = 0;
  double fit_time_mape = 0, fit_memory_mape = 0; // mean |error| on the fit rows
};
/// Least squares on log(predicted / measured) over the fit rows of `runs` that belong to
/// base.name (Nelder-Mead over the chosen parameters; memory fitted in closed form by the
/// one-dimensional search). Residuals (RMS of the relative errors on the fit rows) go into
/// profile.fit. Throws ConfigError when no fit row informs the chosen parameters.
[[nodiscard]] FitResult fit_framework(const sim::FrameworkProfile& base,
                                      const std::vector<FrameworkRun>& runs,
                                      const FitOptions& options, const std::string& fitted_on);

/// The share of tensor-parallel communication a framework hides when it overlaps it
/// (tp_overlap_hidden_fraction), fitted alone on the fit rows of `runs` of base.name that
/// overlap it (tp_overlap) without context parallelism: the value in [0, 1], in steps of 0.01,
/// with the least mean |error| (the smallest such value on a tie). Everything else of `base`,
/// its residuals included, is kept. Throws ConfigError when no such row exists.
struct TpOverlapFit {
  sim::FrameworkProfile profile;
  std::int64_t rows = 0;
  double mape = 0; // mean |error| of those rows at the fitted value
};
[[nodiscard]] TpOverlapFit fit_tp_overlap_hidden(const sim::FrameworkProfile& base,
                                                 const std::vector<FrameworkRun>& runs);

/// Time residuals of `profile` on the fit rows of `runs` of its framework that ran on more than
/// one GPU (sim::FrameworkProfile::fit_multi_gpu): in-sample RMS of the relative step-time
/// errors, time_dof = rows - `fitted_params` (the parameters fitted on those rows), the
/// memory residuals of the rows that measured memory. time_runs 0 when there is no such row.
[[nodiscard]] sim::FitResiduals multi_gpu_residuals(const sim::FrameworkProfile& profile,
                                                    const std::vector<FrameworkRun>& runs,
                                                    std::int64_t fitted_params,
                                                    const std::string& fitted_on);

} // namespace trainsim::fitting
