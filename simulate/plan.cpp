// Exhaustive plan search (plan.hpp).
#include "simulate/plan.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <tuple>

#include "model/count.hpp"
#include "model/ops.hpp"
#include "simulate/costs.hpp"
#include "simulate/memory.hpp"

namespace trainsim::sim {

const char* to_string(Reject r) {
  switch (r) {
  case Reject::tp_indivisible: return "tp does not divide heads / kv heads / ffn";
  case Reject::pp_indivisible: return "pp x interleave does not divide layers";
  case Reject::cp_indivisible: return "cp (x tp with SP) does not divide seq_len";
  case Reject::batch_mismatch: return "global batch not a multiple of micro-batch x dp";
  case Reject::interleave_batch: return "interleaving needs micro-batches divisible by pp";
  case Reject::expert_indivisible: return "ep does not divide experts / dp";
  case Reject::seq_too_long: return "seq_len exceeds the model's learned positions";
  case Reject::out_of_range: return "a degree outside its limits";
  case Reject::does_not_fit: return "does not fit in GPU memory";
  case Reject::count_: break;
  }
  return "?";
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
                         static_cast<int>(p.recompute), p.sequence_parallel, p.interleave);
}

bool better(const PlanCandidate& a, const PlanCandidate& b) { return key(a) < key(b); }

struct TopK {
  std::size_t k;
  std::vector<PlanCandidate> items; // sorted best first
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
      {PlanRule::cp_seq, Reject::cp_indivisible},
      {PlanRule::sp_seq, Reject::cp_indivisible},
      {PlanRule::ep_experts, Reject::expert_indivisible},
      {PlanRule::ep_dp, Reject::expert_indivisible},
      {PlanRule::ep_dense, Reject::expert_indivisible},
      {PlanRule::seq_positions, Reject::seq_too_long},
      {PlanRule::pp_layers, Reject::pp_indivisible},
      {PlanRule::pp_interleave_layers, Reject::pp_indivisible},
      {PlanRule::interleave_needs_pp, Reject::pp_indivisible},
      {PlanRule::batch_multiple, Reject::batch_mismatch},
      {PlanRule::interleave_batch, Reject::interleave_batch},
      {PlanRule::num_gpus, Reject::out_of_range}};
  for (const auto& [rule, why] : order)
    if (bad.has(rule))
      return why;
  return Reject::out_of_range;
}

void search_tp_cp(const Context& c, std::int64_t tp, std::int64_t cp, PlanSearchResult& r,
                  TopK& top) {
  const auto& m = c.m;
  const std::int64_t rest = c.N / (tp * cp);
  const std::int64_t nz = static_cast<std::int64_t>(c.zeros.size());
  const std::int64_t nr = static_cast<std::int64_t>(c.rcs.size());
  const std::int64_t nmb = static_cast<std::int64_t>(c.mbs.size());
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
  std::vector<Phase1> cache(sps.size() * c.mbs.size());

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
        // in the loop that fixes the fields it reads.
        model::ParallelPlan plan;
        plan.tp = tp;
        plan.cp = cp;
        plan.pp = pp;
        plan.dp = dp;
        plan.ep = ep;
        plan.sequence_parallel = sp;
        model::TrainingSetup s = c.setup;
        if (const auto bad = model::check_plan(plan, m, s, 0, model::kLayoutRules); !bad.ok()) {
          reject(reject_reason(bad), all);
          continue;
        }
        for (std::int64_t v : vs) {
          plan.interleave = v;
          if (const auto bad = model::check_plan(plan, m, s, 0, model::kPipelineRules); !bad.ok()) {
            reject(reject_reason(bad), per_v);
            continue;
          }
          for (std::int64_t mi = 0; mi < nmb; ++mi) {
            const std::int64_t mb = c.mbs[static_cast<std::size_t>(mi)];
            s.micro_batch_size = mb;
            if (const auto bad = model::check_plan(plan, m, s, 0, model::kBatchRules); !bad.ok()) {
              reject(reject_reason(bad), nz * nr);
              continue;
            }
            const std::int64_t micro_batches = c.B / (mb * dp);
            Phase1& p1 = cache[si * c.mbs.size() + static_cast<std::size_t>(mi)];
            if (!p1.built) {
              const auto ops = model::build_ops(m, model::make_op_context(plan, s));
              p1.acc = account_micro_batch(m, ops, plan, s);
              p1.times = time_micro_batch(m, ops, plan, s, c.gpu, c.profile, c.cluster);
              p1.built = true;
              ++r.phase1_builds;
            }
            for (std::int64_t z : c.zeros) {
              plan.zero_stage = z;
              for (std::int64_t rc : c.rcs) {
                plan.recompute = static_cast<Recompute>(rc);
                ++r.space_size;
                ++r.evaluated;
                const MemoryBreakdown mem = compose_memory_fullest(
                    p1.acc, m, plan, s, c.profile, MemoryOptions{c.o.step.bucket_bytes});
                if (mem.total > c.o.memory_bytes) {
                  ++r.rejected[static_cast<std::size_t>(Reject::does_not_fit)];
                  continue;
                }
                ++r.feasible;
                StepEstimate est;
                compose_step(p1.acc, p1.times, m, c.cluster, c.gpu, c.profile, plan, s, c.o.step,
                             c.flops_per_token, est, &mem);
                r.collective_evaluations += est.collective_evaluations;
                PlanCandidate cand;
                cand.plan = plan;
                cand.micro_batch_size = mb;
                cand.micro_batches = micro_batches;
                cand.step_time_s = est.step_time_s;
                cand.per_gpu_bytes_total = mem.total;
                cand.mfu = est.mfu;
                cand.objective = c.o.objective == Objective::time ? est.step_time_s
                                 : c.o.objective == Objective::cost
                                     ? est.step_time_s * static_cast<double>(plan.num_gpus())
                                     : mem.total;
                top.offer(cand);
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
  c.pps = filtered(divisors(c.N), o.fix_pp);
  c.mbs = filtered(divisors(c.B), o.fix_micro_batch);
  for (std::int64_t z = 0; z <= 3; ++z)
    if (o.fix_zero < 0 || o.fix_zero == z)
      c.zeros.push_back(z);
  for (std::int64_t rc = 0; rc <= 2; ++rc) {
    // With FlashAttention nothing quadratic is saved, so selective recompute is the same
    // plan as none: search it only when asked for explicitly.
    const bool same_as_none = rc == 1 && setup.attention == model::AttentionImpl::flash;
    if (o.fix_recompute == rc || (o.fix_recompute < 0 && !same_as_none))
      c.rcs.push_back(rc);
  }
  for (std::int64_t v = 1; v <= std::max<std::int64_t>(o.max_interleave, 1); ++v)
    if (o.fix_interleave < 0 || o.fix_interleave == v)
      c.vs_pipelined.push_back(v);

  const std::int64_t max_tp = o.max_tp > 0 ? o.max_tp : cluster.gpus_per_node;
  const auto tps = filtered(divisors(c.N), o.fix_tp, o.fix_tp > 0 ? 0 : max_tp);
  const auto cps = filtered(divisors(c.N), o.fix_cp, o.fix_cp > 0 ? 0 : o.max_cp);
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
    out.feasible += partial[t].feasible;
    out.phase1_builds += partial[t].phase1_builds;
    out.collective_evaluations += partial[t].collective_evaluations;
    for (std::size_t k = 0; k < out.rejected.size(); ++k)
      out.rejected[k] += partial[t].rejected[k];
    for (const auto& cand : tops[t].items)
      merged.offer(cand);
  }
  out.plans = std::move(merged.items);
  return out;
}

} // namespace trainsim::sim
