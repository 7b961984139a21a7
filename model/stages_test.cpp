// Uneven pipeline stages: the split helpers (Megatron-LM's first/last counts, the balanced
// split, the "7,8x14,7" notation) and validate()'s rules for ParallelPlan::stage_layers.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "common/errors.hpp"
#include "model/load.hpp"
#include "model/spec.hpp"

using namespace trainsim;
using namespace trainsim::model;

namespace {
std::vector<std::int64_t> llama3_405b_split() { // 7, 8 x 14, 7 = 126 layers on 16 stages
  std::vector<std::int64_t> s(16, 8);
  s.front() = s.back() = 7;
  return s;
}

// Every split of Megatron's pattern (a, b x (pp - 2), c) within the minimum counts, ranked by
// (slowest stage, more layers in the middle, slower of the two ends, lighter first stage): what
// the bisection in balanced_stage_layers() must find.
std::vector<std::int64_t> exhaustive_balanced(std::int64_t layers, std::int64_t pp, std::int64_t v,
                                              double layer, double first, double last) {
  const std::int64_t min_end = min_layers_on_stage(pp, v, 0);
  const std::int64_t min_mid = pp > 2 ? min_layers_on_stage(pp, v, 1) : 0;
  double best = std::numeric_limits<double>::infinity(), best_ends = best;
  std::int64_t ba = -1, bb = -1, bc = -1;
  const std::int64_t max_b = pp > 2 ? layers : 0;
  for (std::int64_t b = min_mid; b <= max_b; ++b)
    for (std::int64_t a = min_end; a <= layers; ++a) {
      const std::int64_t c = layers - (pp - 2) * b - a;
      if (c < min_end)
        continue;
      const double ends =
          std::max(static_cast<double>(a) * layer + first, static_cast<double>(c) * layer + last);
      const double slowest = pp > 2 ? std::max(ends, static_cast<double>(b) * layer) : ends;
      if (slowest < best ||
          (slowest == best &&
           (b > bb || (b == bb && (ends < best_ends || (ends == best_ends && a < ba)))))) {
        best = slowest;
        best_ends = ends;
        ba = a;
        bb = b;
        bc = c;
      }
    }
  if (ba < 0)
    return {};
  std::vector<std::int64_t> out(static_cast<std::size_t>(pp), bb);
  out.front() = ba;
  out.back() = bc;
  return out;
}
} // namespace

TEST_CASE("stage counts print as runs: 7,8x14,7") {
  CHECK(format_stage_layers(llama3_405b_split()) == "7,8x14,7");
  CHECK(format_stage_layers({5}) == "5");
  CHECK(format_stage_layers({3, 3}) == "3x2");
  CHECK(format_stage_layers({}).empty());
}

TEST_CASE("Megatron-LM's first/last stage counts: the middle stages split the rest evenly") {
  std::vector<std::int64_t> out;
  // Llama 3 405B: 126 - 7 - 7 = 112 layers over 14 middle stages = 8 each.
  REQUIRE(first_last_stage_layers(126, 16, 7, 7, out));
  CHECK(out == llama3_405b_split());
  // Only the first given: 126 - 6 = 120 over the other 15 stages = 8 each.
  REQUIRE(first_last_stage_layers(126, 16, 6, -1, out));
  CHECK(out.front() == 6);
  CHECK(std::count(out.begin(), out.end(), 8) == 15);
  // 126 - 5 = 121 does not divide over 15 stages; neither does 126 over 16.
  CHECK_FALSE(first_last_stage_layers(126, 16, 5, -1, out));
  CHECK_FALSE(first_last_stage_layers(126, 16, -1, -1, out));
  // Two stages, both given: they must add up (no middle to take the rest).
  CHECK(first_last_stage_layers(126, 2, 63, 63, out));
  CHECK_FALSE(first_last_stage_layers(126, 2, 60, 60, out));
  // One stage has no first/last distinction; a middle count of 0 is no split.
  CHECK_FALSE(first_last_stage_layers(126, 1, 126, -1, out));
  CHECK_FALSE(first_last_stage_layers(14, 16, 1, 13, out));
}

TEST_CASE("balanced split: hand-computed cases") {
  std::vector<std::int64_t> out;
  // Counts alone (layer cost 1, no extras), 126 layers on 16 stages: middle b = 8 leaves 14
  // for the ends, 7 each: slowest 8. b = 7 leaves 28 (14 each); b = 9 leaves nothing.
  REQUIRE(balanced_stage_layers(126, 16, 1, 1, 0, 0, out));
  CHECK(out == llama3_405b_split());
  // With an LM head of 0.66 layer on the last stage: b = 8, ends 14: a = 7 gives
  // max(7, 7 + 0.66) = 7.66 < 8: the same 7,8x14,7 (Llama 3's layout).
  REQUIRE(balanced_stage_layers(126, 16, 1, 1, 0.01, 0.66, out));
  CHECK(out == llama3_405b_split());
  // A head of 3 layers, 128 layers on 8 stages (even: the last takes 16 + 3 = 19):
  // b = 17 leaves 26: a = 14, c = 12 -> max(14, 12 + 3) = 15 < 17, slowest 17;
  // b = 16 leaves 32 -> ends max(17, 15 + 3) = 18; b = 18 is slower itself.
  REQUIRE(balanced_stage_layers(128, 8, 1, 1, 0, 3, out));
  CHECK(out == std::vector<std::int64_t>{14, 17, 17, 17, 17, 17, 17, 12});
  // Divisible and no extras: the even split.
  REQUIRE(balanced_stage_layers(128, 16, 1, 1, 0, 0, out));
  CHECK(out == std::vector<std::int64_t>(16, 8));
  // Interleave 8: middle stages need 8 (one layer per chunk), the ends 7 (Llama 3's
  // embedding-only and head-only chunks): 7 + 14 x 8 + 7 = 126 is the only split.
  REQUIRE(balanced_stage_layers(126, 16, 8, 1, 0, 0, out));
  CHECK(out == llama3_405b_split());
  CHECK_FALSE(balanced_stage_layers(125, 16, 8, 1, 0, 0, out));
  CHECK_FALSE(balanced_stage_layers(10, 16, 1, 1, 0, 0, out)); // fewer layers than stages
  REQUIRE(balanced_stage_layers(126, 1, 1, 1, 5, 5, out));
  CHECK(out == std::vector<std::int64_t>{126});
}

