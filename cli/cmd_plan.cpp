// `trainsim plan`: exhaustive search over parallel layouts, micro-batch, ZeRO stage,
// recompute, sequence parallelism and interleaving; top plans, rejections by reason,
// --explain, a frontier plot, and --bench for evaluations per second.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <thread>

#include "cli/commands.hpp"
#include "cli/estimate_print.hpp"
#include "cli/output.hpp"
#include "cli/plot.hpp"
#include "cli/resolve.hpp"
#include "common/checks.hpp"
#include "common/errors.hpp"
#include "common/stats.hpp"
#include "common/units.hpp"
#include "model/count.hpp"
#include "simulate/allocator.hpp"
#include "simulate/plan.hpp"
#include "simulate/roofline.hpp"

namespace trainsim::cli {
namespace {

struct PlanOptionsCli {
  ModelOptions model;
  MachineOptions machine;
  SetupOptions setup;
  StepFlags step;
  std::string tokens;
  std::int64_t top = 10;
  std::string objective = "time";
  std::vector<std::string> fix;
  StageSplitOptions stages;
  std::optional<std::int64_t> explain; // rank of the plan to explain
  std::int64_t max_tp = 0, max_cp = 8, max_interleave = 8;
  int threads = 0;
  bool bench = false;
  bool search_recompute_layers = false; // --search-recompute-layers
  bool micro_batch_given = false;       // --micro-batch: pins the micro-batch as --fix does
  std::string plot;
  OutputOptions out;
};

// Largest pinned or searched degree (model::validate's limit for tp, pp, cp, ep).
constexpr std::int64_t kMaxDegree = 1 << 16;

// `fixed` maps each dimension pinned so far to the --fix item that pinned it (aliases such as
// mb and micro-batch are one dimension): pinning one twice is an error, not "last one wins".
void apply_fix(const std::string& item, sim::PlanSearchOptions& o,
               std::map<std::string, std::string>& fixed) {
  const auto eq = item.find('=');
  if (eq == std::string::npos)
    throw ConfigError(
        fmt::format("--fix {}: expected NAME=VALUE (e.g. tp=8, recompute=full, sp=on)", item));
  const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
  const std::string dim = name == "mb"                  ? "micro-batch"
                          : name == "v"                 ? "interleave"
                          : name == "sequence-parallel" ? "sp"
                                                        : name;
  if (const auto it = fixed.find(dim); it != fixed.end())
    throw ConfigError(fmt::format("--fix {}: {} is already fixed by --fix {} (give each "
                                  "dimension once)",
                                  item, dim, it->second));
  fixed[dim] = item;
  auto number = [&]() -> std::int64_t {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(value, &used);
      if (used != value.size() || v < 0)
        throw std::invalid_argument(value);
      return v;
    } catch (const std::exception&) {
      throw ConfigError(fmt::format("--fix {}: '{}' is not a non-negative integer", item, value));
    }
  };
  if (name == "tp")
    o.fix_tp = number();
  else if (name == "pp")
    o.fix_pp = number();
  else if (name == "dp")
    o.fix_dp = number();
  else if (name == "cp")
    o.fix_cp = number();
  else if (name == "ep")
    o.fix_ep = number();
  else if (name == "etp")
    o.fix_etp = number();
  else if (name == "micro-batch" || name == "mb")
    o.fix_micro_batch = number();
  else if (name == "zero")
    o.fix_zero = number();
  else if (name == "interleave" || name == "v")
    o.fix_interleave = number();
  else if (name == "recompute")
    o.fix_recompute = static_cast<std::int64_t>(parse_recompute(value));
  else if (name == "sp" || name == "sequence-parallel") {
    if (value == "on" || value == "1" || value == "true")
      o.fix_sp = 1;
    else if (value == "off" || value == "0" || value == "false")
      o.fix_sp = 0;
    else
      throw ConfigError(fmt::format("--fix {}: sp must be on or off", item));
  } else {
    throw ConfigError(fmt::format("--fix {}: unknown dimension '{}' (tp, pp, dp, cp, ep, "
                                  "etp, micro-batch, zero, interleave, recompute, sp)",
                                  item, name));
  }
  if (name != "recompute" && name != "sp" && name != "sequence-parallel" && name != "zero" &&
      (number() == 0 || number() > (dim == "dp" || dim == "micro-batch" ? 1 << 24 : kMaxDegree)))
    throw ConfigError(fmt::format("--fix {}: must be in 1..{}", item,
                                  dim == "dp" || dim == "micro-batch" ? 1 << 24 : kMaxDegree));
  if (name == "zero" && number() > 3)
    throw ConfigError(fmt::format("--fix {}: zero must be 0..3", item));
}

// The candidate's recompute: its policy, and "full(8)" for full recompute of 8 layers per model
// chunk only.
std::string recompute_cell(const sim::PlanCandidate& c) {
  return c.recompute_layers > 0 ? fmt::format("full({})", c.recompute_layers)
                                : std::string(model::to_string(c.plan.recompute));
}

std::string plan_label(const sim::PlanCandidate& c) {
  const auto& p = c.plan;
  return fmt::format(
      "tp{} pp{}{} dp{} cp{} mb{} z{} {}{}{}", p.tp, p.pp,
      p.stage_layers.empty() ? ""
                             : fmt::format(" [{}]", model::format_stage_layers(p.stage_layers)),
      p.dp, p.cp, c.micro_batch_size, p.zero_stage, recompute_cell(c),
      p.sequence_parallel ? " sp" : "", p.interleave > 1 ? fmt::format(" v{}", p.interleave) : "");
}

// Why does `best` win? Re-estimate it and its one-step neighbours with the full model.
// Why a valid neighbour of plan #rank stands where it does: by its step time against this
// plan's, and by its own place in the ranked list where the search found it.
std::string neighbour_why(const sim::PlanNeighbour& n, double step_s,
                          const std::vector<sim::PlanCandidate>& ranked, std::int64_t rank,
                          sim::Objective objective) {
  const auto it = std::find_if(ranked.begin(), ranked.end(), [&](const sim::PlanCandidate& c) {
    return sim::same_plan(c, n.candidate);
  });
  const std::string at = it == ranked.end() ? "" : fmt::format("plan #{}", it - ranked.begin() + 1);
  const double rel = n.step_time_s / step_s - 1;
  if (std::abs(rel) <= 1e-9)
    return at.empty() ? "as fast (a tie)" : "as fast: " + at + " (a tie)";
  if (rel > 0)
    return at.empty() ? "slower" : "slower: " + at;
  if (!at.empty() && it - ranked.begin() + 1 < rank)
    return "faster: " + at + ", ranked above";
  if (!at.empty())
    return fmt::format("faster, but {} by the objective ({})", at,
                       objective == sim::Objective::memory ? "memory per GPU" : "cost");
  if (objective == sim::Objective::memory)
    return "faster, but more memory per GPU (the objective)";
  return "faster, but outside the search (a --fix or --max-* bound, or a policy searched only "
         "when asked)";
}

// Plan #rank against its one-step neighbours: printed as a table (table mode), returned as
// JSON (the plan's JSON carries it as "explain").
nlohmann::json explain(Sink& sink, const model::ModelSpec& m, const Machine& mc,
                       const model::TrainingSetup& s, const sim::StepOptions& so,
                       const std::vector<sim::PlanCandidate>& ranked, std::int64_t rank,
                       sim::Objective objective) {
  const sim::PlanCandidate& best = ranked[static_cast<std::size_t>(rank - 1)];
  const auto& b = best.plan;
  model::TrainingSetup t = s;
  t.micro_batch_size = best.micro_batch_size;
  if (best.recompute_layers > 0)
    t.recompute_layers = best.recompute_layers;
  const auto e = sim::estimate_step(m, mc.cluster, mc.gpu, mc.profile, b, t, so);
  const auto& bd = e.breakdown_s;
  nlohmann::json out{{"rank", rank},
                     {"plan", plan_label(best)},
                     {"step_time_s", e.step_time_s},
                     {"mfu", e.mfu},
                     {"per_gpu_bytes_total", e.memory.total},
                     {"breakdown_s", breakdown_json(bd)},
                     {"neighbours", nlohmann::json::array()}};
  Table tab({"neighbour (one change)", "step (s)", "vs this plan", "why"});
  for (const auto& n : sim::plan_neighbours(m, mc.cluster, mc.gpu, mc.profile, s, so, best)) {
    if (!n.why_not.empty()) {
      tab.add_row({n.change, "-", "-", "not valid: " + n.why_not});
      out["neighbours"].push_back({{"change", n.change}, {"valid", false}, {"why", n.why_not}});
      continue;
    }
    const std::string why = neighbour_why(n, e.step_time_s, ranked, rank, objective);
    tab.add_row({n.change, fmt::format("{:.3f}", n.step_time_s),
                 fmt::format("{:+.1f}%", 100 * (n.step_time_s / e.step_time_s - 1)), why});
    out["neighbours"].push_back(
        {{"change", n.change}, {"valid", true}, {"step_time_s", n.step_time_s}, {"why", why}});
  }
  if (sink.format() == Format::table) {
    sink.write(fmt::format("\nplan #{}: {}  step {:.3f} s, MFU {:.1f}%, {:.1f} GB per GPU\n", rank,
                           plan_label(best), e.step_time_s, 100 * e.mfu, e.memory.total / 1e9));
    sink.write(
        fmt::format("  breakdown: compute {:.3f} s (fwd {:.3f}, bwd {:.3f}, recompute {:.3f}), "
                    "tp {:.3f}, pp {:.3f}, dp {:.3f}, bubble {:.3f}, optimizer {:.3f}\n",
                    bd.forward + bd.backward + bd.recompute, bd.forward, bd.backward, bd.recompute,
                    bd.tp_comm, bd.pp_comm, bd.dp_comm, bd.bubble, bd.optimizer));
    tab.print(sink);
  }
  return out;
}

int hardware_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The search's options from the flags: objective, bounds, pinned dimensions, each checked
// against the model, the GPUs and the framework.
sim::PlanSearchOptions resolve_search_options(const PlanOptionsCli& o, const model::ModelSpec& m,
                                              const Machine& mc, const model::TrainingSetup& s) {
  require_range("--top", o.top, 1, 10000);
  if (o.explain) {
    require_range("--explain", *o.explain, 1, 10000);
    if (o.out.format == Format::csv)
      throw ConfigError("--explain with --format csv: the plans are one table and the "
                        "explanation another; use --format table or json (its \"explain\")");
  }
  require_range("--max-tp", o.max_tp, 0, kMaxDegree, "(0 = GPUs per node)");
  require_range("--max-cp", o.max_cp, 1, kMaxDegree);
  require_range("--max-interleave", o.max_interleave, 1, 1024);
  require_range("--threads", std::int64_t{o.threads}, 0, 1024, "(0 = all cores)");
  sim::PlanSearchOptions so;
  so.objective = o.objective == "time"   ? sim::Objective::time
                 : o.objective == "cost" ? sim::Objective::cost
                 : o.objective == "memory"
                     ? sim::Objective::memory
                     : throw ConfigError(fmt::format(
                           "--objective = {}: must be time, cost or memory", o.objective));
  so.top_k = std::max(o.top, o.explain.value_or(0));
  so.search_recompute_layers = o.search_recompute_layers;
  so.max_tp = o.max_tp;
  so.max_cp = o.max_cp;
  so.max_interleave = o.max_interleave;
  so.step = resolve_step_flags(o.step);
  so.memory_bytes = mc.gpu.memory_bytes;
  std::map<std::string, std::string> fixed;
  for (const auto& f : o.fix)
    apply_fix(f, so, fixed);
  if (o.micro_batch_given) {
    if (so.fix_micro_batch >= 0 && so.fix_micro_batch != o.setup.micro_batch_size)
      throw ConfigError(fmt::format("--micro-batch {} and {}: pin the micro-batch once",
                                    o.setup.micro_batch_size, fixed["micro-batch"]));
    so.fix_micro_batch = o.setup.micro_batch_size;
  }

  if (so.fix_recompute >= 0)
    require_recompute_supported(static_cast<model::Recompute>(so.fix_recompute), so.step.fw());
  if (so.fix_zero >= 0)
    require_zero_supported(so.fix_zero, so.step.fw(), "--fix zero=");
  {
    // Fixed degrees the framework does not run (at any ZeRO stage it may search) find nothing.
    model::ParallelPlan fixed;
    fixed.tp = std::max<std::int64_t>(so.fix_tp, 1);
    // A fixed interleave > 1 implies a pipeline, whose schedule the framework may not have.
    fixed.pp = std::max<std::int64_t>(so.fix_pp, so.fix_interleave > 1 ? 2 : 1);
    fixed.cp = std::max<std::int64_t>(so.fix_cp, 1);
    fixed.ep = std::max<std::int64_t>(so.fix_ep, 1);
    fixed.interleave = std::max<std::int64_t>(so.fix_interleave, 1);
    const auto& fw = so.step.fw();
    const auto zeros = so.fix_zero >= 0 ? std::vector<std::int64_t>{so.fix_zero} : fw.zero_stages;
    const bool any = std::any_of(zeros.begin(), zeros.end(), [&](std::int64_t z) {
      fixed.zero_stage = z;
      return fw.runs_layout(fixed);
    });
    if (!any) {
      fixed.zero_stage = zeros.front();
      throw ConfigError("--fix: " + fw.layout_refusal(fixed));
    }
  }
  if (s.recompute_layers > 0 && so.fix_recompute >= 0 &&
      so.fix_recompute != static_cast<std::int64_t>(model::Recompute::full))
    throw ConfigError(fmt::format(
        "--recompute-layers {}: needs full recompute (the layers it names are fully recomputed), "
        "not --fix recompute={}",
        s.recompute_layers, model::to_string(static_cast<model::Recompute>(so.fix_recompute))));
  if (s.recompute_layers > m.num_layers)
    throw ConfigError(fmt::format("--recompute-layers {}: must not exceed num_layers = {}",
                                  s.recompute_layers, m.num_layers));
  require_setup_supported(s, so.step.fw());
  if (so.fix_recompute >= 0)
    require_modules_recompute(static_cast<model::Recompute>(so.fix_recompute), s);
  if (so.fix_tp > 0 && (m.num_heads % so.fix_tp || m.num_kv_heads % so.fix_tp))
    throw ConfigError(fmt::format("--fix tp={}: must divide num_heads = {} and num_kv_heads = {}",
                                  so.fix_tp, m.num_heads, m.num_kv_heads));
  if (so.fix_pp > m.num_layers)
    throw ConfigError(
        fmt::format("--fix pp={}: must not exceed num_layers = {}", so.fix_pp, m.num_layers));
  check_stage_split_flags(o.stages, m.num_layers);
  // A pinned degree must divide the GPUs and a pinned micro-batch the global batch, or the
  // search has nothing to enumerate.
  for (const auto& [flag, v] : {std::pair{"tp", so.fix_tp}, std::pair{"pp", so.fix_pp},
                                std::pair{"dp", so.fix_dp}, std::pair{"cp", so.fix_cp}})
    if (v == 0 || (v > 0 && mc.num_gpus % v))
      throw ConfigError(fmt::format("--fix {}={}: must divide the {} GPUs", flag, v, mc.num_gpus));
  if (so.fix_micro_batch == 0 ||
      (so.fix_micro_batch > 0 && s.global_batch_size % so.fix_micro_batch))
    throw ConfigError(fmt::format("micro-batch {}: must divide the global batch {}",
                                  so.fix_micro_batch, s.global_batch_size));
  if (!o.stages.pp_layers.empty()) {
    // Pins pp to the number of stages; checked like a plan's split (pp alone is searched).
    so.fix_stage_layers = parse_stage_layers(o.stages.pp_layers, "--pp-layers");
    const auto stages = static_cast<std::int64_t>(so.fix_stage_layers.size());
    if (so.fix_pp > 0 && so.fix_pp != stages)
      throw ConfigError(fmt::format("--pp-layers = {}: has {} stages but --fix pp={}",
                                    o.stages.pp_layers, stages, so.fix_pp));
    model::ParallelPlan pinned;
    pinned.pp = stages;
    pinned.stage_layers = so.fix_stage_layers;
    model::validate_stage_layers(pinned, m.num_layers, "flags (--pp-layers)");
  }
  so.fix_first_stage_layers = o.stages.first_stage_layers.value_or(-1);
  so.fix_last_stage_layers = o.stages.last_stage_layers.value_or(-1);
  so.threads = o.threads > 0 ? o.threads : hardware_threads();

  return so;
}

// --bench: evaluations per second, single-threaded and with every core, median of 5 cold
// searches each; both must list the same plans.
int run_plan_bench(Sink& sink, const model::ModelSpec& m, const Machine& mc,
                   const model::TrainingSetup& s, const sim::PlanSearchOptions& so) {
  const int hw_threads = hardware_threads();
  // Evaluations per second, single-threaded and with every core, median of 5 runs each.
  auto time_run = [&](int threads, sim::PlanSearchResult& r) {
    auto opts = so;
    opts.threads = threads;
    std::vector<double> ts;
    for (int i = 0; i < 5; ++i) {
      sim::clear_allocator_cache(); // each search cold, as one `plan` runs
      const auto t0 = std::chrono::steady_clock::now();
      r = sim::search_plans(m, mc.cluster, mc.gpu, mc.profile, s, opts);
      ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return median(ts);
  };
  sim::PlanSearchResult r1, rn;
  const double t1 = time_run(1, r1);
  const double tn = time_run(hw_threads, rn);
  // The same plans in the same order (how many were sized on the way depends on what each
  // thread had found: the pruning).
  const bool same = r1.plans.size() == rn.plans.size() &&
                    std::equal(r1.plans.begin(), r1.plans.end(), rn.plans.begin(),
                               [](const auto& a, const auto& b) {
                                 return sim::same_plan(a, b) && a.step_time_s == b.step_time_s &&
                                        a.per_gpu_bytes_total == b.per_gpu_bytes_total;
                               });
  if (!same)
    throw CheckFailed("plan search: single- and multi-threaded results differ");
  if (sink.format() != Format::table) {
    const nlohmann::json j{{"model", m.name},
                           {"num_gpus", mc.num_gpus},
                           {"gpu", mc.gpu.name},
                           {"global_batch_size", s.global_batch_size},
                           {"seq_len", s.seq_len},
                           {"space_size", r1.space_size},
                           {"evaluated", r1.evaluated},
                           {"feasible", r1.feasible},
                           {"one_thread_search_s", t1},
                           {"threads", hw_threads},
                           {"all_threads_search_s", tn},
                           {"one_thread_evaluations_per_s", static_cast<double>(r1.evaluated) / t1},
                           {"identical_results", same}};
    if (sink.format() == Format::json) {
      sink.json(j);
    } else {
      Table t({"threads", "search_s", "evaluations_per_s"});
      t.add_row({"1", fmt::format("{:.6g}", t1),
                 fmt::format("{:.6g}", static_cast<double>(r1.evaluated) / t1)});
      t.add_row({fmt::format("{}", hw_threads), fmt::format("{:.6g}", tn),
                 fmt::format("{:.6g}", static_cast<double>(rn.evaluated) / tn)});
      t.print(sink);
    }
    return 0;
  }
  sink.write(fmt::format("# plan search benchmark: {} on {} x {}, global batch {}, seq {}\n",
                         m.name, mc.num_gpus, mc.gpu.name, s.global_batch_size, s.seq_len));
  sink.write(fmt::format("space {} candidates, {} evaluated by the cost model ({} with uneven "
                         "stages), {} feasible, {} op lists built\n",
                         r1.space_size, r1.evaluated, r1.uneven_evaluated, r1.feasible,
                         r1.phase1_builds));
  sink.write(fmt::format("1 thread : {:.1f} ms per search (median of 5), {:.2f} M evaluations/s\n",
                         t1 * 1e3, static_cast<double>(r1.evaluated) / t1 / 1e6));
  sink.write(fmt::format("{} threads: {:.1f} ms per search (median of 5), {:.2f} M evaluations/s "
                         "({:.2f} M per core); speed-up {:.2f}x; identical results: {}\n",
                         hw_threads, tn * 1e3, static_cast<double>(rn.evaluated) / tn / 1e6,
                         static_cast<double>(rn.evaluated) / tn / 1e6 / hw_threads, t1 / tn,
                         same ? "yes" : "NO"));
  return 0;
}

// Why a search found nothing: an empty space, or every candidate rejected (with the counts).
void require_plans(const sim::PlanSearchResult& r, const model::ModelSpec& m, const Machine& mc,
                   const model::TrainingSetup& s, const sim::PlanSearchOptions& so) {
  if (r.space_size == 0)
    throw ConfigError(fmt::format(
        "no candidates for {} on {} GPUs (global batch {}): the pinned dimensions (--fix, "
        "--micro-batch, --pp-layers) and the --max-* bounds leave nothing to search",
        m.name, mc.num_gpus, s.global_batch_size));
  if (r.plans.empty()) {
    std::string reasons;
    for (std::size_t k = 0; k < r.rejected.size(); ++k)
      if (r.rejected[k])
        reasons +=
            fmt::format("\n  {}: {}", sim::to_string(static_cast<sim::Reject>(k)), r.rejected[k]);
    throw ConfigError(fmt::format(
        "no feasible plan for {} on {} x {} (global batch {}, seq {}): all "
        "{} candidates rejected:{}{}{}",
        m.name, mc.num_gpus, mc.gpu.name, s.global_batch_size, s.seq_len, r.space_size, reasons,
        r.rejected[static_cast<std::size_t>(sim::Reject::does_not_fit)] == r.space_size
            ? "\n  try more GPUs, a smaller --seq-len, or --precision bf16"
            : "",
        so.step.fw().parallelisms_limited()
            ? fmt::format("\n  --framework {} runs {}; another framework may find a plan",
                          so.step.fw().name, so.step.fw().parallelisms_text())
            : ""));
  }
}

// The listed plans as JSON (raw base units), every figure the table prints among them.
nlohmann::json plans_json(const sim::PlanSearchResult& r, const model::TrainingSetup& s,
                          double tokens) {
  nlohmann::json plans = nlohmann::json::array();
  for (const auto& c : r.plans) {
    nlohmann::json pj{
        {"tp", c.plan.tp},
        {"pp", c.plan.pp},
        {"dp", c.plan.dp},
        {"cp", c.plan.cp},
        {"micro_batch", c.micro_batch_size},
        {"grad_accumulation", c.micro_batches},
        {"zero", c.plan.zero_stage},
        {"recompute", std::string(model::to_string(c.plan.recompute))},
        {"recompute_layers", c.recompute_layers > 0 ? c.recompute_layers : s.recompute_layers},
        {"sequence_parallel", c.plan.sequence_parallel},
        {"interleave", c.plan.interleave},
        {"step_time_s", c.step_time_s},
        {"per_gpu_bytes_total", c.per_gpu_bytes_total},
        {"mfu", c.mfu}};
    if (!c.plan.stage_layers.empty())
      pj["stage_layers"] = c.plan.stage_layers;
    if (tokens > 0)
      pj["days"] = sim::days_to_train(tokens, static_cast<double>(s.global_batch_size * s.seq_len),
                                      c.step_time_s);
    plans.push_back(pj);
  }
  return plans;
}

// --plot: step time against memory per GPU for the best 2000 plans, and their frontier.
void plot_plans(const PlanOptionsCli& o, const model::ModelSpec& m, const Machine& mc,
                const model::TrainingSetup& s, const sim::PlanSearchOptions& so) {
  // Frontier: step time against memory per GPU for the top plans (search again with a
  // larger K so the cloud is visible).
  auto wide = so;
  wide.top_k = 2000;
  const auto cloud = sim::search_plans(m, mc.cluster, mc.gpu, mc.profile, s, wide);
  Series pts{"feasible plans (best 2000)", {}, "points pt 7 ps 0.5", {}};
  Series front{"frontier (fastest at each memory)", {}, "linespoints", {}};
  std::vector<std::pair<double, double>> all;
  for (const auto& c : cloud.plans)
    all.emplace_back(c.per_gpu_bytes_total / 1e9, c.step_time_s);
  pts.points = all;
  std::sort(all.begin(), all.end());
  double best = 1e300;
  for (const auto& [mem, t] : all)
    if (t < best) {
      best = t;
      front.points.emplace_back(mem, t);
    }
  PlotSpec spec = plot_spec(
      o.plot,
      fmt::format("{} on {} x {}: step time vs memory per GPU", m.name, mc.num_gpus, mc.gpu.name),
      "memory per GPU (GB)", "step time (s)");
  spec.logy = true;
  plot_xy(spec, {pts, front});
}

// The profile's caveats for what the listed plans run: MoE and those said always, and
// context parallelism where a listed plan uses it; and whether a listed MFU exceeds the peak.
struct PlanCaveats {
  std::vector<std::string> every, cp;
  bool mfu_above_peak = false;
};
PlanCaveats plan_caveats(const sim::PlanSearchResult& r, std::int64_t top,
                         const model::ModelSpec& m, const sim::FrameworkProfile& fw) {
  PlanCaveats out;
  bool listed_cp = false;
  for (std::size_t i = 0; i < r.plans.size() && static_cast<std::int64_t>(i) < top; ++i) {
    listed_cp = listed_cp || r.plans[i].plan.cp > 1;
    out.mfu_above_peak = out.mfu_above_peak || r.plans[i].mfu > 1;
  }
  out.every = sim::applicable_caveats(fw, m.is_moe(), false);
  if (listed_cp)
    out.cp = sim::caveats_of(fw, sim::FrameworkProfile::Caveat::When::context_parallel);
  return out;
}

// What the printers of a search's result read.
struct PlanResult {
  const PlanOptionsCli& o;
  const model::ModelSpec& m;
  const Machine& mc;
  const model::TrainingSetup& s;
  const sim::PlanSearchOptions& so;
  const sim::PlanSearchResult& r;
  const PlanCaveats& caveats;
  double elapsed = 0, tokens = 0;
};

void print_plans_json(Sink& sink, const PlanResult& c_, const nlohmann::json& plans) {
  const auto& [o, m, mc, s, so, r, caveats_, elapsed, tokens] = c_;
  nlohmann::json rej = nlohmann::json::object();
  for (std::size_t k = 0; k < r.rejected.size(); ++k)
    rej[sim::to_string(static_cast<sim::Reject>(k))] = r.rejected[k];
  nlohmann::json caveats = caveats_.every;
  for (const auto& c : caveats_.cp)
    caveats.push_back("plans with cp > 1: " + c);
  nlohmann::json j{{"model", m.name},
                   {"framework", so.step.fw().name},
                   {"framework_parallelisms", so.step.fw().parallelisms_text()},
                   {"caveats", caveats},
                   {"mfu_note", caveats_.mfu_above_peak ? sim::kMfuAbovePeakNote : ""},
                   {"num_gpus", mc.num_gpus},
                   {"gpu", mc.gpu.name},
                   {"objective", o.objective},
                   {"space_size", r.space_size},
                   {"evaluated", r.evaluated},
                   {"uneven_stages_evaluated", r.uneven_evaluated},
                   {"feasible", r.feasible},
                   {"rejected", rej},
                   {"search_time_s", elapsed},
                   {"plans", plans}};
  if (o.explain)
    j["explain"] = explain(sink, m, mc, s, so.step, r.plans, *o.explain, so.objective);
  sink.json(j);
}

void print_plans_table(Sink& sink, const PlanResult& c_) {
  const auto& [o, m, mc, s, so, r, caveats_, elapsed, tokens] = c_;
  sink.comment(fmt::format(
      "{} ({} params) on {} x {} ({} per node), global batch {} x {} tokens, "
      "{}, {} attention, framework {}{}; objective {}",
      m.name, format_count(model::count_params(m).total), mc.num_gpus, mc.gpu.name,
      mc.cluster.gpus_per_node, s.global_batch_size, s.seq_len, model::to_string(s.precision),
      model::to_string(s.attention), so.step.fw().name,
      s.recompute_layers > 0
          ? fmt::format("; full recompute of {} layers per chunk only", s.recompute_layers)
      : s.recompute_modules != model::kRecomputeCoreAttn
          ? fmt::format("; selective recompute re-runs {}",
                        model::recompute_modules_string(s.recompute_modules))
          : "",
      o.objective));
  if (so.step.fw().parallelisms_limited())
    sink.comment(fmt::format("layouts: --framework {} runs {}", so.step.fw().name,
                             so.step.fw().parallelisms_text()));
  sink.comment(fmt::format(
      "searched {} candidates in {:.3f} s ({} threads): {} evaluated{}, {} "
      "feasible",
      r.space_size, elapsed, so.threads, r.evaluated,
      r.uneven_evaluated > 0 ? fmt::format(" ({} with uneven pipeline stages)", r.uneven_evaluated)
                             : "",
      r.feasible));
  for (std::size_t k = 0; k < r.rejected.size(); ++k)
    if (r.rejected[k])
      sink.comment(fmt::format("  rejected, {}: {}", sim::to_string(static_cast<sim::Reject>(k)),
                               r.rejected[k]));
  Table t({"#", "tp", "pp", "dp", "cp", "mb", "accum", "ZeRO", "recompute", "SP", "v", "step (s)",
           "MFU", "mem/GPU (GB)", tokens > 0 ? "days" : ""},
          {"rank", "tp", "pp", "dp", "cp", "micro_batch", "grad_accumulation", "zero", "recompute",
           "sequence_parallel", "interleave", "step_time_s", "mfu", "per_gpu_bytes_total", "days",
           "stage_layers"});
  std::int64_t rank = 0;
  for (const auto& c : r.plans) {
    if (++rank > o.top)
      break;
    const double days =
        tokens > 0
            ? sim::days_to_train(tokens, static_cast<double>(s.global_batch_size * s.seq_len),
                                 c.step_time_s)
            : 0;
    const std::string split = model::format_stage_layers(c.plan.stage_layers);
    t.add_row(
        {fmt::format("{}", rank), fmt::format("{}", c.plan.tp),
         split.empty() ? fmt::format("{}", c.plan.pp) : fmt::format("{} [{}]", c.plan.pp, split),
         fmt::format("{}", c.plan.dp), fmt::format("{}", c.plan.cp),
         fmt::format("{}", c.micro_batch_size), fmt::format("{}", c.micro_batches),
         fmt::format("{}", c.plan.zero_stage), recompute_cell(c),
         c.plan.sequence_parallel ? "on" : "off", fmt::format("{}", c.plan.interleave),
         fmt::format("{:.3f}", c.step_time_s), fmt::format("{:.1f}%", 100 * c.mfu),
         fmt::format("{:.1f}", c.per_gpu_bytes_total / 1e9),
         tokens > 0 ? fmt::format("{:.1f}", days) : ""},
        {fmt::format("{}", rank), fmt::format("{}", c.plan.tp), fmt::format("{}", c.plan.pp),
         fmt::format("{}", c.plan.dp), fmt::format("{}", c.plan.cp),
         fmt::format("{}", c.micro_batch_size), fmt::format("{}", c.micro_batches),
         fmt::format("{}", c.plan.zero_stage), recompute_cell(c),
         c.plan.sequence_parallel ? "true" : "false", fmt::format("{}", c.plan.interleave),
         fmt::format("{:.9g}", c.step_time_s), fmt::format("{:.6f}", c.mfu),
         fmt::format("{:.0f}", c.per_gpu_bytes_total), fmt::format("{:.6g}", days), split});
  }
  t.print(sink);
  if (sink.format() == Format::table) { // CSV: the table alone
    if (caveats_.mfu_above_peak)
      sink.write(fmt::format("note: {}\n", sim::kMfuAbovePeakNote));
    for (const auto& c : caveats_.every)
      sink.write(fmt::format("caveat ({}): {}\n", so.step.fw().name, c));
    for (const auto& c : caveats_.cp)
      sink.write(fmt::format("caveat ({}, plans with cp > 1): {}\n", so.step.fw().name, c));
  }
  if (o.explain)
    (void)explain(sink, m, mc, s, so.step, r.plans, *o.explain, so.objective);
}

int run_plan(const PlanOptionsCli& o) {
  if (!o.plot.empty())
    check_plot_file(o.plot);
  const model::ModelSpec m = resolve_model(o.model);
  const Machine mc = resolve_machine(o.machine, 8);
  model::TrainingSetup s = resolve_setup(o.setup, m);
  if (s.global_batch_size <= 0)
    throw ConfigError("--global-batch: required for plan (sequences per optimizer step)");
  const sim::PlanSearchOptions so = resolve_search_options(o, m, mc, s);
  Sink sink(o.out);
  if (o.bench)
    return run_plan_bench(sink, m, mc, s, so);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = sim::search_plans(m, mc.cluster, mc.gpu, mc.profile, s, so);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double tokens = o.tokens.empty() ? 0 : parse_tokens(o.tokens);
  require_plans(r, m, mc, s, so);
  const nlohmann::json plans = plans_json(r, s, tokens);
  check_finite(plans); // every printed figure below is one of these
  const PlanCaveats caveats = plan_caveats(r, o.top, m, so.step.fw());
  if (o.explain && *o.explain > static_cast<std::int64_t>(r.plans.size()))
    throw ConfigError(
        fmt::format("--explain {}: only {} plans were found", *o.explain, r.plans.size()));
  const PlanResult result{o, m, mc, s, so, r, caveats, elapsed, tokens};
  if (sink.format() == Format::json)
    print_plans_json(sink, result, plans);
  else
    print_plans_table(sink, result);
  if (!o.plot.empty())
    plot_plans(o, m, mc, s, so);
  return 0;
}

} // namespace

void add_plan(CLI::App& app) {
  auto o = std::make_shared<PlanOptionsCli>();
  auto* cmd = app.add_subcommand("plan", "Search every parallel layout / micro-batch / ZeRO / "
                                         "recompute plan; rank the ones that fit");
  add_model_options(*cmd, o->model, true);
  add_machine_options(*cmd, o->machine, true);
  add_setup_options(*cmd, o->setup);
  add_framework_setup_options(*cmd, o->setup);
  add_step_flags(*cmd, o->step);
  cmd->add_option("--tokens,-t", o->tokens, "Training tokens, for days per plan");
  cmd->add_option("--top,-k", o->top, "Plans to print")->capture_default_str();
  cmd->add_option("--objective", o->objective,
                  "time (step time) | cost (GPU-seconds per step; "
                  "may use fewer GPUs) | memory (per GPU)")
      ->capture_default_str();
  cmd->add_option("--fix", o->fix,
                  "Pin a dimension: tp=8, pp=4, dp=16, cp=2, micro-batch=1, "
                  "zero=1, interleave=2, recompute=full, sp=on (repeatable)");
  add_stage_split_options(*cmd, o->stages);
  cmd->add_option("--explain", o->explain,
                  "Explain plan RANK (1, 2, ...) against its one-change neighbours");
  cmd->add_option("--max-tp", o->max_tp, "Largest tp searched (0 = GPUs per node)")
      ->capture_default_str();
  cmd->add_option("--max-cp", o->max_cp, "Largest cp searched")->capture_default_str();
  cmd->add_option("--max-interleave", o->max_interleave, "Largest interleaving depth searched")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Search threads (0 = all cores)")->capture_default_str();
  cmd->add_flag("--search-recompute-layers", o->search_recompute_layers,
                "Where a plan fits with full recompute but not without, also rank it re-running "
                "only the fewest layers per model chunk that fit (Megatron-Core's "
                "--recompute-num-layers; shown as full(N))");
  cmd->add_flag("--bench", o->bench,
                "Time the search: evaluations per second, 1 thread and all cores");
  cmd->add_option("--plot", o->plot, "Write the step-time vs memory frontier (.png or .svg)");
  add_output_options(*cmd, o->out);
  cmd->footer("Example: trainsim plan --model megatron-1t --cluster dgx-a100 --num-gpus 3072 "
              "--global-batch 3072 --seq-len 2048 --precision fp16-mixed --attention naive --top 5 "
              "--explain 1");
  // The search needs the global batch; the micro-batch it searches unless one is given.
  cmd->get_option("--global-batch")
      ->description("Sequences per optimizer step (required: the search splits it into "
                    "micro-batches x accumulation x dp)")
      ->default_str("");
  cmd->get_option("--micro-batch")
      ->description("Search only this micro-batch (as --fix micro-batch=N); default: every "
                    "divisor of the global batch")
      ->default_str("");
  cmd->callback([o, cmd] {
    o->micro_batch_given = cmd->get_option("--micro-batch")->count() > 0;
    run_plan(*o);
  });
}

} // namespace trainsim::cli
