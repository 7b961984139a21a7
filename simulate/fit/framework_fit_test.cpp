// Framework-run records and the framework fit: the fit/test split follows the declared rule,
// bad lines name file:line and the field, and the fit recovers a known parameter.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/errors.hpp"
#include "hardware/load.hpp"
#include "model/load.hpp"
#include "simulate/fit/framework_fit.hpp"
#include "simulate/memory.hpp"

using namespace trainsim;
using namespace trainsim::sim;
using namespace trainsim::fitting;

TEST_CASE("framework runs: the declared split alternates per framework in file order") {
  const std::string path = "framework_runs_split_test.jsonl";
  {
    std::ofstream f(path);
    for (int i = 0; i < 6; ++i)
      f << R"({"id": "r)" << i << R"(", "framework": ")" << (i % 3 == 0 ? "fsdp" : "pytorch")
        << R"(", "model": "cs336-small", "gpu": "h200", "num_gpus": 1, "precision": "bf16-mixed",)"
        << R"( "seq_len": 512, "micro_batch": 4, "measured": {"step_time_s": 0.05}})"
        << "\n";
  }
  const auto runs = read_framework_runs({path});
  std::remove(path.c_str());
  REQUIRE(runs.size() == 6);
  // fsdp: r0 fit, r3 test; pytorch: r1 fit, r2 test, r4 fit, r5 test.
  CHECK(runs[0].split == Split::fit);
  CHECK(runs[3].split == Split::test);
  CHECK(runs[1].split == Split::fit);
  CHECK(runs[2].split == Split::test);
  CHECK(runs[4].split == Split::fit);
  CHECK(runs[5].split == Split::test);
  for (const auto& r : runs)
    CHECK(r.skip_reason.empty());
}

TEST_CASE("framework runs: a failed OOM search keeps its configuration's side") {
  const std::string path = "framework_runs_oom_split_test.jsonl";
  auto pair = [](const std::string& config, int cap, int max_batch) {
    return R"({"id": ")" + config + "-cap" + std::to_string(cap) +
           R"(", "framework": "fsdp", "model": "cs336-small", "gpu": "h200", "num_gpus": 1,)" +
           R"( "precision": "bf16-mixed", "seq_len": 512, "micro_batch": 4,)" +
           R"( "memory_cap_bytes": )" + std::to_string(cap) + "e9," +
           R"( "measured": {"max_micro_batch": )" + std::to_string(max_batch) +
           R"(, "peak_allocated_bytes": 1e9, "peak_reserved_bytes": 1e9}})" + "\n";
  };
  {
    std::ofstream f(path);
    f << pair("oom-a", 24, 4) << pair("oom-a", 40, 8)
      << R"({"id": "oom-b", "framework": "fsdp", "model": "cs336-small", "oom_search": true,)"
      << R"( "error": "timeout"})"
      << "\n"
      << pair("oom-c", 24, 4) << pair("oom-d", 24, 4);
  }
  const auto runs = read_framework_runs({path});
  std::remove(path.c_str());
  REQUIRE(runs.size() == 5);
  CHECK(runs[0].split == Split::fit);
  CHECK(runs[1].split == Split::fit);
  CHECK(runs[2].split == Split::test); // the failed configuration
  CHECK_FALSE(runs[2].skip_reason.empty());
  CHECK(runs[3].split == Split::fit); // without the failed row counted this would be test
  CHECK(runs[4].split == Split::test);
}

TEST_CASE("framework runs: an OOM pair's peaks re-measured in a fresh process take precedence") {
  const auto run = parse_framework_run(
      nlohmann::json::parse(
          R"({"id": "oom-x-cap80", "framework": "fsdp", "model": "cs336-small", "gpu": "h200",)"
          R"( "num_gpus": 1, "precision": "bf16-mixed", "seq_len": 512, "micro_batch": 8,)"
          R"( "memory_cap_bytes": 80e9, "measured": {"max_micro_batch": 8,)"
          R"( "peak_allocated_bytes": 75e9, "peak_reserved_bytes": 76e9,)"
          R"( "fresh_peak_allocated_bytes": 71e9, "fresh_peak_reserved_bytes": 79e9}})"),
      "test");
  CHECK(run.peak_allocated_bytes == doctest::Approx(71e9));
  CHECK(run.peak_reserved_bytes == doctest::Approx(79e9));
  CHECK(run.max_micro_batch == 8);
  // A fresh re-run that itself ran out of memory: its peaks are a failed step's; the search's
  // own are kept.
  const auto failed = parse_framework_run(
      nlohmann::json::parse(
          R"({"id": "oom-x-cap80", "framework": "fsdp", "model": "cs336-small", "gpu": "h200",)"
          R"( "num_gpus": 1, "precision": "bf16-mixed", "seq_len": 512, "micro_batch": 8,)"
          R"( "memory_cap_bytes": 80e9, "measured": {"max_micro_batch": 8, "fresh_ok": false,)"
          R"( "peak_allocated_bytes": 75e9, "peak_reserved_bytes": 76e9,)"
          R"( "fresh_peak_allocated_bytes": 71e9, "fresh_peak_reserved_bytes": 79e9}})"),
      "test");
  CHECK(failed.peak_allocated_bytes == doctest::Approx(75e9));
  CHECK(failed.peak_reserved_bytes == doctest::Approx(76e9));
}

TEST_CASE("framework runs: a boundary re-measured in fresh processes takes precedence") {
  const auto run = parse_framework_run(
      nlohmann::json::parse(
          R"({"id": "oom-y-cap80", "framework": "fsdp", "model": "cs336-small", "gpu": "h200",)"
          R"( "num_gpus": 1, "precision": "bf16-mixed", "seq_len": 512, "micro_batch": 8,)"
          R"( "global_batch": 8, "memory_cap_bytes": 80e9, "measured": {"max_micro_batch": 8,)"
          R"( "peak_allocated_bytes": 70e9, "peak_reserved_bytes": 79e9, "fresh_ok": true,)"
          R"( "fresh_peak_allocated_bytes": 69e9, "fresh_peak_reserved_bytes": 78e9,)"
          R"( "fresh_max_micro_batch": 10, "fresh_boundary_peak_allocated_bytes": 74e9,)"
          R"( "fresh_boundary_peak_reserved_bytes": 79.5e9}})"),
      "row");
  CHECK(run.max_micro_batch == 10);
  CHECK(run.searched_max_micro_batch == 8);
  CHECK(run.setup.micro_batch_size == 10); // the peaks are compared at the fresh boundary
  CHECK_FALSE(run.loop_boundary);
  CHECK(run.setup.global_batch_size == 10);
  CHECK(run.peak_allocated_bytes == 74e9);
  CHECK(run.peak_reserved_bytes == 79.5e9);
  CHECK_THROWS_WITH_AS(
      (void)parse_framework_run(
          nlohmann::json::parse(R"({"id": "z", "framework": "fsdp", "model": "cs336-small",)"
                                R"( "measured": {"max_micro_batch": 8,)"
                                R"( "fresh_max_micro_batch": 9.5}})"),
          "row"),
      doctest::Contains("measured.fresh_max_micro_batch: expected an integer"), ConfigError);
}

