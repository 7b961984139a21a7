// Randomised fuzzing of the JSON loaders (project presets, Hugging Face configs, GPU and
// cluster presets): mutated documents must either load into a valid spec or throw
// ConfigError naming a field; never crash, hang, or yield non-finite counts. Seeded, so a
// failure reproduces; the corpus is the presets directory, a few HF configs and every
// transcribed config of model/testdata/hf.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "hardware/load.hpp"
#include "model/count.hpp"
#include "model/load.hpp"

using namespace trainsim;
using nlohmann::json;

namespace {

json random_value(std::mt19937_64& rng) {
  switch (rng() % 9) {
  case 0: return -static_cast<std::int64_t>(rng() % 1000);
  case 1: return static_cast<std::int64_t>(rng() % 100000);
  case 2: return static_cast<std::int64_t>(rng()); // huge
  case 3: return std::ldexp(1.0, static_cast<int>(rng() % 200) - 100);
  case 4: return "x";
  case 5: return nullptr;
  case 6: return json::array({1, 2});
  case 7: return json::object({{"a", 1}});
  default: return rng() % 2 == 0;
  }
}

json mutate(json j, std::mt19937_64& rng) {
  if (!j.is_object() || j.empty())
    return random_value(rng);
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    auto it = j.begin();
    std::advance(it, static_cast<long>(rng() % j.size()));
    switch (rng() % 4) {
    case 0: j.erase(it.key()); break;
    case 1: j[it.key()] = random_value(rng); break;
    case 2: j["unknown_" + std::to_string(rng() % 5)] = random_value(rng); break;
    default:
      if (it->is_number_integer())
        j[it.key()] = it->get<std::int64_t>() * (rng() % 2 ? -1 : 3) + 1;
      else if (it->is_object()) // nested configs: Gemma 3's text_config, DBRX's ffn_config
        j[it.key()] = mutate(*it, rng);
      break;
    }
    if (j.empty())
      break;
  }
  return j;
}

template <class F> void expect_clean(const json& doc, F load) {
  try {
    load(doc);
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).size() > 0);
  }
  // Any other exception type escapes and fails the test case.
}

std::vector<json> corpus(const std::string& kind) {
  std::vector<json> docs;
  for (const auto& name : list_presets(kind))
    docs.push_back(load_json_file(resolve_preset(kind, name, "corpus")));
  return docs;
}

} // namespace

TEST_CASE("fuzz: model presets and Hugging Face configs") {
  std::mt19937_64 rng(20261129);
  auto docs = corpus("models");
  docs.push_back(
      json::parse(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256})"));
  docs.push_back(json::parse(R"({"model_type": "qwen2", "_name_or_path": "q", "hidden_size": 896,
    "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
    "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": true})"));
  docs.push_back(
      json::parse(R"({"model_type": "gpt_neox", "hidden_size": 768, "intermediate_size": 3072,
    "num_hidden_layers": 12, "num_attention_heads": 12, "vocab_size": 50304})"));
  docs.push_back(json::parse(R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
    "n_positions": 1024, "vocab_size": 50257})"));
  docs.push_back(
      json::parse(R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
    "num_local_experts": 8, "num_experts_per_tok": 2})"));
  // Every transcribed Hugging Face config (model/testdata/hf): the newer model types.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(TRAINSIM_SOURCE_DIR) / "model/testdata/hf", ec))
    docs.push_back(load_json_file(entry.path().string()));
  REQUIRE(docs.size() > 20);
  int loaded = 0, rejected = 0;
  for (int i = 0; i < 4000; ++i) {
    const json doc = mutate(docs[rng() % docs.size()], rng);
    try {
      const auto m = model::model_from_json(doc, "fuzz.json");
      const auto c = model::count_params(m);
      INFO("mutated document: ", doc.dump());
      CHECK(std::isfinite(c.total));
      CHECK(c.total > 0);
      ++loaded;
    } catch (const ConfigError&) {
      ++rejected;
    }
  }
  CHECK(loaded > 0);
  CHECK(rejected > 0);
}

TEST_CASE("fuzz: GPU, cluster and profile presets") {
  std::mt19937_64 rng(7);
  const auto gpus = corpus("gpus"), clusters = corpus("clusters"), profiles = corpus("profiles");
  for (int i = 0; i < 1500; ++i) {
    expect_clean(mutate(gpus[rng() % gpus.size()], rng),
                 [](const json& d) { (void)hw::gpu_from_json(d, "g.json"); });
    expect_clean(mutate(clusters[rng() % clusters.size()], rng),
                 [](const json& d) { (void)hw::cluster_from_json(d, "c.json"); });
    expect_clean(mutate(profiles[rng() % profiles.size()], rng),
                 [](const json& d) { (void)hw::profile_from_json(d, "p.json"); });
  }
}

TEST_CASE("fuzz: random bytes and truncations through the JSON parser") {
  std::mt19937_64 rng(42);
  const std::string valid = load_json_file(resolve_preset("models", "llama3-8b", "corpus")).dump(2);
  for (int i = 0; i < 2000; ++i) {
    std::string text = valid.substr(0, rng() % (valid.size() + 1));
    for (int k = static_cast<int>(rng() % 4); k > 0 && !text.empty(); --k)
      text[rng() % text.size()] = static_cast<char>(rng() % 256);
    try {
      const json j = parse_json_text(text, "bytes.json");
      (void)model::model_from_json(j, "bytes.json");
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()).find("bytes.json") != std::string::npos);
    }
  }
}
