// Validation and names of the job description structs (spec.hpp).
#include "model/spec.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <utility>

#include "common/errors.hpp"

namespace trainsim::model {

std::int64_t grad_accumulation_steps(const ParallelPlan& plan, const TrainingSetup& setup) {
  const std::int64_t per_step = setup.micro_batch_size * plan.dp;
  if (setup.global_batch_size <= 0 || per_step <= 0)
    return 1;
  return setup.global_batch_size / per_step;
}

std::int64_t default_seq_len(const ModelSpec& m) {
  return m.max_seq_len > 0 ? std::min(kDefaultSeqLen, m.max_seq_len) : kDefaultSeqLen;
}

Dtype compute_dtype(Precision p) {
  switch (p) {
  case Precision::fp32: return Dtype::fp32;
  case Precision::fp16_mixed: return Dtype::fp16;
  case Precision::bf16_mixed:
  case Precision::bf16:
  case Precision::fp8_delayed:
  case Precision::fp8_current:
  case Precision::mxfp8: return Dtype::bf16; // activations; FP8 only inside linear GEMMs
  }
  return Dtype::bf16;
}

std::string_view to_string(Precision p) {
  switch (p) {
  case Precision::fp32: return "fp32";
  case Precision::bf16_mixed: return "bf16-mixed";
  case Precision::fp16_mixed: return "fp16-mixed";
  case Precision::bf16: return "bf16";
  case Precision::fp8_delayed: return "fp8";
  case Precision::fp8_current: return "fp8-cs";
  case Precision::mxfp8: return "mxfp8";
  }
  return "?";
}
std::string_view to_string(Recompute r) {
  switch (r) {
  case Recompute::none: return "none";
  case Recompute::selective: return "selective";
  case Recompute::full: return "full";
  case Recompute::selective_op: return "selective-op";
  }
  return "?";
}
namespace {
constexpr std::pair<std::uint32_t, const char*> kRecomputeModuleNames[] = {
    {kRecomputeCoreAttn, "core_attn"},
    {kRecomputeLayernorm, "layernorm"},
    {kRecomputeMlp, "mlp"},
    {kRecomputeMoeAct, "moe_act"},
    {kRecomputeMoe, "moe"},
    {kRecomputeSharedExperts, "shared_experts"}};
} // namespace
std::string recompute_modules_string(std::uint32_t modules) {
  std::string out;
  for (const auto& [bit, name] : kRecomputeModuleNames)
    if ((modules & bit) != 0) {
      if (!out.empty())
        out += ',';
      out += name;
    }
  return out;
}
std::uint32_t parse_recompute_modules(const std::vector<std::string>& names,
                                      std::string_view what) {
  if (names.empty())
    return kRecomputeCoreAttn;
  std::uint32_t bits = 0;
  for (const auto& name : names) {
    const auto* it =
        std::find_if(std::begin(kRecomputeModuleNames), std::end(kRecomputeModuleNames),
                     [&](const auto& entry) { return name == entry.second; });
    if (it != std::end(kRecomputeModuleNames))
      bits |= it->first;
    else if (name == "mla_up_proj")
      throw ConfigError(fmt::format("{} mla_up_proj: Megatron-Core's MLA up-projection recompute "
                                    "is not modelled (use core_attn, layernorm, mlp, moe_act, moe "
                                    "or shared_experts)",
                                    what));
    else
      throw ConfigError(fmt::format("{} '{}': unknown module (Megatron-Core's names: core_attn, "
                                    "layernorm, mlp, moe_act, moe, shared_experts)",
                                    what, name));
  }
  return bits;
}
std::string_view to_string(AttentionImpl a) {
  return a == AttentionImpl::flash ? "flash" : "naive";
}
std::string_view to_string(Optimizer o) { return o == Optimizer::adamw ? "adamw" : "sgd"; }
std::string_view to_string(FfnKind f) { return f == FfnKind::gated ? "gated" : "plain"; }
std::string_view to_string(NormKind n) {
  switch (n) {
  case NormKind::layernorm: return "layernorm";
  case NormKind::rmsnorm: return "rmsnorm";
  case NormKind::layernorm_no_bias: return "layernorm-no-bias";
  case NormKind::layernorm_no_affine: return "layernorm-no-affine";
  }
  return "?";
}
std::string_view to_string(PositionKind p) {
  switch (p) {
  case PositionKind::learned: return "learned";
  case PositionKind::rotary: return "rotary";
  case PositionKind::none: return "none";
  }
  return "?";
}
std::string_view to_string(AttentionKind a) { return a == AttentionKind::mla ? "mla" : "standard"; }
std::string_view to_string(NormPlacement n) {
  switch (n) {
  case NormPlacement::pre: return "pre";
  case NormPlacement::post: return "post";
  case NormPlacement::sandwich: return "sandwich";
  }
  return "?";
}
std::string_view to_string(QkNorm q) {
  switch (q) {
  case QkNorm::none: return "none";
  case QkNorm::per_head: return "per-head";
  case QkNorm::full: return "full";
  }
  return "?";
}

double norm_params(NormKind n, double width) {
  switch (n) {
  case NormKind::layernorm: return 2 * width;
  case NormKind::rmsnorm:
  case NormKind::layernorm_no_bias: return width;
  case NormKind::layernorm_no_affine: return 0;
  }
  return width;
}

std::int64_t min_layers_on_stage(std::int64_t pp, std::int64_t interleave, std::int64_t stage) {
  if (interleave <= 1)
    return 1;
  const bool end = stage == 0 || stage == pp - 1;
  return std::max<std::int64_t>(1, end ? interleave - 1 : interleave);
}

bool first_last_stage_layers(std::int64_t num_layers, std::int64_t pp, std::int64_t first,
                             std::int64_t last, std::vector<std::int64_t>& out) {
  out.clear();
  if (pp < 2 || num_layers < 1)
    return false;
  std::int64_t rest = num_layers, stages = pp;
  if (first >= 0) {
    rest -= first;
    --stages;
  }
  if (last >= 0) {
    rest -= last;
    --stages;
  }
  std::int64_t middle = 0;
  if (stages == 0) {
    if (rest != 0)
      return false;
  } else {
    if (rest < stages || rest % stages != 0)
      return false;
    middle = rest / stages;
  }
  out.assign(static_cast<std::size_t>(pp), middle);
  if (first >= 0)
    out.front() = first;
  if (last >= 0)
    out.back() = last;
  return std::all_of(out.begin(), out.end(), [](std::int64_t n) { return n >= 1; });
}

bool balanced_stage_layers(std::int64_t num_layers, std::int64_t pp, std::int64_t interleave,
                           double layer_cost, double first_extra_cost, double last_extra_cost,
                           std::vector<std::int64_t>& out) {
  out.clear();
  if (pp < 1 || num_layers < pp)
    return false;
  if (pp == 1) {
    out.push_back(num_layers);
    return true;
  }
  if (!(layer_cost > 0)) { // no timing: balance the layer counts alone
    layer_cost = 1;
    first_extra_cost = last_extra_cost = 0;
  }
  const std::int64_t min_end = min_layers_on_stage(pp, interleave, 0);
  const std::int64_t min_mid = pp > 2 ? min_layers_on_stage(pp, interleave, 1) : 0;
  const std::int64_t mids = pp - 2;
  if (num_layers < 2 * min_end + mids * min_mid)
    return false;
  // Middle stages hold b layers each; the ends share the rest s = a + c. For one b the best a
  // balances a x layer + first extra against c x layer + last extra: the floor or the ceiling
  // of the real optimum (ties: the smaller a). That end cost G falls (weakly) as b grows and
  // the middle cost b x layer rises, so the slowest stage is least at their crossing: b0, the
  // largest b with b x layer <= G, or b0 + 1. Found by bisection; ties go to the larger b
  // (lighter ends). With two stages there is no middle: b = 0, one evaluation.
  struct Ends {
    std::int64_t a = 0, c = 0;
    double cost = 0;
  };
  auto ends = [&](std::int64_t b) {
    const std::int64_t s = num_layers - mids * b;
    const double real_a =
        (static_cast<double>(s) * layer_cost + last_extra_cost - first_extra_cost) /
        (2 * layer_cost);
    const double lo = static_cast<double>(min_end), hi = static_cast<double>(s - min_end);
    const auto a0 = static_cast<std::int64_t>(std::clamp(std::floor(real_a), lo, hi));
    Ends best;
    best.cost = std::numeric_limits<double>::infinity();
    for (const std::int64_t a : {a0, std::min(a0 + 1, s - min_end)}) {
      const std::int64_t c = s - a;
      const double cost = std::max(static_cast<double>(a) * layer_cost + first_extra_cost,
                                   static_cast<double>(c) * layer_cost + last_extra_cost);
      if (cost < best.cost)
        best = {a, c, cost};
    }
    return best;
  };
  auto middle = [&](std::int64_t b) { return static_cast<double>(b) * layer_cost; };
  std::int64_t best_b = 0;
  if (mids > 0) {
    const std::int64_t max_mid = (num_layers - 2 * min_end) / mids;
    std::int64_t lo = min_mid, hi = max_mid; // bisect for b0 in [lo, hi]
    if (middle(lo) > ends(lo).cost) {
      best_b = lo; // the middle already dominates at its smallest
    } else {
      while (lo < hi) { // invariant: middle(lo) <= ends(lo)
        const std::int64_t mid = lo + (hi - lo + 1) / 2;
        if (middle(mid) <= ends(mid).cost)
          lo = mid;
        else
          hi = mid - 1;
      }
      best_b = lo;
      if (lo < max_mid && middle(lo + 1) <= ends(lo).cost)
        best_b = lo + 1;
    }
  }
  const Ends e = ends(best_b);
  const std::int64_t best_a = e.a, best_c = e.c;
  out.assign(static_cast<std::size_t>(pp), best_b);
  out.front() = best_a;
  out.back() = best_c;
  return true;
}

std::string format_stage_layers(const std::vector<std::int64_t>& stage_layers) {
  std::string s;
  for (std::size_t i = 0; i < stage_layers.size();) {
    std::size_t j = i;
    while (j < stage_layers.size() && stage_layers[j] == stage_layers[i])
      ++j;
    if (!s.empty())
      s += ',';
    s += j - i > 1 ? fmt::format("{}x{}", stage_layers[i], j - i)
                   : fmt::format("{}", stage_layers[i]);
    i = j;
  }
  return s;
}

namespace {
// Sizes beyond these are typos, not models (a 1e6-wide hidden layer has 1e12 params/layer).
constexpr std::int64_t kMaxDim = 1 << 20;
// Layers: the deepest published LLMs have about 200 (Llama 3 405B: 126; GPT-3: 96); 10,000
// keeps a step's allocator play (linear in layers) well under a second (docs/model.md).
constexpr std::int64_t kMaxLayers = 10000;
constexpr std::int64_t kMaxVocab = 1 << 24;

// Largest parallel degrees (ParallelPlan): beyond these a layout is a typo, not a machine.
constexpr std::int64_t kMaxTp = 1 << 16;
constexpr std::int64_t kMaxPp = 1 << 16;
constexpr std::int64_t kMaxDp = 1 << 24;
constexpr std::int64_t kMaxCp = 1 << 16;
constexpr std::int64_t kMaxEp = 1 << 16;
constexpr std::int64_t kMaxInterleave = 1 << 10;

void positive(Problems& p, const char* field, std::int64_t v, std::int64_t max) {
  if (v <= 0)
    p.add(fmt::format("{} = {}: must be positive", field, v));
  else if (v > max)
    p.add(fmt::format("{} = {}: absurdly large (limit {})", field, v, max));
}

// No split given and the layers do not divide: say how to give one, with the split that
// balances the layer counts alone as an example.
std::string indivisible_layers(const ParallelPlan& plan, std::int64_t num_layers) {
  std::string msg = fmt::format("pp x interleave = {} x {}: must divide num_layers = {}", plan.pp,
                                plan.interleave, num_layers);
  std::vector<std::int64_t> example;
  if (!balanced_stage_layers(num_layers, plan.pp, plan.interleave, 1, 0, 0, example))
    return msg; // too few layers for pp x interleave chunks, even unevenly
  return msg + fmt::format(", or give the layers of each stage (stage_layers, e.g. {}: flags "
                           "--pp-layers, or --decoder-first-pipeline-num-layers and "
                           "--decoder-last-pipeline-num-layers)",
                           format_stage_layers(example));
}

// Whether plan.stage_layers is a valid split of num_layers (one entry per stage, each within
// the stage's minimum and the limit, summing to num_layers); with `p`, also says why not. The
// one definition of the stage_layers rule: check_plan() asks it without `p` (no allocation).
bool check_stage_layers(Problems* p, const ParallelPlan& plan, std::int64_t num_layers) {
  const auto& s = plan.stage_layers;
  bool ok = true;
  const bool counted = static_cast<std::int64_t>(s.size()) == plan.pp;
  if (!counted) {
    ok = false;
    if (p)
      p->add(fmt::format("stage_layers = {}: has {} entries, must have one per pipeline stage "
                         "(pp = {})",
                         format_stage_layers(s), s.size(), plan.pp));
  }
  std::int64_t sum = 0;
  std::size_t short_count = 0; // stages below their minimum
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] > kMaxLayers) {
      ok = false;
      if (p)
        p->add(
            fmt::format("stage_layers[{}] = {}: absurdly large (limit {})", i, s[i], kMaxLayers));
      continue;
    }
    sum += s[i];
    const std::int64_t stage = static_cast<std::int64_t>(i);
    if (s[i] < (counted ? min_layers_on_stage(plan.pp, plan.interleave, stage) : 1))
      ++short_count;
  }
  if (short_count > 0) {
    ok = false;
    if (p) {
      std::string which;
      std::size_t listed = 0;
      for (std::size_t i = 0; i < s.size() && listed < 4; ++i) {
        const std::int64_t stage = static_cast<std::int64_t>(i);
        if (s[i] > kMaxLayers ||
            s[i] >= (counted ? min_layers_on_stage(plan.pp, plan.interleave, stage) : 1))
          continue;
        which += fmt::format("{}stage_layers[{}] = {}", listed++ ? ", " : "", i, s[i]);
      }
      if (short_count > 4)
        which += fmt::format(" and {} more", short_count - 4);
      if (plan.interleave <= 1)
        p->add(fmt::format("{}: every stage needs at least 1 layer", which));
      else
        p->add(fmt::format("{}: with interleave = {} a stage needs a layer per model chunk, at "
                           "least {} ({} on the first and the last stage, whose first / last "
                           "chunk may hold only the embedding / the head)",
                           which, plan.interleave, plan.interleave,
                           std::max<std::int64_t>(1, plan.interleave - 1)));
    }
  }
  if (sum != num_layers) {
    ok = false;
    if (p)
      p->add(fmt::format("stage_layers = {}: sum to {}, must sum to num_layers = {}",
                         format_stage_layers(s), sum, num_layers));
  }
  return ok;
}
} // namespace

