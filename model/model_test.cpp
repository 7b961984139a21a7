// Tests of the operator list against hand-computed parameter counts and the closed forms of
// docs/model.md (Narayanan 2021 Eq. 2/3, Korthikanti 2022 Table 2 and Eq. 7).
#include <doctest/doctest.h>

#include <filesystem>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "model/count.hpp"
#include "model/load.hpp"

using namespace trainsim;
using namespace trainsim::model;

TEST_CASE("exact parameter counts of published models") {
  // GPT-2 small: 12*L*h^2 + 13*L*h + (V + s)*h + 2h (final LayerNorm)
  //   = 12*12*768^2 + 13*12*768 + (50257 + 1024)*768 + 1536 = 124,439,808.
  CHECK(count_params(load_model("gpt2")).total == 124439808.0);
  // Llama-2-7B: 2*V*h + L*(4h^2 + 3*h*ffn + 2h) + h = 6,738,415,616.
  CHECK(count_params(load_model("llama2-7b")).total == 6738415616.0);
  // Llama-3-8B (GQA 8 kv heads of 128): 2*128256*4096 + 32*(4096*(4096+2*1024) + 4096^2 +
  //   3*4096*14336 + 2*4096) + 4096 = 8,030,261,248.
  CHECK(count_params(load_model("llama3-8b")).total == 8030261248.0);
  CHECK(count_params(load_model("llama3-70b")).total == 70553706496.0);
  // Mixtral: per layer 41,943,040 attention + 32,768 router + 8*3*4096*14336 experts + 8192.
  const auto mixtral = count_params(load_model("mixtral-8x7b"));
  CHECK(mixtral.total == 46702792704.0);
  // Active: 2 of 8 experts per token: total - 32 layers * 6 * 176,160,768 = 12,879,921,152.
  CHECK(mixtral.active == 46702792704.0 - 32.0 * 6 * 176160768.0);
  // CS336 2.7B: 2*10000*2560 + 32*(4*2560^2 + 3*2560*10240 + 2*2560) + 2560 = 3,406,809,600.
  CHECK(count_params(load_model("cs336-2.7b")).total == 3406809600.0);
}

TEST_CASE("GPT-style closed form (Narayanan et al. 2021 Eq. 2) matches the op list") {
  for (const char* name :
       {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt3-175b", "gpt3-5b", "gpt3-20b"}) {
    const ModelSpec m = load_model(name);
    const double L = m.num_layers, h = m.hidden_size, V = m.vocab_size, s = m.max_seq_len;
    // 12 L h^2 + 13 L h + (V + s) h, plus the final LayerNorm's 2h.
    CHECK(count_params(m).total == 12 * L * h * h + 13 * L * h + (V + s) * h + 2 * h);
  }
}

TEST_CASE("parts sum to totals") {
  for (const auto& name : list_presets("models")) {
    const auto c = count_params(load_model(name));
    CHECK(c.total == doctest::Approx(c.embedding + c.layers + c.head + c.mtp).epsilon(1e-12));
    CHECK(c.active <= c.total);
    CHECK(c.non_embedding < c.total);
  }
}

TEST_CASE("model FLOPs match Korthikanti et al. 2022 Eq. 7") {
  // 72 B L s h^2 (1 + s/(6h) + V/(12 h L)) per iteration of B sequences; per token / (B s).
  const ModelSpec m = load_model("gpt3-175b");
  const double L = m.num_layers, h = m.hidden_size, V = m.vocab_size, s = 2048;
  const double expected = 72 * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L)) / s;
  const auto f = flops_per_token(m, 2048);
  CHECK(f.total == doctest::Approx(expected).epsilon(1e-12));
  CHECK(f.backward == doctest::Approx(2 * f.forward).epsilon(1e-12));
}

TEST_CASE("Llama FLOPs: 2 per matmul parameter plus attention") {
  const ModelSpec m = load_model("llama3-8b");
  const double s = 8192;
  const auto c = count_params(m);
  // Matmul parameters = all but the embedding table and the norm weights.
  const double norms = m.num_layers * 2.0 * m.hidden_size + m.hidden_size;
  const double matmul = c.total - c.embedding - norms;
  const double attn = 4.0 * s * m.num_heads * m.head_dim * m.num_layers; // QK^T + PV, full
  CHECK(flops_per_token(m, 8192).forward == doctest::Approx(2 * matmul + attn).epsilon(1e-12));
}