TEST_CASE("balanced split: the bisection finds the exhaustive optimum and its tie order") {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> cost(0.0, 6.0);
  std::uniform_int_distribution<int> small(0, 4);
  int checked = 0;
  for (std::int64_t pp = 2; pp <= 9; ++pp)
    for (std::int64_t v = 1; v <= 3; ++v)
      for (std::int64_t layers = pp; layers <= 70; layers += 3)
        for (int trial = 0; trial < 4; ++trial) {
          // Integer costs make exact ties; real ones the general case.
          const bool ties = trial < 2;
          const double first = ties ? small(rng) : cost(rng);
          const double last = ties ? small(rng) : cost(rng);
          CAPTURE(layers);
          CAPTURE(pp);
          CAPTURE(v);
          CAPTURE(first);
          CAPTURE(last);
          std::vector<std::int64_t> got;
          const auto want = exhaustive_balanced(layers, pp, v, 1.0, first, last);
          CHECK(balanced_stage_layers(layers, pp, v, 1.0, first, last, got) == !want.empty());
          CHECK(format_stage_layers(got) == format_stage_layers(want));
          ++checked;
        }
  CHECK(checked > 1000);
}

TEST_CASE("stage_layers validation") {
  const ModelSpec m = load_model("llama3-405b");
  TrainingSetup s;
  s.seq_len = 8192;
  ParallelPlan p;
  p.tp = 8;
  p.pp = 16;
  p.dp = 64;
  auto fails = [&](const ParallelPlan& plan, const char* needle) {
    CHECK_THROWS_WITH_AS(validate(plan, m, s, 8192, "flags"), doctest::Contains(needle),
                         ConfigError);
  };
  SUBCASE("no split: 126 layers do not divide over 16 stages; the message says how") {
    fails(p, "pp x interleave = 16 x 1: must divide num_layers = 126, or give the layers of "
             "each stage (stage_layers, e.g. 7,8x14,7: flags --pp-layers, or "
             "--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers)");
  }
  SUBCASE("Llama 3's split is valid, also with 8 chunks per stage") {
    p.stage_layers = llama3_405b_split();
    CHECK_NOTHROW(validate(p, m, s, 8192, "flags"));
    p.interleave = 8;
    CHECK_NOTHROW(validate(p, m, s, 8192, "flags"));
    p.interleave = 9; // middle stages need 9 layers, the ends 8
    fails(p, "stage_layers[0] = 7, stage_layers[1] = 8, stage_layers[2] = 8, stage_layers[3] = 8 "
             "and 12 more: with interleave = 9 a stage needs a layer per model chunk, at least 9 "
             "(8 on the first and the last stage");
  }
  SUBCASE("count, sum and minimum") {
    p.stage_layers = {7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7};
    fails(p, "stage_layers = 7,8x13,7: has 15 entries, must have one per pipeline stage (pp = 16)");
    p.stage_layers = llama3_405b_split();
    p.stage_layers.back() = 6;
    fails(p, "stage_layers = 7,8x14,6: sum to 125, must sum to num_layers = 126");
    p.stage_layers = llama3_405b_split();
    p.stage_layers.front() = 0;
    p.stage_layers.back() = 14;
    fails(p, "stage_layers[0] = 0: every stage needs at least 1 layer");
  }
  SUBCASE("an explicit even split is a split like any other") {
    const ModelSpec m8 = load_model("llama3-8b");
    ParallelPlan q;
    q.pp = 4;
    q.dp = 2;
    q.stage_layers = {8, 8, 8, 8};
    CHECK_NOTHROW(validate(q, m8, s, 8, "flags"));
  }
}

TEST_CASE("minimum layers per stage under interleaving") {
  CHECK(min_layers_on_stage(16, 1, 0) == 1);
  CHECK(min_layers_on_stage(16, 8, 0) == 7);  // first chunk: embedding only
  CHECK(min_layers_on_stage(16, 8, 5) == 8);  // a layer per chunk
  CHECK(min_layers_on_stage(16, 8, 15) == 7); // last chunk: head and loss only
  CHECK(min_layers_on_stage(4, 2, 0) == 1);
}