void validate(const ModelSpec& m, const std::string& source) {
  Problems p(source);
  positive(p, "num_layers", m.num_layers, kMaxLayers);
  positive(p, "hidden_size", m.hidden_size, kMaxDim);
  positive(p, "num_heads", m.num_heads, kMaxDim);
  positive(p, "num_kv_heads", m.num_kv_heads, kMaxDim);
  positive(p, "head_dim", m.head_dim, kMaxDim);
  positive(p, "vocab_size", m.vocab_size, kMaxVocab);
  if (!m.is_moe() || m.first_dense_layers > 0 || m.ffn_hidden_size != 0)
    positive(p, "ffn_hidden_size", m.ffn_hidden_size, kMaxDim * 8);
  if (m.num_heads > 0 && m.num_kv_heads > 0 && m.num_heads % m.num_kv_heads != 0)
    p.add(
        fmt::format("num_kv_heads = {}: must divide num_heads = {}", m.num_kv_heads, m.num_heads));
  if (m.num_kv_heads > m.num_heads)
    p.add(fmt::format("num_kv_heads = {}: must not exceed num_heads = {}", m.num_kv_heads,
                      m.num_heads));
  if (m.position == PositionKind::learned)
    positive(p, "max_seq_len", m.max_seq_len, 1 << 24);
  if (m.max_seq_len < 0)
    p.add(fmt::format("max_seq_len = {}: must not be negative", m.max_seq_len));
  if (m.num_experts < 0 || m.num_experts > kMaxDim)
    p.add(fmt::format("num_experts = {}: must be in [0, {}]", m.num_experts, kMaxDim));
  if (m.is_moe()) {
    positive(p, "top_k", m.top_k, m.num_experts);
    positive(p, "expert_ffn_hidden_size", m.expert_ffn_hidden_size, kMaxDim * 8);
    if (m.num_shared_experts < 0 || m.num_shared_experts > m.num_experts)
      p.add(fmt::format("num_shared_experts = {}: must be in [0, num_experts = {}]",
                        m.num_shared_experts, m.num_experts));
    if (m.first_dense_layers < 0 || m.first_dense_layers > m.num_layers)
      p.add(fmt::format("first_dense_layers = {}: must be in [0, num_layers = {}]",
                        m.first_dense_layers, m.num_layers));
    if (m.first_dense_layers > 0 && m.ffn_hidden_size <= 0)
      p.add(fmt::format("first_dense_layers = {}: dense layers need ffn_hidden_size > 0",
                        m.first_dense_layers));
  } else if (m.top_k != 0 || m.num_shared_experts != 0 || m.expert_ffn_hidden_size != 0 ||
             m.first_dense_layers != 0 || m.router_bias) {
    p.add("top_k / expert_ffn_hidden_size / num_shared_experts / first_dense_layers / "
          "router_bias: only valid with num_experts > 0");
  }
  if (m.num_mtp_modules < 0 || m.num_mtp_modules > 16)
    p.add(fmt::format("num_mtp_modules = {}: must be in [0, 16]", m.num_mtp_modules));
  if (m.attention_kind == AttentionKind::mla) {
    // q_lora_rank = 0: queries projected directly (DeepSeek-V2-Lite).
    if (m.q_lora_rank < 0 || m.q_lora_rank > kMaxDim)
      p.add(fmt::format("q_lora_rank = {}: must be in [0, {}]", m.q_lora_rank, kMaxDim));
    positive(p, "kv_lora_rank", m.kv_lora_rank, kMaxDim);
    positive(p, "qk_rope_head_dim", m.qk_rope_head_dim, kMaxDim);
    positive(p, "v_head_dim", m.v_head_dim, kMaxDim);
    if (m.qk_nope_head_dim < 0 || m.qk_nope_head_dim > kMaxDim)
      p.add(fmt::format("qk_nope_head_dim = {}: must be in [0, {}]", m.qk_nope_head_dim, kMaxDim));
    if (m.num_kv_heads != m.num_heads)
      p.add(fmt::format("num_kv_heads = {}: must equal num_heads = {} with attention_kind = mla",
                        m.num_kv_heads, m.num_heads));
    if (m.position != PositionKind::rotary)
      p.add("position: must be rotary with attention_kind = mla (decoupled RoPE)");
    if (m.qk_norm != QkNorm::none)
      p.add("qk_norm: not supported with attention_kind = mla");
    if (m.qkv_bias)
      p.add("qkv_bias: not supported with attention_kind = mla");
  } else if (m.q_lora_rank != 0 || m.kv_lora_rank != 0 || m.qk_nope_head_dim != 0 ||
             m.qk_rope_head_dim != 0 || m.v_head_dim != 0) {
    p.add("q_lora_rank / kv_lora_rank / qk_nope_head_dim / qk_rope_head_dim / v_head_dim: only "
          "valid with attention_kind = mla");
  }
  if (!(m.rotary_fraction > 0 && m.rotary_fraction <= 1))
    p.add(fmt::format("rotary_fraction = {}: must be in (0, 1]", m.rotary_fraction));
  else if (m.rotary_fraction != 1 && m.position != PositionKind::rotary)
    p.add(
        fmt::format("rotary_fraction = {}: only valid with position = rotary", m.rotary_fraction));
  if (m.sliding_window < 0 || m.sliding_window > (1 << 24))
    p.add(fmt::format("sliding_window = {}: must be in [0, {}] (0 = none)", m.sliding_window,
                      1 << 24));
  if (m.full_attention_interval < 0 || m.full_attention_interval > kMaxLayers)
    p.add(fmt::format("full_attention_interval = {}: must be in [0, {}]", m.full_attention_interval,
                      kMaxLayers));
  else if (m.full_attention_interval > 0 && m.sliding_window == 0)
    p.add(fmt::format("full_attention_interval = {}: needs sliding_window > 0",
                      m.full_attention_interval));
  if (m.shared_block_norm && !m.parallel_block)
    p.add("shared_block_norm: needs parallel_block = true");
  if (m.parallel_block && m.norm_placement != NormPlacement::pre)
    p.add(
        fmt::format("norm_placement = {}: parallel_block needs pre", to_string(m.norm_placement)));
  p.throw_if_any();
}