namespace {
// Korthikanti Table 2 configurations: GPT-3 175B (a = 96, h = 12288, s = 2048), b = 1,
// 16-bit activations, dropout, no flash attention.
struct Korthikanti {
  ModelSpec m = load_model("gpt3-175b");
  double s = 2048, b = 1, h = 12288, a = 96;
  double layer(std::int64_t tp, bool sp, bool naive = true) const {
    OpContext ctx;
    ctx.seq_len = 2048;
    ctx.micro_batch_size = 1;
    ctx.tp = tp;
    ctx.sequence_parallel = sp;
    ctx.attention = naive ? AttentionImpl::naive : AttentionImpl::flash;
    return saved_bytes(build_ops(m, ctx).layers.front().ops, true);
  }
  // The op list also keeps the LayerNorms' fp32 mean and rstd: 2 norms x 8 bytes per token.
  double stats(double t) const { return 16 * s * b / t; }
};
} // namespace

TEST_CASE("activation memory per layer = Korthikanti et al. 2022 Table 2") {
  Korthikanti k;
  const double sbh = k.s * k.b * k.h;
  SUBCASE("no parallelism: sbh(34 + 5as/h)") {
    CHECK(k.layer(1, false) == sbh * (34 + 5 * k.a * k.s / k.h) + k.stats(1));
  }
  SUBCASE("tensor parallel t = 8: sbh(10 + 24/t + 5as/(ht))") {
    const double t = 8;
    CHECK(k.layer(8, false) ==
          doctest::Approx(sbh * (10 + 24 / t + 5 * k.a * k.s / (k.h * t)) + k.stats(1))
              .epsilon(1e-12));
  }
  SUBCASE("tensor + sequence parallel: sbh(34 + 5as/h)/t") {
    const double t = 8;
    CHECK(k.layer(8, true) ==
          doctest::Approx(sbh * (34 + 5 * k.a * k.s / k.h) / t + k.stats(t)).epsilon(1e-12));
  }
  SUBCASE("flash attention drops the 5as^2b term and adds a per-row logsumexp") {
    // Saves Q, K, V, O (as the naive path) plus fp32 lse [b, a, s]; no probabilities.
    CHECK(k.layer(1, false, false) == sbh * 34 + k.stats(1) + 4 * k.b * k.a * k.s);
  }
}

TEST_CASE("the XXL model of the study notes") {
  // 126 layers, each FFN two matrices of d_model x d_ff = 16384 x 53248:
  // 126 * 2 * 16384 * 53248 = 219,848,638,464 params = 204.75 Gi-params (the notes' "204B").
  const ModelSpec m = load_model("cs336-xxl");
  OpContext ctx;
  ctx.seq_len = 1;
  const OpList ops = build_ops(m, ctx);
  double ffn = 0;
  REQUIRE(ops.layers.size() == 1);
  for (const auto& op : ops.layers.front().ops)
    if (op.role == OpRole::ffn_up || op.role == OpRole::ffn_down)
      ffn += op.params;
  ffn *= static_cast<double>(ops.num_layers);
  CHECK(ffn == 219848638464.0);
  const double gib = 1024.0 * 1024 * 1024;
  CHECK(ffn / gib == doctest::Approx(204.75).epsilon(1e-3));
  // fp32 weights: 4 bytes each = 819 GiB ("816G" in the notes: 204 x 4), and with gradients
  // and two Adam moments 16 bytes each = 3.2 TiB ("3200G+").
  CHECK(4 * ffn / gib == doctest::Approx(819.0).epsilon(1e-3));
  CHECK(16 * ffn / (gib * 1024) == doctest::Approx(3.2).epsilon(1e-2));
}

TEST_CASE("every model preset loads, validates and round-trips") {
  const auto names = list_presets("models");
  CHECK(names.size() >= 36);
  for (const auto& name : names) {
    CAPTURE(name);
    const ModelSpec m = load_model(name);
    CHECK(m.name == name);
    CHECK_FALSE(m.source.empty());
    const ModelSpec again = model_from_json(model_to_json(m), "round-trip");
    CHECK(count_params(again).total == count_params(m).total);
  }
}

