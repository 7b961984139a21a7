// Validation and names of the job description structs (spec.hpp).
#include "model/spec.hpp"

#include <algorithm>
#include <fmt/format.h>

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
  case Precision::bf16: return Dtype::bf16;
  }
  return Dtype::bf16;
}

std::string_view to_string(Precision p) {
  switch (p) {
  case Precision::fp32: return "fp32";
  case Precision::bf16_mixed: return "bf16-mixed";
  case Precision::fp16_mixed: return "fp16-mixed";
  case Precision::bf16: return "bf16";
  }
  return "?";
}
std::string_view to_string(Recompute r) {
  switch (r) {
  case Recompute::none: return "none";
  case Recompute::selective: return "selective";
  case Recompute::full: return "full";
  }
  return "?";
}
std::string_view to_string(AttentionImpl a) {
  return a == AttentionImpl::flash ? "flash" : "naive";
}
std::string_view to_string(Optimizer o) { return o == Optimizer::adamw ? "adamw" : "sgd"; }
std::string_view to_string(FfnKind f) { return f == FfnKind::gated ? "gated" : "plain"; }
std::string_view to_string(NormKind n) {
  return n == NormKind::layernorm ? "layernorm" : "rmsnorm";
}
std::string_view to_string(PositionKind p) {
  return p == PositionKind::learned ? "learned" : "rotary";
}

namespace {
// Sizes beyond these are typos, not models (a 1e6-wide hidden layer has 1e12 params/layer).
constexpr std::int64_t kMaxDim = 1 << 20;
constexpr std::int64_t kMaxLayers = 100000;
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
} // namespace

void validate(const ModelSpec& m, const std::string& source) {
  Problems p(source);
  positive(p, "num_layers", m.num_layers, kMaxLayers);
  positive(p, "hidden_size", m.hidden_size, kMaxDim);
  positive(p, "num_heads", m.num_heads, kMaxDim);
  positive(p, "num_kv_heads", m.num_kv_heads, kMaxDim);
  positive(p, "head_dim", m.head_dim, kMaxDim);
  positive(p, "vocab_size", m.vocab_size, kMaxVocab);
  if (!m.is_moe() || m.num_shared_experts > 0 || m.ffn_hidden_size != 0)
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
  if (m.num_experts < 0)
    p.add(fmt::format("num_experts = {}: must not be negative", m.num_experts));
  if (m.is_moe()) {
    positive(p, "top_k", m.top_k, m.num_experts);
    positive(p, "expert_ffn_hidden_size", m.expert_ffn_hidden_size, kMaxDim * 8);
    if (m.num_shared_experts < 0)
      p.add(fmt::format("num_shared_experts = {}: must not be negative", m.num_shared_experts));
  } else if (m.top_k != 0 || m.num_shared_experts != 0 || m.expert_ffn_hidden_size != 0) {
    p.add("top_k / expert_ffn_hidden_size / num_shared_experts: only valid with num_experts > 0");
  }
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
    fail(PlanRule::tp_expert_ffn, m.is_moe() && m.expert_ffn_hidden_size % plan.tp != 0);
    fail(PlanRule::cp_seq, s.seq_len % plan.cp != 0);
    fail(PlanRule::sp_seq,
         plan.sequence_parallel && plan.tp > 1 && (s.seq_len / plan.cp) % plan.tp != 0);
    fail(PlanRule::ep_experts, m.is_moe() && m.num_experts % plan.ep != 0);
    fail(PlanRule::ep_dp, m.is_moe() && plan.dp % plan.ep != 0);
    fail(PlanRule::ep_dense, !m.is_moe() && plan.ep != 1);
    fail(PlanRule::seq_positions,
         m.position == PositionKind::learned && m.max_seq_len > 0 && s.seq_len > m.max_seq_len);
  }
  if (groups & kPipelineRules) {
    fail(PlanRule::pp_layers, plan.pp > m.num_layers);
    fail(PlanRule::pp_interleave_layers,
         plan.pp <= m.num_layers && m.num_layers % (plan.pp * plan.interleave) != 0);
    fail(PlanRule::interleave_needs_pp, plan.interleave > 1 && plan.pp == 1);
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
  auto rule = [&](PlanRule r, const std::string& message) {
    if (c.has(r))
      p.add(message);
  };
  rule(PlanRule::tp_heads,
       fmt::format("tp = {}: must divide num_heads = {}", plan.tp, m.num_heads));
  rule(PlanRule::tp_kv_heads,
       fmt::format("tp = {}: must divide num_kv_heads = {}", plan.tp, m.num_kv_heads));
  rule(PlanRule::tp_ffn,
       fmt::format("tp = {}: must divide ffn_hidden_size = {}", plan.tp, m.ffn_hidden_size));
  rule(PlanRule::tp_expert_ffn, fmt::format("tp = {}: must divide expert_ffn_hidden_size = {}",
                                            plan.tp, m.expert_ffn_hidden_size));
  rule(PlanRule::ep_experts,
       fmt::format("ep = {}: must divide num_experts = {}", plan.ep, m.num_experts));
  rule(PlanRule::ep_dp, fmt::format("ep = {}: must divide dp = {}", plan.ep, plan.dp));
  rule(PlanRule::ep_dense,
       fmt::format("ep = {}: expert parallelism needs a MoE model (num_experts > 0)", plan.ep));
  rule(PlanRule::pp_layers,
       fmt::format("pp = {}: must not exceed num_layers = {}", plan.pp, m.num_layers));
  rule(PlanRule::pp_interleave_layers,
       fmt::format("pp x interleave = {} x {}: must divide num_layers = {}", plan.pp,
                   plan.interleave, m.num_layers));
  rule(PlanRule::interleave_needs_pp,
       fmt::format("interleave = {}: needs pipeline parallelism (pp > 1)", plan.interleave));
  rule(PlanRule::cp_seq, fmt::format("cp = {}: must divide seq_len = {}", plan.cp, s.seq_len));
  rule(PlanRule::sp_seq, fmt::format("sequence_parallel: tp = {} must divide the local sequence {}",
                                     plan.tp, s.seq_len / plan.cp));
  rule(PlanRule::seq_positions,
       fmt::format("seq_len = {}: exceeds the model's learned positions max_seq_len = {}",
                   s.seq_len, m.max_seq_len));
  rule(PlanRule::num_gpus,
       fmt::format("tp x pp x dp x cp = {} x {} x {} x {} = {}: must equal num_gpus = {}", plan.tp,
                   plan.pp, plan.dp, plan.cp, plan.num_gpus(), num_gpus));
  rule(PlanRule::batch_multiple,
       fmt::format("global_batch_size = {}: must be a multiple of micro_batch_size x dp = {} x "
                   "{} = {}",
                   s.global_batch_size, s.micro_batch_size, plan.dp, per_step));
  rule(PlanRule::interleave_batch,
       fmt::format("interleaved schedule: micro-batches per step = {} must be a multiple of "
                   "pp = {}",
                   per_step > 0 ? s.global_batch_size / per_step : 0, plan.pp));
  p.throw_if_any();
}

} // namespace trainsim::model
