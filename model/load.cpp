// ModelSpec loaders: strict project presets and lenient Hugging Face config.json (load.hpp).
// Each Hugging Face model_type maps its config keys (and its config class's defaults, from
// huggingface/transformers src/transformers/models/<type>/configuration_<type>.py) onto the
// spec; a feature the op list cannot represent is a ConfigError naming the config field.
#include "model/load.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"

namespace trainsim::model {
namespace {

template <class E>
bool read_enum(JsonObjectReader& r, Problems& p, const char* key, E& out,
               std::initializer_list<std::pair<const char*, E>> values) {
  std::string s;
  if (!r.get(key, s))
    return false;
  std::string allowed;
  for (const auto& [name, value] : values) {
    if (s == name) {
      out = value;
      return true;
    }
    allowed += allowed.empty() ? name : std::string(", ") + name;
  }
  p.add(fmt::format("{} = \"{}\": must be one of {}", key, s, allowed));
  return false;
}

} // namespace

ModelSpec model_from_json(const nlohmann::json& j, const std::string& source) {
  if (j.is_object() && j.contains("model_type"))
    return model_from_hf_config(j, source);
  // A Hugging Face config without model_type: one message, not the project preset reader's
  // "unknown field" for each of its keys.
  if (j.is_object() && !j.contains("name"))
    for (const char* hf_key : {"num_hidden_layers", "num_attention_heads", "n_layer", "n_head",
                               "architectures", "transformers_version"})
      if (j.contains(hf_key))
        throw ConfigError(fmt::format(
            "{}: model_type: missing: a Hugging Face config.json (this file has \"{}\") must "
            "name its architecture, e.g. \"model_type\": \"llama\"; a project preset has name, "
            "source and num_layers instead",
            source, hf_key));
  Problems p(source);
  ModelSpec m;
  JsonObjectReader r(j, p);
  r.get("name", m.name, true);
  r.get("source", m.source, true);
  r.get("num_layers", m.num_layers, true);
  r.get("hidden_size", m.hidden_size, true);
  r.get("num_heads", m.num_heads, true);
  m.num_kv_heads = m.num_heads;
  r.get("num_kv_heads", m.num_kv_heads);
  m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
  r.get("head_dim", m.head_dim);
  r.get("ffn_hidden_size", m.ffn_hidden_size);
  r.get("vocab_size", m.vocab_size, true);
  r.get("max_seq_len", m.max_seq_len);
  read_enum(r, p, "ffn", m.ffn, {{"gated", FfnKind::gated}, {"plain", FfnKind::plain}});
  read_enum(r, p, "norm", m.norm,
            {{"layernorm", NormKind::layernorm},
             {"rmsnorm", NormKind::rmsnorm},
             {"layernorm-no-bias", NormKind::layernorm_no_bias},
             {"layernorm-no-affine", NormKind::layernorm_no_affine}});
  read_enum(r, p, "position", m.position,
            {{"learned", PositionKind::learned},
             {"rotary", PositionKind::rotary},
             {"none", PositionKind::none}});
  r.get("tied_embeddings", m.tied_embeddings);
  r.get("qkv_bias", m.qkv_bias);
  r.get("out_bias", m.out_bias);
  r.get("mlp_bias", m.mlp_bias);
  r.get("dropout", m.dropout);
  r.get("lm_head_bias", m.lm_head_bias);
  read_enum(r, p, "attention_kind", m.attention_kind,
            {{"standard", AttentionKind::standard}, {"mla", AttentionKind::mla}});
  r.get("q_lora_rank", m.q_lora_rank);
  r.get("kv_lora_rank", m.kv_lora_rank);
  r.get("qk_nope_head_dim", m.qk_nope_head_dim);
  r.get("qk_rope_head_dim", m.qk_rope_head_dim);
  r.get("v_head_dim", m.v_head_dim);
  read_enum(r, p, "qk_norm", m.qk_norm,
            {{"none", QkNorm::none}, {"per-head", QkNorm::per_head}, {"full", QkNorm::full}});
  r.get("rotary_fraction", m.rotary_fraction);
  r.get("sliding_window", m.sliding_window);
  r.get("full_attention_interval", m.full_attention_interval);
  r.get("attention_sinks", m.attention_sinks);
  r.get("attention_softcap", m.attention_softcap);
  r.get("logit_softcap", m.logit_softcap);
  read_enum(r, p, "norm_placement", m.norm_placement,
            {{"pre", NormPlacement::pre},
             {"post", NormPlacement::post},
             {"sandwich", NormPlacement::sandwich}});
  r.get("parallel_block", m.parallel_block);
  r.get("shared_block_norm", m.shared_block_norm);
  r.get("num_experts", m.num_experts);
  r.get("top_k", m.top_k);
  r.get("expert_ffn_hidden_size", m.expert_ffn_hidden_size);
  r.get("num_shared_experts", m.num_shared_experts);
  r.get("first_dense_layers", m.first_dense_layers);
  r.get("router_bias", m.router_bias);
  r.get("num_mtp_modules", m.num_mtp_modules);
  r.finish();
  p.throw_if_any();
  validate(m, source);
  return m;
}

namespace {

// Reads the fields of a Hugging Face config (or one nested object of it, e.g. Gemma 3's
// text_config or DBRX's ffn_config). Configs carry many keys trainsim does not need: it reads
// the ones it does and ignores the rest (unlike project presets, which are strict). A null
// value counts as absent (the model class's default applies).
class HfReader {
 public:
  HfReader(const nlohmann::json& j, Problems& p, std::string type, std::string prefix = "")
      : j_(j), p_(p), type_(std::move(type)), prefix_(std::move(prefix)) {}