TEST_CASE("Hugging Face config.json loaders") {
  SUBCASE("llama") {
    const auto j = parse_json_text(R"({"model_type": "llama", "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
      "tie_word_embeddings": false, "rms_norm_eps": 1e-5, "rope_theta": 500000.0})",
                                   "config.json");
    CHECK(count_params(model_from_json(j, "config.json")).total == 8030261248.0);
  }
  SUBCASE("mixtral") {
    const auto j = parse_json_text(R"({"model_type": "mixtral", "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8,
      "num_experts_per_tok": 2})",
                                   "config.json");
    CHECK(count_params(model_from_json(j, "config.json")).total == 46702792704.0);
  }
  SUBCASE("gpt2") {
    const auto j = parse_json_text(R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12,
      "n_head": 12, "n_positions": 1024, "vocab_size": 50257, "n_inner": null})",
                                   "config.json");
    CHECK(count_params(model_from_json(j, "config.json")).total == 124439808.0);
  }
  SUBCASE("qwen2 has Q/K/V biases only") {
    // Qwen2-0.5B: hidden 896, 24 layers, 14 heads, 2 kv heads, ffn 4864, vocab 151936, tied:
    // 494,032,768 parameters (model card: 0.49B).
    const auto j = parse_json_text(R"({"model_type": "qwen2", "hidden_size": 896,
      "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
      "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": true})",
                                   "config.json");
    CHECK(count_params(model_from_json(j, "config.json")).total == 494032768.0);
  }
  SUBCASE("gpt_neox") {
    // Pythia-160M: hidden 768, 12 layers, 12 heads, ffn 3072, vocab 50304, untied:
    // 162,322,944 parameters.
    const auto j = parse_json_text(R"({"model_type": "gpt_neox", "hidden_size": 768,
      "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
      "vocab_size": 50304, "max_position_embeddings": 2048, "tie_word_embeddings": false})",
                                   "config.json");
    CHECK(count_params(model_from_json(j, "config.json")).total == 162322944.0);
  }
  SUBCASE("unsupported model_type names the field") {
    const auto j = parse_json_text(R"({"model_type": "t5"})", "config.json");
    CHECK_THROWS_WITH_AS(model_from_json(j, "config.json"), doctest::Contains("model_type"),
                         ConfigError);
  }
  SUBCASE("missing field named") {
    const auto j = parse_json_text(R"({"model_type": "llama", "hidden_size": 4096})", "c.json");
    CHECK_THROWS_WITH_AS(model_from_json(j, "c.json"), doctest::Contains("num_hidden_layers"),
                         ConfigError);
  }
}

TEST_CASE("bad model presets: every problem named") {
  SUBCASE("unknown key with suggestion") {
    const auto j = parse_json_text(R"({"name": "x", "source": "t", "num_layers": 2,
      "hidden_size": 64, "num_heads": 4, "ffn_hidden_size": 128, "vocab_size": 100,
      "num_kv_head": 2})",
                                   "x.json");
    CHECK_THROWS_WITH_AS(model_from_json(j, "x.json"),
                         doctest::Contains("did you mean 'num_kv_heads'"), ConfigError);
  }
  SUBCASE("kv heads must divide heads") {
    const auto j = parse_json_text(R"({"name": "x", "source": "t", "num_layers": 2,
      "hidden_size": 64, "num_heads": 32, "num_kv_heads": 5, "ffn_hidden_size": 128,
      "vocab_size": 100})",
                                   "x.json");
    CHECK_THROWS_WITH_AS(model_from_json(j, "x.json"),
                         doctest::Contains("num_kv_heads = 5: must divide num_heads = 32"),
                         ConfigError);
  }
  SUBCASE("non-positive and absurd sizes") {
    const auto j = parse_json_text(R"({"name": "x", "source": "t", "num_layers": -3,
      "hidden_size": 99999999999, "num_heads": 4, "ffn_hidden_size": 128, "vocab_size": 0})",
                                   "x.json");
    try {
      (void)model_from_json(j, "x.json");
      FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      CHECK(msg.find("num_layers = -3: must be positive") != std::string::npos);
      CHECK(msg.find("hidden_size = 99999999999: absurdly large") != std::string::npos);
      CHECK(msg.find("vocab_size = 0: must be positive") != std::string::npos);
    }
  }
  SUBCASE("wrong types") {
    const auto j = parse_json_text(R"({"name": "x", "source": "t", "num_layers": "two",
      "hidden_size": 64.5, "num_heads": 4, "ffn_hidden_size": 128, "vocab_size": 100,
      "ffn": "swish"})",
                                   "x.json");
    try {
      (void)model_from_json(j, "x.json");
      FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      CHECK(msg.find("num_layers = \"two\": expected an integer") != std::string::npos);
      CHECK(msg.find("hidden_size = 64.5: expected an integer") != std::string::npos);
      CHECK(msg.find("ffn = \"swish\": must be one of gated, plain") != std::string::npos);
    }
  }
  SUBCASE("unknown preset suggests near names") {
    CHECK_THROWS_WITH_AS(load_model("llama3-8"), doctest::Contains("did you mean llama3-8b"),
                         ConfigError);
  }
}

