// `trainsim model`: parameter and FLOP accounting of a model from its operator list.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/resolve.hpp"
#include "common/errors.hpp"
#include "common/units.hpp"
#include "model/count.hpp"
#include "model/load.hpp"

namespace trainsim::cli {
namespace {

struct ModelCmdOptions {
  ModelOptions model;
  std::optional<std::int64_t> seq_len; // unset: model::default_seq_len
  bool ops = false;
  OutputOptions out;
};

void print_ops(Sink& sink, const model::OpList& ops) {
  Table t({"op", "where", "shape", "params", "fwd GFLOP", "bwd GFLOP", "fwd MB moved", "saved MB"},
          {"op", "where", "shape", "params", "fwd_flops", "bwd_flops", "fwd_bytes", "saved_bytes"});
  auto add = [&](const std::vector<model::Op>& list, const char* where) {
    for (const auto& op : list) {
      std::string shape;
      if (op.kind == model::OpKind::gemm)
        shape = fmt::format("[{},{}]x[{},{}]{}", op.m, op.k, op.k, op.n,
                            op.count > 1 ? fmt::format(" x{:g}", op.count) : "");
      else if (op.kind == model::OpKind::attention_core)
        shape = fmt::format("b{} h{} s{} d{}{}{}", op.batch, op.heads, op.seq_q, op.head_dim,
                            op.v_head_dim != op.head_dim ? fmt::format("/{}", op.v_head_dim) : "",
                            op.window > 0 ? fmt::format(" w{}", op.window) : "");
      double saved = 0;
      for (const auto& s : op.saved)
        saved += s.bytes;
      t.add_row({op.name, where, shape, fmt::format("{:.0f}", op.params),
                 fmt::format("{:.3f}", op.fwd_flops / 1e9),
                 fmt::format("{:.3f}", op.bwd_flops / 1e9),
                 fmt::format("{:.2f}", op.fwd_bytes / 1e6), fmt::format("{:.2f}", saved / 1e6)},
                {op.name, where, shape, fmt::format("{:.0f}", op.params),
                 fmt::format("{:.0f}", op.fwd_flops), fmt::format("{:.0f}", op.bwd_flops),
                 fmt::format("{:.0f}", op.fwd_bytes), fmt::format("{:.0f}", saved)});
    }
  };
  add(ops.embedding, "embedding");
  for (const auto& kind : ops.layers)
    add(kind.ops, fmt::format("{} x{}", kind.name, kind.num_layers).c_str());
  add(ops.head, "head");
  if (ops.num_mtp_modules > 0)
    add(ops.mtp, fmt::format("mtp x{}", ops.num_mtp_modules).c_str());
  t.print(sink);
}

// One line naming the attention, norm and MoE variants that differ from a plain Llama layer.
std::string describe_variants(const model::ModelSpec& m) {
  std::vector<std::string> parts;
  if (m.attention_kind == model::AttentionKind::mla)
    parts.push_back(fmt::format("MLA (q rank {}, kv rank {}, qk {}+{}, v {})", m.q_lora_rank,
                                m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim,
                                m.v_head_dim));
  if (m.sliding_window > 0)
    parts.push_back(m.full_attention_interval > 0
                        ? fmt::format("sliding window {} (every {}th layer full)", m.sliding_window,
                                      m.full_attention_interval)
                        : fmt::format("sliding window {} on every layer", m.sliding_window));
  if (m.qk_norm != model::QkNorm::none)
    parts.push_back(fmt::format("QK-norm {}", model::to_string(m.qk_norm)));
  if (m.rotary_fraction < 1)
    parts.push_back(fmt::format("RoPE on {:g} of each head", m.rotary_fraction));
  if (m.attention_sinks)
    parts.push_back("attention sinks");
  if (m.attention_softcap || m.logit_softcap)
    parts.push_back("logit soft-capping");
  if (m.parallel_block)
    parts.push_back(m.shared_block_norm ? "parallel block (one norm)" : "parallel block");
  if (m.norm_placement != model::NormPlacement::pre)
    parts.push_back(fmt::format("{}-norm", model::to_string(m.norm_placement)));
  if (m.num_shared_experts > 0)
    parts.push_back(fmt::format("shared experts x{}", m.num_shared_experts));
  if (m.first_dense_layers > 0)
    parts.push_back(fmt::format("first {} layers dense", m.first_dense_layers));
  if (m.num_mtp_modules > 0)
    parts.push_back(fmt::format("MTP modules x{}", m.num_mtp_modules));
  std::string s = "variants:";
  for (const auto& p : parts)
    s += (s.back() == ':' ? " " : ", ") + p;
  return parts.empty() ? "variants: none (pre-norm, full attention)" : s;
}

int run_model(const ModelCmdOptions& o) {
  const model::ModelSpec m = resolve_model(o.model);
  const std::int64_t seq = resolve_seq_len(o.seq_len, m);
  const auto p = model::count_params(m);
  const auto f = model::flops_per_token(m, seq);
  Sink sink(o.out);
  nlohmann::json j;
  j["model"] = model::model_to_json(m);
  j["seq_len"] = seq;
  j["params"] = {{"total", p.total},
                 {"embedding", p.embedding},
                 {"per_layer", p.per_layer},
                 {"layers", p.layers},
                 {"head", p.head},
                 {"mtp", p.mtp},
                 {"active", p.active},
                 {"active_without_embedding", p.active_without_embedding},
                 {"non_embedding", p.non_embedding}};
  j["flops_per_token"] = {{"forward", f.forward},
                          {"backward", f.backward},
                          {"total", f.total},
                          {"causal_total", f.causal_total},
                          {"six_n", f.six_n}};
  check_finite(j); // every printed figure below is one of these
  if (sink.format() == Format::json) {
    sink.json(j);
    return 0;
  }
  sink.comment(fmt::format(
      "model {} ({}): {} layers, hidden {}, {} heads ({} kv, head_dim {}), "
      "ffn {} {}, vocab {}, {} norm, {} positions, {} embeddings{}",
      m.name, m.source, m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.head_dim,
      m.is_moe() ? m.expert_ffn_hidden_size : m.ffn_hidden_size, model::to_string(m.ffn),
      m.vocab_size, model::to_string(m.norm), model::to_string(m.position),
      m.tied_embeddings ? "tied" : "untied",
      m.is_moe() ? fmt::format(", MoE {} experts top-{}", m.num_experts, m.top_k) : ""));
  sink.comment(describe_variants(m));
  sink.comment(fmt::format("seq_len {} (FLOPs count the full s x s attention product, "
                           "Narayanan et al. 2021 convention)",
                           seq));
  Table t({"quantity", "value", "exact"}, {"quantity", "value", "exact"});
  auto row = [&](const std::string& name, double v) {
    t.add_row({name, format_count(v), fmt::format("{:.0f}", v)},
              {name, fmt::format("{:.0f}", v), fmt::format("{:.0f}", v)});
  };
  row("params total", p.total);
  row("params embedding", p.embedding);
  // Layers differ in parameters when some are dense and some MoE (DeepSeek's first layers).
  row(m.is_moe() && m.first_dense_layers > 0 ? "params per layer (mean over layers)"
                                             : "params per layer",
      p.per_layer);
  row("params all layers", p.layers);
  row("params head (final norm + untied LM head)", p.head);
  row("params non-embedding", p.non_embedding);
  if (m.num_mtp_modules > 0)
    row("params MTP modules", p.mtp);
  if (m.is_moe()) {
    row("params active per token", p.active);
    row("params active without the embedding table", p.active_without_embedding);
  }
  row("FLOPs/token forward", f.forward);
  row("FLOPs/token backward", f.backward);
  row("FLOPs/token total (fwd + bwd)", f.total);
  row("FLOPs/token total, attention over visible keys only", f.causal_total);
  row("6N (N = active params)", f.six_n);
  t.print(sink);
  if (o.ops && sink.format() == Format::table) {
    sink.write("\n");
    model::OpContext ctx;
    ctx.seq_len = seq;
    print_ops(sink, model::build_ops(m, ctx));
  }
  return 0;
}

} // namespace

void add_model(CLI::App& app) {
  auto o = std::make_shared<ModelCmdOptions>();
  auto* cmd = app.add_subcommand("model", "Parameters and FLOPs per token of a model, from its "
                                          "operator list");
  add_model_options(*cmd, o->model, true);
  cmd->add_option(
      "--seq-len,-s", o->seq_len,
      "Sequence length for attention FLOPs (default: 2048, or the model's max_seq_len when "
      "smaller)");
  cmd->add_flag("--ops", o->ops, "Also print the per-layer operator list (table format)");
  add_output_options(*cmd, o->out);
  cmd->footer("Example: trainsim model --model llama3-8b --seq-len 8192 --ops");
  cmd->callback([o] {
    if (int rc = run_model(*o))
      throw CLI::RuntimeError(rc);
  });
}

} // namespace trainsim::cli
