// Framework profiles (framework.hpp): loading, validation, the identity profile.
#include "simulate/framework.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <string_view>
#include <utility>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "common/stats.hpp"

namespace trainsim::sim {

void FitResiduals::set_time_dof(std::int64_t dof) {
  time_dof_ = dof;
  band_sigmas_[0] = t_band_sigmas(1, static_cast<double>(dof));
  band_sigmas_[1] = t_band_sigmas(2, static_cast<double>(dof));
}

double FitResiduals::time_band_fraction(int k) const {
  return time_sigma_fraction * (k == 1   ? band_sigmas_[0]
                                : k == 2 ? band_sigmas_[1]
                                         : t_band_sigmas(k, static_cast<double>(time_dof_)));
}

namespace {

// A caveat's case, as profiles spell it.
using CaveatWhen = FrameworkProfile::Caveat::When;
constexpr std::pair<CaveatWhen, std::string_view> kCaveatWhenNames[] = {
    {CaveatWhen::context_parallel, "context_parallel"},
    {CaveatWhen::moe, "moe"},
    {CaveatWhen::full_recompute_memory, "full_recompute_memory"},
    {CaveatWhen::always, "always"}};

std::optional<CaveatWhen> caveat_when_from(std::string_view s) {
  for (const auto& [w, name] : kCaveatWhenNames)
    if (name == s)
      return w;
  return std::nullopt;
}

std::string caveat_when_name(CaveatWhen w) {
  for (const auto& [k, name] : kCaveatWhenNames)
    if (k == w)
      return std::string(name);
  return "always";
}

// The parallelisms a profile may limit, as profiles and the CLI spell them.
constexpr std::array<std::string_view, FrameworkProfile::kParallelDims> kParallelDimKeys = {
    "tp", "pp", "cp", "ep"};
constexpr std::array<std::string_view, FrameworkProfile::kParallelDims> kParallelDimNames = {
    "tensor parallelism", "pipeline parallelism", "context parallelism", "expert parallelism"};

std::optional<std::size_t> parallel_dim_from(std::string_view s) {
  for (std::size_t i = 0; i < kParallelDimKeys.size(); ++i)
    if (kParallelDimKeys[i] == s)
      return i;
  return std::nullopt;
}

model::OpRole parse_role(std::string_view s, bool& ok) {
  for (std::size_t i = 0; i < static_cast<std::size_t>(model::OpRole::count_); ++i) {
    const auto r = static_cast<model::OpRole>(i);
    if (model::to_string(r) == s) {
      ok = true;
      return r;
    }
  }
  ok = false;
  return model::OpRole::other;
}

std::string role_names() {
  std::string out;
  for (std::size_t i = 0; i < static_cast<std::size_t>(model::OpRole::count_); ++i)
    out += (i ? ", " : "") + std::string(model::to_string(static_cast<model::OpRole>(i)));
  return out;
}

bool same(const RoleCost& a, const RoleCost& b) {
  return a.fwd_kernels == b.fwd_kernels && a.bwd_kernels == b.bwd_kernels &&
         a.fwd_bytes_factor == b.fwd_bytes_factor && a.bwd_bytes_factor == b.bwd_bytes_factor &&
         a.saved_bytes_factor == b.saved_bytes_factor &&
         a.saved_bytes_factor_fp32 == b.saved_bytes_factor_fp32 &&
         a.fwd_bytes_factor_fp32 == b.fwd_bytes_factor_fp32 &&
         a.bwd_bytes_factor_fp32 == b.bwd_bytes_factor_fp32 &&
         a.fwd_compute_factor == b.fwd_compute_factor &&
         a.bwd_compute_factor == b.bwd_compute_factor &&
         a.fwd_compute_factor_fp32 == b.fwd_compute_factor_fp32 &&
         a.bwd_compute_factor_fp32 == b.bwd_compute_factor_fp32 &&
         a.autocast_input_casts == b.autocast_input_casts;
}

} // namespace

double default_kernels(model::OpKind kind, bool backward) {
  return kind == model::OpKind::gemm && backward ? 2.0 : 1.0;
}

bool FrameworkProfile::parallelisms_limited() const {
  return std::any_of(parallelisms.begin(), parallelisms.end(), [](const ParallelismRule& r) {
    return !r.runs || !r.zero_stages.empty() || !r.interleave;
  });
}

std::string FrameworkProfile::parallelisms_text() const {
  std::vector<std::string> runs{"data"}, limits;
  for (std::size_t k = 0; k < kParallelDims; ++k) {
    if (!parallelisms[k].runs)
      continue;
    const std::string word(kParallelDimNames[k].substr(0, kParallelDimNames[k].find(' ')));
    runs.push_back(word);
    std::vector<std::string> how;
    if (!parallelisms[k].zero_stages.empty())
      how.push_back(fmt::format("with ZeRO {}", fmt::join(parallelisms[k].zero_stages, ", ")));
    if (!parallelisms[k].interleave)
      how.emplace_back("without interleaving");
    if (!how.empty())
      limits.push_back(fmt::format("{} {}", word, fmt::join(how, " and ")));
  }
  if (runs.size() == 1)
    return "data parallelism only";
  return fmt::format("{} and {} parallelism{}", fmt::join(runs.begin(), runs.end() - 1, ", "),
                     runs.back(),
                     limits.empty() ? "" : fmt::format(" ({})", fmt::join(limits, "; ")));
}

namespace {
// The first parallelism of `plan` with a degree above 1 that `f` does not run at the plan's
// ZeRO stage, if any.
std::optional<std::size_t> refused_dim(const FrameworkProfile& f, const model::ParallelPlan& plan) {
  const std::array<std::int64_t, FrameworkProfile::kParallelDims> degree{plan.tp, plan.pp, plan.cp,
                                                                         plan.ep};
  for (std::size_t d = 0; d < degree.size(); ++d) {
    const auto& rule = f.parallelisms[d];
    if (degree[d] > 1 && (!rule.runs || (!rule.zero_stages.empty() &&
                                         std::find(rule.zero_stages.begin(), rule.zero_stages.end(),
                                                   plan.zero_stage) == rule.zero_stages.end())))
      return d;
    if (d == static_cast<std::size_t>(FrameworkProfile::ParallelDim::pp) && degree[d] > 1 &&
        plan.interleave > 1 && !rule.interleave)
      return d;
  }
  return std::nullopt;
}
} // namespace

bool FrameworkProfile::runs_layout(const model::ParallelPlan& plan) const {
  return !refused_dim(*this, plan);
}

std::string FrameworkProfile::layout_refusal(const model::ParallelPlan& plan) const {
  const auto d = refused_dim(*this, plan);
  if (!d)
    return {};
  const std::array<std::int64_t, kParallelDims> degree{plan.tp, plan.pp, plan.cp, plan.ep};
  const ParallelismRule& rule = parallelisms[*d];
  if (!rule.runs)
    return fmt::format("--{} {}: --framework {} runs {}, not {}: {}", kParallelDimKeys[*d],
                       degree[*d], name, parallelisms_text(), kParallelDimNames[*d],
                       parallelisms_source);
  if (plan.interleave > 1 && !rule.interleave)
    return fmt::format("--interleave {}: --framework {} runs pipelines without interleaving: {}",
                       plan.interleave, name, rule.source);
  return fmt::format("--{} {} with ZeRO-{}: --framework {} runs {} only with ZeRO stages {}: {}",
                     kParallelDimKeys[*d], degree[*d], plan.zero_stage, name, kParallelDimNames[*d],
                     fmt::join(rule.zero_stages, ", "), rule.source);
}

bool FrameworkProfile::is_identity() const {
  // The scalars first: a fitted profile differs in one of them, so the per-op callers on the
  // plan search's hot path return early without comparing every role.
  if (!(host_model == HostModel::per_op && host_bwd_kernel_factor == 1 &&
        host_s_per_checkpoint == 0 && host_s_per_sac_kernel == 0 && moe_dispatch_s_per_layer == 0 &&
        tp_overlap_hidden_fraction == 1 && gemm_efficiency_scale == 1 &&
        gpu_gemm_efficiency_scale.empty() && gpu_sdpa_time_factors.empty() &&
        optimizer_bytes_factor == 1 && optimizer_host_s_per_tensor == 0 &&
        activation_bytes_factor == 1 && logits_peak_bytes_per_elem == 0 &&
        logits_peak_bytes_per_elem_fp32 == 0 && logits_peak_bytes_per_elem_loss_parallel == 0 &&
        score_bwd_transient_bytes == 0 && score_bwd_transient_bytes_fp32 == 0 &&
        ffn_bwd_transient_tensors == 0 && !autocast_fp32_weights && !autocast_cast_passes &&
        !fsdp2_copies && !expand_kv_heads && cp_ring == CpRing::p2p &&
        allocator_overhead_fraction == 0 && context_bytes == 0 && !caching_allocator &&
        !pp_unsharded_stage && !megatron_main_grads && !fp8_param_gather))
    return false;
  for (const auto& r : roles)
    if (!same(r, RoleCost{}))
      return false;
  return true;
}

const FrameworkProfile& trainsim_framework() {
  static const FrameworkProfile f = [] {
    FrameworkProfile p;
    p.name = "trainsim";
    p.source = "trainsim's own C++/CUDA trainer (validate/train): fused kernels as the op list "
               "describes them, the per-op launch model of kernels/dev/launch_probe";
    p.version = "this repository";
    return p;
  }();
  return f;
}

void validate(const FrameworkProfile& f, const std::string& source) {
  Problems p(source);
  if (f.name.empty())
    p.add("name: must not be empty");
  auto positive = [&](const char* field, double v, double max) {
    if (!std::isfinite(v) || v <= 0 || v > max)
      p.add(fmt::format("{} = {}: must be in (0, {}]", field, v, max));
  };
  auto non_negative = [&](const char* field, double v, double max) {
    if (!std::isfinite(v) || v < 0 || v > max)
      p.add(fmt::format("{} = {}: must be in [0, {}]", field, v, max));
  };
  for (std::size_t i = 0; i < f.roles.size(); ++i) {
    const auto& r = f.roles[i];
    const std::string name(model::to_string(static_cast<model::OpRole>(i)));
    auto kernels = [&](const char* field, double v) {
      if (!std::isfinite(v) || (v < 0 && v != -1) || v > 1000)
        p.add(fmt::format("roles.{}.{} = {}: must be in [0, 1000]", name, field, v));
    };
    kernels("fwd_kernels", r.fwd_kernels);
    kernels("bwd_kernels", r.bwd_kernels);
    for (auto [field, v] : {std::pair{"fwd_bytes_factor", r.fwd_bytes_factor},
                            std::pair{"bwd_bytes_factor", r.bwd_bytes_factor},
                            std::pair{"saved_bytes_factor", r.saved_bytes_factor}})
      if (!std::isfinite(v) || v < 0 || v > 100)
        p.add(fmt::format("roles.{}.{} = {}: must be in [0, 100]", name, field, v));
    if (!std::isfinite(r.autocast_input_casts) || r.autocast_input_casts < 0 ||
        r.autocast_input_casts > 16)
      p.add(fmt::format("roles.{}.autocast_input_casts = {}: must be in [0, 16]", name,
                        r.autocast_input_casts));
    for (auto [field, v] : {std::pair{"fwd_compute_factor", r.fwd_compute_factor},
                            std::pair{"bwd_compute_factor", r.bwd_compute_factor}})
      if (!std::isfinite(v) || v <= 0 || v > 100)
        p.add(fmt::format("roles.{}.{} = {}: must be in (0, 100]", name, field, v));
    for (auto [field, v] : {std::pair{"fwd_compute_factor_fp32", r.fwd_compute_factor_fp32},
                            std::pair{"bwd_compute_factor_fp32", r.bwd_compute_factor_fp32}})
      if (v != -1 && (!std::isfinite(v) || v <= 0 || v > 100))
        p.add(fmt::format("roles.{}.{} = {}: must be in (0, 100]", name, field, v));
    for (auto [field, v] : {std::pair{"saved_bytes_factor_fp32", r.saved_bytes_factor_fp32},
                            std::pair{"fwd_bytes_factor_fp32", r.fwd_bytes_factor_fp32},
                            std::pair{"bwd_bytes_factor_fp32", r.bwd_bytes_factor_fp32}})
      if (v != -1 && (!std::isfinite(v) || v < 0 || v > 100))
        p.add(fmt::format("roles.{}.{} = {}: must be in [0, 100]", name, field, v));
  }
  if (f.default_zero_stage < 0 || f.default_zero_stage > 3)
    p.add(fmt::format("default_zero_stage = {}: must be 0, 1, 2 or 3", f.default_zero_stage));
  for (std::size_t i = 0; i < f.zero_stages.size(); ++i)
    if (f.zero_stages[i] < 0 || f.zero_stages[i] > 3 ||
        (i > 0 && f.zero_stages[i] <= f.zero_stages[i - 1])) {
      p.add("zero_stages: must be distinct ZeRO stages 0..3 in ascending order");
      break;
    }
  if (!f.runs_zero_stage(f.default_zero_stage))
    p.add(fmt::format("default_zero_stage = {}: must be one of zero_stages", f.default_zero_stage));
  if (f.zero_stages.size() < 4 && f.zero_stages_source.empty())
    p.add("zero_stages_source: required when zero_stages leaves a stage out (why the framework "
          "cannot run it)");
  for (std::size_t d = 0; d < f.parallelisms.size(); ++d) {
    const auto& rule = f.parallelisms[d];
    const auto& zs = rule.zero_stages;
    for (std::size_t i = 0; i < zs.size(); ++i)
      if (!f.runs_zero_stage(zs[i]) || (i > 0 && zs[i] <= zs[i - 1])) {
        p.add(fmt::format("parallelisms.{}.zero_stages: must be distinct stages of zero_stages "
                          "({}) in ascending order",
                          kParallelDimKeys[d], fmt::join(f.zero_stages, ", ")));
        break;
      }
    if (!rule.interleave && rule.source.empty())
      p.add(fmt::format("parallelisms.{}.source: required with interleave false (where the "
                        "framework's schedule is)",
                        kParallelDimKeys[d]));
    if (!zs.empty() && rule.source.empty())
      p.add(fmt::format("parallelisms.{}.source: required with zero_stages (where the framework "
                        "limits them)",
                        kParallelDimKeys[d]));
  }
  if (f.parallelisms_source.empty() &&
      std::any_of(f.parallelisms.begin(), f.parallelisms.end(),
                  [](const FrameworkProfile::ParallelismRule& r) { return !r.runs; }))
    p.add("parallelisms_source: required when parallelisms leaves one out (why the framework "
          "cannot run it)");
  if (f.default_zero_stage > 0 && f.default_zero_stage_source.empty())
    p.add("default_zero_stage_source: required when default_zero_stage > 0 (where the "
          "framework's recipes set that sharding)");
  non_negative("host_us_per_kernel", f.host_s_per_kernel * 1e6, 1e4);
  positive("host_bwd_kernel_factor", f.host_bwd_kernel_factor, 10);
  non_negative("host_us_per_checkpoint", f.host_s_per_checkpoint * 1e6, 1e6);
  non_negative("host_us_per_sac_kernel", f.host_s_per_sac_kernel * 1e6, 1e4);
  non_negative("moe_dispatch_us_per_layer", f.moe_dispatch_s_per_layer * 1e6, 1e6);
  non_negative("tp_overlap_hidden_fraction", f.tp_overlap_hidden_fraction, 1);
  positive("gemm_efficiency_scale", f.gemm_efficiency_scale, 2);
  positive("expert_gemm_efficiency_scale", f.expert_gemm_efficiency_scale, 2);
  for (const auto& [gpu, v] : f.gpu_gemm_efficiency_scale)
    positive(fmt::format("gpu_gemm_efficiency_scale.{}", gpu).c_str(), v, 2);
  for (const auto& [gpu, s] : f.gpu_sdpa_time_factors)
    for (auto [field, v] : {std::pair{"fwd_64", s.fwd_64}, std::pair{"bwd_64", s.bwd_64},
                            std::pair{"fwd_128", s.fwd_128}, std::pair{"bwd_128", s.bwd_128}})
      positive(fmt::format("gpu_sdpa_time_factors.{}.{}", gpu, field).c_str(), v, 10);
  positive("optimizer_bytes_factor", f.optimizer_bytes_factor, 100);
  non_negative("optimizer_host_us_per_tensor", f.optimizer_host_s_per_tensor * 1e6, 1e4);
  positive("activation_bytes_factor", f.activation_bytes_factor, 100);
  non_negative("activation_bytes_factor_fp32", f.activation_bytes_factor_fp32, 100);
  non_negative("optimizer_transient_bytes_per_param", f.optimizer_transient_bytes_per_param, 100);
  non_negative("mixed_state_bytes_per_param.weights", f.mixed_weight_bytes, 64);
  non_negative("mixed_state_bytes_per_param.gradients", f.mixed_grad_bytes, 64);
  non_negative("mixed_state_bytes_per_param.optimizer", f.mixed_optimizer_bytes, 64);
  non_negative("logits_peak_bytes_per_elem", f.logits_peak_bytes_per_elem, 1000);
  non_negative("logits_peak_bytes_per_elem_fp32", f.logits_peak_bytes_per_elem_fp32, 1000);
  non_negative("logits_peak_bytes_per_elem_loss_parallel",
               f.logits_peak_bytes_per_elem_loss_parallel, 1000);
  non_negative("score_bwd_transient_bytes", f.score_bwd_transient_bytes, 100);
  non_negative("score_bwd_transient_bytes_fp32", f.score_bwd_transient_bytes_fp32, 100);
  non_negative("ffn_bwd_transient_tensors", f.ffn_bwd_transient_tensors, 16);
  non_negative("allocator_overhead_fraction", f.allocator_overhead_fraction, 10);
  non_negative("context_gb", f.context_bytes / 1e9, 1e3);
  if (f.caching_allocator && f.allocator_overhead_fraction != 0)
    p.add("caching_allocator = true: the allocator's slack is simulated, so "
          "allocator_overhead_fraction must be 0");
  non_negative("fit.time_sigma_pct", f.fit.time_sigma_fraction * 100, 1e4);
  non_negative("fit.memory_sigma_pct", f.fit.memory_sigma_fraction * 100, 1e4);
  non_negative("fit_multi_gpu.time_sigma_pct", f.fit_multi_gpu.time_sigma_fraction * 100, 1e4);
  non_negative("fit_dense.time_sigma_pct", f.fit_dense.time_sigma_fraction * 100, 1e4);
  non_negative("fit_moe.time_sigma_pct", f.fit_moe.time_sigma_fraction * 100, 1e4);
  p.throw_if_any();
}

namespace {
// Per-GPU maps: the GEMM efficiency scale and PyTorch SDPA's time factors.
void read_gpu_maps(JsonObjectReader& r, Problems& p, FrameworkProfile& f) {
  if (const auto* g = r.take("gpu_gemm_efficiency_scale")) {
    if (!g->is_object()) {
      p.add("gpu_gemm_efficiency_scale: expected an object keyed by GPU preset");
    } else {
      for (const auto& [gpu, v] : g->items()) {
        if (!v.is_number())
          p.add(fmt::format("gpu_gemm_efficiency_scale.{}: expected a number", gpu));
        else
          f.gpu_gemm_efficiency_scale[gpu] = v.get<double>();
      }
    }
  }
  if (const auto* g = r.take("gpu_sdpa_time_factors")) {
    if (!g->is_object()) {
      p.add("gpu_sdpa_time_factors: expected an object keyed by GPU preset");
    } else {
      for (const auto& [gpu, v] : g->items()) {
        if (!v.is_object()) {
          p.add(fmt::format("gpu_sdpa_time_factors.{}: expected an object with fwd_64, bwd_64, "
                            "fwd_128 and bwd_128",
                            gpu));
          continue;
        }
        FrameworkProfile::SdpaFactors s;
        for (auto [field, dst] :
             {std::pair{"fwd_64", &s.fwd_64}, std::pair{"bwd_64", &s.bwd_64},
              std::pair{"fwd_128", &s.fwd_128}, std::pair{"bwd_128", &s.bwd_128}}) {
          const auto it = v.find(field);
          if (it == v.end() || !it->is_number())
            p.add(fmt::format("gpu_sdpa_time_factors.{}.{}: expected a number", gpu, field));
          else
            *dst = it->get<double>();
        }
        for (const auto& [key, unused] : v.items())
          if (key != "fwd_64" && key != "bwd_64" && key != "fwd_128" && key != "bwd_128")
            p.add(fmt::format("gpu_sdpa_time_factors.{}.{}: unknown key", gpu, key));
        f.gpu_sdpa_time_factors[gpu] = s;
      }
    }
  }
}

// The parallelisms the framework runs, each with its ZeRO stages and source.
void read_parallelisms(JsonObjectReader& r, Problems& p, FrameworkProfile& f) {
  if (const auto* par = r.take("parallelisms")) {
    if (!par->is_object()) {
      p.add("parallelisms: expected an object naming the parallelisms the framework runs (tp, "
            "pp, cp, ep), each {\"zero_stages\": [...], \"source\": \"...\"}");
    } else {
      for (auto& rule : f.parallelisms)
        rule.runs = false;
      for (auto it = par->begin(); it != par->end(); ++it) {
        const auto dim = parallel_dim_from(it.key());
        if (!dim) {
          p.add(fmt::format("parallelisms.{}: not a parallelism trainsim models (tp, pp, cp, ep; "
                            "data parallelism is always run)",
                            it.key()));
          continue;
        }
        auto& rule = f.parallelisms[*dim];
        rule.runs = true;
        const auto& v = it.value();
        if (!v.is_object()) {
          p.add(fmt::format("parallelisms.{}: expected an object, e.g. {{\"source\": \"...\"}}",
                            it.key()));
          continue;
        }
        for (auto jt = v.begin(); jt != v.end(); ++jt) {
          if (jt.key() == "source" && jt.value().is_string()) {
            rule.source = jt.value().get<std::string>();
          } else if (jt.key() == "interleave" && jt.value().is_boolean() && it.key() == "pp") {
            rule.interleave = jt.value().get<bool>();
          } else if (jt.key() == "zero_stages" && jt.value().is_array() && !jt.value().empty()) {
            for (const auto& z : jt.value()) {
              if (!z.is_number_integer()) {
                p.add(fmt::format("parallelisms.{}.zero_stages: expected whole numbers 0..3",
                                  it.key()));
                break;
              }
              rule.zero_stages.push_back(z.get<std::int64_t>());
            }
          } else {
            p.add(fmt::format("parallelisms.{}.{}: expected \"source\" (a string), "
                              "\"zero_stages\" (a non-empty array of ZeRO stages) or, for pp, "
                              "\"interleave\" (true or false)",
                              it.key(), jt.key()));
          }
        }
      }
    }
  }
}

// The caveats said beside its figures.
void read_caveats(JsonObjectReader& r, Problems& p, FrameworkProfile& f) {
  if (const auto* cav = r.take("caveats")) {
    if (!cav->is_array()) {
      p.add("caveats: expected an array of {\"when\", \"text\"} objects");
    } else {
      for (std::size_t i = 0; i < cav->size(); ++i) {
        const auto& c = (*cav)[i];
        const std::string at = fmt::format("caveats[{}]", i);
        if (!c.is_object() || !c.contains("when") || !c.contains("text") ||
            !c["when"].is_string() || !c["text"].is_string() || c.size() != 2) {
          p.add(fmt::format("{}: expected {{\"when\": string, \"text\": string}}", at));
          continue;
        }
        const std::string when = c["when"].get<std::string>();
        const auto kind = caveat_when_from(when);
        FrameworkProfile::Caveat one{kind.value_or(FrameworkProfile::Caveat::When::always),
                                     c["text"].get<std::string>()};
        if (!kind)
          p.add(fmt::format("{}.when = \"{}\": must be context_parallel, moe, "
                            "full_recompute_memory or always",
                            at, when));
        else if (one.text.empty())
          p.add(fmt::format("{}.text: must not be empty", at));
        else
          f.caveats.push_back(std::move(one));
      }
    }
  }
}

// Kernels, HBM passes and saved bytes per op role.
void read_roles(JsonObjectReader& r, Problems& p, FrameworkProfile& f) {
  if (const auto* roles = r.take("roles")) {
    if (!roles->is_object()) {
      p.add("roles: expected an object keyed by op role");
    } else {
      for (const auto& [name, obj] : roles->items()) {
        bool ok = false;
        const auto role = parse_role(name, ok);
        if (!ok) {
          p.add(fmt::format("roles.{}: unknown op role (known: {})", name, role_names()));
          continue;
        }
        if (!obj.is_object()) {
          p.add(fmt::format("roles.{}: expected an object", name));
          continue;
        }
        JsonObjectReader rr(obj, p);
        RoleCost& c = f.roles[static_cast<std::size_t>(role)];
        rr.get("fwd_kernels", c.fwd_kernels);
        rr.get("bwd_kernels", c.bwd_kernels);
        rr.get("fwd_bytes_factor", c.fwd_bytes_factor);
        rr.get("bwd_bytes_factor", c.bwd_bytes_factor);
        rr.get("saved_bytes_factor", c.saved_bytes_factor);
        rr.get("saved_bytes_factor_fp32", c.saved_bytes_factor_fp32);
        rr.get("fwd_bytes_factor_fp32", c.fwd_bytes_factor_fp32);
        rr.get("bwd_bytes_factor_fp32", c.bwd_bytes_factor_fp32);
        rr.get("autocast_input_casts", c.autocast_input_casts);
        rr.get("fwd_compute_factor", c.fwd_compute_factor);
        rr.get("bwd_compute_factor", c.bwd_compute_factor);
        rr.get("fwd_compute_factor_fp32", c.fwd_compute_factor_fp32);
        rr.get("bwd_compute_factor_fp32", c.bwd_compute_factor_fp32);
        (void)rr.take("notes");
        rr.finish();
      }
    }
  }
}

// The fit residuals (fit, fit_multi_gpu, fit_dense, fit_moe): the bands.
void read_residuals(JsonObjectReader& r, Problems& p, FrameworkProfile& f) {
  for (auto [key, out] : {std::pair{"fit", &f.fit}, std::pair{"fit_multi_gpu", &f.fit_multi_gpu},
                          std::pair{"fit_dense", &f.fit_dense}, std::pair{"fit_moe", &f.fit_moe}}) {
    const auto* fit = r.take(key);
    if (fit == nullptr)
      continue;
    if (!fit->is_object()) {
      p.add(fmt::format("{}: expected an object", key));
      continue;
    }
    JsonObjectReader fr(*fit, p);
    double pct = 0;
    fr.get("time_runs", out->time_runs);
    std::int64_t dof = 0;
    if (fr.get("time_dof", dof))
      out->set_time_dof(dof);
    if (fr.get("time_sigma_pct", pct))
      out->time_sigma_fraction = pct / 100;
    if (fr.get("time_bias_pct", pct))
      out->time_bias_fraction = pct / 100;
    std::string method;
    if (fr.get("time_sigma_method", method)) {
      if (method != "leave-one-out" && method != "in-sample")
        p.add(fmt::format("{}.time_sigma_method = \"{}\": expected \"leave-one-out\" or "
                          "\"in-sample\"",
                          key, method));
      out->time_sigma_leave_one_out = method == "leave-one-out";
    }
    fr.get("memory_runs", out->memory_runs);
    if (fr.get("memory_sigma_pct", pct))
      out->memory_sigma_fraction = pct / 100;
    fr.get("fitted_on", out->fitted_on);
    fr.finish();
  }
}

// The host's cost: its model and its times per kernel, checkpoint and MoE layer.
void read_host(JsonObjectReader& r, Problems& p, FrameworkProfile& f) {
  std::string host = "per_op";
  r.get("host_model", host);
  if (host == "per_op")
    f.host_model = HostModel::per_op;
  else if (host == "queue")
    f.host_model = HostModel::queue;
  else
    p.add(fmt::format("host_model = \"{}\": must be \"per_op\" or \"queue\"", host));
  double us = 0;
  if (r.get("host_us_per_kernel", us))
    f.host_s_per_kernel = us * 1e-6;
  r.get("host_bwd_kernel_factor", f.host_bwd_kernel_factor);
  if (r.get("host_us_per_checkpoint", us))
    f.host_s_per_checkpoint = us * 1e-6;
  if (r.get("host_us_per_sac_kernel", us))
    f.host_s_per_sac_kernel = us * 1e-6;
  if (r.get("moe_dispatch_us_per_layer", us))
    f.moe_dispatch_s_per_layer = us * 1e-6;
}

} // namespace

FrameworkProfile framework_from_json(const nlohmann::json& j, const std::string& source) {
  Problems p(source);
  if (!j.is_object()) {
    p.add("expected a JSON object");
    p.throw_if_any();
  }
  FrameworkProfile f;
  JsonObjectReader r(j, p);
  r.get("name", f.name, true);
  r.get("source", f.source, true);
  r.get("version", f.version, true);
  read_host(r, p, f);
  r.get("tp_overlap_hidden_fraction", f.tp_overlap_hidden_fraction);
  r.get("gemm_efficiency_scale", f.gemm_efficiency_scale);
  r.get("expert_gemm_efficiency_scale", f.expert_gemm_efficiency_scale);
  read_gpu_maps(r, p, f);
  r.get("optimizer_bytes_factor", f.optimizer_bytes_factor);
  double us = 0;
  if (r.get("optimizer_host_us_per_tensor", us))
    f.optimizer_host_s_per_tensor = us * 1e-6;
  r.get("activation_bytes_factor", f.activation_bytes_factor);
  r.get("activation_bytes_factor_fp32", f.activation_bytes_factor_fp32);
  r.get("memory_timeline", f.memory_timeline);
  if (const auto* st = r.take("mixed_state_bytes_per_param")) {
    JsonObjectReader sr(*st, p);
    sr.get("weights", f.mixed_weight_bytes, true);
    sr.get("gradients", f.mixed_grad_bytes, true);
    sr.get("optimizer", f.mixed_optimizer_bytes, true);
    sr.finish();
  }
  r.get("optimizer_transient_bytes_per_param", f.optimizer_transient_bytes_per_param);
  r.get("logits_peak_bytes_per_elem", f.logits_peak_bytes_per_elem);
  r.get("logits_peak_bytes_per_elem_fp32", f.logits_peak_bytes_per_elem_fp32);
  r.get("logits_peak_bytes_per_elem_loss_parallel", f.logits_peak_bytes_per_elem_loss_parallel);
  r.get("expand_kv_heads", f.expand_kv_heads);
  std::string ring;
  if (r.get("cp_ring", ring)) {
    if (ring == "p2p")
      f.cp_ring = FrameworkProfile::CpRing::p2p;
    else if (ring == "torch_allgather")
      f.cp_ring = FrameworkProfile::CpRing::torch_allgather;
    else
      p.add(fmt::format("cp_ring = \"{}\": must be p2p or torch_allgather", ring));
  }
  r.get("score_bwd_transient_bytes", f.score_bwd_transient_bytes);
  r.get("score_bwd_transient_bytes_fp32", f.score_bwd_transient_bytes_fp32);
  r.get("ffn_bwd_transient_tensors", f.ffn_bwd_transient_tensors);
  r.get("autocast_fp32_weights", f.autocast_fp32_weights);
  r.get("autocast_cast_passes", f.autocast_cast_passes);
  r.get("fsdp2_copies", f.fsdp2_copies);
  r.get("pp_unsharded_stage", f.pp_unsharded_stage);
  r.get("megatron_main_grads", f.megatron_main_grads);
  r.get("fp8_param_gather", f.fp8_param_gather);
  r.get("caching_allocator", f.caching_allocator);
  r.get("compiled", f.compiled);
  if (r.get("compiled_loss_profile", f.compiled_loss_profile))
    check_data_preset_name(p, "compiled_loss_profile", f.compiled_loss_profile);
  r.get("allocator_overhead_fraction", f.allocator_overhead_fraction);
  double gb = 0;
  if (r.get("context_gb", gb))
    f.context_bytes = gb * 1e9;
  r.get("notes", f.notes); // free text: derivations of the values (documentation only)
  r.get("default_zero_stage", f.default_zero_stage);
  r.get("default_zero_stage_source", f.default_zero_stage_source);
  if (const auto* z = r.take("zero_stages")) {
    f.zero_stages.clear();
    if (!z->is_array() || z->empty())
      p.add("zero_stages: expected a non-empty array of ZeRO stages (0..3)");
    else
      for (const auto& v : *z) {
        if (!v.is_number_integer()) {
          p.add("zero_stages: expected whole numbers 0..3");
          break;
        }
        f.zero_stages.push_back(v.get<std::int64_t>());
      }
  }
  r.get("zero_stages_source", f.zero_stages_source);
  read_parallelisms(r, p, f);
  r.get("parallelisms_source", f.parallelisms_source);
  read_caveats(r, p, f);
  read_roles(r, p, f);
  read_residuals(r, p, f);
  r.finish();
  p.throw_if_any();
  validate(f, source);
  return f;
}

namespace {
nlohmann::json sdpa_json(const std::map<std::string, FrameworkProfile::SdpaFactors>& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [gpu, s] : m)
    j[gpu] = {
        {"fwd_64", s.fwd_64}, {"bwd_64", s.bwd_64}, {"fwd_128", s.fwd_128}, {"bwd_128", s.bwd_128}};
  return j;
}
nlohmann::json caveats_json(const std::vector<FrameworkProfile::Caveat>& caveats) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : caveats)
    j.push_back({{"when", caveat_when_name(c.when)}, {"text", c.text}});
  return j;
}

} // namespace