TEST_CASE("parallel plan validation") {
  const ModelSpec m = load_model("llama3-8b");
  TrainingSetup s;
  s.seq_len = 4096;
  auto check = [&](ParallelPlan p, std::int64_t gpus, const char* needle) {
    CHECK_THROWS_WITH_AS(validate(p, m, s, gpus, "flags"), doctest::Contains(needle), ConfigError);
  };
  ParallelPlan p;
  p.tp = 3;
  check(p, 0, "tp = 3: must divide num_heads = 32");
  p = {};
  p.pp = 64;
  check(p, 0, "pp = 64: must not exceed num_layers = 32");
  p = {};
  p.tp = 2;
  p.dp = 3;
  check(p, 8, "must equal num_gpus = 8");
  p = {};
  p.zero_stage = 4;
  check(p, 0, "zero_stage = 4: must be 0, 1, 2 or 3");
  p = {};
  p.tp = 8;
  CHECK_NOTHROW(validate(p, m, s, 8, "flags"));
}

TEST_CASE("one default sequence length: 2048, or the model's positions when fewer") {
  CHECK(default_seq_len(load_model("gpt2")) == 1024);        // 1024 learned positions
  CHECK(default_seq_len(load_model("llama3-8b")) == 2048);   // 8192 positions
  CHECK(default_seq_len(load_model("llama3-405b")) == 2048); // 131072, never the default
  ModelSpec m = load_model("llama3-8b");
  m.max_seq_len = 0; // unknown
  CHECK(default_seq_len(m) == kDefaultSeqLen);
}

TEST_CASE("check_plan: each broken rule is one bit, and validate names each one") {
  const ModelSpec m = load_model("gpt2"); // 12 layers, 12 heads, ffn 3072, 1024 positions
  TrainingSetup s;
  s.seq_len = 1024;
  s.global_batch_size = 24;
  ParallelPlan p;
  CHECK(check_plan(p, m, s, 1).ok());
  p.tp = 5;
  p.pp = 24;
  p.interleave = 2;
  const PlanCheck c = check_plan(p, m, s, 0);
  CHECK(c.has(PlanRule::tp_heads));
  CHECK(c.has(PlanRule::tp_kv_heads));
  CHECK(c.has(PlanRule::tp_ffn)); // 3072 % 5 != 0
  CHECK(c.has(PlanRule::pp_layers));
  CHECK_FALSE(c.has(PlanRule::pp_interleave_layers)); // only when pp fits the layers
  CHECK_FALSE(c.has(PlanRule::num_gpus));             // num_gpus = 0: not checked
  // Groups evaluate only their rules.
  CHECK(check_plan(p, m, s, 0, kPipelineRules).failed ==
        (1u << static_cast<unsigned>(PlanRule::pp_layers)));
  try {
    validate(p, m, s, 0, "flags");
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("tp = 5: must divide num_heads = 12") != std::string::npos);
    CHECK(msg.find("tp = 5: must divide ffn_hidden_size = 3072") != std::string::npos);
    CHECK(msg.find("pp = 24: must not exceed num_layers = 12") != std::string::npos);
  }
  // Longer than the learned positions (issue 18, row 6: `plan` ranked such layouts).
  s.seq_len = 2048;
  CHECK(check_plan(ParallelPlan{}, m, s, 0).has(PlanRule::seq_positions));
  // Degrees out of range stop before any rule divides by them.
  p = {};
  p.cp = 0;
  CHECK(check_plan(p, m, s, 0).failed == (1u << static_cast<unsigned>(PlanRule::degree_range)));
  CHECK_THROWS_WITH_AS(validate(p, m, s, 0, "flags"), "flags: cp = 0: must be positive",
                       ConfigError);
}