TEST_CASE("framework runs: further passes merge by id into the geometric mean") {
  const std::string first = "framework_runs_pass1_test.jsonl",
                    second = "framework_runs_pass2_test.jsonl";
  auto row = [](const char* id, double step) {
    return std::string(R"({"id": ")") + id +
           R"(", "framework": "fsdp", "model": "cs336-small", "gpu": "h200", "num_gpus": 1,)"
           R"( "precision": "bf16-mixed", "seq_len": 512, "micro_batch": 4, "measured": {"step_time_s": )" +
           std::to_string(step) + "}}\n";
  };
  {
    std::ofstream f(first);
    f << row("a", 0.1) << row("b", 0.2);
    std::ofstream g(second);
    g << row("b", 0.8);
  }
  auto runs = read_framework_runs({first});
  merge_repeat_runs(runs, {second});
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].step_time_s == doctest::Approx(0.1));
  CHECK(runs[0].time_passes == 1);
  CHECK(runs[1].step_time_s == doctest::Approx(0.4)); // sqrt(0.2 x 0.8)
  CHECK(runs[1].time_passes == 2);
  CHECK(runs[1].split == Split::test); // the side stays the first pass's
  {
    std::ofstream g(second);
    g << row("b", 0.8) << row("c", 0.3);
  }
  runs = read_framework_runs({first});
  CHECK_THROWS_WITH_AS(
      merge_repeat_runs(runs, {second}),
      doctest::Contains("framework_runs_pass2_test.jsonl:2: run 'c' repeats no run"), ConfigError);
  std::remove(first.c_str());
  std::remove(second.c_str());
}

TEST_CASE("framework runs: bad lines name file:line and the field") {
  const std::string path = "framework_runs_bad_test.jsonl";
  {
    std::ofstream f(path);
    f << R"({"id": "a", "framework": "pytorch", "model": "cs336-small"})"
      << "\n";
  }
  CHECK_THROWS_WITH_AS((void)read_framework_runs({path}),
                       doctest::Contains("framework_runs_bad_test.jsonl:1: measured: missing"),
                       ConfigError);
  std::remove(path.c_str());
  // A known field of the wrong type is named, never read as absent.
  for (const auto& [line, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"id": "a", "framework": "fsdp", "model": "cs336-small", "seq_len": "512",)"
            R"( "measured": {"step_time_s": 0.1}})",
            "seq_len: expected an integer, got \"512\""},
           {R"({"id": "a", "framework": "fsdp", "model": "cs336-small", "seq_len": 512,)"
            R"( "measured": {"peak_allocated_bytes": "abc"}})",
            "measured.peak_allocated_bytes: expected a number"},
           {R"({"id": "a", "framework": "fsdp", "model": "cs336-small", "oom_search": "yes",)"
            R"( "error": "timeout"})",
            "oom_search: expected true or false"}}) {
    CAPTURE(line);
    CHECK_THROWS_WITH_AS((void)parse_framework_run(nlohmann::json::parse(line), "row"),
                         doctest::Contains(message.c_str()), ConfigError);
  }
}

namespace {
// A one-GPU H200 eager run of model m at micro-batch b x 512 tokens, its step time made by
// `truth` itself (fit tests recover truth's constants from such runs).
FrameworkRun synthetic_run(const char* m, std::int64_t b, model::Recompute rc,
                           const FrameworkProfile& truth) {
  FrameworkRun r;
  r.id = m;
  r.framework = "pytorch";
  r.model = model::load_model(m);
  r.gpu = hw::load_gpu("h200");
  r.cluster = hw::single_node_cluster(r.gpu, 1);
  r.profile = hw::default_profile("h200");
  r.plan.recompute = rc;
  r.setup.micro_batch_size = b;
  r.setup.global_batch_size = b;
  r.setup.seq_len = 512;
  r.step_time_s = predict_run(r, truth).step_time_s;
  return r;
}
} // namespace

TEST_CASE("fit recovers the host cost per kernel that generated the runs") {
  // Runs made by the model itself with a known host cost: the fit must find it again.
  FrameworkProfile truth = load_framework("pytorch");
  truth.host_s_per_kernel = 31e-6;
  truth.host_s_per_checkpoint = 0;
  std::vector<FrameworkRun> runs;
  for (const char* m : {"cs336-small", "cs336-medium", "cs336-large"})
    for (std::int64_t b : {2, 8})
      runs.push_back(synthetic_run(m, b, model::Recompute::none, truth));
  FrameworkProfile start = truth;
  start.host_s_per_kernel = 10e-6;
  FitOptions o;
  o.host_per_kernel = true;
  const auto fit = fit_framework(start, runs, o, "synthetic");
  CHECK(fit.profile.host_s_per_kernel == doctest::Approx(31e-6).epsilon(1e-3));
  CHECK(fit.profile.fit.time_sigma_fraction < 1e-3);
  CHECK(fit.profile.fit.time_runs == 6);
  CHECK(fit.profile.fit.time_sigma_leave_one_out);

  // The band's sigma is out of sample: one run 20% slower than the model says. In sample the
  // fit spreads that over all six; left out, the other five fit the truth exactly and the
  // outlier's own residual is -1/6 of its measurement, so the leave-one-out RMS is at least
  // (1/6)/sqrt(6), and more than the in-sample RMS.
  runs[3].step_time_s *= 1.2;
  const auto noisy = fit_framework(start, runs, o, "synthetic");
  CHECK(noisy.profile.fit.time_sigma_fraction >= (0.2 / 1.2) / std::sqrt(6.0) * 0.999);
  double in2 = 0;
  for (const auto& r : runs) {
    const double e = time_error(r, predict_run(r, noisy.profile));
    in2 += e * e;
  }
  CHECK(std::sqrt(in2 / 6) < noisy.profile.fit.time_sigma_fraction);
  // A profile file says which sigma it holds.
  const auto j = framework_to_json(noisy.profile);
  CHECK(j["fit"]["time_sigma_method"] == "leave-one-out");
  CHECK(framework_from_json(j, "x.json").fit.time_sigma_leave_one_out);
}

