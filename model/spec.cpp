// Validation and names of the job description structs (spec.hpp).
#include "model/spec.hpp"

#include <fmt/format.h>

#include "common/errors.hpp"

namespace trainsim::model {

std::int64_t grad_accumulation_steps(const ParallelPlan& plan, const TrainingSetup& setup) {
  const std::int64_t per_step = setup.micro_batch_size * plan.dp;
  if (setup.global_batch_size <= 0 || per_step <= 0)
    return 1;
  return setup.global_batch_size / per_step;
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

void validate(const ParallelPlan& plan, const ModelSpec& m, const TrainingSetup& s,
              std::int64_t num_gpus, const std::string& source) {
  Problems p(source);
  positive(p, "tp", plan.tp, 1 << 16);
  positive(p, "pp", plan.pp, 1 << 16);
  positive(p, "dp", plan.dp, 1 << 24);
  positive(p, "cp", plan.cp, 1 << 16);
  positive(p, "ep", plan.ep, 1 << 16);
  positive(p, "interleave", plan.interleave, 1 << 10);
  if (plan.zero_stage < 0 || plan.zero_stage > 3)
    p.add(fmt::format("zero_stage = {}: must be 0, 1, 2 or 3", plan.zero_stage));
  if (!p.empty())
    p.throw_if_any();
  auto divides = [&](const char* what, std::int64_t deg, const char* field, std::int64_t v) {
    if (v > 0 && v % deg != 0)
      p.add(fmt::format("{} = {}: must divide {} = {}", what, deg, field, v));
  };
  divides("tp", plan.tp, "num_heads", m.num_heads);
  divides("tp", plan.tp, "num_kv_heads", m.num_kv_heads);
  if (m.ffn_hidden_size > 0)
    divides("tp", plan.tp, "ffn_hidden_size", m.ffn_hidden_size);
  if (m.is_moe()) {
    divides("tp", plan.tp, "expert_ffn_hidden_size", m.expert_ffn_hidden_size);
    divides("ep", plan.ep, "num_experts", m.num_experts);
    if (plan.dp % plan.ep != 0)
      p.add(fmt::format("ep = {}: must divide dp = {}", plan.ep, plan.dp));
  } else if (plan.ep != 1) {
    p.add(fmt::format("ep = {}: expert parallelism needs a MoE model (num_experts > 0)", plan.ep));
  }
  if (plan.pp > m.num_layers)
    p.add(fmt::format("pp = {}: must not exceed num_layers = {}", plan.pp, m.num_layers));
  else if (m.num_layers % (plan.pp * plan.interleave) != 0)
    p.add(fmt::format("pp x interleave = {} x {}: must divide num_layers = {}", plan.pp,
                      plan.interleave, m.num_layers));
  if (plan.interleave > 1 && plan.pp == 1)
    p.add(fmt::format("interleave = {}: needs pipeline parallelism (pp > 1)", plan.interleave));
  if (s.seq_len % plan.cp != 0)
    p.add(fmt::format("cp = {}: must divide seq_len = {}", plan.cp, s.seq_len));
  if (plan.sequence_parallel && plan.tp > 1 && (s.seq_len / plan.cp) % plan.tp != 0)
    p.add(fmt::format("sequence_parallel: tp = {} must divide the local sequence {}", plan.tp,
                      s.seq_len / plan.cp));
  if (m.position == PositionKind::learned && m.max_seq_len > 0 && s.seq_len > m.max_seq_len)
    p.add(fmt::format("seq_len = {}: exceeds the model's learned positions max_seq_len = {}",
                      s.seq_len, m.max_seq_len));
  if (num_gpus > 0 && plan.num_gpus() != num_gpus)
    p.add(fmt::format("tp x pp x dp x cp = {} x {} x {} x {} = {}: must equal num_gpus = {}",
                      plan.tp, plan.pp, plan.dp, plan.cp, plan.num_gpus(), num_gpus));
  if (s.global_batch_size > 0) {
    const std::int64_t per_step = s.micro_batch_size * plan.dp;
    if (s.global_batch_size % per_step != 0)
      p.add(
          fmt::format("global_batch_size = {}: must be a multiple of micro_batch_size x dp = {} x "
                      "{} = {}",
                      s.global_batch_size, s.micro_batch_size, plan.dp, per_step));
    else if (plan.pp > 1 && plan.interleave > 1 && (s.global_batch_size / per_step) % plan.pp != 0)
      p.add(fmt::format("interleaved schedule: micro-batches per step = {} must be a multiple of "
                        "pp = {}",
                        s.global_batch_size / per_step, plan.pp));
  }
  p.throw_if_any();
}

} // namespace trainsim::model
