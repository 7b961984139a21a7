// Exhaustive search for the best way to train a model on a cluster: every combination of
// tp, pp, cp, dp, micro-batch (hence gradient accumulation), ZeRO stage, recompute policy,
// sequence parallelism and interleaving depth, rejected with a reason or ranked by the step
// model. Layers split evenly over the stages when pp x interleave divides them; when pp does
// not divide them, one uneven split is composed: Megatron's pattern (first, middle x (pp-2),
// last) that minimises the slowest stage, embedding and head included. Fast by design: phase-1
// costs (costs.hpp) are computed once per (tp, cp, SP, micro-batch); the inner loops only compose
// arithmetic, prune on memory before timing, and never allocate. Threads split the outer loop;
// results are merged deterministically.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"
#include "model/spec.hpp"
#include "simulate/step.hpp"

namespace trainsim::sim {

enum class Objective { time, cost, memory };

/// Why a candidate was rejected (counted, never listed one by one).
enum class Reject {
  tp_indivisible,     // tp does not divide heads, kv heads or FFN size
  pp_indivisible,     // no stage split: pp > layers; pp divides the layers but pp x interleave
                      // does not; too few layers for pp x interleave chunks; or the pinned
                      // split does not apply to this pp / interleave
  cp_indivisible,     // cp (x tp with SP) does not divide the sequence
  batch_mismatch,     // global batch not a multiple of micro-batch x dp
  interleave_batch,   // interleaving needs micro-batches per step divisible by pp
  expert_indivisible, // ep does not divide experts or dp
  seq_too_long,       // seq_len above the model's learned positions
  out_of_range,       // a degree beyond model::validate's limits
  does_not_fit,       // memory per GPU above capacity
  slower,             // under a caching-allocator profile, its objective cannot enter the top
                      // list (step time: its bound, then the step itself; memory: its
                      // allocated floor): not sized (bound_step_time)
  framework_layout,   // the framework runs that parallelism only with other ZeRO stages
                      // (FrameworkProfile::parallelisms; one it does not run is not searched)
  count_
};
[[nodiscard]] const char* to_string(Reject r);

struct PlanSearchOptions {
  Objective objective = Objective::time;
  std::int64_t top_k = 10;
  std::int64_t max_tp = 0; // 0 = GPUs per node
  std::int64_t max_cp = 8;
  std::int64_t max_interleave = 8;
  // Fixed dimensions (-1 = searched). recompute: 0 none, 1 selective, 2 full, 3 selective-op.
  std::int64_t fix_tp = -1, fix_pp = -1, fix_dp = -1, fix_cp = -1, fix_micro_batch = -1,
               fix_zero = -1, fix_interleave = -1, fix_recompute = -1, fix_sp = -1, fix_ep = -1,
               fix_etp = -1;
  // A pinned stage split: explicit counts (only pp = their number is searched), or Megatron's
  // first / last stage counts with the middle stages dividing the rest (-1 = not pinned).
  std::vector<std::int64_t> fix_stage_layers;
  std::int64_t fix_first_stage_layers = -1, fix_last_stage_layers = -1;
  int threads = 1;
  // A (ZeRO, recompute) choice that did not fit at a micro-batch is rejected at every larger one
  // of the same layout without composing its memory again (memory never falls as the
  // micro-batch grows); false composes each one (for tests: the same results).
  bool reuse_misfits = true;
  // A plan whose step-time lower bound (its micro-batches and bubble through the first stage)
  // cannot enter the top list is not timed: counted feasible when its memory is analytic, and
  // under a caching-allocator profile (whose allocator is the costly part) rejected as
  // Reject::slower without being sized, as is one whose composed step cannot enter either;
  // false sizes and times every plan (for tests: the same top list).
  bool bound_step_time = true;
  // Where a layout's step does not fit without recompute but does with full recompute, also
  // the plan that re-runs only the fewest layers per model chunk that fit
  // (TrainingSetup::recompute_layers, found by bisection on the memory): a candidate of its
  // own, counted in the space. Off unless asked for (it composes more memory per candidate).
  bool search_recompute_layers = false;
  StepOptions step;
  double memory_bytes = 0; // per-GPU capacity
};

struct PlanCandidate {
  model::ParallelPlan plan;
  std::int64_t micro_batch_size = 0;
  // Full recompute of this many layers per model chunk only (TrainingSetup::recompute_layers;
  // 0: as the plan's policy runs, every layer).
  std::int64_t recompute_layers = 0;
  std::int64_t micro_batches = 0; // gradient accumulation steps
  double step_time_s = 0;
  double per_gpu_bytes_total = 0;
  double mfu = 0;
  double objective = 0; // what was minimised
};

struct PlanSearchResult {
  std::int64_t space_size = 0;       // candidates enumerated (== evaluated + every rejection)
  std::int64_t evaluated = 0;        // decided by the cost model (memory, then time)
  std::int64_t uneven_evaluated = 0; // of those, with a balanced or pinned stage split
  std::int64_t feasible = 0;
  std::int64_t phase1_builds = 0;          // distinct (tp, cp, SP, micro-batch) op lists built
  std::int64_t timed = 0;                  // feasible plans whose step was composed
  std::int64_t collective_evaluations = 0; // collective_cost() calls of phase 2, all plans
  std::array<std::int64_t, static_cast<std::size_t>(Reject::count_)> rejected{};
  std::vector<PlanCandidate> plans; // best first, at most top_k
};

/// setup.global_batch_size must be > 0. num_gpus = cluster.num_gpus().
[[nodiscard]] PlanSearchResult search_plans(const model::ModelSpec& model,
                                            const hw::ClusterSpec& cluster, const hw::GpuSpec& gpu,
                                            const hw::HardwareProfile& profile,
                                            const model::TrainingSetup& setup,
                                            const PlanSearchOptions& options);

/// The stage split the search composes for `plan` and `setup` (micro-batch size included):
/// empty when the layers split evenly (or cannot be split: validate() says why), else the
/// balanced uneven split. For re-estimating neighbours of a plan with the search's own rule.
[[nodiscard]] std::vector<std::int64_t>
searched_stage_layers(const model::ModelSpec& model, const hw::ClusterSpec& cluster,
                      const hw::GpuSpec& gpu, const hw::HardwareProfile& profile,
                      const model::ParallelPlan& plan, const model::TrainingSetup& setup,
                      const StepOptions& options);

/// One-step neighbours of a plan (plan --explain): tp or pp halved or doubled against dp, the
/// micro-batch halved or doubled, every other ZeRO stage and recompute mode, sequence
/// parallelism toggled, interleaving doubled; each re-estimated with the full model (a new
/// pipeline depth gets the search's own stage split). A neighbour that is not a valid layout or
/// does not fit says why and has no step time.
struct PlanNeighbour {
  std::string change;      // "tp 8 -> 4 (dp x2)"
  double step_time_s = 0;  // 0 when not valid
  std::string why_not;     // the rule it breaks, or the memory it needs; empty when valid
  PlanCandidate candidate; // the neighbour's plan, micro-batch, step and memory per GPU
};
/// Whether two candidates are the same plan (layout, micro-batch, ZeRO, recompute).
[[nodiscard]] bool same_plan(const PlanCandidate& a, const PlanCandidate& b);
[[nodiscard]] std::vector<PlanNeighbour>
plan_neighbours(const model::ModelSpec& model, const hw::ClusterSpec& cluster,
                const hw::GpuSpec& gpu, const hw::HardwareProfile& profile,
                const model::TrainingSetup& setup, const StepOptions& options,
                const PlanCandidate& best);

/// Positive divisors of n in increasing order.
[[nodiscard]] std::vector<std::int64_t> divisors(std::int64_t n);

} // namespace trainsim::sim