TEST_CASE("fit recovers per-op checkpointing's dispatch cost beside the host cost per kernel") {
  // Runs made by the model with known costs, some with per-op checkpointing: the fit finds
  // both, and only runs with that policy say anything about the second.
  FrameworkProfile truth = load_framework("pytorch");
  truth.host_s_per_kernel = 31e-6;
  truth.host_s_per_checkpoint = 1e-3;
  truth.host_s_per_sac_kernel = 60e-6;
  std::vector<FrameworkRun> runs;
  for (const char* m : {"cs336-small", "cs336-medium", "cs336-large"})
    for (auto rc : {model::Recompute::none, model::Recompute::full, model::Recompute::selective_op})
      runs.push_back(synthetic_run(m, 4, rc, truth));
  const FitOptions o = default_fit_options(truth, runs);
  CHECK(o.host_per_sac_kernel);
  FrameworkProfile start = truth;
  start.host_s_per_kernel = 10e-6;
  start.host_s_per_sac_kernel = 0;
  const auto fit = fit_framework(start, runs, o, "synthetic");
  CHECK(fit.profile.host_s_per_sac_kernel == doctest::Approx(60e-6).epsilon(1e-2));
  CHECK(fit.profile.host_s_per_kernel == doctest::Approx(31e-6).epsilon(1e-2));
  // Without such runs the option stays off and the cost is not touched.
  std::vector<FrameworkRun> plain;
  for (const auto& r : runs)
    if (r.plan.recompute != model::Recompute::selective_op)
      plain.push_back(r);
  CHECK_FALSE(default_fit_options(truth, plain).host_per_sac_kernel);
}

TEST_CASE("the hidden share of TP communication is fitted alone on overlapped fit rows") {
  // Rows made by the model with a known share (0.3): two-GPU tensor-parallel runs with
  // overlap. The fit finds the share, keeps every other constant and the residuals, and skips
  // rows without overlap, with context parallelism, or on the test side.
  FrameworkProfile truth = load_framework("fsdp");
  truth.tp_overlap_hidden_fraction = 0.3;
  auto row = [&](const char* m, bool overlap, std::int64_t cp, Split side) {
    FrameworkRun r;
    r.id = m;
    r.framework = "fsdp";
    r.split = side;
    r.model = model::load_model(m);
    r.gpu = hw::load_gpu("h200");
    r.cluster = hw::single_node_cluster(r.gpu, 2 * cp);
    r.profile = hw::default_profile("h200");
    r.plan.tp = 2;
    r.plan.cp = cp;
    r.plan.sequence_parallel = true;
    r.tp_overlap = overlap;
    r.setup.micro_batch_size = 8;
    r.setup.global_batch_size = 8;
    r.setup.seq_len = 1024;
    r.step_time_s = predict_run(r, truth).step_time_s;
    return r;
  };
  std::vector<FrameworkRun> runs{row("cs336-large", true, 1, Split::fit),
                                 row("cs336-xl", true, 1, Split::fit)};
  FrameworkProfile start = truth;
  start.tp_overlap_hidden_fraction = 1;
  // Rows the fit must not use: measured 2x slower than the truth says.
  for (auto r :
       {row("cs336-medium", false, 1, Split::fit), row("cs336-medium", true, 2, Split::fit),
        row("cs336-medium", true, 1, Split::test)}) {
    r.step_time_s *= 2;
    runs.push_back(r);
  }
  const auto fit = fit_tp_overlap_hidden(start, runs);
  CHECK(fit.rows == 2);
  CHECK(fit.profile.tp_overlap_hidden_fraction == doctest::Approx(0.3));
  CHECK(fit.mape < 1e-3);
  CHECK(fit.profile.host_s_per_kernel == start.host_s_per_kernel);
  CHECK(fit.profile.fit.time_sigma_fraction == start.fit.time_sigma_fraction);
  // No overlapped fit row: a clear error, not a silent value.
  const std::vector<FrameworkRun> none{runs[2], runs[4]};
  CHECK_THROWS_WITH_AS(fit_tp_overlap_hidden(start, none),
                       doctest::Contains("overlaps tensor-parallel communication"), ConfigError);
}

TEST_CASE("a run under torch.compile pays no per-op checkpointing dispatch") {
  // torchtitan's rows say whether torch.compile ran (other.torch_compile): compiled, the
  // per-op policy is traced into the graph and the eager dispatch mode's cost is left out.
  auto row = [](bool compile) {
    return nlohmann::json::parse(
        std::string(R"({"id": "t", "framework": "fsdp", "model": "cs336-small", "gpu": "h200",)"
                    R"( "num_gpus": 1, "precision": "bf16-mixed", "seq_len": 512,)"
                    R"( "micro_batch": 4, "recompute": "selective op",)"
                    R"( "other": {"torch_compile": )") +
        (compile ? "true" : "false") + R"(}, "measured": {"step_time_s": 0.1}})");
  };
  const FrameworkRun eager = parse_framework_run(row(false), "row");
  const FrameworkRun traced = parse_framework_run(row(true), "row");
  CHECK_FALSE(eager.compiled);
  CHECK(traced.compiled);
  REQUIRE(traced.skip_reason.empty());
  FrameworkProfile fw = load_framework("fsdp");
  fw.host_s_per_sac_kernel = 100e-6;
  FrameworkProfile without = fw;
  without.host_s_per_sac_kernel = 0;
  CHECK(predict_run(traced, fw).step_time_s < predict_run(eager, fw).step_time_s);
  CHECK(predict_run(traced, fw).step_time_s ==
        doctest::Approx(predict_run(eager, without).step_time_s));
}