void validate(const TrainingSetup& s, const std::string& source) {
  Problems p(source);
  positive(p, "micro_batch_size", s.micro_batch_size, 1 << 20);
  positive(p, "seq_len", s.seq_len, 1 << 24);
  if (s.global_batch_size < 0)
    p.add(fmt::format("global_batch_size = {}: must not be negative", s.global_batch_size));
  if (s.global_batch_size > (std::int64_t{1} << 32))
    p.add(fmt::format("global_batch_size = {}: absurdly large", s.global_batch_size));
  if (!(s.moe_capacity_factor >= 0 && s.moe_capacity_factor <= 64))
    p.add(fmt::format("moe_capacity_factor = {}: must be in [0, 64] (0 = dropless)",
                      s.moe_capacity_factor));
  if (!(s.moe_imbalance_factor >= 1 && s.moe_imbalance_factor <= 1024))
    p.add(fmt::format("moe_imbalance_factor = {}: must be in [1, 1024] (1 = balanced)",
                      s.moe_imbalance_factor));
  if (s.recompute_layers < 0 || s.recompute_layers > (1 << 20))
    p.add(fmt::format("recompute_layers = {}: must be in [0, num_layers] (0 = every layer)",
                      s.recompute_layers));
  if (s.recompute_modules == 0 || (s.recompute_modules & ~kRecomputeModulesAll) != 0)
    p.add(fmt::format("recompute_modules = {:#x}: must name at least one of core_attn, "
                      "layernorm, mlp, moe_act, moe, shared_experts",
                      s.recompute_modules));
  if (s.offload_activation_layers < 0 || s.offload_activation_layers > (1 << 20))
    p.add(fmt::format("offload_activation_layers = {}: must be in [0, num_layers)",
                      s.offload_activation_layers));
  p.throw_if_any();
}