  [[nodiscard]] const nlohmann::json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  bool num(const char* key, std::int64_t& out, bool required = false) const {
    const auto* v = find(key);
    if (!v) {
      if (required)
        p_.add(
            fmt::format("{}{}: missing required field for model_type \"{}\"", prefix_, key, type_));
      return false;
    }
    if (!v->is_number_integer()) {
      p_.add(fmt::format("{}{} = {}: expected an integer", prefix_, key, json_brief(*v)));
      return false;
    }
    out = v->get<std::int64_t>();
    return true;
  }
  bool real(const char* key, double& out) const {
    const auto* v = find(key);
    if (!v)
      return false;
    if (!v->is_number() || !std::isfinite(v->get<double>())) {
      p_.add(fmt::format("{}{} = {}: expected a number", prefix_, key, json_brief(*v)));
      return false;
    }
    out = v->get<double>();
    return true;
  }
  void flag(const char* key, bool& out) const {
    const auto* v = find(key);
    if (!v)
      return;
    if (!v->is_boolean())
      p_.add(fmt::format("{}{} = {}: expected true or false", prefix_, key, json_brief(*v)));
    else
      out = v->get<bool>();
  }
  // A soft-capping value: a number turns it on, null or absent leaves the default.
  void cap(const char* key, bool& out) const {
    const auto* v = find(key);
    if (!v)
      return;
    double c = 0;
    if (real(key, c))
      out = c > 0;
  }
  [[nodiscard]] const nlohmann::json* object(const char* key) const {
    const auto* v = find(key);
    if (v && !v->is_object()) {
      p_.add(fmt::format("{}{} = {}: expected an object", prefix_, key, json_brief(*v)));
      return nullptr;
    }
    return v;
  }
  // An unsupported feature: names the field and the rule.
  void unsupported(const char* key, const std::string& value, const char* rule) const {
    p_.add(fmt::format("{}{} = {}: not supported for model_type \"{}\" ({})", prefix_, key, value,
                       type_, rule));
  }
  [[nodiscard]] const std::string& type() const { return type_; }
  [[nodiscard]] Problems& problems() const { return p_; }