TEST_CASE("a run whose loss is compiled keeps the compiled loss chain's memory") {
  // torchtitan since April 2025 compiles its cross-entropy under training.compile
  // (other.compiled_loss): the eager chain's 12 B per logit becomes the compiled one's 2 B.
  auto row = [](bool compiled_loss) {
    return nlohmann::json::parse(
        std::string(R"({"id": "t", "framework": "fsdp", "model": "cs336-small", "gpu": "h200",)"
                    R"( "num_gpus": 1, "precision": "bf16-mixed", "seq_len": 512,)"
                    R"( "micro_batch": 64, "recompute": "full",)"
                    R"( "other": {"torch_compile": true, "compiled_loss": )") +
        (compiled_loss ? "true" : "false") + R"(}, "measured": {"step_time_s": 0.1}})");
  };
  const FrameworkRun eager_loss = parse_framework_run(row(false), "row");
  const FrameworkRun compiled_loss = parse_framework_run(row(true), "row");
  CHECK_FALSE(eager_loss.compiled_loss);
  REQUIRE(compiled_loss.compiled_loss);
  const FrameworkProfile fw = load_framework("fsdp");
  REQUIRE(fw.logits_peak_bytes_per_elem == 12);
  FrameworkProfile two = fw;
  two.logits_peak_bytes_per_elem = load_framework("pytorch-compile").logits_peak_bytes_per_elem;
  REQUIRE(two.logits_peak_bytes_per_elem == 2);
  CHECK(predict_run(compiled_loss, fw).peak_allocated_bytes <
        predict_run(eager_loss, fw).peak_allocated_bytes);
  CHECK(predict_run(compiled_loss, fw).peak_allocated_bytes ==
        doctest::Approx(predict_run(eager_loss, two).peak_allocated_bytes));
}

TEST_CASE("a GEMM scale per GPU: runs of two GPUs whose rates differ get one scale each") {
  // Runs made by the model with GEMMs 20% slower on the B200 than on the H100: the shared
  // scale must come out at the H100's (the GPU with most rows) and the B200's own at 0.8.
  FrameworkProfile truth = load_framework("megatron");
  truth.gemm_efficiency_scale = 0.9;
  truth.gpu_gemm_efficiency_scale = {{"b200", 0.8}};
  std::vector<FrameworkRun> runs;
  auto add = [&](const char* gpu, const char* m, std::int64_t b) {
    FrameworkRun r;
    r.id = std::string(gpu) + m;
    r.framework = "megatron";
    r.model = model::load_model(m);
    r.gpu = hw::load_gpu(gpu);
    r.cluster = hw::single_node_cluster(r.gpu, 1);
    r.profile = hw::default_profile(gpu);
    r.setup.micro_batch_size = b;
    r.setup.global_batch_size = b;
    r.setup.seq_len = 2048;
    r.step_time_s = predict_run(r, truth).step_time_s;
    runs.push_back(r);
  };
  for (const char* m : {"cs336-large", "cs336-xl", "cs336-2.7b", "llama3.2-1b"})
    add("h100-sxm", m, 8);
  for (const char* m : {"cs336-large", "cs336-xl", "cs336-2.7b"})
    add("b200", m, 8);
  FrameworkProfile start = truth;
  start.gemm_efficiency_scale = 0.7;
  start.gpu_gemm_efficiency_scale.clear();
  FitOptions o;
  o.gemm_efficiency = true;
  o.gemm_efficiency_per_gpu = true;
  const auto fit = fit_framework(start, runs, o, "synthetic");
  CHECK(fit.profile.gemm_efficiency_scale == doctest::Approx(0.9).epsilon(0.01));
  REQUIRE(fit.profile.gpu_gemm_efficiency_scale.count("b200") == 1);
  CHECK(fit.profile.gpu_gemm_efficiency_scale.at("b200") == doctest::Approx(0.8).epsilon(0.01));
  CHECK(fit.profile.gpu_gemm_efficiency_scale.count("h100-sxm") == 0);
  // With fewer than 3 rows of its own a GPU shares the scale.
  runs.pop_back();
  const auto few = fit_framework(start, runs, o, "synthetic");
  CHECK(few.profile.gpu_gemm_efficiency_scale.empty());
}

TEST_CASE("fuzz: mutated run records are read, or refused naming the file and line") {
  const std::string dir = std::string(TRAINSIM_SOURCE_DIR) + "/validate/";
  std::vector<std::string> lines;
  for (const char* f : {"results/runs-2026-12-02/runs-d.jsonl",
                        "results/runs-2026-12-02/oom-b.jsonl", "published/data/nvidia-nemo.jsonl",
                        "results/runs-2026-12-04/partial-recompute/runs-k.jsonl",
                        "results/runs-2026-12-04/recompute-boundary/recompute-boundary.jsonl"}) {
    std::ifstream in(dir + f);
    REQUIRE(in);
    for (std::string l; std::getline(in, l);)
      if (!l.empty())
        lines.push_back(l);
  }
  { // Megatron-Bridge rows carry the `other` fields the reader checks (ga, overlaps, offload)
    std::ifstream in(dir + "published/data/nvidia-megatron-bridge.jsonl");
    REQUIRE(in);
    int taken = 0;
    for (std::string l; taken < 12 && std::getline(in, l);)
      if (l.find("\"ga\"") != std::string::npos && l.find("moe_routing") == std::string::npos) {
        lines.push_back(l);
        ++taken;
      }
    REQUIRE(taken == 12);
  }
  REQUIRE(lines.size() >= 20);
  std::mt19937_64 rng(2026);
  const std::vector<nlohmann::json> values = {nullptr, "x",  -1,   0,  1,   2.5,
                                              1e9,     true, "7b", {}, {1}, -0.0};
  const std::string path = "framework_runs_fuzz_test.jsonl";
  int read = 0, refused = 0;
  for (const auto& line : lines) {
    for (int i = 0; i < 20; ++i) {
      nlohmann::json j = nlohmann::json::parse(line);
      nlohmann::json* target = &j;
      if (j.contains("measured") && j["measured"].is_object() && rng() % 2 == 0)
        target = &j["measured"];
      else if (j.contains("other") && j["other"].is_object() && rng() % 2 == 0)
        target = &j["other"];
      std::vector<std::string> keys;
      for (const auto& [k, v] : target->items())
        keys.push_back(k);
      if (keys.empty())
        continue;
      const std::string key = keys[rng() % keys.size()];
      if (rng() % 5 == 0)
        target->erase(key);
      else
        (*target)[key] = values[rng() % values.size()];
      {
        std::ofstream f(path);
        f << j.dump() << "\n";
      }
      CAPTURE(j.dump());
      try {
        for (const auto& run : read_framework_runs({path})) {
          if (!run.skip_reason.empty())
            continue;
          sim::FrameworkProfile fw;
          try {
            fw = sim::load_framework(run.framework);
          } catch (const ConfigError& e) { // a mutated framework name: no such preset
            CHECK(std::string(e.what()).find("unknown framework") != std::string::npos);
            continue;
          }
          const auto p = predict_run(run, fw);
          CHECK(std::isfinite(p.step_time_s));
          CHECK(p.step_time_s > 0);
        }
        ++read;
      } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find(path + ":1") != std::string::npos);
        ++refused;
      }
    }
  }
  std::remove(path.c_str());
  CHECK(read > 0);
  CHECK(refused > 0);
  MESSAGE("mutated records: " << read << " read, " << refused << " refused");
}