void validate_stage_layers(const ParallelPlan& plan, std::int64_t num_layers,
                           const std::string& source) {
  Problems p(source);
  check_stage_layers(&p, plan, num_layers);
  p.throw_if_any();
}

PlanCheck check_plan(const ParallelPlan& plan, const ModelSpec& m, const TrainingSetup& s,
                     std::int64_t num_gpus, unsigned groups) {
  PlanCheck c;
  auto fail = [&](PlanRule r, bool broken) {
    if (broken)
      c.failed |= 1u << static_cast<unsigned>(r);
  };
  auto in = [](std::int64_t v, std::int64_t max) { return v >= 1 && v <= max; };
  if (groups & kDegreeRules) {
    fail(PlanRule::degree_range, !in(plan.tp, kMaxTp) || !in(plan.pp, kMaxPp) ||
                                     !in(plan.dp, kMaxDp) || !in(plan.cp, kMaxCp) ||
                                     !in(plan.ep, kMaxEp) || !in(plan.interleave, kMaxInterleave) ||
                                     plan.zero_stage < 0 || plan.zero_stage > 3);
    fail(PlanRule::num_gpus, num_gpus > 0 && plan.num_gpus() != num_gpus);
    // The other rules divide by the degrees: stop here if one is not positive.
    if (plan.tp < 1 || plan.pp < 1 || plan.dp < 1 || plan.cp < 1 || plan.ep < 1 ||
        plan.interleave < 1)
      return c;
  }
  if (groups & kLayoutRules) {
    fail(PlanRule::tp_heads, m.num_heads % plan.tp != 0);
    fail(PlanRule::tp_kv_heads, m.num_kv_heads % plan.tp != 0);
    fail(PlanRule::tp_ffn, m.ffn_hidden_size > 0 && m.ffn_hidden_size % plan.tp != 0);
    const bool etp_ok = plan.etp == 0 || plan.etp == 1 || plan.etp == plan.tp;
    fail(PlanRule::etp_value, !etp_ok);
    fail(PlanRule::tp_expert_ffn,
         m.is_moe() && etp_ok && m.expert_ffn_hidden_size % plan.expert_tp() != 0);
    fail(PlanRule::etp_fold_sp,
         m.is_moe() && etp_ok && plan.experts_folded() && !plan.sequence_parallel);
    fail(PlanRule::cp_seq, s.seq_len % plan.cp != 0);
    fail(PlanRule::sp_seq,
         plan.sequence_parallel && plan.tp > 1 && (s.seq_len / plan.cp) % plan.tp != 0);
    fail(PlanRule::ep_experts, m.is_moe() && m.num_experts % plan.ep != 0);
    fail(PlanRule::ep_dp,
         m.is_moe() && (plan.experts_folded() ? (plan.tp * plan.dp_cp()) % plan.ep != 0
                                              : plan.dp % plan.ep != 0));
    fail(PlanRule::ep_dense, !m.is_moe() && plan.ep != 1);
    fail(PlanRule::seq_positions,
         m.position == PositionKind::learned && m.max_seq_len > 0 && s.seq_len > m.max_seq_len);
  }
  if (groups & kPipelineRules) {
    const bool even = plan.stage_layers.empty();
    fail(PlanRule::pp_layers, plan.pp > m.num_layers);
    fail(PlanRule::pp_interleave_layers,
         even && plan.pp <= m.num_layers && m.num_layers % (plan.pp * plan.interleave) != 0);
    fail(PlanRule::stage_layers, !even && !check_stage_layers(nullptr, plan, m.num_layers));
    fail(PlanRule::interleave_needs_pp, plan.interleave > 1 && plan.pp == 1);
    // Megatron-Core refuses CPU offloading with pipeline parallelism and wants 0 <= n <
    // num_layers (transformer_config.py).
    fail(PlanRule::offload_layers,
         s.offload_activation_layers > 0 &&
             (plan.pp > 1 || s.offload_activation_layers >= m.num_layers));
    fail(PlanRule::recompute_layers, s.recompute_layers > 0 && (plan.recompute != Recompute::full ||
                                                                s.recompute_layers > m.num_layers));
  }
  if ((groups & kBatchRules) && s.global_batch_size > 0) {
    const std::int64_t per_step = s.micro_batch_size * plan.dp;
    const bool multiple = per_step > 0 && s.global_batch_size % per_step == 0;
    fail(PlanRule::batch_multiple, !multiple);
    fail(PlanRule::interleave_batch, multiple && plan.pp > 1 && plan.interleave > 1 &&
                                         (s.global_batch_size / per_step) % plan.pp != 0);
  }
  return c;
}

