// ModelSpec loaders: strict project presets and lenient Hugging Face config.json (load.hpp).
#include "model/load.hpp"

#include <fmt/format.h>

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
            {{"layernorm", NormKind::layernorm}, {"rmsnorm", NormKind::rmsnorm}});
  read_enum(r, p, "position", m.position,
            {{"learned", PositionKind::learned}, {"rotary", PositionKind::rotary}});
  r.get("tied_embeddings", m.tied_embeddings);
  r.get("qkv_bias", m.qkv_bias);
  r.get("out_bias", m.out_bias);
  r.get("mlp_bias", m.mlp_bias);
  r.get("dropout", m.dropout);
  r.get("num_experts", m.num_experts);
  r.get("top_k", m.top_k);
  r.get("expert_ffn_hidden_size", m.expert_ffn_hidden_size);
  r.get("num_shared_experts", m.num_shared_experts);
  r.finish();
  p.throw_if_any();
  validate(m, source);
  return m;
}

ModelSpec model_from_hf_config(const nlohmann::json& j, const std::string& source) {
  Problems p(source);
  if (!j.is_object())
    throw ConfigError(source + ": expected a JSON object");
  const auto type_it = j.find("model_type");
  if (type_it == j.end() || !type_it->is_string())
    throw ConfigError(source + ": model_type: missing or not a string");
  const std::string type = type_it->get<std::string>();
  // Hugging Face configs carry many keys trainsim does not need; read the ones it does and
  // ignore the rest (unlike project presets, which are strict).
  auto num = [&](const char* key, std::int64_t& out, bool required) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (required)
        p.add(fmt::format("{}: missing required field for model_type \"{}\"", key, type));
      return false;
    }
    if (!it->is_number_integer()) {
      p.add(fmt::format("{} = {}: expected an integer", key, it->dump()));
      return false;
    }
    out = it->get<std::int64_t>();
    return true;
  };
  auto flag = [&](const char* key, bool& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null())
      return;
    if (!it->is_boolean())
      p.add(fmt::format("{} = {}: expected true or false", key, it->dump()));
    else
      out = it->get<bool>();
  };
  ModelSpec m;
  if (auto it = j.find("_name_or_path"); it != j.end() && it->is_string())
    m.name = it->get<std::string>();
  if (m.name.empty())
    m.name = source;
  m.source = "Hugging Face config.json: " + source;
  if (type == "llama" || type == "mistral" || type == "mixtral" || type == "qwen2") {
    m.ffn = FfnKind::gated;
    m.norm = NormKind::rmsnorm;
    m.position = PositionKind::rotary;
    num("hidden_size", m.hidden_size, true);
    num("num_hidden_layers", m.num_layers, true);
    num("num_attention_heads", m.num_heads, true);
    m.num_kv_heads = m.num_heads;
    num("num_key_value_heads", m.num_kv_heads, false);
    num("vocab_size", m.vocab_size, true);
    num("max_position_embeddings", m.max_seq_len, false);
    m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
    num("head_dim", m.head_dim, false);
    flag("tie_word_embeddings", m.tied_embeddings);
    bool attention_bias = type == "qwen2"; // Qwen2 has biases on Q, K, V only
    flag("attention_bias", attention_bias);
    m.qkv_bias = attention_bias;
    m.out_bias = type != "qwen2" && attention_bias;
    flag("mlp_bias", m.mlp_bias);
    if (type == "mixtral") {
      num("num_local_experts", m.num_experts, true);
      num("num_experts_per_tok", m.top_k, true);
      num("intermediate_size", m.expert_ffn_hidden_size, true);
    } else {
      num("intermediate_size", m.ffn_hidden_size, true);
    }
  } else if (type == "gpt2") {
    m.ffn = FfnKind::plain;
    m.norm = NormKind::layernorm;
    m.position = PositionKind::learned;
    m.tied_embeddings = true;
    m.qkv_bias = m.out_bias = m.mlp_bias = true;
    m.dropout = true;
    num("n_embd", m.hidden_size, true);
    num("n_layer", m.num_layers, true);
    num("n_head", m.num_heads, true);
    m.num_kv_heads = m.num_heads;
    num("vocab_size", m.vocab_size, true);
    num("n_positions", m.max_seq_len, true);
    m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
    m.ffn_hidden_size = 4 * m.hidden_size;
    num("n_inner", m.ffn_hidden_size, false);
    flag("tie_word_embeddings", m.tied_embeddings);
  } else if (type == "gpt_neox") {
    m.ffn = FfnKind::plain;
    m.norm = NormKind::layernorm;
    m.position = PositionKind::rotary;
    m.qkv_bias = m.out_bias = m.mlp_bias = true;
    num("hidden_size", m.hidden_size, true);
    num("num_hidden_layers", m.num_layers, true);
    num("num_attention_heads", m.num_heads, true);
    m.num_kv_heads = m.num_heads;
    num("intermediate_size", m.ffn_hidden_size, true);
    num("vocab_size", m.vocab_size, true);
    num("max_position_embeddings", m.max_seq_len, false);
    m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
    flag("tie_word_embeddings", m.tied_embeddings);
  } else {
    throw ConfigError(fmt::format("{}: model_type = \"{}\": not supported (supported: llama, "
                                  "mistral, mixtral, qwen2, gpt2, gpt_neox)",
                                  source, type));
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
  return j;
}

} // namespace trainsim::model