TEST_CASE("framework runs: torchtitan's local batch with pipeline stages sets the global batch") {
  // Table 6 style: TP 8 x PP 8 on 512 GPUs (dp 8), local batch 8 cut into micro-batches of 1,
  // no global batch printed: 8 x 8 = 64 sequences per step, not one micro-batch per replica.
  const auto run = parse_framework_run(
      nlohmann::json::parse(
          R"({"id": "tt-405b", "framework": "fsdp", "model": "llama3.1-405b", "gpu": "h100-sxm",)"
          R"( "num_gpus": 512, "precision": "fp8", "seq_len": 32768, "tp": 8, "pp": 8, "cp": 1,)"
          R"( "fsdp": true, "recompute": "full", "other": {"local_batch_size": 8},)"
          R"( "measured": {"tokens_per_s_per_gpu": 76}})"),
      "test");
  CHECK(run.skip_reason.empty());
  CHECK(run.setup.micro_batch_size == 1);
  CHECK(run.setup.global_batch_size == 64);
}

TEST_CASE("framework runs: a row whose GA column contradicts its layout says so") {
  // 64 GPUs at pp 4: dp 16; global batch 512 at micro-batch 4 is 8 micro-batches per step.
  auto row = [](const char* ga) {
    return nlohmann::json::parse(
        std::string(R"({"id": "ga", "framework": "megatron", "model": "llama3-8b",)"
                    R"( "gpu": "h100-sxm", "num_gpus": 64, "precision": "bf16", "seq_len": 4096,)"
                    R"( "global_batch": 512, "micro_batch": 4, "tp": 1, "pp": 4, "cp": 1,)"
                    R"( "other": {"ga": )") +
        ga + R"(}, "measured": {"tokens_per_s_per_gpu": 1000}})");
  };
  const auto on = parse_framework_run(row("8"), "r");
  INFO(on.skip_reason);
  CHECK(on.skip_reason.empty());
  CHECK(on.notes.empty());
  const auto off = parse_framework_run(row("2"), "r");
  CHECK(off.skip_reason.empty());
  REQUIRE(off.notes.size() == 1);
  CHECK(off.notes[0].find("GA column (2)") != std::string::npos);
  CHECK(off.notes[0].find("= 8 micro-batches per step") != std::string::npos);
  CHECK(off.setup.global_batch_size == 512); // predicted from the layout
  CHECK_THROWS_WITH_AS((void)parse_framework_run(row("2.5"), "r"),
                       doctest::Contains("other.ga must be a whole number >= 1"), ConfigError);
}

TEST_CASE("framework runs: a row's moe_a2a_overlap runs combined 1F1B, checked by its rules") {
  auto row = [](const char* overlap, const char* layout) {
    return nlohmann::json::parse(
        std::string(R"({"id": "moe", "framework": "megatron", "model": "mixtral-8x7b",)"
                    R"( "gpu": "h100-sxm", "num_gpus": 16, "precision": "bf16", "seq_len": 4096,)"
                    R"( "global_batch": 64, "micro_batch": 1, )") +
        layout + R"(, "other": {"moe_a2a_overlap": )" + overlap +
        R"(}, "measured": {"tokens_per_s_per_gpu": 1000}})");
  };
  const auto on = parse_framework_run(row("true", R"("tp": 1, "pp": 1, "ep": 8)"), "r");
  CHECK(on.skip_reason.empty());
  CHECK(on.ep_overlap);
  const auto off = parse_framework_run(row("false", R"("tp": 1, "pp": 1, "ep": 8)"), "r");
  CHECK_FALSE(off.ep_overlap);
  const FrameworkProfile fw = load_framework("megatron");
  const auto a = predict_run(on, fw), b = predict_run(off, fw);
  CHECK(a.step.ep_overlap);
  CHECK(a.step.ep_hidden_s > 0);
  CHECK(a.step_time_s == doctest::Approx(b.step_time_s - a.step.ep_hidden_s).epsilon(1e-9));
  CHECK_THROWS_WITH_AS((void)parse_framework_run(row("\"yes\"", R"("ep": 8)"), "r"),
                       doctest::Contains("other.moe_a2a_overlap must be true or false"),
                       ConfigError);
  CHECK_THROWS_WITH_AS((void)parse_framework_run(row("true", R"("pp": 2, "ep": 8)"), "r"),
                       doctest::Contains("other.moe_a2a_overlap: needs the interleaved schedule"),
                       ConfigError);
}

TEST_CASE("framework runs: a row's tp_comm_overlap hides its TP collectives, checked") {
  auto row = [](const char* overlap, int tp) {
    return nlohmann::json::parse(
        std::string(R"({"id": "ub", "framework": "megatron", "model": "llama3-70b",)"
                    R"( "gpu": "h100-sxm", "num_gpus": 64, "precision": "fp8", "seq_len": 8192,)"
                    R"( "global_batch": 128, "micro_batch": 1, "pp": 8, "vp": 5, "tp": )") +
        std::to_string(tp) + R"(, "other": {"tp_comm_overlap": )" + overlap +
        R"(}, "measured": {"tokens_per_s_per_gpu": 1000}})");
  };
  const auto on = parse_framework_run(row("true", 4), "r");
  const auto off = parse_framework_run(row("false", 4), "r");
  REQUIRE(on.skip_reason.empty());
  CHECK(on.tp_overlap);
  CHECK_FALSE(off.tp_overlap);
  const FrameworkProfile fw = load_framework("megatron");
  const auto a = predict_run(on, fw), b = predict_run(off, fw);
  CHECK(b.step.breakdown_s.tp_comm > 0);
  CHECK(a.step.breakdown_s.tp_comm < b.step.breakdown_s.tp_comm);
  CHECK(a.step_time_s < b.step_time_s);
  CHECK_THROWS_WITH_AS((void)parse_framework_run(row("1", 4), "r"),
                       doctest::Contains("other.tp_comm_overlap must be true or false"),
                       ConfigError);
  CHECK_THROWS_WITH_AS((void)parse_framework_run(row("true", 1), "r"),
                       doctest::Contains("other.tp_comm_overlap: needs tensor parallelism"),
                       ConfigError);
}