void validate(const ParallelPlan& plan, const ModelSpec& m, const TrainingSetup& s,
              std::int64_t num_gpus, const std::string& source) {
  const PlanCheck c = check_plan(plan, m, s, num_gpus);
  if (c.ok())
    return;
  Problems p(source);
  if (c.has(PlanRule::degree_range)) {
    positive(p, "tp", plan.tp, kMaxTp);
    positive(p, "pp", plan.pp, kMaxPp);
    positive(p, "dp", plan.dp, kMaxDp);
    positive(p, "cp", plan.cp, kMaxCp);
    positive(p, "ep", plan.ep, kMaxEp);
    positive(p, "interleave", plan.interleave, kMaxInterleave);
    if (plan.zero_stage < 0 || plan.zero_stage > 3)
      p.add(fmt::format("zero_stage = {}: must be 0, 1, 2 or 3", plan.zero_stage));
    p.throw_if_any(); // the other rules divide by these
  }
  const std::int64_t per_step = s.micro_batch_size * plan.dp;
  if (c.has(PlanRule::tp_heads))
    p.add(fmt::format("tp = {}: must divide num_heads = {}", plan.tp, m.num_heads));
  if (c.has(PlanRule::tp_kv_heads))
    p.add(fmt::format("tp = {}: must divide num_kv_heads = {}", plan.tp, m.num_kv_heads));
  if (c.has(PlanRule::tp_ffn))
    p.add(fmt::format("tp = {}: must divide ffn_hidden_size = {}", plan.tp, m.ffn_hidden_size));
  if (c.has(PlanRule::etp_value))
    p.add(fmt::format("etp = {}: must be 0 (= tp), tp = {}, or 1 (MoE parallel folding)", plan.etp,
                      plan.tp));
  if (c.has(PlanRule::tp_expert_ffn))
    p.add(fmt::format("{} = {}: must divide expert_ffn_hidden_size = {}",
                      plan.etp > 0 ? "etp" : "tp", plan.expert_tp(), m.expert_ffn_hidden_size));
  if (c.has(PlanRule::etp_fold_sp))
    p.add(fmt::format("etp = {} with tp = {}: folded experts need sequence parallelism (each "
                      "rank dispatches its sequence shard; Megatron-Core requires it with tp "
                      "and ep)",
                      plan.etp, plan.tp));
  if (c.has(PlanRule::ep_experts))
    p.add(fmt::format("ep = {}: must divide num_experts = {}", plan.ep, m.num_experts));
  if (c.has(PlanRule::ep_dp))
    p.add(plan.experts_folded()
              ? fmt::format("ep = {}: must divide tp x dp x cp = {} (etp = {}: the experts are "
                            "folded over every rank of a pipeline stage)",
                            plan.ep, plan.tp * plan.dp_cp(), plan.etp)
              : fmt::format("ep = {}: must divide dp = {}", plan.ep, plan.dp));
  if (c.has(PlanRule::ep_dense))
    p.add(fmt::format("ep = {}: expert parallelism needs a MoE model (num_experts > 0)", plan.ep));
  if (c.has(PlanRule::pp_layers))
    p.add(fmt::format("pp = {}: must not exceed num_layers = {}", plan.pp, m.num_layers));
  if (c.has(PlanRule::pp_interleave_layers))
    p.add(indivisible_layers(plan, m.num_layers));
  if (c.has(PlanRule::stage_layers))
    check_stage_layers(&p, plan, m.num_layers);
  if (c.has(PlanRule::interleave_needs_pp))
    p.add(fmt::format("interleave = {}: needs pipeline parallelism (pp > 1)", plan.interleave));
  if (c.has(PlanRule::offload_layers))
    p.add(plan.pp > 1
              ? fmt::format("offload_activation_layers = {}: needs pp = 1 (Megatron-Core has no "
                            "CPU offloading with pipeline parallelism; pp = {})",
                            s.offload_activation_layers, plan.pp)
              : fmt::format("offload_activation_layers = {}: must be below num_layers = {} (one "
                            "layer at least stays on the GPU)",
                            s.offload_activation_layers, m.num_layers));
  if (c.has(PlanRule::recompute_layers))
    p.add(plan.recompute != Recompute::full
              ? fmt::format("recompute_layers = {}: needs recompute = full (the layers it names "
                            "are fully recomputed, the others not at all; recompute = {})",
                            s.recompute_layers, to_string(plan.recompute))
              : fmt::format("recompute_layers = {}: must not exceed num_layers = {}",
                            s.recompute_layers, m.num_layers));
  if (c.has(PlanRule::cp_seq))
    p.add(fmt::format("cp = {}: must divide seq_len = {}", plan.cp, s.seq_len));
  if (c.has(PlanRule::sp_seq))
    p.add(fmt::format("sequence_parallel: tp = {} must divide the local sequence {}", plan.tp,
                      s.seq_len / plan.cp));
  if (c.has(PlanRule::seq_positions))
    p.add(fmt::format("seq_len = {}: exceeds the model's learned positions max_seq_len = {}",
                      s.seq_len, m.max_seq_len));
  if (c.has(PlanRule::num_gpus))
    p.add(fmt::format("tp x pp x dp x cp = {} x {} x {} x {} = {}: must equal num_gpus = {}",
                      plan.tp, plan.pp, plan.dp, plan.cp, plan.num_gpus(), num_gpus));
  if (c.has(PlanRule::batch_multiple))
    p.add(fmt::format("global_batch_size = {}: must be a multiple of micro_batch_size x dp = {} x "
                      "{} = {}",
                      s.global_batch_size, s.micro_batch_size, plan.dp, per_step));
  if (c.has(PlanRule::interleave_batch))
    p.add(fmt::format("interleaved schedule: micro-batches per step = {} must be a multiple of "
                      "pp = {}",
                      s.global_batch_size / per_step, plan.pp));
  p.throw_if_any();
}

} // namespace trainsim::model