 private:
  const nlohmann::json& j_;
  Problems& p_;
  std::string type_;
  std::string prefix_;
};

// The fields shared by Llama-like configs (hidden_size, num_hidden_layers, ...).
void read_common(const HfReader& r, ModelSpec& m, bool tied_default) {
  r.num("hidden_size", m.hidden_size, true);
  r.num("num_hidden_layers", m.num_layers, true);
  r.num("num_attention_heads", m.num_heads, true);
  m.num_kv_heads = m.num_heads;
  r.num("num_key_value_heads", m.num_kv_heads);
  r.num("vocab_size", m.vocab_size, true);
  r.num("max_position_embeddings", m.max_seq_len);
  m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
  r.num("head_dim", m.head_dim);
  m.tied_embeddings = tied_default;
  r.flag("tie_word_embeddings", m.tied_embeddings);
}

// Sliding-window layers: `layer_types` (a list of "sliding_attention" / "full_attention", in
// newer configs) must be periodic with every n-th layer full; without it, `interval`.
void read_window(const HfReader& r, ModelSpec& m, std::int64_t interval) {
  r.num("sliding_window", m.sliding_window);
  const auto* types = r.find("layer_types");
  if (!types) {
    m.full_attention_interval = m.sliding_window > 0 ? interval : 0;
    return;
  }
  Problems& p = r.problems();
  if (!types->is_array() || static_cast<std::int64_t>(types->size()) != m.num_layers) {
    p.add(fmt::format("layer_types: expected a list of num_hidden_layers = {} strings",
                      m.num_layers));
    return;
  }
  std::vector<bool> full;
  for (const auto& t : *types) {
    if (t == "full_attention")
      full.push_back(true);
    else if (t == "sliding_attention")
      full.push_back(false);
    else {
      p.add(fmt::format("layer_types: {}: expected \"sliding_attention\" or \"full_attention\"",
                        json_brief(t)));
      return;
    }
  }
  std::int64_t n = 0; // the first full layer sets the period
  for (std::size_t i = 0; i < full.size() && n == 0; ++i)
    if (full[i])
      n = static_cast<std::int64_t>(i) + 1;
  if (n == 1 || m.sliding_window <= 0) { // first layer full: all must be
    for (bool f : full)
      if (!f && m.sliding_window > 0) {
        r.unsupported("layer_types", "[...]",
                      "sliding layers must follow a period: every n-th "
                      "layer full");
        return;
      }
    m.sliding_window = 0;
    m.full_attention_interval = 0;
    return;
  }
  for (std::size_t i = 0; i < full.size(); ++i)
    if (full[i] != (n > 0 && (static_cast<std::int64_t>(i) + 1) % n == 0)) {
      r.unsupported("layer_types", "[...]",
                    "sliding layers must follow a period: every n-th layer full");
      return;
    }
  m.full_attention_interval = n;
}

void read_mixtral_like_moe(const HfReader& r, ModelSpec& m, const char* experts_key,
                           const char* ffn_key) {
  r.num(experts_key, m.num_experts, true);
  r.num("num_experts_per_tok", m.top_k, true);
  r.num(ffn_key, m.expert_ffn_hidden_size, true);
  m.ffn_hidden_size = 0;
}

void reject_qwen_sliding(const HfReader& r) {
  bool use = false;
  r.flag("use_sliding_window", use);
  if (use)
    r.unsupported("use_sliding_window", "true",
                  "Qwen picks sliding layers by max_window_layers; use a project preset");
}

void load_llama_family(const HfReader& r, ModelSpec& m) {
  const std::string& type = r.type();
  m.ffn = FfnKind::gated;
  m.norm = NormKind::rmsnorm;
  m.position = PositionKind::rotary;
  read_common(r, m, false);
  // Qwen2 has biases on Q, K, V only; the others on none unless attention_bias.
  bool attention_bias = type == "qwen2";
  r.flag("attention_bias", attention_bias);
  m.qkv_bias = attention_bias;
  m.out_bias = type != "qwen2" && attention_bias;
  r.flag("mlp_bias", m.mlp_bias);
  if (type == "qwen2" || type == "qwen3" || type == "qwen3_moe")
    reject_qwen_sliding(r);
  else
    read_window(r, m, 0); // Mistral v0.1: every layer slides over 4096 tokens
  if (type == "qwen3" || type == "qwen3_moe")
    m.qk_norm = QkNorm::per_head;
  if (type == "mixtral") {
    read_mixtral_like_moe(r, m, "num_local_experts", "intermediate_size");
  } else if (type == "qwen3_moe") {
    read_mixtral_like_moe(r, m, "num_experts", "moe_intermediate_size");
    std::int64_t step = 1;
    if (r.num("decoder_sparse_step", step) && step != 1)
      r.unsupported("decoder_sparse_step", std::to_string(step), "every layer must be MoE");
    if (const auto* only = r.find("mlp_only_layers"); only && !(only->is_array() && only->empty()))
      r.unsupported("mlp_only_layers", json_brief(*only), "every layer must be MoE");
  } else {
    r.num("intermediate_size", m.ffn_hidden_size, true);
  }
}

void load_gemma(const HfReader& r, ModelSpec& m) {
  const std::string& type = r.type();
  const bool v3 = type == "gemma3_text";
  m.ffn = FfnKind::gated; // GeGLU
  m.norm = NormKind::rmsnorm;
  m.position = PositionKind::rotary;
  if (v3) { // Gemma3TextConfig's defaults, for the keys a checkpoint's text_config leaves out
    m.vocab_size = 262208;
    m.num_heads = 8;
    m.num_kv_heads = 4;
    m.head_dim = 256;
    m.max_seq_len = 131072;
    m.sliding_window = 4096;
    m.hidden_size = 2304;
    m.ffn_hidden_size = 9216;
    m.num_layers = 26;
    m.tied_embeddings = true;
    r.num("hidden_size", m.hidden_size);
    r.num("num_hidden_layers", m.num_layers);
    r.num("num_attention_heads", m.num_heads);
    r.num("num_key_value_heads", m.num_kv_heads);
    r.num("vocab_size", m.vocab_size);
    r.num("max_position_embeddings", m.max_seq_len);
    r.num("head_dim", m.head_dim);
    r.num("intermediate_size", m.ffn_hidden_size);
    r.flag("tie_word_embeddings", m.tied_embeddings);
  } else {
    read_common(r, m, true);
    m.head_dim = 256; // GemmaConfig's default
    r.num("head_dim", m.head_dim);
    r.num("intermediate_size", m.ffn_hidden_size, true);
  }
  bool attention_bias = false;
  r.flag("attention_bias", attention_bias);
  m.qkv_bias = m.out_bias = attention_bias;
  if (type == "gemma")
    return;
  m.norm_placement = NormPlacement::sandwich;
  if (type == "gemma2") {
    m.sliding_window = 4096; // Gemma2Config's defaults: window 4096, soft-caps 50 and 30
    m.attention_softcap = m.logit_softcap = true;
    read_window(r, m, 2);
  } else {
    m.qk_norm = QkNorm::per_head;
    std::int64_t pattern = 6;
    r.num("sliding_window_pattern", pattern);
    read_window(r, m, pattern);
  }
  r.cap("attn_logit_softcapping", m.attention_softcap);
  r.cap("final_logit_softcapping", m.logit_softcap);
}

void load_phi(const HfReader& r, ModelSpec& m) {
  const bool phi3 = r.type() == "phi3";
  m.position = PositionKind::rotary;
  read_common(r, m, false);
  r.num("intermediate_size", m.ffn_hidden_size, true);
  m.rotary_fraction = phi3 ? 1.0 : 0.5; // PhiConfig's default partial_rotary_factor
  r.real("partial_rotary_factor", m.rotary_fraction);
  if (phi3) { // fused qkv_proj and gate_up_proj, no biases
    m.ffn = FfnKind::gated;
    m.norm = NormKind::rmsnorm;
    read_window(r, m, 0);
    return;
  }
  // Phi-1/1.5/2: one LayerNorm feeds parallel attention and MLP; biases everywhere.
  m.ffn = FfnKind::plain;
  m.norm = NormKind::layernorm;
  m.parallel_block = m.shared_block_norm = true;
  m.qkv_bias = m.out_bias = m.mlp_bias = m.lm_head_bias = true;
  bool qk_layernorm = false;
  r.flag("qk_layernorm", qk_layernorm);
  if (qk_layernorm)
    m.qk_norm = QkNorm::per_head;
}

void load_falcon(const HfReader& r, ModelSpec& m) {
  m.ffn = FfnKind::plain;
  m.norm = NormKind::layernorm;
  m.position = PositionKind::rotary;
  r.num("hidden_size", m.hidden_size, true);
  if (!r.num("num_hidden_layers", m.num_layers))
    r.num("n_layer", m.num_layers, true);
  if (!r.num("num_attention_heads", m.num_heads))
    r.num("n_head", m.num_heads, true);
  r.num("vocab_size", m.vocab_size, true);
  m.max_seq_len = 2048;
  r.num("max_position_embeddings", m.max_seq_len);
  m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
  m.ffn_hidden_size = 4 * m.hidden_size;
  r.num("ffn_hidden_size", m.ffn_hidden_size);
  m.tied_embeddings = true;
  r.flag("tie_word_embeddings", m.tied_embeddings);
  bool bias = false, alibi = false, multi_query = true, parallel = true, new_arch = false;
  r.flag("bias", bias);
  r.flag("alibi", alibi);
  r.flag("multi_query", multi_query);
  r.flag("parallel_attn", parallel);
  r.flag("new_decoder_architecture", new_arch);
  m.qkv_bias = m.out_bias = m.mlp_bias = bias;
  if (alibi)
    m.position = PositionKind::none;
  // FalconConfig: the new architecture reads num_kv_heads and gives attention and MLP their
  // own norm; otherwise multi_query means one K/V head and one norm feeds both branches.
  m.num_kv_heads = multi_query ? 1 : m.num_heads;
  if (new_arch) {
    m.num_kv_heads = m.num_heads;
    r.num("num_kv_heads", m.num_kv_heads);
    m.parallel_block = true;
  } else if (parallel) {
    m.parallel_block = m.shared_block_norm = true;
  }
}

void load_olmo(const HfReader& r, ModelSpec& m) {
  const std::string& type = r.type();
  m.ffn = FfnKind::gated;
  m.position = PositionKind::rotary;
  read_common(r, m, false);
  bool attention_bias = false;
  r.flag("attention_bias", attention_bias);
  m.qkv_bias = m.out_bias = attention_bias;
  if (type == "olmo") { // LayerNorm without weight or bias
    m.norm = NormKind::layernorm_no_affine;
    r.num("intermediate_size", m.ffn_hidden_size, true);
    return;
  }
  m.norm = NormKind::rmsnorm;
  m.qk_norm = QkNorm::full;
  if (type == "olmo2") {
    m.norm_placement = NormPlacement::post;
    r.num("intermediate_size", m.ffn_hidden_size, true);
  } else { // olmoe
    read_mixtral_like_moe(r, m, "num_experts", "intermediate_size");
  }
}

void load_dbrx(const HfReader& r, ModelSpec& m) {
  m.ffn = FfnKind::gated;
  m.norm = NormKind::layernorm_no_bias;
  m.position = PositionKind::rotary;
  r.num("d_model", m.hidden_size, true);
  r.num("n_layers", m.num_layers, true);
  r.num("n_heads", m.num_heads, true);
  r.num("vocab_size", m.vocab_size, true);
  r.num("max_seq_len", m.max_seq_len);
  m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
  r.flag("tie_word_embeddings", m.tied_embeddings);
  m.num_kv_heads = 1; // DbrxAttentionConfig's default kv_n_heads
  if (const auto* attn = r.object("attn_config"))
    HfReader(*attn, r.problems(), r.type(), "attn_config.").num("kv_n_heads", m.num_kv_heads);
  const auto* ffn = r.object("ffn_config");
  if (!ffn) {
    r.problems().add("ffn_config: missing required field for model_type \"dbrx\"");
    return;
  }
  const HfReader f(*ffn, r.problems(), r.type(), "ffn_config.");
  f.num("moe_num_experts", m.num_experts, true);
  f.num("moe_top_k", m.top_k, true);
  f.num("ffn_hidden_size", m.expert_ffn_hidden_size, true);
}

void load_deepseek(const HfReader& r, ModelSpec& m) {
  m.ffn = FfnKind::gated;
  m.norm = NormKind::rmsnorm;
  m.position = PositionKind::rotary;
  m.attention_kind = AttentionKind::mla;
  read_common(r, m, false);
  m.num_kv_heads = m.num_heads;        // MLA: every head has its own K and V
  r.num("q_lora_rank", m.q_lora_rank); // null: queries projected directly (V2-Lite)
  r.num("kv_lora_rank", m.kv_lora_rank, true);
  r.num("qk_nope_head_dim", m.qk_nope_head_dim, true);
  r.num("qk_rope_head_dim", m.qk_rope_head_dim, true);
  r.num("v_head_dim", m.v_head_dim, true);
  m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
  bool attention_bias = false;
  r.flag("attention_bias", attention_bias);
  if (attention_bias)
    r.unsupported("attention_bias", "true", "MLA projections without bias");
  r.num("intermediate_size", m.ffn_hidden_size, true);
  if (r.num("n_routed_experts", m.num_experts)) {
    r.num("num_experts_per_tok", m.top_k, true);
    r.num("moe_intermediate_size", m.expert_ffn_hidden_size, true);
    r.num("n_shared_experts", m.num_shared_experts);
    r.num("first_k_dense_replace", m.first_dense_layers);
    std::int64_t freq = 1;
    if (r.num("moe_layer_freq", freq) && freq != 1)
      r.unsupported("moe_layer_freq", std::to_string(freq),
                    "every layer after first_k_dense_replace must be MoE");
    // Auxiliary-loss-free balancing adds a per-expert bias to the routing scores (V3 Sec. 2.1.2).
    if (const auto* method = r.find("topk_method"); method && *method == "noaux_tc")
      m.router_bias = true;
    if (m.first_dense_layers == 0)
      m.ffn_hidden_size = 0; // no dense layer uses it
  }
  r.num("num_nextn_predict_layers", m.num_mtp_modules);
}

void load_gpt_oss(const HfReader& r, ModelSpec& m) {
  m.ffn = FfnKind::gated; // clamped SwiGLU
  m.norm = NormKind::rmsnorm;
  m.position = PositionKind::rotary;
  read_common(r, m, false);
  bool attention_bias = true;
  r.flag("attention_bias", attention_bias);
  m.qkv_bias = m.out_bias = attention_bias;
  m.attention_sinks = true;
  m.router_bias = m.mlp_bias = true; // router and every expert matrix carry biases
  read_window(r, m, 2);
  r.num("num_local_experts", m.num_experts, true);
  if (!r.num("num_experts_per_tok", m.top_k))
    r.num("experts_per_token", m.top_k, true);
  r.num("intermediate_size", m.expert_ffn_hidden_size, true);
  m.ffn_hidden_size = 0;
}

constexpr const char* kSupportedTypes =
    "llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, gemma, gemma2, gemma3, gemma3_text, phi, "
    "phi3, falcon, olmo, olmo2, olmoe, dbrx, deepseek_v2, deepseek_v3, gpt_oss, gpt2, gpt_neox";

} // namespace

ModelSpec model_from_hf_config(const nlohmann::json& j, const std::string& source) {
  Problems p(source);
  if (!j.is_object())
    throw ConfigError(source + ": expected a JSON object");
  const auto type_it = j.find("model_type");
  if (type_it == j.end() || !type_it->is_string())
    throw ConfigError(source + ": model_type: missing or not a string");
  std::string type = type_it->get<std::string>();
  // Gemma 3 checkpoints are multimodal: the decoder's config is nested in text_config (the
  // vision tower is not counted).
  const nlohmann::json* cfg = &j;
  std::string prefix;
  if (type == "gemma3") {
    const auto t = j.find("text_config");
    if (t != j.end() && !t->is_null() && !t->is_object())
      throw ConfigError(
          fmt::format("{}: text_config = {}: expected an object", source, json_brief(*t)));
    static const nlohmann::json kEmpty = nlohmann::json::object();
    cfg = t == j.end() || t->is_null() ? &kEmpty : &*t;
    prefix = "text_config.";
    type = "gemma3_text";
  }
  const HfReader r(*cfg, p, type, prefix);
  ModelSpec m;
  if (auto it = j.find("_name_or_path"); it != j.end() && it->is_string())
    m.name = it->get<std::string>();
  if (m.name.empty())
    m.name = source;
  m.source = "Hugging Face config.json: " + source;
  if (type == "llama" || type == "mistral" || type == "mixtral" || type == "qwen2" ||
      type == "qwen3" || type == "qwen3_moe") {
    load_llama_family(r, m);
  } else if (type == "gemma" || type == "gemma2" || type == "gemma3_text") {
    load_gemma(r, m);
  } else if (type == "phi" || type == "phi3") {
    load_phi(r, m);
  } else if (type == "falcon") {
    load_falcon(r, m);
  } else if (type == "olmo" || type == "olmo2" || type == "olmoe") {
    load_olmo(r, m);
  } else if (type == "dbrx") {
    load_dbrx(r, m);
  } else if (type == "deepseek_v2" || type == "deepseek_v3") {
    load_deepseek(r, m);
  } else if (type == "gpt_oss") {
    load_gpt_oss(r, m);
  } else if (type == "gpt2") {
    m.ffn = FfnKind::plain;
    m.norm = NormKind::layernorm;
    m.position = PositionKind::learned;
    m.tied_embeddings = true;
    m.qkv_bias = m.out_bias = m.mlp_bias = true;
    m.dropout = true;
    r.num("n_embd", m.hidden_size, true);
    r.num("n_layer", m.num_layers, true);
    r.num("n_head", m.num_heads, true);
    m.num_kv_heads = m.num_heads;
    r.num("vocab_size", m.vocab_size, true);
    r.num("n_positions", m.max_seq_len, true);
    m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
    m.ffn_hidden_size = 4 * m.hidden_size;
    r.num("n_inner", m.ffn_hidden_size);
    r.flag("tie_word_embeddings", m.tied_embeddings);
  } else if (type == "gpt_neox") {
    m.ffn = FfnKind::plain;
    m.norm = NormKind::layernorm;
    m.position = PositionKind::rotary;
    m.qkv_bias = m.out_bias = m.mlp_bias = true;
    read_common(r, m, false);
    m.num_kv_heads = m.num_heads;
    r.num("intermediate_size", m.ffn_hidden_size, true);
    // GPTNeoXConfig's defaults: parallel attention and MLP, each with its own LayerNorm; RoPE on
    // a quarter of each head.
    m.parallel_block = true;
    r.flag("use_parallel_residual", m.parallel_block);
    m.rotary_fraction = 0.25;
    r.real("rotary_pct", m.rotary_fraction);
  } else {
    throw ConfigError(fmt::format("{}: model_type = \"{}\": not supported (supported: {})", source,
                                  type, kSupportedTypes));
  }
  p.throw_if_any();
  validate(m, source);
  return m;
}

ModelSpec load_model(const std::string& name_or_path) {
  const std::string path = resolve_preset("models", name_or_path, "--model");
  return model_from_json(load_json_file(path), path);
}

nlohmann::json model_to_json(const ModelSpec& m) {
  nlohmann::json j;
  j["name"] = m.name;
  j["source"] = m.source;
  j["num_layers"] = m.num_layers;
  j["hidden_size"] = m.hidden_size;
  j["num_heads"] = m.num_heads;
  j["num_kv_heads"] = m.num_kv_heads;
  j["head_dim"] = m.head_dim;
  j["ffn_hidden_size"] = m.ffn_hidden_size;
  j["vocab_size"] = m.vocab_size;
  j["max_seq_len"] = m.max_seq_len;
  j["ffn"] = std::string(to_string(m.ffn));
  j["norm"] = std::string(to_string(m.norm));
  j["position"] = std::string(to_string(m.position));
  j["tied_embeddings"] = m.tied_embeddings;
  j["qkv_bias"] = m.qkv_bias;
  j["out_bias"] = m.out_bias;
  j["mlp_bias"] = m.mlp_bias;
  j["dropout"] = m.dropout;
  j["num_experts"] = m.num_experts;
  j["top_k"] = m.top_k;
  j["expert_ffn_hidden_size"] = m.expert_ffn_hidden_size;
  j["num_shared_experts"] = m.num_shared_experts;
  j["first_dense_layers"] = m.first_dense_layers;
  j["router_bias"] = m.router_bias;
  j["num_mtp_modules"] = m.num_mtp_modules;
  j["lm_head_bias"] = m.lm_head_bias;
  j["attention_kind"] = std::string(to_string(m.attention_kind));
  j["q_lora_rank"] = m.q_lora_rank;
  j["kv_lora_rank"] = m.kv_lora_rank;
  j["qk_nope_head_dim"] = m.qk_nope_head_dim;
  j["qk_rope_head_dim"] = m.qk_rope_head_dim;
  j["v_head_dim"] = m.v_head_dim;
  j["qk_norm"] = std::string(to_string(m.qk_norm));
  j["rotary_fraction"] = m.rotary_fraction;
  j["sliding_window"] = m.sliding_window;
  j["full_attention_interval"] = m.full_attention_interval;
  j["attention_sinks"] = m.attention_sinks;
  j["attention_softcap"] = m.attention_softcap;
  j["logit_softcap"] = m.logit_softcap;
  j["norm_placement"] = std::string(to_string(m.norm_placement));
  j["parallel_block"] = m.parallel_block;
  j["shared_block_norm"] = m.shared_block_norm;
  return j;
}

} // namespace trainsim::model