TEST_CASE("framework runs: a row's cpu_offloading_num_layers moves activations to the host") {
  auto row = [](const char* framework, const char* layers) {
    return nlohmann::json::parse(
        std::string(R"({"id": "off", "framework": ")") + framework +
        R"(", "model": "llama3-8b", "gpu": "h100-sxm", "num_gpus": 8, "precision": "bf16",)"
        R"( "seq_len": 8192, "global_batch": 16, "micro_batch": 2, "fsdp": true,)"
        R"( "other": {"cpu_offloading_num_layers": )" +
        layers + R"(}, "measured": {"tokens_per_s_per_gpu": 1000}})");
  };
  const auto on = parse_framework_run(row("megatron", "8"), "r");
  REQUIRE(on.skip_reason.empty());
  CHECK(on.setup.offload_activation_layers == 8);
  const auto off = parse_framework_run(row("megatron", "0"), "r");
  const FrameworkProfile fw = load_framework("megatron");
  const auto a = predict_run(on, fw), b = predict_run(off, fw);
  CHECK(a.step.memory.host_activation_bytes > 0);
  CHECK(a.peak_allocated_bytes < b.peak_allocated_bytes);
  CHECK_THROWS_WITH_AS((void)parse_framework_run(row("megatron", "\"8\""), "r"),
                       doctest::Contains("other.cpu_offloading_num_layers must be a whole number"),
                       ConfigError);
  CHECK_THROWS_WITH_AS((void)parse_framework_run(row("fsdp", "8"), "r"),
                       doctest::Contains("Megatron-Core's option; the row's framework is 'fsdp'"),
                       ConfigError);
}

TEST_CASE("framework runs: torchtitan's layer checkpointing and recompute_layers") {
  auto row = [](const std::string& extra) {
    return nlohmann::json::parse(
        R"({"id": "ac", "framework": "fsdp", "model": "llama3-8b", "gpu": "a100-80g", "num_gpus": 8,)"
        R"( "precision": "bf16", "seq_len": 8192, "global_batch": 8, "fsdp": true, )" +
        extra + R"(, "measured": {"tokens_per_s_per_gpu": 1000}})");
  };
  // "selective layer": torchtitan wraps every second block (num_layers / 2 of 32).
  const auto layer = parse_framework_run(row(R"("recompute": "selective layer")"), "r");
  CAPTURE(layer.skip_reason);
  REQUIRE(layer.skip_reason.empty());
  CHECK(layer.plan.recompute == model::Recompute::full);
  CHECK(layer.setup.recompute_layers == 16);
  // With stages, the blocks a rank holds: 8 of a 4-stage pipeline's chunk, half of them.
  const auto staged = parse_framework_run(
      row(R"("recompute": "selective layer", "pp": 4, "tp": 2, "micro_batch": 1)"), "r");
  CHECK(staged.setup.recompute_layers == 4);
  const auto some = parse_framework_run(row(R"("recompute": "full", "recompute_layers": 4)"), "r");
  CHECK(some.setup.recompute_layers == 4);
  const auto all = parse_framework_run(row(R"("recompute": "full")"), "r");
  const auto none = parse_framework_run(row(R"("recompute": "none")"), "r");
  const FrameworkProfile fw = load_framework("fsdp");
  const auto t_all = predict_run(all, fw), t_layer = predict_run(layer, fw),
             t_none = predict_run(none, fw);
  CHECK(t_layer.step_time_s < t_all.step_time_s);
  CHECK(t_layer.step_time_s > t_none.step_time_s);
  CHECK(t_layer.peak_allocated_bytes > t_all.peak_allocated_bytes);
  CHECK(t_layer.peak_allocated_bytes < t_none.peak_allocated_bytes);
  for (const auto& [extra, message] : std::vector<std::pair<std::string, std::string>>{
           {R"("recompute": "full", "recompute_layers": 33)",
            "recompute_layers must be a whole number in [1, num_layers = 32], got 33"},
           {R"("recompute": "full", "recompute_layers": 0)", "got 0"},
           {R"("recompute": "none", "recompute_layers": 4)",
            "recompute_layers needs recompute \"full\""},
           {R"("recompute": "full", "recompute_layers": "4")",
            "recompute_layers: expected an integer"}}) {
    CAPTURE(extra);
    CHECK_THROWS_WITH_AS((void)parse_framework_run(row(extra), "r"),
                         doctest::Contains(message.c_str()), ConfigError);
  }
}

TEST_CASE("framework runs: Megatron-Core's recompute_modules") {
  auto row = [](const std::string& framework, const std::string& extra) {
    return nlohmann::json::parse(
        R"({"id": "rm", "framework": ")" + framework +
        R"(", "model": "mixtral-8x7b", "gpu": "h100-sxm", "num_gpus": 8, "ep": 8,)"
        R"( "precision": "bf16", "seq_len": 4096, "global_batch": 16, "micro_batch": 1, )" +
        extra + R"(, "measured": {"tokens_per_s_per_gpu": 1000}})");
  };
  const auto act = parse_framework_run(
      row("megatron", R"("recompute": "selective", "recompute_modules": ["core_attn", "moe_act"])"),
      "r");
  CAPTURE(act.skip_reason);
  REQUIRE(act.skip_reason.empty());
  CHECK(act.setup.recompute_modules == (model::kRecomputeCoreAttn | model::kRecomputeMoeAct));
  const auto core = parse_framework_run(row("megatron", R"("recompute": "selective")"), "r");
  CHECK(core.setup.recompute_modules == model::kRecomputeCoreAttn);
  const FrameworkProfile fw = load_framework("megatron");
  CHECK(predict_run(act, fw).peak_allocated_bytes < predict_run(core, fw).peak_allocated_bytes);
  for (const auto& [framework, extra, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"megatron", R"("recompute": "full", "recompute_modules": ["moe_act"])",
            "recompute_modules needs recompute \"selective\""},
           {"megatron", R"("recompute": "selective", "recompute_modules": ["moe_acts"])",
            "'moe_acts': unknown module"},
           {"megatron", R"("recompute": "selective", "recompute_modules": "moe_act")",
            "must be a non-empty list"},
           {"megatron", R"("recompute": "selective", "recompute_modules": [])",
            "must be a non-empty list"},
           {"fsdp", R"("recompute": "selective", "recompute_modules": ["moe_act"])",
            "framework \"fsdp\" has none"}}) {
    CAPTURE(extra);
    CHECK_THROWS_WITH_AS((void)parse_framework_run(row(framework, extra), "r"),
                         doctest::Contains(message.c_str()), ConfigError);
  }
}