std::vector<std::string> applicable_caveats(const FrameworkProfile& fw, bool moe,
                                            bool context_parallel) {
  std::vector<std::string> out;
  using When = FrameworkProfile::Caveat::When;
  for (const auto& c : fw.caveats)
    if (c.when == When::always || (c.when == When::moe && moe) ||
        (c.when == When::context_parallel && context_parallel))
      out.push_back(c.text);
  return out;
}

std::vector<std::string> caveats_of(const FrameworkProfile& fw,
                                    FrameworkProfile::Caveat::When when) {
  std::vector<std::string> out;
  for (const auto& c : fw.caveats)
    if (c.when == when)
      out.push_back(c.text);
  return out;
}

std::vector<std::string> memory_caveats(const FrameworkProfile& fw, bool full_recompute) {
  std::vector<std::string> out;
  for (const auto& c : fw.caveats)
    if (c.when == FrameworkProfile::Caveat::When::full_recompute_memory && full_recompute)
      out.push_back(c.text);
  return out;
}

nlohmann::json framework_to_json(const FrameworkProfile& f) {
  nlohmann::json j{
      {"name", f.name},
      {"source", f.source},
      {"version", f.version},
      {"notes", f.notes},
      {"default_zero_stage", f.default_zero_stage},
      {"default_zero_stage_source", f.default_zero_stage_source},
      {"zero_stages", f.zero_stages},
      {"zero_stages_source", f.zero_stages_source},
      {"caveats", caveats_json(f.caveats)},
      {"host_model", f.host_model == HostModel::queue ? "queue" : "per_op"},
      {"host_us_per_kernel", f.host_s_per_kernel * 1e6},
      {"host_bwd_kernel_factor", f.host_bwd_kernel_factor},
      {"host_us_per_checkpoint", f.host_s_per_checkpoint * 1e6},
      {"host_us_per_sac_kernel", f.host_s_per_sac_kernel * 1e6},
      {"moe_dispatch_us_per_layer", f.moe_dispatch_s_per_layer * 1e6},
      {"tp_overlap_hidden_fraction", f.tp_overlap_hidden_fraction},
      {"gemm_efficiency_scale", f.gemm_efficiency_scale},
      {"expert_gemm_efficiency_scale", f.expert_gemm_efficiency_scale},
      {"gpu_gemm_efficiency_scale", f.gpu_gemm_efficiency_scale},
      {"gpu_sdpa_time_factors", sdpa_json(f.gpu_sdpa_time_factors)},
      {"optimizer_bytes_factor", f.optimizer_bytes_factor},
      {"optimizer_host_us_per_tensor", f.optimizer_host_s_per_tensor * 1e6},
      {"activation_bytes_factor", f.activation_bytes_factor},
      {"activation_bytes_factor_fp32", f.activation_bytes_factor_fp32},
      {"memory_timeline", f.memory_timeline},
      {"mixed_state_bytes_per_param",
       {{"weights", f.mixed_weight_bytes},
        {"gradients", f.mixed_grad_bytes},
        {"optimizer", f.mixed_optimizer_bytes}}},
      {"optimizer_transient_bytes_per_param", f.optimizer_transient_bytes_per_param},
      {"logits_peak_bytes_per_elem", f.logits_peak_bytes_per_elem},
      {"logits_peak_bytes_per_elem_fp32", f.logits_peak_bytes_per_elem_fp32},
      {"logits_peak_bytes_per_elem_loss_parallel", f.logits_peak_bytes_per_elem_loss_parallel},
      {"score_bwd_transient_bytes", f.score_bwd_transient_bytes},
      {"score_bwd_transient_bytes_fp32", f.score_bwd_transient_bytes_fp32},
      {"ffn_bwd_transient_tensors", f.ffn_bwd_transient_tensors},
      {"autocast_fp32_weights", f.autocast_fp32_weights},
      {"autocast_cast_passes", f.autocast_cast_passes},
      {"fsdp2_copies", f.fsdp2_copies},
      {"pp_unsharded_stage", f.pp_unsharded_stage},
      {"megatron_main_grads", f.megatron_main_grads},
      {"fp8_param_gather", f.fp8_param_gather},
      {"expand_kv_heads", f.expand_kv_heads},
      {"cp_ring", f.cp_ring == FrameworkProfile::CpRing::p2p ? "p2p" : "torch_allgather"},
      {"caching_allocator", f.caching_allocator},
      {"compiled", f.compiled},
      {"compiled_loss_profile", f.compiled_loss_profile},
      {"allocator_overhead_fraction", f.allocator_overhead_fraction},
      {"context_gb", f.context_bytes / 1e9}};
  nlohmann::json roles = nlohmann::json::object();
  for (std::size_t i = 0; i < f.roles.size(); ++i) {
    const RoleCost& c = f.roles[i];
    if (same(c, RoleCost{}))
      continue;
    nlohmann::json rj = nlohmann::json::object();
    // Kernel counts and fp32 variants only when set (< 0: the default); compute factors only
    // when not 1.
    for (auto [field, v] :
         {std::pair{"fwd_kernels", c.fwd_kernels}, std::pair{"bwd_kernels", c.bwd_kernels}})
      if (v >= 0)
        rj[field] = v;
    rj["fwd_bytes_factor"] = c.fwd_bytes_factor;
    rj["bwd_bytes_factor"] = c.bwd_bytes_factor;
    rj["saved_bytes_factor"] = c.saved_bytes_factor;
    if (c.autocast_input_casts != 0)
      rj["autocast_input_casts"] = c.autocast_input_casts;
    if (c.fwd_compute_factor != 1 || c.bwd_compute_factor != 1) {
      rj["fwd_compute_factor"] = c.fwd_compute_factor;
      rj["bwd_compute_factor"] = c.bwd_compute_factor;
    }
    for (auto [field, v] : {std::pair{"saved_bytes_factor_fp32", c.saved_bytes_factor_fp32},
                            std::pair{"fwd_bytes_factor_fp32", c.fwd_bytes_factor_fp32},
                            std::pair{"bwd_bytes_factor_fp32", c.bwd_bytes_factor_fp32},
                            std::pair{"fwd_compute_factor_fp32", c.fwd_compute_factor_fp32},
                            std::pair{"bwd_compute_factor_fp32", c.bwd_compute_factor_fp32}})
      if (v >= 0)
        rj[field] = v;
    roles[std::string(model::to_string(static_cast<model::OpRole>(i)))] = rj;
  }
  j["roles"] = roles;
  if (f.parallelisms_limited()) { // the rule as the profile wrote it (absent: all, any stage)
    nlohmann::json par = nlohmann::json::object();
    for (std::size_t d = 0; d < FrameworkProfile::kParallelDims; ++d) {
      const auto& rule = f.parallelisms[d];
      if (!rule.runs)
        continue;
      nlohmann::json one = nlohmann::json::object();
      if (!rule.zero_stages.empty())
        one["zero_stages"] = rule.zero_stages;
      if (!rule.interleave)
        one["interleave"] = false;
      if (!rule.source.empty())
        one["source"] = rule.source;
      par[std::string(kParallelDimKeys[d])] = one;
    }
    j["parallelisms"] = par;
  }
  if (!f.parallelisms_source.empty())
    j["parallelisms_source"] = f.parallelisms_source;
  auto fit_json = [](const FitResiduals& r) {
    return nlohmann::json{
        {"time_runs", r.time_runs},
        {"time_sigma_pct", r.time_sigma_fraction * 100},
        {"time_sigma_method", r.time_sigma_leave_one_out ? "leave-one-out" : "in-sample"},
        {"time_dof", r.time_dof()},
        {"time_bias_pct", r.time_bias_fraction * 100},
        {"memory_runs", r.memory_runs},
        {"memory_sigma_pct", r.memory_sigma_fraction * 100},
        {"fitted_on", r.fitted_on}};
  };
  j["fit"] = fit_json(f.fit);
  if (f.fit_multi_gpu.time_runs > 0)
    j["fit_multi_gpu"] = fit_json(f.fit_multi_gpu);
  if (f.fit_dense.time_runs > 0)
    j["fit_dense"] = fit_json(f.fit_dense);
  if (f.fit_moe.time_runs > 0)
    j["fit_moe"] = fit_json(f.fit_moe);
  return j;
}