TEST_CASE("activation offload: pp 1, fewer layers than the model's, not negative") {
  const auto m = load_model("llama3-8b"); // 32 layers
  TrainingSetup s;
  ParallelPlan p;
  p.dp = 8;
  s.offload_activation_layers = 31;
  CHECK(check_plan(p, m, s, 8).ok());
  s.offload_activation_layers = 32;
  CHECK(check_plan(p, m, s, 8).has(PlanRule::offload_layers));
  CHECK_THROWS_WITH_AS(validate(p, m, s, 8, "flags"),
                       doctest::Contains("offload_activation_layers = 32: must be below "
                                         "num_layers = 32"),
                       ConfigError);
  s.offload_activation_layers = 4;
  p.dp = 4;
  p.pp = 2;
  CHECK_THROWS_WITH_AS(validate(p, m, s, 8, "flags"),
                       doctest::Contains("offload_activation_layers = 4: needs pp = 1"),
                       ConfigError);
  s.offload_activation_layers = -1;
  CHECK_THROWS_WITH_AS(validate(s, "flags"),
                       doctest::Contains("offload_activation_layers = -1: must be in [0, "
                                         "num_layers)"),
                       ConfigError);
}

TEST_CASE("full recompute of some layers: needs full, at most the model's layers, per chunk") {
  const auto m = load_model("llama3-8b"); // 32 layers
  TrainingSetup s;
  ParallelPlan p;
  p.dp = 8;
  p.recompute = Recompute::full;
  s.recompute_layers = 32;
  CHECK(check_plan(p, m, s, 8).ok());
  CHECK(layers_recomputed(p, s, 32) == 32);
  s.recompute_layers = 12;
  CHECK(layers_recomputed(p, s, 32) == 12);
  s.recompute_layers = 0; // every layer
  CHECK(layers_recomputed(p, s, 32) == 32);
  // Megatron-Core counts per model chunk: an 8-layer stage of 2 chunks re-runs 2 x 3.
  p.dp = 2;
  p.pp = 4;
  p.interleave = 2;
  s.recompute_layers = 3;
  CHECK(layers_recomputed(p, s, 8) == 6);
  s.recompute_layers = 5;
  CHECK(layers_recomputed(p, s, 8) == 8);
  // Other policies run on every layer whatever the field says.
  p.recompute = Recompute::selective;
  CHECK(layers_recomputed(p, s, 8) == 8);
  CHECK(check_plan(p, m, s, 8).has(PlanRule::recompute_layers));
  CHECK_THROWS_WITH_AS(validate(p, m, s, 8, "flags"),
                       doctest::Contains("recompute_layers = 5: needs recompute = full"),
                       ConfigError);
  p.recompute = Recompute::full;
  s.recompute_layers = 33;
  CHECK_THROWS_WITH_AS(validate(p, m, s, 8, "flags"),
                       doctest::Contains("recompute_layers = 33: must not exceed num_layers = 32"),
                       ConfigError);
  s.recompute_layers = -2;
  CHECK_THROWS_WITH_AS(validate(s, "flags"),
                       doctest::Contains("recompute_layers = -2: must be in [0, num_layers]"),
                       ConfigError);
}

TEST_CASE("a Hugging Face config without model_type gets one message") {
  const auto j = parse_json_text(R"({"hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "vocab_size": 32000, "intermediate_size": 11008})",
                                 "config.json");
  CHECK_THROWS_WITH_AS(model_from_json(j, "config.json"),
                       "config.json: model_type: missing: a Hugging Face config.json (this file "
                       "has \"num_hidden_layers\") must name its architecture, e.g. "
                       "\"model_type\": \"llama\"; a project preset has name, source and "
                       "num_layers instead",
                       ConfigError);
}