TEST_CASE("framework runs: a row's own split overrides the file's alternating order") {
  const std::string dir = std::string(TRAINSIM_SOURCE_DIR) + "/validate/results/runs-2026-12-04/";
  const auto runs = read_framework_runs({dir + "oom-d.jsonl"});
  REQUIRE(runs.size() == 9);
  for (const auto& r : runs)
    CHECK(r.split == Split::fit); // declared all fit; the positional rule would alternate
  const std::string path =
      (std::filesystem::temp_directory_path() / "trainsim-split-test.jsonl").string();
  {
    std::ofstream f(path);
    f << R"({"id": "a", "framework": "pytorch", "model": "cs336-small", "gpu": "h200",)"
         R"( "num_gpus": 1, "precision": "bf16-mixed", "seq_len": 512, "micro_batch": 4,)"
         R"( "split": "later", "measured": {"step_time_s": 0.1}})"
      << "\n";
  }
  CHECK_THROWS_WITH_AS((void)read_framework_runs({path}),
                       doctest::Contains(":1: split must be \"fit\" or \"test\""), ConfigError);
  std::remove(path.c_str());
}

TEST_CASE("framework runs: Megatron-Bridge rows reduce gradients in bf16 unless they say") {
  auto row = [](const char* source, const char* other) {
    return nlohmann::json::parse(
        std::string(R"({"id": "r", "framework": "megatron", "model": "llama3-8b", "gpu":)"
                    R"( "h100-sxm", "num_gpus": 8, "precision": "fp8", "seq_len": 8192,)"
                    R"( "global_batch": 128, "micro_batch": 1, "source": ")") +
        source + R"(", "other": )" + other + R"(, "measured": {"tokens_per_s_per_gpu": 1}})");
  };
  CHECK(parse_framework_run(row("NVIDIA-NeMo/Megatron-Bridge:docs/x.md", "{}"), "r")
            .setup.grad_reduce_bytes == 2);
  CHECK(parse_framework_run(row("NVIDIA/NeMo:docs/x.md", "{}"), "r").setup.grad_reduce_bytes == 0);
  CHECK(parse_framework_run(
            row("NVIDIA-NeMo/Megatron-Bridge:docs/x.md", R"({"grad_reduce_in_fp32": true})"), "r")
            .setup.grad_reduce_bytes == 4);
  CHECK_THROWS_WITH_AS(
      (void)parse_framework_run(row("NVIDIA/NeMo", R"({"grad_reduce_in_fp32": 1})"), "r"),
      doctest::Contains("other.grad_reduce_in_fp32 must be true or false"), ConfigError);
}

TEST_CASE("framework runs: a row's own cluster wins over its GPU's usual machine") {
  auto row = [](const char* cluster) {
    return nlohmann::json::parse(
        std::string(R"({"id": "tt-8b", "framework": "fsdp", "model": "llama3.1-8b", "gpu": "h100",)"
                    R"( "cluster": ")") +
        cluster +
        R"(", "num_gpus": 16, "precision": "fp8", "seq_len": 8192, "tp": 1, "pp": 1,)"
        R"( "fsdp": true, "recompute": "full", "other": {"local_batch_size": 1},)"
        R"( "measured": {"tokens_per_s_per_gpu": 5000}})");
  };
  const auto run = parse_framework_run(row("grand-teton-h100"), "test");
  REQUIRE(run.skip_reason.empty());
  CHECK(run.gpu.name == "h100-hbm2e-500w");
  CHECK(run.gpu.memory_bytes == doctest::Approx(96e9));
  CHECK(run.cluster.num_nodes == 2);
  const auto unknown = parse_framework_run(row("no-such-cluster"), "test");
  CHECK(unknown.skip_reason.find("cluster 'no-such-cluster'") != std::string::npos);
}

TEST_CASE("multi-GPU residuals: the fit rows on more than one GPU, in sample") {
  // Three rows: one on one GPU (left out), two on 8 GPUs whose measured step times are the
  // prediction x 1.1 and x 0.8: errors -9.09% and +25%, RMS 18.8%, dof 2 - 1.
  const FrameworkProfile fw = load_framework("fsdp");
  auto row = [](const char* id, int gpus, double step) {
    return nlohmann::json::parse(fmt::format(
        R"({{"id": "{}", "framework": "fsdp", "model": "cs336-small", "gpu": "h200",)"
        R"( "num_gpus": {}, "precision": "bf16-mixed", "seq_len": 512, "micro_batch": 4,)"
        R"( "fsdp": true, "recompute": "none", "measured": {{"step_time_s": {}}}}})",
        id, gpus, step));
  };
  std::vector<FrameworkRun> runs;
  runs.push_back(parse_framework_run(row("one", 1, 1.0), "r"));
  runs.push_back(parse_framework_run(row("a", 8, 1.0), "r"));
  runs.push_back(parse_framework_run(row("b", 8, 1.0), "r"));
  for (auto& r : runs) {
    REQUIRE(r.skip_reason.empty());
    r.split = Split::fit;
  }
  const double predicted = predict_run(runs[1], fw).step_time_s;
  runs[1].step_time_s = predicted * 1.1;
  runs[2].step_time_s = predicted * 0.8;
  const FitResiduals res = multi_gpu_residuals(fw, runs, 1, "test rows");
  CHECK(res.time_runs == 2);
  CHECK(res.time_dof() == 1);
  const double e1 = 1 / 1.1 - 1, e2 = 1 / 0.8 - 1;
  CHECK(res.time_sigma_fraction == doctest::Approx(std::sqrt((e1 * e1 + e2 * e2) / 2)));
  CHECK(res.fitted_on == "test rows");
  runs[1].split = runs[2].split = Split::test; // the test half never sets a band
  CHECK(multi_gpu_residuals(fw, runs, 1, "").time_runs == 0);
}