FrameworkProfile load_framework(const std::string& name_or_path) {
  const std::string path = resolve_preset("frameworks", name_or_path, "--framework");
  return framework_from_json(load_json_file(path), path);
}

TorchCompile parse_torch_compile(const std::string& text, const std::string& field) {
  if (text == "none")
    return TorchCompile::none;
  if (text == "blocks")
    return TorchCompile::blocks;
  if (text == "blocks+loss")
    return TorchCompile::blocks_and_loss;
  throw ConfigError(fmt::format("{} = {}: must be none, blocks (torch.compile per transformer "
                                "block) or blocks+loss (the loss compiled too)",
                                field, text));
}

bool torch_compile_applies(const FrameworkProfile& fw) {
  return fw.caching_allocator && !fw.compiled;
}

FrameworkProfile with_torch_compile(const FrameworkProfile& fw, TorchCompile c) {
  if (c == TorchCompile::none)
    return fw;
  if (!fw.caching_allocator)
    throw ConfigError(fmt::format("torch.compile applies to the eager PyTorch profiles (pytorch, "
                                  "fsdp); the {} profile does not model PyTorch",
                                  fw.name));
  if (fw.compiled)
    throw ConfigError(fmt::format("the {} profile is compiled already (the whole model, the "
                                  "loss included): leave torch.compile at none",
                                  fw.name));
  FrameworkProfile out = fw;
  out.torch_compile = c == TorchCompile::blocks ? "blocks" : "blocks+loss";
  out.host_s_per_sac_kernel = 0; // the per-op policy is traced into the graph
  if (c == TorchCompile::blocks_and_loss) {
    if (fw.compiled_loss_profile.empty())
      throw ConfigError(fmt::format("torch.compile blocks+loss: the {} profile names no compiled "
                                    "loss chain (compiled_loss_profile); use blocks",
                                    fw.name));
    const FrameworkProfile compiled = load_framework(fw.compiled_loss_profile);
    out.logits_peak_bytes_per_elem = compiled.logits_peak_bytes_per_elem;
    out.logits_peak_bytes_per_elem_fp32 = compiled.logits_peak_bytes_per_elem_fp32;
    out.logits_peak_bytes_per_elem_loss_parallel = 0; // the compiled chain, tp or not
  }
  return out;
}

} // namespace trainsim::sim
