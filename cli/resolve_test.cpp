// Model overrides on the command line: every field derived from another is derived again after
// an override (head_dim from hidden / heads, the KV heads of multi-head attention), for every
// model preset, unless the derived field is given too.
#include <doctest/doctest.h>

#include "cli/resolve.hpp"
#include "common/errors.hpp"
#include "common/presets.hpp"
#include "model/count.hpp"
#include "model/load.hpp"

using namespace trainsim;
using namespace trainsim::cli;

TEST_CASE("overrides of hidden size and heads re-derive head_dim and MHA's KV heads, for every "
          "model preset") {
  int checked = 0;
  for (const auto& name : list_presets("models")) {
    CAPTURE(name);
    const model::ModelSpec base = model::load_model(name);
    const bool mla = base.attention_kind == model::AttentionKind::mla;
    const bool mha = base.num_kv_heads == base.num_heads;
    // Twice the heads at the same width, and twice the width with the same heads.
    ModelOptions heads;
    heads.model = name;
    heads.num_heads = 2 * base.num_heads;
    ModelOptions width;
    width.model = name;
    width.hidden_size = 2 * base.hidden_size;
    for (const ModelOptions* o : {&heads, &width}) {
      model::ModelSpec m;
      try {
        m = resolve_model(*o);
      } catch (const ConfigError&) {
        continue; // e.g. twice the heads no longer divided by the KV heads: refused, not wrong
      }
      if (!mla)
        CHECK(m.head_dim * m.num_heads == m.hidden_size);
      else
        CHECK(m.head_dim == base.head_dim); // MLA's head widths are its own fields
      if (mha)
        CHECK(m.num_kv_heads == m.num_heads);
      else
        CHECK(m.num_kv_heads == base.num_kv_heads);
      ++checked;
    }
  }
  CHECK(checked > 40);
}

TEST_CASE("a given head_dim or KV-head count wins over the derived one") {
  ModelOptions o;
  o.model = "gpt2";
  o.hidden_size = 4096;
  o.num_heads = 32;
  auto m = resolve_model(o);
  CHECK(m.head_dim == 128);
  CHECK(m.num_kv_heads == 32);
  // The attention is 4096 wide (32 x 128), as with --head-dim 128 given, not 2048 (32 x 64).
  ModelOptions given = o;
  given.head_dim = 128;
  CHECK(model::count_params(m).total == model::count_params(resolve_model(given)).total);
  o.head_dim = 64;
  o.num_kv_heads = 8;
  m = resolve_model(o);
  CHECK(m.head_dim == 64);
  CHECK(m.num_kv_heads == 8);
  ModelOptions llama;
  llama.model = "llama3-8b";
  llama.num_heads = 64;
  m = resolve_model(llama);
  CHECK(m.head_dim == 64);    // 4096 / 64, not 128 (an 8192-wide attention on a 4096 model)
  CHECK(m.num_kv_heads == 8); // GQA: the KV heads stay as given by the preset
  ModelOptions bad;
  bad.model = "llama3-8b";
  bad.num_heads = 48; // 4096 / 48 is not whole
  CHECK_THROWS_WITH_AS(resolve_model(bad), doctest::Contains("must divide the hidden size"),
                       ConfigError);
}