TEST_CASE("the OOM boundary compare scores is the one trainsim memory gives under the cap") {
  // A user's-loop boundary (measured.loop_max_micro_batch) takes precedence over the probes'
  // fresh boundary; the peaks stay those of the probes' largest batch.
  auto row = nlohmann::json::parse(
      R"({"id": "oom-l-cap24", "framework": "pytorch", "model": "cs336-medium", "gpu": "h200",)"
      R"( "num_gpus": 1, "precision": "bf16-mixed", "seq_len": 1024, "micro_batch": 4,)"
      R"( "global_batch": 4, "attention": "naive", "memory_cap_bytes": 24e9,)"
      R"( "measured": {"max_micro_batch": 4, "peak_allocated_bytes": 20e9,)"
      R"( "peak_reserved_bytes": 23e9, "fresh_max_micro_batch": 5,)"
      R"( "fresh_boundary_peak_allocated_bytes": 21e9, "fresh_boundary_peak_reserved_bytes": 23.5e9,)"
      R"( "loop_max_micro_batch": 3}})");
  const auto run = parse_framework_run(row, "row");
  CHECK(run.max_micro_batch == 3);
  CHECK(run.loop_boundary);
  CHECK(run.searched_max_micro_batch == 5);
  CHECK(run.boundary_peaks);
  CHECK(run.setup.micro_batch_size == 5); // the peaks were measured at the probes' boundary
  CHECK(run.peak_reserved_bytes == 23.5e9);
  const auto fw = std::make_shared<const trainsim::sim::FrameworkProfile>(
      trainsim::sim::load_framework("pytorch"));
  // What `trainsim memory --gpu h200 --allocator-cap-gb 24 ...` computes: four steps of the
  // loop, the cache kept, reserved bytes under the cap.
  trainsim::sim::MemoryOptions mo;
  mo.framework = fw;
  mo.allocator_cap_bytes = 24e9;
  model::TrainingSetup s = run.setup;
  const std::int64_t memory_says =
      trainsim::sim::max_micro_batch(run.model, run.plan, s, run.profile, run.gpu.memory_bytes, mo);
  CHECK(memory_says > 0);
  CHECK(trainsim::fitting::predict_run(run, *fw).max_micro_batch == memory_says);
  // A boundary measured by the recorded probes is scored against the same answer: one answer,
  // whatever protocol measured it.
  row["measured"].erase("loop_max_micro_batch");
  const auto probes = parse_framework_run(row, "row");
  CHECK_FALSE(probes.loop_boundary);
  CHECK(trainsim::fitting::predict_run(probes, *fw).max_micro_batch == memory_says);
}

TEST_CASE("framework runs: a recompute boundary is read, checked and predicted under its cap") {
  auto row = [](const std::string& recompute, const std::string& answer) {
    return nlohmann::json::parse(
        R"({"id": "rcb", "framework": "pytorch", "model": "cs336-xl", "gpu": "h200", )"
        R"("num_gpus": 1, "precision": "bf16-mixed", "seq_len": 1024, "micro_batch": 16, )"
        R"("attention": "flash", "memory_cap_bytes": 78.75e9, )" +
        recompute + R"(, "measured": {"min_recompute_layers": )" + answer + "}}");
  };
  const auto r =
      parse_framework_run(row(R"("recompute": "full", "recompute_layers": 22)", "22"), "r");
  CAPTURE(r.skip_reason);
  REQUIRE(r.skip_reason.empty());
  CHECK(r.recompute_boundary);
  CHECK(r.min_recompute_layers == 22);
  CHECK_FALSE(r.is_oom_search());
  const FrameworkProfile fw = load_framework("pytorch");
  const auto p = predict_run(r, fw);
  // The cap lies between the step without recompute and with every layer, so the answer is
  // strictly inside; it is the least n whose predicted step fits, as `trainsim memory` says.
  REQUIRE(p.min_recompute_layers > 0);
  REQUIRE(p.min_recompute_layers < 48);
  // The memory band's range: more room (sigma less needed) asks no more layers, less room no
  // fewer; with a band of some percent it spans more than one answer here.
  CHECK(p.min_recompute_layers_low <= p.min_recompute_layers);
  CHECK(p.min_recompute_layers_high >= p.min_recompute_layers);
  CHECK(p.min_recompute_layers_low < p.min_recompute_layers_high);
  CHECK(p.peak_reserved_bytes > 0);
  CHECK(p.step_time_s > 0);
  {
    sim::MemoryOptions mo;
    mo.framework = std::make_shared<const FrameworkProfile>(fw);
    mo.allocator_cap_bytes = r.memory_cap_bytes;
    model::ParallelPlan plan = r.plan;
    model::TrainingSetup s = r.setup;
    plan.recompute = model::Recompute::full;
    s.recompute_layers = p.min_recompute_layers;
    CHECK(estimate_memory(r.model, plan, s, r.profile, mo).peak_reserved() <= r.memory_cap_bytes);
    s.recompute_layers = p.min_recompute_layers - 1;
    CHECK(estimate_memory(r.model, plan, s, r.profile, mo).peak_reserved() > r.memory_cap_bytes);
  }
  // 0: the answer's probe ran without recompute; -1: nothing ran, so no peaks to compare.
  const auto zero = parse_framework_run(row(R"("recompute": "none")", "0"), "r");
  CHECK(zero.min_recompute_layers == 0);
  const auto never = parse_framework_run(row(R"("recompute": "full")", "-1"), "r");
  CHECK(std::isnan(memory_error(never, predict_run(never, fw))));
  for (const auto& [rc, answer, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {R"("recompute": "full")", "49", "min_recompute_layers must be -1"},
           {R"("recompute": "full")", "-2", "at most num_layers = 48, got -2"},
           {R"("recompute": "full", "recompute_layers": 21)", "22",
            "min_recompute_layers = 22 needs recompute \"full\" with recompute_layers = 22"},
           {R"("recompute": "full")", "0", "needs recompute \"none\""},
           {R"("recompute": "none")", "5", "needs recompute \"full\""},
           {R"("recompute": "full")", "\"5\"", "min_recompute_layers: expected an integer"}}) {
    CAPTURE(answer);
    CHECK_THROWS_WITH_AS((void)parse_framework_run(row(rc, answer), "r"),
                         doctest::Contains(message.c_str()), ConfigError);
  }
  // Never fitted on: on their own these rows give a fit nothing to move.
  {
    auto fit_row = r;
    fit_row.split = Split::fit;
    fit_row.peak_allocated_bytes = 70e9;
    fit_row.peak_reserved_bytes = 78e9;
    fit_row.setup.precision = model::Precision::fp32; // would also ask for the fp32 factor
    const FitOptions o = default_fit_options(fw, {fit_row});
    CHECK_FALSE(o.activation_factor);
    CHECK_FALSE(o.activation_factor_fp32);
    CHECK_FALSE(o.allocator_overhead);
  }
  auto no_cap = row(R"("recompute": "full", "recompute_layers": 22)", "22");
  no_cap.erase("memory_cap_bytes");
  CHECK_THROWS_WITH_AS((void)parse_framework_run(no_cap, "r"),
                       doctest::Contains("needs memory_cap_bytes > 0"), ConfigError);
  auto both = row(R"("recompute": "full", "recompute_layers": 22)", "22");
  both["measured"]["max_micro_batch"] = 16;
  CHECK_THROWS_WITH_AS((void)parse_framework_run(both, "r"),
                       doctest::Contains("either a recompute boundary or an OOM boundary"),
                       ConfigError);
}
