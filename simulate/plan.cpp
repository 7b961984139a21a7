// Exhaustive plan search (plan.hpp).
#include "simulate/plan.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "common/errors.hpp"

#include "model/count.hpp"
#include "model/ops.hpp"
#include "simulate/costs.hpp"
#include "simulate/memory.hpp"

namespace trainsim::sim {

const char* to_string(Reject r) {
  switch (r) {
  case Reject::tp_indivisible: return "tp does not divide heads / kv heads / ffn";
  case Reject::pp_indivisible: return "layers do not split over pp x interleave";
  case Reject::cp_indivisible: return "cp (x tp with SP) does not divide seq_len";
  case Reject::batch_mismatch: return "global batch not a multiple of micro-batch x dp";
  case Reject::interleave_batch: return "interleaving needs micro-batches divisible by pp";
  case Reject::expert_indivisible:
    return "experts: ep does not divide them or dp (folded: tp x dp x cp), etp not 1 or tp, or "
           "folded without sequence parallelism";
  case Reject::seq_too_long: return "seq_len exceeds the model's learned positions";
  case Reject::out_of_range: return "a degree outside its limits";
  case Reject::does_not_fit: return "does not fit in GPU memory";
  case Reject::slower: return "cannot enter the top plans on its objective's bound (not sized)";
  case Reject::framework_layout: return "the framework runs that layout with other ZeRO stages";
  case Reject::count_: break;
  }
  return "?";
}

// What one more layer adds to a stage, for balancing: under full recompute of some layers only
// every stage re-runs the same number (when it holds that many), so a further layer is a plain
// one.
static double balance_layer_cost(const StageCosts& k, const model::ParallelPlan& plan,
                                 const model::TrainingSetup& setup) {
  return plan.recompute == model::Recompute::full && setup.recompute_layers > 0
             ? k.layer_plain.total()
             : k.layer.total();
}

std::vector<std::int64_t>
searched_stage_layers(const model::ModelSpec& m, const hw::ClusterSpec& cluster,
                      const hw::GpuSpec& gpu, const hw::HardwareProfile& profile,
                      const model::ParallelPlan& plan, const model::TrainingSetup& setup,
                      const StepOptions& options) {
  std::vector<std::int64_t> out;
  const std::int64_t layers = m.num_layers;
  if (plan.pp < 1 || plan.pp > layers || layers % plan.pp == 0)
    return out;
  model::ParallelPlan even = plan;
  even.stage_layers.clear();
  model::TrainingSetup one = setup;
  one.micro_batch_size = 1; // the search balances on a one-sequence micro-batch
  const auto ops = model::build_ops(m, model::make_op_context(even, one));
  const MicroBatchTimes t =
      time_micro_batch(m, ops, even, one, gpu, profile, cluster, options.fw());
  const StageCosts k = stage_costs(t, even, options);
  if (!model::balanced_stage_layers(layers, plan.pp, plan.interleave,
                                    balance_layer_cost(k, even, setup), k.first_extra.total(),
                                    k.last_extra.total(), out))
    out.clear();
  return out;
}

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> small, large;
  for (std::int64_t i = 1; i * i <= n; ++i) {
    if (n % i)
      continue;
    small.push_back(i);
    if (i != n / i)
      large.push_back(n / i);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

namespace {

using model::Recompute;

std::vector<std::int64_t> filtered(std::vector<std::int64_t> v, std::int64_t fixed,
                                   std::int64_t max = 0) {
  std::vector<std::int64_t> out;
  for (auto x : v)
    if ((fixed < 0 || x == fixed) && (max <= 0 || x <= max))
      out.push_back(x);
  return out;
}

auto key(const PlanCandidate& c) {
  const auto& p = c.plan;
  return std::make_tuple(c.objective, p.tp, p.pp, p.dp, p.cp, c.micro_batch_size, p.zero_stage,
                         static_cast<int>(p.recompute), c.recompute_layers, p.sequence_parallel,
                         p.interleave, std::cref(p.stage_layers));
}

bool better(const PlanCandidate& a, const PlanCandidate& b) { return key(a) < key(b); }

struct TopK {
  std::size_t k;
  std::vector<PlanCandidate> items; // sorted best first
  // False when a candidate with this objective cannot enter (saves building it).
  [[nodiscard]] bool may_take(double objective) const {
    return items.size() < k || objective <= items.back().objective;
  }
  void offer(const PlanCandidate& c) {
    if (items.size() == k && !better(c, items.back()))
      return;
    auto it = std::upper_bound(items.begin(), items.end(), c, better);
    items.insert(it, c);
    if (items.size() > k)
      items.pop_back();
  }
};

struct Phase1 {
  bool built = false;
  MicroBatchAccounting acc;
  MicroBatchTimes times;
};

struct Context {
  const model::ModelSpec& m;
  const hw::ClusterSpec& cluster;
  const hw::GpuSpec& gpu;
  const hw::HardwareProfile& profile;
  const model::TrainingSetup& setup;
  const PlanSearchOptions& o;
  std::int64_t N, B;
  std::vector<std::int64_t> pps, mbs, zeros, rcs, vs_pipelined;
  double flops_per_token;
  bool fw_limited = false; // the framework runs some parallelism with some ZeRO stages only
};

// The search's reason for the first broken rule, in the order tp, cp, experts, positions,
// pipeline, batch.
Reject reject_reason(const model::PlanCheck& bad) {
  using model::PlanRule;
  const std::pair<PlanRule, Reject> order[] = {
      {PlanRule::degree_range, Reject::out_of_range},
      {PlanRule::tp_heads, Reject::tp_indivisible},
      {PlanRule::tp_kv_heads, Reject::tp_indivisible},
      {PlanRule::tp_ffn, Reject::tp_indivisible},
      {PlanRule::tp_expert_ffn, Reject::tp_indivisible},
      {PlanRule::etp_value, Reject::expert_indivisible},
      {PlanRule::etp_fold_sp, Reject::expert_indivisible},
      {PlanRule::cp_seq, Reject::cp_indivisible},
      {PlanRule::sp_seq, Reject::cp_indivisible},
      {PlanRule::ep_experts, Reject::expert_indivisible},
      {PlanRule::ep_dp, Reject::expert_indivisible},
      {PlanRule::ep_dense, Reject::expert_indivisible},
      {PlanRule::seq_positions, Reject::seq_too_long},
      {PlanRule::pp_layers, Reject::pp_indivisible},
      {PlanRule::pp_interleave_layers, Reject::pp_indivisible},
      {PlanRule::stage_layers, Reject::pp_indivisible},
      {PlanRule::interleave_needs_pp, Reject::pp_indivisible},
      {PlanRule::batch_multiple, Reject::batch_mismatch},
      {PlanRule::interleave_batch, Reject::interleave_batch},
      {PlanRule::num_gpus, Reject::out_of_range},
      {PlanRule::recompute_layers, Reject::pp_indivisible}};
  for (const auto& [rule, why] : order)
    if (bad.has(rule))
      return why;
  return Reject::out_of_range;
}

enum class Split { none, even, balanced, pinned };

// How the layers split over pp stages of v chunks (plan.hpp): evenly when pp x v divides
// them; when pp does not, the balanced split (computed per recompute policy by the caller);
// or the pinned one, written into `pinned`.
Split stage_split(const Context& c, std::int64_t pp, std::int64_t v,
                  std::vector<std::int64_t>& pinned) {
  const std::int64_t layers = c.m.num_layers;
  if (pp > layers)
    return Split::none;
  auto meets_minimum = [&] {
    for (std::int64_t i = 0; i < pp; ++i)
      if (pinned[static_cast<std::size_t>(i)] < model::min_layers_on_stage(pp, v, i))
        return false;
    return true;
  };
  if (!c.o.fix_stage_layers.empty()) {
    pinned.assign(c.o.fix_stage_layers.begin(), c.o.fix_stage_layers.end());
    std::int64_t sum = 0;
    for (std::int64_t n : pinned)
      sum += n;
    return static_cast<std::int64_t>(pinned.size()) == pp && sum == layers && meets_minimum()
               ? Split::pinned
               : Split::none;
  }
  if (c.o.fix_first_stage_layers >= 0 || c.o.fix_last_stage_layers >= 0)
    return model::first_last_stage_layers(layers, pp, c.o.fix_first_stage_layers,
                                          c.o.fix_last_stage_layers, pinned) &&
                   meets_minimum()
               ? Split::pinned
               : Split::none;
  if (layers % (pp * v) == 0)
    return Split::even;
  if (layers % pp == 0) // even stages whose chunks would differ: not searched
    return Split::none;
  const std::int64_t least =
      2 * model::min_layers_on_stage(pp, v, 0) + (pp - 2) * model::min_layers_on_stage(pp, v, 1);
  return layers >= least ? Split::balanced : Split::none;
}

void balance(const model::ModelSpec& m, const MicroBatchTimes& t, const model::ParallelPlan& plan,
             const model::TrainingSetup& setup, const StepOptions& options,
             std::vector<std::int64_t>& out) {
  const StageCosts k = stage_costs(t, plan, options);
  const bool ok = model::balanced_stage_layers(m.num_layers, plan.pp, plan.interleave,
                                               balance_layer_cost(k, plan, setup),
                                               k.first_extra.total(), k.last_extra.total(), out);
  if (!ok)
    throw std::logic_error("balanced_stage_layers: no split where stage_split() found one");
}

void build(const Context& c, const model::ParallelPlan& plan, std::int64_t micro_batch_size,
           Phase1& p1, PlanSearchResult& r) {
  if (p1.built)
    return;
  model::TrainingSetup s = c.setup;
  s.micro_batch_size = micro_batch_size;
  const auto ops = model::build_ops(c.m, model::make_op_context(plan, s));
  p1.acc = account_micro_batch(c.m, ops, plan, s, c.o.step.fw());
  p1.times = time_micro_batch(c.m, ops, plan, s, c.gpu, c.profile, c.cluster, c.o.step.fw());
  p1.built = true;
  ++r.phase1_builds;
}

// The step of a plan (compose_step reads the analytic part of the memory only) and the
// objective it is ranked by.
struct Timed {
  StepEstimate est;
  double objective = 0;
};
Timed time_plan(const Context& c, const Phase1& p1, const model::ParallelPlan& plan,
                const model::TrainingSetup& s, const MemoryBreakdown& mem, PlanSearchResult& r) {
  Timed t{compose_step({p1.acc, p1.times, c.m, c.cluster, c.gpu, c.profile, plan, s, c.o.step,
                        c.flops_per_token, &mem})};
  r.collective_evaluations += t.est.collective_evaluations;
  t.objective = c.o.objective == Objective::time ? t.est.step_time_s
                : c.o.objective == Objective::cost
                    ? t.est.step_time_s * static_cast<double>(plan.num_gpus())
                    : mem.total;
  return t;
}

// Offer a timed plan that fits (its memory composed: `memory_total`) to the top list.
void offer(const model::ParallelPlan& plan, const model::TrainingSetup& s,
           std::int64_t micro_batches, const Timed& t, double memory_total, TopK& top) {
  if (!top.may_take(t.objective))
    return;
  PlanCandidate cand;
  cand.plan = plan;
  cand.micro_batch_size = s.micro_batch_size;
  cand.micro_batches = micro_batches;
  cand.recompute_layers = s.recompute_layers;
  cand.step_time_s = t.est.step_time_s;
  cand.per_gpu_bytes_total = memory_total;
  cand.mfu = t.est.mfu;
  cand.objective = t.objective;
  top.offer(cand);
}

// Whether a plan with full recompute of some layers only may enter the top list: the fastest
// re-runs one layer per model chunk (timed on the analytic memory, which is all the step reads).
bool partial_may_enter(const Context& c, const Phase1& p1, const model::ParallelPlan& plan,
                       model::TrainingSetup s, PlanSearchResult& r, const TopK& top) {
  MemoryOptions analytic{c.o.step.bucket_bytes, c.o.step.framework};
  analytic.simulate_allocator = false;
  s.recompute_layers = 1;
  return top.may_take(
      time_plan(c, p1, plan, s,
                compose_memory_fullest(p1.acc, c.m, plan, s, c.profile, analytic, c.o.memory_bytes),
                r)
          .objective);
}

// PlanSearchOptions::search_recompute_layers: `plan` fits with full recompute of every layer,
// not without recompute; bisect for the fewest layers per model chunk that fit and, if fewer
// than a chunk holds, time that plan and offer it as a candidate of its own.
void offer_partial_recompute(const Context& c, const Phase1& p1, const model::ParallelPlan& plan,
                             model::TrainingSetup s, std::int64_t micro_batches, Split split,
                             const MemoryOptions& mo, PlanSearchResult& r, TopK& top) {
  std::int64_t most = plan.stage_layers.empty() ? c.m.num_layers / plan.pp : 0;
  for (std::int64_t n : plan.stage_layers)
    most = std::max(most, n);
  const std::int64_t v = std::max<std::int64_t>(plan.interleave, 1);
  const std::int64_t chunk = (most + v - 1) / v;
  auto memory = [&](std::int64_t n) {
    s.recompute_layers = n;
    return compose_memory_fullest(p1.acc, c.m, plan, s, c.profile, mo, c.o.memory_bytes);
  };
  std::int64_t lo = 0, hi = chunk; // lo: no recompute (does not fit); hi: every layer (fits)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (memory(mid).total <= c.o.memory_bytes ? hi : lo) = mid;
  }
  if (hi >= chunk)
    return; // only every layer fits: the full-recompute candidate already is this plan
  const MemoryBreakdown mem = memory(hi);
  ++r.space_size;
  ++r.evaluated;
  if (split != Split::even)
    ++r.uneven_evaluated;
  ++r.feasible;
  ++r.timed;
  s.recompute_layers = hi;
  offer(plan, s, micro_batches, time_plan(c, p1, plan, s, mem, r), mem.total, top);
}

// One candidate of the search: a layout with its micro-batch, ZeRO stage and recompute policy.
struct Candidate {
  const Phase1& p1;
  const model::ParallelPlan& plan;
  const model::TrainingSetup& s;
  std::int64_t micro_batches;
  Split split;
  double bound_s;      // lower bound of its step time
  double none_bound_s; // ... of the same layout without recompute
  bool partial;        // full recompute whose layout may hand over to partial recompute
};

// Sizes a candidate as `memory` and `estimate` do (the allocator under this GPU's capacity; a
// misfit needs only its verdict), counts it and offers it to the top list. Returns false when
// it does not fit. The analytic breakdown comes first: it is the memory of a profile that does
// not simulate its allocator, and under one that does its allocated bytes are a floor of what
// the allocator reserves. A plan that cannot enter the top list on its step time is not timed,
// and under a caching-allocator profile, where sizing is the search's costliest part, not
// sized either (whether it fits changes no answer): first the bound, then the step itself
// (compose_step reads only the analytic memory). Full recompute that may hand its layout to
// partial recompute (no faster than none) is sized whatever its own time.
bool size_and_offer(const Context& c, const Candidate& k, PlanSearchResult& r, TopK& top) {
  MemoryOptions mo{c.o.step.bucket_bytes, c.o.step.framework};
  mo.device_bytes = c.o.memory_bytes;
  mo.verdict_only_above_bytes = c.o.memory_bytes;
  const bool allocator = c.o.step.fw().caching_allocator;
  mo.simulate_allocator = false;
  const MemoryBreakdown m0 =
      compose_memory_fullest(k.p1.acc, c.m, k.plan, k.s, c.profile, mo, c.o.memory_bytes);
  mo.simulate_allocator = true;
  auto misfit = [&] {
    ++r.rejected[static_cast<std::size_t>(Reject::does_not_fit)];
    return false;
  };
  if ((allocator ? m0.peak_allocated() + m0.overhead : m0.total) > c.o.memory_bytes)
    return misfit();
  auto slower = [&] {
    ++r.rejected[static_cast<std::size_t>(Reject::slower)];
    return true; // not known not to fit
  };
  // Ranked by memory under a caching-allocator profile: the allocated peak plus the overhead is
  // a floor of the total the allocator would reserve; one whose floor cannot enter the top list
  // is not sized (nor are its partial-recompute variants: re-running fewer layers keeps more).
  if (allocator && c.o.objective == Objective::memory && c.o.bound_step_time &&
      !top.may_take((m0.peak_allocated() + m0.overhead) * (1 - 1e-12)))
    return slower();
  const bool prune = c.o.objective != Objective::memory && c.o.bound_step_time;
  const bool partial = k.partial && (!prune || partial_may_enter(c, k.p1, k.plan, k.s, r, top));
  const double gpus =
      c.o.objective == Objective::cost ? static_cast<double>(k.plan.num_gpus()) : 1.0;
  // Margin: the bound adds the same terms in another order (rounding).
  auto may_enter = [&](double bound_s) {
    return !prune || top.may_take(bound_s * gpus * (1 - 1e-12));
  };
  if (!allocator) { // the analytic breakdown is the memory: it fits; the bound spares the timing
    ++r.feasible;
    if (partial)
      offer_partial_recompute(c, k.p1, k.plan, k.s, k.micro_batches, k.split, mo, r, top);
    if (may_enter(k.bound_s)) {
      ++r.timed;
      offer(k.plan, k.s, k.micro_batches, time_plan(c, k.p1, k.plan, k.s, m0, r), m0.total, top);
    }
    return true;
  }
  if (!may_enter(partial ? k.none_bound_s : k.bound_s))
    return slower();
  std::optional<Timed> timed;
  if (prune) {
    timed = time_plan(c, k.p1, k.plan, k.s, m0, r);
    if (!partial && !top.may_take(timed->objective))
      return slower();
  }
  const MemoryBreakdown mem =
      compose_memory_fullest(k.p1.acc, c.m, k.plan, k.s, c.profile, mo, c.o.memory_bytes);
  if (mem.total > c.o.memory_bytes)
    return misfit();
  ++r.feasible;
  if (partial)
    offer_partial_recompute(c, k.p1, k.plan, k.s, k.micro_batches, k.split, mo, r, top);
  ++r.timed;
  offer(k.plan, k.s, k.micro_batches, timed ? *timed : time_plan(c, k.p1, k.plan, k.s, mem, r),
        mem.total, top);
  return true;
}

void search_tp_cp(const Context& c, std::int64_t tp, std::int64_t cp, PlanSearchResult& r,
                  TopK& top) {
  const auto& m = c.m;
  const std::int64_t rest = c.N / (tp * cp);
  const std::int64_t nz = static_cast<std::int64_t>(c.zeros.size());
  const std::int64_t nr = static_cast<std::int64_t>(c.rcs.size());
  const std::int64_t nmb = static_cast<std::int64_t>(c.mbs.size());
  if (c.rcs.empty() || c.mbs.empty())
    return; // nothing to compose (and nothing to count)
  auto reject = [&](Reject why, std::int64_t n) {
    r.rejected[static_cast<std::size_t>(why)] += n;
    r.space_size += n;
  };
  std::vector<std::int64_t> sps;
  if (c.o.fix_sp != 1)
    sps.push_back(0);
  if (tp > 1 && c.o.fix_sp != 0)
    sps.push_back(1);
  const std::int64_t ep = c.o.fix_ep > 0 ? c.o.fix_ep : 1;
  const std::int64_t etp = c.o.fix_etp > 0 ? c.o.fix_etp : 0; // 0: the experts' tp is tp
  std::vector<Phase1> cache(sps.size() * c.mbs.size());
  std::vector<Phase1> one_sequence(sps.size()); // micro-batch 1 when not searched
  // The plans being composed, one per recompute policy with its stage split, and the splits.
  // Capacities are reused: the inner loops do not allocate once these have grown.
  std::array<model::ParallelPlan, model::kRecomputePolicies> plans;
  std::vector<std::int64_t> pinned;

  for (std::size_t si = 0; si < sps.size(); ++si) {
    const bool sp = sps[si] == 1;
    for (std::int64_t pp : c.pps) {
      if (rest % pp)
        continue;
      const std::int64_t rest_dp = rest / pp;
      const auto dps = c.o.objective == Objective::cost ? filtered(divisors(rest_dp), c.o.fix_dp)
                                                        : filtered({rest_dp}, c.o.fix_dp);
      // Without a pipeline only v = 1 exists; a pinned v > 1 stays, for check_plan to refuse.
      const std::vector<std::int64_t> one{c.o.fix_interleave > 1 ? c.o.fix_interleave : 1};
      const auto& vs = pp > 1 ? c.vs_pipelined : one;
      if (vs.empty())
        continue;
      for (std::int64_t dp : dps) {
        const std::int64_t per_v = nmb * nz * nr;
        const std::int64_t all = static_cast<std::int64_t>(vs.size()) * per_v;
        // The rules are model::check_plan's (the ones `estimate` enforces), each group checked
        // in the loop that fixes the fields it reads, on `layout` (stage split aside).
        model::ParallelPlan layout;
        layout.tp = tp;
        layout.cp = cp;
        layout.pp = pp;
        layout.dp = dp;
        layout.ep = ep;
        layout.etp = etp;
        layout.sequence_parallel = sp;
        model::TrainingSetup s = c.setup;
        if (const auto bad = model::check_plan(layout, m, s, 0, model::kLayoutRules); !bad.ok()) {
          reject(reject_reason(bad), all);
          continue;
        }
        for (std::int64_t v : vs) {
          layout.interleave = v;
          const Split split = stage_split(c, pp, v, pinned);
          if (split == Split::none) {
            // No split to search: pp x v does not divide the layers, and no uneven split is
            // pinned or balances them (a broken rule's own reason where there is one).
            const auto bad = model::check_plan(layout, m, s, 0, model::kPipelineRules);
            reject(bad.ok() ? Reject::pp_indivisible : reject_reason(bad), per_v);
            continue;
          }
          for (std::int64_t rc : c.rcs) {
            model::ParallelPlan& plan = plans[static_cast<std::size_t>(rc)];
            plan.tp = tp;
            plan.cp = cp;
            plan.pp = pp;
            plan.dp = dp;
            plan.ep = ep;
            plan.etp = etp;
            plan.interleave = v;
            plan.sequence_parallel = sp;
            plan.recompute = static_cast<Recompute>(rc);
            if (split == Split::even)
              plan.stage_layers.clear();
            else if (split == Split::pinned)
              plan.stage_layers = pinned;
          }
          if (split == Split::balanced) {
            // Balanced on the stage times of a one-sequence micro-batch under each recompute
            // policy: one split for every micro-batch (embedding, head and layer times all
            // grow with it), which keeps memory monotone in the micro-batch below.
            Phase1& ref = c.mbs.front() == 1 ? cache[si * c.mbs.size()] : one_sequence[si];
            build(c, plans[static_cast<std::size_t>(c.rcs.front())], 1, ref, r);
            for (std::int64_t rc : c.rcs) {
              model::ParallelPlan& plan = plans[static_cast<std::size_t>(rc)];
              balance(m, ref.times, plan, c.setup, c.o.step, plan.stage_layers);
            }
          }
          // Memory never falls as the micro-batch grows with the rest of the plan fixed: the
          // parameters stay, saved activations and pipeline sends scale with it, and micro-batches
          // in flight times the micro-batch, min(pp - i, B / (mb dp)) mb, does not fall. A
          // (ZeRO, recompute) pair that did not fit at a smaller micro-batch is rejected without
          // composing it again (the same verdict, counted the same way).
          // Whatever the split, the plans it gives obey the rules `estimate` applies to them.
          bool split_ok = true;
          for (std::int64_t rc : c.rcs) {
            const auto bad = model::check_plan(plans[static_cast<std::size_t>(rc)], m, s, 0,
                                               model::kPipelineRules);
            if (!bad.ok() && split_ok) {
              reject(reject_reason(bad), per_v);
              split_ok = false;
            }
          }
          if (!split_ok)
            continue;
          std::array<std::array<bool, model::kRecomputePolicies>, 4> failed{};
          for (std::int64_t mi = 0; mi < nmb; ++mi) {
            const std::int64_t mb = c.mbs[static_cast<std::size_t>(mi)];
            s.micro_batch_size = mb;
            if (const auto bad = model::check_plan(layout, m, s, 0, model::kBatchRules);
                !bad.ok()) {
              reject(reject_reason(bad), nz * nr);
              continue;
            }
            const std::int64_t micro_batches = c.B / (mb * dp);
            bool all_failed = c.o.reuse_misfits;
            for (std::int64_t z : c.zeros)
              for (std::int64_t rc : c.rcs)
                all_failed =
                    all_failed && failed[static_cast<std::size_t>(z)][static_cast<std::size_t>(rc)];
            if (all_failed) {
              reject(Reject::does_not_fit, nz * nr);
              r.evaluated += nz * nr;
              if (split != Split::even)
                r.uneven_evaluated += nz * nr;
              continue;
            }
            Phase1& p1 = cache[si * c.mbs.size() + static_cast<std::size_t>(mi)];
            build(c, plans[static_cast<std::size_t>(c.rcs.front())], mb, p1, r);
            // A lower bound of the step by policy: the micro-batches and the bubble through the
            // first stage (the slowest is no faster), (m + (pp - 1) / v) x its time; the other
            // parts are >= 0. A plan whose bound cannot enter the top list is not timed.
            std::array<double, model::kRecomputePolicies> least_step_s{};
            for (std::int64_t rc : c.rcs) {
              const model::ParallelPlan& plan = plans[static_cast<std::size_t>(rc)];
              const StageCosts k = stage_costs(p1.times, plan, c.o.step);
              const std::int64_t n0 = model::layers_on_stage(plan, m.num_layers, 0);
              const double layers_s =
                  c.setup.recompute_layers > 0
                      ? k.layers(n0, model::layers_recomputed(plan, c.setup, n0)).least()
                      : static_cast<double>(n0) * k.layer.least();
              const double first =
                  layers_s + k.first_extra.total() + (pp == 1 ? k.last_extra.total() : 0.0);
              least_step_s[static_cast<std::size_t>(rc)] =
                  (static_cast<double>(micro_batches) +
                   static_cast<double>(pp - 1) / static_cast<double>(v)) *
                  first;
            }
            for (std::int64_t z : c.zeros) {
              for (std::int64_t rc : c.rcs) {
                model::ParallelPlan& plan = plans[static_cast<std::size_t>(rc)];
                plan.zero_stage = z;
                if (c.fw_limited && !c.o.step.fw().runs_layout(plan)) {
                  ++r.space_size;
                  ++r.rejected[static_cast<std::size_t>(Reject::framework_layout)];
                  continue;
                }
                ++r.space_size;
                ++r.evaluated;
                if (split != Split::even)
                  ++r.uneven_evaluated;
                bool& no_fit = failed[static_cast<std::size_t>(z)][static_cast<std::size_t>(rc)];
                if (no_fit && c.o.reuse_misfits) {
                  ++r.rejected[static_cast<std::size_t>(Reject::does_not_fit)];
                  continue;
                }
                const bool partial = c.o.search_recompute_layers &&
                                     rc == static_cast<std::int64_t>(Recompute::full) &&
                                     c.setup.recompute_layers == 0 && c.rcs.front() == 0 &&
                                     failed[static_cast<std::size_t>(z)][0];
                const Candidate k{p1,
                                  plan,
                                  s,
                                  micro_batches,
                                  split,
                                  least_step_s[static_cast<std::size_t>(rc)],
                                  least_step_s[0],
                                  partial};
                if (!size_and_offer(c, k, r, top))
                  no_fit = true;
              }
            }
          }
        }
      }
    }
  }
}

} // namespace

PlanSearchResult search_plans(const model::ModelSpec& m, const hw::ClusterSpec& cluster,
                              const hw::GpuSpec& gpu, const hw::HardwareProfile& profile,
                              const model::TrainingSetup& setup, const PlanSearchOptions& o) {
  check_precision_supported(gpu, setup.precision);
  Context c{m,
            cluster,
            gpu,
            profile,
            setup,
            o,
            cluster.num_gpus(),
            setup.global_batch_size,
            {},
            {},
            {},
            {},
            {},
            model::flops_per_token(m, setup.seq_len).total};
  // Pinned stage counts pin pp to their number.
  c.pps = filtered(divisors(c.N), o.fix_stage_layers.empty()
                                      ? o.fix_pp
                                      : static_cast<std::int64_t>(o.fix_stage_layers.size()));
  if (!o.fix_stage_layers.empty() && o.fix_pp > 0 &&
      o.fix_pp != static_cast<std::int64_t>(o.fix_stage_layers.size()))
    c.pps.clear();
  c.mbs = filtered(divisors(c.B), o.fix_micro_batch);
  for (std::int64_t z = 0; z <= 3; ++z) // the stages the framework runs
    if ((o.fix_zero < 0 || o.fix_zero == z) && o.step.fw().runs_zero_stage(z))
      c.zeros.push_back(z);
  for (std::int64_t rc = 0; rc < model::kRecomputePolicies; ++rc) {
    // With FlashAttention nothing quadratic is saved, so selective recompute keeps what none
    // keeps and re-runs the core's forward: never better than none, searched only when asked
    // for explicitly. torchtitan's per-op policy is a PyTorch framework's own option: searched
    // only when asked for.
    const bool flash_selective = rc == 1 && setup.attention == model::AttentionImpl::flash;
    const bool only_if_asked =
        flash_selective || rc == static_cast<std::int64_t>(model::Recompute::selective_op);
    // Full recompute of some layers only (TrainingSetup::recompute_layers) is a full-recompute
    // plan: the only policy searched then.
    const bool partial_full = setup.recompute_layers > 0;
    if (partial_full ? rc == static_cast<std::int64_t>(model::Recompute::full) &&
                           (o.fix_recompute < 0 || o.fix_recompute == rc)
                     : o.fix_recompute == rc || (o.fix_recompute < 0 && !only_if_asked))
      c.rcs.push_back(rc);
  }
  for (std::int64_t v = 1; v <= std::max<std::int64_t>(o.max_interleave, 1); ++v)
    if (o.fix_interleave < 0 || o.fix_interleave == v)
      c.vs_pipelined.push_back(v);

  // A parallelism the framework does not run is not searched (FrameworkProfile::parallelisms);
  // one it runs only with some ZeRO stages is rejected plan by plan (Reject::framework_layout).
  using Dim = FrameworkProfile::ParallelDim;
  const FrameworkProfile& fw = o.step.fw();
  c.fw_limited = fw.parallelisms_limited();
  if (!fw.runs(Dim::pp))
    std::erase_if(c.pps, [](std::int64_t pp) { return pp > 1; });
  if (!fw.parallelism(Dim::pp).interleave)
    std::erase_if(c.vs_pipelined, [](std::int64_t v) { return v > 1; });
  const std::int64_t max_tp = o.max_tp > 0 ? o.max_tp : cluster.gpus_per_node;
  auto tps = filtered(divisors(c.N), o.fix_tp, o.fix_tp > 0 ? 0 : max_tp);
  auto cps = filtered(divisors(c.N), o.fix_cp, o.fix_cp > 0 ? 0 : o.max_cp);
  if (!fw.runs(Dim::tp))
    std::erase_if(tps, [](std::int64_t tp) { return tp > 1; });
  if (!fw.runs(Dim::cp))
    std::erase_if(cps, [](std::int64_t cp) { return cp > 1; });
  std::vector<std::pair<std::int64_t, std::int64_t>> work;
  for (auto tp : tps)
    for (auto cp : cps)
      if (c.N % (tp * cp) == 0)
        work.emplace_back(tp, cp);

  const int threads = std::max(1, std::min<int>(o.threads, static_cast<int>(work.size())));
  std::vector<PlanSearchResult> partial(static_cast<std::size_t>(threads));
  std::vector<TopK> tops(static_cast<std::size_t>(threads),
                         TopK{static_cast<std::size_t>(std::max<std::int64_t>(o.top_k, 1)), {}});
  // Items with a small tp x cp leave the most pp/dp/micro-batch choices: hand them out first,
  // then the rest on demand (dynamic scheduling keeps both cores busy to the end).
  std::stable_sort(work.begin(), work.end(), [](const auto& x, const auto& y) {
    return x.first * x.second < y.first * y.second;
  });
  std::atomic<std::size_t> next{0};
  auto worker = [&](int t) {
    // Counters and the top-k live on this thread's stack while it works: neighbouring
    // elements of `partial` share cache lines, and bumping them from two cores in the inner
    // loop (false sharing) made two threads slower than one.
    PlanSearchResult mine;
    TopK top = tops[static_cast<std::size_t>(t)];
    for (std::size_t i = next++; i < work.size(); i = next++)
      search_tp_cp(c, work[i].first, work[i].second, mine, top);
    partial[static_cast<std::size_t>(t)] = std::move(mine);
    tops[static_cast<std::size_t>(t)] = std::move(top);
  };
  if (threads == 1) {
    worker(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back(worker, t);
    for (auto& th : pool)
      th.join();
  }
  PlanSearchResult out;
  TopK merged{static_cast<std::size_t>(std::max<std::int64_t>(o.top_k, 1)), {}};
  for (std::size_t t = 0; t < partial.size(); ++t) {
    out.space_size += partial[t].space_size;
    out.evaluated += partial[t].evaluated;
    out.uneven_evaluated += partial[t].uneven_evaluated;
    out.feasible += partial[t].feasible;
    out.phase1_builds += partial[t].phase1_builds;
    out.timed += partial[t].timed;
    out.collective_evaluations += partial[t].collective_evaluations;
    for (std::size_t k = 0; k < out.rejected.size(); ++k)
      out.rejected[k] += partial[t].rejected[k];
    for (const auto& cand : tops[t].items)
      merged.offer(cand);
  }
  out.plans = std::move(merged.items);
  return out;
}

std::vector<PlanNeighbour> plan_neighbours(const model::ModelSpec& m,
                                           const hw::ClusterSpec& cluster, const hw::GpuSpec& gpu,
                                           const hw::HardwareProfile& profile,
                                           const model::TrainingSetup& s, const StepOptions& so,
                                           const PlanCandidate& best) {
  const auto& b = best.plan;
  struct N {
    std::string what;
    model::ParallelPlan p;
    std::int64_t mb;
  };
  std::vector<N> ns;
  auto add = [&](std::string what, auto mutate, std::int64_t mb) {
    model::ParallelPlan p = b;
    mutate(p);
    if (p.pp != b.pp) { // another stage count: the split the search would use for it
      model::TrainingSetup t = s;
      t.micro_batch_size = mb;
      p.stage_layers = sim::searched_stage_layers(m, cluster, gpu, profile, p, t, so);
    }
    ns.push_back({std::move(what), p, mb});
  };
  if (b.tp > 1)
    add(
        fmt::format("tp {} -> {} (dp x2)", b.tp, b.tp / 2),
        [](auto& p) {
          p.tp /= 2;
          p.dp *= 2;
        },
        best.micro_batch_size);
  if (b.dp % 2 == 0)
    add(
        fmt::format("tp {} -> {} (dp /2)", b.tp, b.tp * 2),
        [](auto& p) {
          p.tp *= 2;
          p.dp /= 2;
        },
        best.micro_batch_size);
  if (b.pp > 1 && b.interleave == 1)
    add(
        fmt::format("pp {} -> {} (dp x2)", b.pp, b.pp / 2),
        [](auto& p) {
          p.pp /= 2;
          p.dp *= 2;
        },
        best.micro_batch_size);
  if (b.dp % 2 == 0)
    add(
        fmt::format("pp {} -> {} (dp /2)", b.pp, b.pp * 2),
        [](auto& p) {
          p.pp *= 2;
          p.dp /= 2;
        },
        best.micro_batch_size);
  if (best.micro_batch_size > 1)
    add(
        fmt::format("micro-batch {} -> {}", best.micro_batch_size, best.micro_batch_size / 2),
        [](auto&) {}, best.micro_batch_size / 2);
  add(
      fmt::format("micro-batch {} -> {}", best.micro_batch_size, best.micro_batch_size * 2),
      [](auto&) {}, best.micro_batch_size * 2);
  for (std::int64_t z = 0; z <= 3; ++z)
    if (z != b.zero_stage && so.fw().runs_zero_stage(z))
      add(
          fmt::format("ZeRO {} -> {}", b.zero_stage, z), [z](auto& p) { p.zero_stage = z; },
          best.micro_batch_size);
  for (auto r : {model::Recompute::none, model::Recompute::selective, model::Recompute::full})
    if (r != b.recompute)
      add(
          fmt::format("recompute {} -> {}", model::to_string(b.recompute), model::to_string(r)),
          [r](auto& p) { p.recompute = r; }, best.micro_batch_size);
  if (b.tp > 1)
    add(
        fmt::format("sequence parallel {}", b.sequence_parallel ? "off" : "on"),
        [](auto& p) { p.sequence_parallel = !p.sequence_parallel; }, best.micro_batch_size);
  if (b.pp > 1)
    add(
        fmt::format("interleave {} -> {}", b.interleave, b.interleave * 2),
        [](auto& p) { p.interleave *= 2; }, best.micro_batch_size);
  std::vector<PlanNeighbour> out;
  for (const auto& n : ns) {
    PlanNeighbour r{n.what, 0, {}, {}};
    model::TrainingSetup t = s;
    t.micro_batch_size = n.mb;
    t.recompute_layers = best.recompute_layers > 0 ? best.recompute_layers : s.recompute_layers;
    if (n.p.recompute != Recompute::full) // another policy re-runs no chosen subset
      t.recompute_layers = 0;
    r.candidate.plan = n.p;
    r.candidate.micro_batch_size = n.mb;
    r.candidate.recompute_layers = best.recompute_layers > 0 ? t.recompute_layers : 0;
    try {
      model::validate(n.p, m, t, cluster.num_gpus(), "neighbour");
    } catch (const ConfigError& e) {
      r.why_not = e.what();
      const auto pos = r.why_not.find(": ");
      if (pos != std::string::npos)
        r.why_not = r.why_not.substr(pos + 2);
      out.push_back(std::move(r));
      continue;
    }
    const auto e = estimate_step(m, cluster, gpu, profile, n.p, t, so);
    r.candidate.per_gpu_bytes_total = e.memory.total;
    if (e.memory.total > gpu.memory_bytes)
      r.why_not = fmt::format("needs {:.1f} GB per GPU (> {:.0f})", e.memory.total / 1e9,
                              gpu.memory_bytes / 1e9);
    else
      r.step_time_s = r.candidate.step_time_s = e.step_time_s;
    out.push_back(std::move(r));
  }
  return out;
}

bool same_plan(const PlanCandidate& a, const PlanCandidate& b) {
  const auto& p = a.plan;
  const auto& q = b.plan;
  return p.tp == q.tp && p.pp == q.pp && p.dp == q.dp && p.cp == q.cp && p.ep == q.ep &&
         p.zero_stage == q.zero_stage && p.recompute == q.recompute &&
         p.sequence_parallel == q.sequence_parallel && p.interleave == q.interleave &&
         p.stage_layers == q.stage_layers && a.micro_batch_size == b.micro_batch_size &&
         a.recompute_layers == b.recompute_layers;
}

} // namespace trainsim::sim
