// Property test of the whole command line, in-process: random valid-ish invocations of every
// CPU command (mostly sensible values, some out of range, NaN, garbage) through run_cli, and
// for each: no crash, no hang (> 5 s; a plan search 30 s), exit code 0 or 1 (2 = internal error),
// an error message when it fails, no NaN or infinity in the output, no negative time, MFU and HFU
// at most 1 (above it only in fp32 with the note that says why, sim::kMfuAbovePeakNote).
//
//   cli_property [--runs N] [--seed S] [--verbose]   (defaults: 3000 runs, seed 18)
//   TRAINSIM_PROPERTY_RUNS=1000000 cli_property      (the long run; see cli/README.md)
//
// A failure prints the invocation (copy-paste runnable) and exits 1; a crash or a hang prints
// it from the signal handler or the watchdog.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "cli/app.hpp"
#include "common/json_io.hpp"
#include "common/json_mutate.hpp"
#include "common/presets.hpp"
#include "simulate/roofline.hpp"

#ifndef TRAINSIM_SOURCE_DIR
#define TRAINSIM_SOURCE_DIR "."
#endif

namespace {

using Args = std::vector<std::string>;

// ---- the invocation in flight, for the crash handler and the watchdog --------------------
char g_current[8192];
std::atomic<long long> g_started_ms{0}; // 0: no run in flight
int g_stderr = 2;                       // the real stderr while runs are redirected
constexpr long long kHangMs = 5000;
// A plan search with a framework that simulates the caching allocator runs the allocator model
// over every feasible candidate's step (docs/plan.md): a 70B search on 64 GPUs takes ~7 s on
// one thread. Still finite: a hang is 30 s there.
constexpr long long kPlanHangMs = 30000;
std::atomic<long long> g_limit_ms{kHangMs};

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void write_all(int fd, const char* s) {
  for (std::size_t n = std::strlen(s); n > 0;) {
    const ssize_t w = ::write(fd, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

extern "C" void on_crash(int sig) {
  write_all(g_stderr, "\nproperty test: CRASH (signal ");
  write_all(g_stderr, sig == SIGSEGV ? "SIGSEGV" : sig == SIGABRT ? "SIGABRT" : "other");
  write_all(g_stderr, ") in: trainsim ");
  write_all(g_stderr, g_current);
  write_all(g_stderr, "\n");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void watchdog() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const long long t0 = g_started_ms.load();
    if (t0 != 0 && now_ms() - t0 > g_limit_ms.load()) {
      write_all(g_stderr, g_limit_ms.load() == kHangMs
                              ? "\nproperty test: HANG (> 5 s) in: trainsim "
                              : "\nproperty test: HANG (> 30 s) in: trainsim ");
      write_all(g_stderr, g_current);
      write_all(g_stderr, "\n");
      std::_Exit(1);
    }
  }
}

// ---- running one invocation with stdout and stderr captured ----------------------------
struct Result {
  int rc = 0;
  std::string out, err;
  double seconds = 0;
};

std::string slurp(int fd) {
  std::string text;
  ::lseek(fd, 0, SEEK_SET);
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  return text;
}

std::string quoted(const Args& args) {
  std::string s;
  for (const auto& a : args) {
    const bool plain =
        !a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()[]{}!#~") == std::string::npos;
    s += (s.empty() ? "" : " ") + (plain ? a : "'" + a + "'");
  }
  return s;
}

Result run(const Args& args, const std::string& tmp) {
  std::vector<const char*> argv{"trainsim"};
  for (const auto& a : args)
    argv.push_back(a.c_str());
  const std::string line = quoted(args);
  std::snprintf(g_current, sizeof g_current, "%s", line.c_str());
  const int out_fd = ::open((tmp + "/out").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  const int err_fd = ::open((tmp + "/err").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  Result r;
  const auto t0 = std::chrono::steady_clock::now();
  g_limit_ms = !args.empty() && args.front() == "plan" ? kPlanHangMs : kHangMs;
  g_started_ms = now_ms();
  r.rc = trainsim::cli::run_cli(static_cast<int>(argv.size()), argv.data());
  g_started_ms = 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fflush(stdout);
  std::fflush(stderr);
  std::cout.flush();
  std::cerr.flush();
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  ::close(saved_out);
  ::close(saved_err);
  r.out = slurp(out_fd);
  r.err = slurp(err_fd);
  ::close(out_fd);
  ::close(err_fd);
  return r;
}

// ---- the checks ------------------------------------------------------------------------
// Keys of JSON output that are durations (seconds, days) or utilisations.
bool is_time_key(const std::string& k) {
  return k.ends_with("_s") || k == "seconds" || k == "days" || k.starts_with("days_") ||
         k == "forward" || k == "backward" || k == "recompute" || k == "bubble" ||
         k == "optimizer" || k.ends_with("_comm");
}

void check_json(const nlohmann::json& j, const std::string& path, const std::string& key,
                double mfu_ceiling, std::vector<std::string>& problems) {
  if (j.is_number()) {
    const double v = j.get<double>();
    if (!std::isfinite(v))
      problems.push_back(fmt::format("{} is not finite", path));
    if (is_time_key(key) && v < 0)
      problems.push_back(fmt::format("{} = {}: a negative time", path, v));
    if ((key == "mfu" || key == "hfu") && !(v >= 0 && v <= mfu_ceiling))
      problems.push_back(fmt::format("{} = {}: utilisation outside [0, {}]", path, v, mfu_ceiling));
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items())
      check_json(v, path + "." + k, k, mfu_ceiling, problems);
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i)
      check_json(j[i], fmt::format("{}[{}]", path, i), key, mfu_ceiling, problems);
  }
}

std::vector<std::string> check(const Args& args, const Result& r) {
  std::vector<std::string> problems;
  // Exit 3 (a check failed) is an answer of the commands that compare against a limit.
  const bool has_limits = args[0] == "validate-published" || args[0] == "compare";
  if (r.rc != 0 && r.rc != 1 && !(r.rc == 3 && has_limits))
    problems.push_back(fmt::format("exit code {} (2 is an internal error)", r.rc));
  if (r.rc != 0 && r.err.find_first_not_of(" \n") == std::string::npos)
    problems.push_back(fmt::format("exit code {} without a message", r.rc));
  if (r.rc == 0) {
    // NaN or infinity in any format: fmt prints "nan", "inf", "-nan"; JSON would print null.
    // (presets echo free text from the files, e.g. "Infinity Fabric": their numbers are checked
    // in JSON only.)
    static const std::regex non_finite(R"((^|[^A-Za-z_])-?(nan|inf)([^A-Za-z_]|$))",
                                       std::regex::icase);
    if (args[0] != "presets" && std::regex_search(r.out, non_finite))
      problems.push_back("NaN or infinity in the output");
    // MFU above 100% is an answer only in fp32 and only with the note that says why
    // (sim::kMfuAbovePeakNote); even then under 12x: 2 for the whole attention square times the
    // 3xTF32 rate over the fp32 peak (tf32 / 3 / fp32), under 6 on every GPU preset.
    const bool fp32 = std::find(args.begin(), args.end(), "fp32") != args.end();
    const bool noted = r.out.find(trainsim::sim::kMfuAbovePeakNote) != std::string::npos;
    const double mfu_ceiling = fp32 && noted ? 12.0 : 1.0;
    if (noted && !fp32)
      problems.push_back("the note on an MFU above 100% outside fp32");
    static const std::regex mfu(R"(MFU (-?[0-9.]+)%)");
    for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), mfu);
         it != std::sregex_iterator(); ++it)
      if (std::stod((*it)[1]) > 100.0 * mfu_ceiling || std::stod((*it)[1]) < 0)
        problems.push_back(fmt::format("MFU {}% in the table", (*it)[1].str()));
    if (std::find(args.begin(), args.end(), "json") != args.end()) {
      try {
        const auto j = nlohmann::json::parse(r.out);
        if (r.out.find("null") != std::string::npos)
          problems.push_back("null in JSON output (a NaN?)");
        check_json(j, "$", "", mfu_ceiling, problems);
      } catch (const nlohmann::json::parse_error& e) {
        problems.push_back(fmt::format("--format json output is not JSON: {}", e.what()));
      }
    }
  }
  return problems;
}

// ---- random invocations ----------------------------------------------------------------
class Gen {
 public:
  explicit Gen(std::uint64_t seed) : rng_(seed), models_(trainsim::list_presets("models")) {}

  Args next() {
    Args a;
    switch (pick_index(12)) {
    case 0: model(a); break;
    case 1: time(a); break;
    case 2: memory(a); break;
    case 3:
    case 4: estimate(a); break;
    case 5: plan(a); break;
    case 6: sweep(a); break;
    case 7: roofline(a); break;
    case 8: collective(a); break;
    case 9: presets(a); break;
    case 10: train_step(a); break;
    default: rare(a); break;
    }
    format(a);
    return a;
  }

 private:
  std::mt19937_64 rng_;
  std::vector<std::string> models_; // every model preset

  std::size_t pick_index(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  std::string pick(std::initializer_list<const char*> v) {
    return *(v.begin() + static_cast<std::ptrdiff_t>(pick_index(v.size())));
  }
  // A value that is usually sensible and sometimes hostile (out of range, NaN, garbage).
  std::string value(std::initializer_list<const char*> sensible) {
    if (chance(0.04))
      return pick({"-1", "0", "nan", "inf", "-inf", "1e308", "-1e308", "1e-300", "abc", "",
                   "9223372036854775807", "1e999", "0x10", "2.5"});
    return pick(sensible);
  }
  void opt(Args& a, const char* flag, std::initializer_list<const char*> sensible, double p = 0.5) {
    if (chance(p)) {
      a.push_back(flag);
      a.push_back(value(sensible));
    }
  }
  void flag(Args& a, const char* name, double p = 0.2) {
    if (chance(p))
      a.push_back(name);
  }

  std::string model_name() {
    if (chance(0.5)) // the common ones more often
      return pick({"gpt2", "llama3-8b", "llama2-7b", "mixtral-8x7b", "cs336-small", "llama3-70b",
                   "nonexistent-model"});
    return models_[pick_index(models_.size())];
  }
  std::string gpu_name() {
    return pick({"h100-sxm", "h100-pcie", "h200", "a100-80g", "a100-40g", "b200", "mi300x", "v100",
                 "rtx-2080", "rtx-4090", "gb200"});
  }
  void model_flags(Args& a) {
    a.push_back("--model");
    a.push_back(model_name());
    if (chance(0.1)) {
      a.push_back(pick({"--num-layers", "--hidden-size", "--num-heads", "--num-kv-heads",
                        "--ffn-hidden-size", "--vocab-size", "--max-seq-len"}));
      a.push_back(value({"1", "2", "8", "12", "32", "64", "96", "1024", "4096", "50257"}));
    }
  }
  void machine(Args& a, const char* gpus_default_range = "small") {
    if (chance(0.35)) {
      a.push_back("--cluster");
      a.push_back(pick({"dgx-h100", "dgx-a100", "dgx-h200", "dgx-b200", "gb200-nvl72"}));
    } else {
      a.push_back("--gpu");
      a.push_back(gpu_name());
    }
    if (std::string(gpus_default_range) == "small")
      opt(a, "--num-gpus", {"1", "2", "4", "8", "16", "32", "64", "3", "12"}, 0.7);
    else
      opt(a, "--num-gpus", {"8", "64", "256", "1024", "2048", "3072", "16384"}, 0.7);
    opt(a, "--gpu-memory-gb", {"16", "40", "80", "141", "1000"}, 0.05);
    if (chance(0.05)) {
      a.push_back("--calibration");
      a.push_back(pick({"h200", "default", "a100-80g", "h200-datasheet", "h200-x2-nvlink"}));
    }
  }
  void setup(Args& a) {
    opt(a, "--seq-len", {"128", "512", "1024", "2048", "4096", "8192", "1000", "32768"}, 0.6);
    opt(a, "--micro-batch", {"1", "2", "4", "8", "3"}, 0.4);
    opt(a, "--global-batch", {"8", "16", "64", "256", "1024", "12", "0"}, 0.5);
    opt(a, "--precision", {"bf16-mixed", "fp16-mixed", "fp32", "bf16", "fp8", "fp8-cs", "mxfp8"},
        0.3);
    opt(a, "--attention", {"flash", "naive"}, 0.3);
    opt(a, "--optimizer", {"adamw", "sgd"}, 0.1);
  }
  void layout(Args& a) {
    opt(a, "--tp", {"1", "2", "4", "8", "3"}, 0.5);
    opt(a, "--pp", {"1", "2", "4", "8", "3"}, 0.4);
    opt(a, "--dp", {"1", "2", "4", "8"}, 0.1);
    opt(a, "--cp", {"1", "2", "4"}, 0.15);
    opt(a, "--ep", {"1", "2", "4", "8"}, 0.05);
    opt(a, "--zero", {"0", "1", "2", "3"}, 0.4);
    opt(a, "--interleave", {"1", "2", "4"}, 0.1);
    opt(a, "--recompute", {"none", "selective", "full"}, 0.3);
    flag(a, "--sequence-parallel");
    opt(a, "--pp-layers", {"7,8x14,7", "16,16", "8x4", "1,31", "0,32"}, 0.05);
    opt(a, "--decoder-first-pipeline-num-layers", {"1", "4", "7"}, 0.03);
    opt(a, "--decoder-last-pipeline-num-layers", {"1", "4", "7"}, 0.03);
    opt(a, "--moe-capacity-factor", {"0", "1", "1.25", "2"}, 0.05);
    opt(a, "--moe-imbalance", {"1", "1.5", "4"}, 0.05);
  }
  // A layout that usually fits together: num-gpus = tp x pp x cp x dp, a global batch that
  // is a multiple of micro-batch x dp, on one node of --gpu GPUs (so that the cost model runs,
  // not only the checks in front of it).
  void consistent(Args& a) {
    const std::string tp = pick({"1", "2", "4", "8"}), pp = pick({"1", "1", "2", "4"}),
                      cp = pick({"1", "1", "1", "2"}), dp = pick({"1", "2", "4", "8", "16"}),
                      mb = pick({"1", "2", "4"}), k = pick({"1", "2", "4"});
    const long n = std::stol(tp) * std::stol(pp) * std::stol(cp) * std::stol(dp);
    a.insert(a.end(), {"--gpu", gpu_name(), "--num-gpus", std::to_string(n), "--tp", tp, "--pp", pp,
                       "--cp", cp, "--micro-batch", mb, "--global-batch",
                       std::to_string(std::stol(mb) * std::stol(dp) * std::stol(k))});
    opt(a, "--zero", {"0", "1", "2", "3"}, 0.5);
    opt(a, "--recompute", {"none", "selective", "full"}, 0.4);
    opt(a, "--seq-len", {"512", "1024", "2048", "4096"}, 0.5);
    opt(a, "--precision", {"bf16-mixed", "fp16-mixed", "fp32", "bf16", "fp8", "fp8-cs", "mxfp8"},
        0.3);
    opt(a, "--attention", {"flash", "naive"}, 0.3);
    if (pp != "1")
      opt(a, "--interleave", {"1", "2"}, 0.2);
    if (tp != "1")
      flag(a, "--sequence-parallel", 0.3);
  }
  // A model and, most of the time, a consistent layout; else everything drawn independently.
  // Returns whether the layout was drawn consistent.
  bool job(Args& a, const char* gpus_range) {
    model_flags(a);
    if (chance(0.7)) {
      consistent(a);
      return true;
    }
    machine(a, gpus_range);
    layout(a);
    setup(a);
    return false;
  }
  void step_flags(Args& a) {
    opt(a, "--framework",
        {"megatron", "deepspeed", "fsdp", "pytorch", "pytorch-compile", "trainsim", "colour"},
        0.15);
    opt(a, "--bucket-mb", {"1", "25", "100", "0.5", "1000"}, 0.15);
    flag(a, "--no-dp-overlap", 0.1);
    flag(a, "--tp-overlap", 0.1);
    flag(a, "--ep-overlap", 0.1);
    opt(a, "--grad-reduce-dtype", {"framework", "fp32", "bf16", "fp16"}, 0.1);
    opt(a, "--offload-activation-layers", {"0", "1", "4", "31", "500", "-2", "x"}, 0.1);
    opt(a, "--dp-algorithm", {"auto", "ring", "tree"}, 0.1);
    opt(a, "--torch-compile", {"none", "blocks", "blocks+loss", "always"}, 0.1);
  }
  void format(Args& a) {
    const auto known = {"model", "time",     "memory",     "estimate",  "plan",
                        "sweep", "roofline", "collective", "train-step"};
    if (a.empty() || std::find(known.begin(), known.end(), a[0]) == known.end() ||
        std::find(a.begin(), a.end(), "--help") != a.end())
      return;
    const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    a.push_back("--format");
    a.push_back(u < 0.6 ? "json" : u < 0.85 ? "table" : "csv");
  }

  void model(Args& a) {
    a.push_back("model");
    model_flags(a);
    opt(a, "--seq-len", {"128", "1024", "2048", "8192", "131072"}, 0.4);
    flag(a, "--ops", 0.2);
  }
  void time(Args& a) {
    a.push_back("time");
    if (chance(0.5)) {
      a.push_back("--params");
      a.push_back(value({"7e9", "70B", "1.5M", "405e9", "1T"}));
    } else {
      model_flags(a);
      opt(a, "--seq-len", {"512", "2048", "8192"}, 0.3);
    }
    a.push_back("--tokens");
    a.push_back(value({"1T", "15T", "300e9", "1B", "1e6"}));
    a.push_back("--gpu");
    a.push_back(gpu_name());
    opt(a, "--num-gpus", {"1", "8", "1024", "16384"});
    opt(a, "--mfu", {"0.3", "0.5", "0.55", "1"});
    opt(a, "--dtype", {"bf16", "fp16", "fp8", "fp32", "tf32"}, 0.3);
    opt(a, "--usd-per-gpu-hour", {"2", "3.5", "0"}, 0.3);
  }
  void memory(Args& a) {
    a.push_back("memory");
    const auto mode = pick_index(4);
    if (mode == 0) {
      a.push_back("--params");
      a.push_back(value({"7.5e9", "70e9", "1e12", "125M"}));
      opt(a, "--num-gpus", {"1", "8", "64", "1024"}, 0.7);
      opt(a, "--zero", {"0", "1", "2", "3"});
      opt(a, "--precision", {"bf16-mixed", "fp32", "bf16"}, 0.3);
      return;
    }
    if (mode == 1) {
      machine(a);
      a.push_back("--max-params");
      opt(a, "--precision", {"bf16-mixed", "fp32", "bf16"}, 0.3);
      return;
    }
    job(a, "small");
    opt(a, "--bucket-mb", {"1", "25", "100"}, 0.1);
    opt(a, "--framework", {"megatron", "deepspeed", "fsdp", "pytorch"}, 0.2);
    opt(a, "--torch-compile", {"none", "blocks", "blocks+loss", "always"}, 0.1);
    opt(a, "--allocator-cap-gb", {"24", "40", "0.5", "1000"}, 0.1);
    if (chance(0.1)) {
      a.push_back("--deepspeed");
      a.push_back(std::string(TRAINSIM_SOURCE_DIR) + "/cli/testdata/" +
                  pick({"ds_zero3_offload.json", "ds_unknown.json"}));
      opt(a, "--nvme-gb-per-s", {"1", "6", "25"}, 0.5);
    }
  }
  void estimate(Args& a) {
    a.push_back("estimate");
    job(a, chance(0.3) ? "large" : "small");
    step_flags(a);
    opt(a, "--tokens", {"1B", "15T", "300e9"}, 0.3);
  }
  void plan(Args& a) {
    a.push_back("plan");
    a.push_back("--model");
    a.push_back(pick({"gpt2", "llama3-8b", "llama2-7b", "mixtral-8x7b", "cs336-small", "cs336-xl",
                      "llama3-70b", "gpt3-175b"}));
    machine(a);
    setup(a);
    if (std::find(a.begin(), a.end(), "--global-batch") == a.end()) {
      a.push_back("--global-batch");
      a.push_back(value({"8", "16", "64", "256", "512"}));
    }
    step_flags(a);
    opt(a, "--top", {"1", "3", "10"}, 0.5);
    opt(a, "--objective", {"time", "cost", "memory"}, 0.3);
    if (chance(0.3)) {
      a.push_back("--fix");
      a.push_back(
          pick({"tp=1", "tp=2", "tp=8", "pp=2", "dp=4", "cp=2", "micro-batch=1", "zero=1", "zero=3",
                "recompute=full", "sp=on", "interleave=2", "mb=2", "tp=3", "colour=1", "tp=0"}));
    }
    opt(a, "--max-tp", {"0", "2", "8"}, 0.1);
    opt(a, "--max-cp", {"1", "2", "8"}, 0.1);
    opt(a, "--max-interleave", {"1", "2", "8"}, 0.1);
    a.push_back("--threads");
    a.push_back(value({"1"}));
    if (chance(0.1) && std::find(a.begin(), a.end(), "json") == a.end()) {
      a.push_back("--explain");
      a.push_back(value({"1", "2"}));
    }
    opt(a, "--tokens", {"1B", "15T"}, 0.2);
  }
  void sweep(Args& a) {
    a.push_back("sweep");
    const bool fits = job(a, "small");
    step_flags(a);
    // With a consistent layout, the inputs that keep it consistent for any value.
    const std::string vary = fits ? pick({"seq-len", "zero", "bucket-mb", "micro-batch"})
                                  : pick({"num-gpus", "micro-batch", "seq-len", "tp", "pp", "cp",
                                          "zero", "global-batch", "bucket-mb"});
    a.push_back("--vary");
    a.push_back(vary);
    std::string values;
    for (std::size_t i = 0, n = 1 + pick_index(5); i < n; ++i) {
      if (i > 0)
        values.push_back(',');
      values.append(value({"1", "2", "4", "8", "16", "64", "512", "1024", "2048"}));
    }
    a.push_back("--values");
    a.push_back(values);
    opt(a, "--metric", {"mfu", "step_time_s", "tokens_per_s", "scaling_efficiency", "memory_gb"},
        0.3);
  }
  void roofline(Args& a) {
    a.push_back("roofline");
    a.push_back("--gpu");
    a.push_back(gpu_name());
    if (chance(0.5)) {
      a.push_back("--op");
      a.push_back(value({"gemm"}));
      for (const char* f : {"--m", "--n", "--k"}) {
        a.push_back(f);
        a.push_back(value({"1", "64", "1000", "4096", "8192", "16384"}));
      }
      opt(a, "--dtype", {"bf16", "fp16", "fp32", "tf32", "fp8"}, 0.5);
    } else {
      model_flags(a);
      setup(a);
      opt(a, "--tp", {"1", "2", "4", "8"}, 0.3);
    }
  }
  void collective(Args& a) {
    a.push_back("collective");
    machine(a, chance(0.5) ? "large" : "small");
    opt(a, "--op",
        {"all-reduce", "reduce-scatter", "all-gather", "broadcast", "all-to-all", "send-recv"},
        0.8);
    opt(a, "--algorithm", {"auto", "ring", "tree"}, 0.3);
    if (chance(0.4)) {
      a.push_back("--sweep");
      opt(a, "--min-bytes", {"8", "1K", "1M"}, 0.3);
      opt(a, "--max-bytes", {"1M", "1G", "4G"}, 0.3);
      opt(a, "--factor", {"2", "4", "1.5", "1.1", "1.001"}, 0.4);
    } else {
      opt(a, "--bytes", {"8", "1K", "1M", "1G", "4G", "100G"}, 0.8);
    }
  }
  void presets(Args& a) {
    a.push_back("presets");
    if (chance(0.4)) {
      a.push_back("list");
      if (chance(0.5))
        a.push_back(pick({"models", "gpus", "clusters", "profiles", "colours"}));
    } else {
      a.push_back("show");
      a.push_back(chance(0.5) ? model_name() : gpu_name());
    }
    if (chance(0.5)) {
      a.push_back("--format");
      a.push_back(pick({"json", "table", "csv"}));
    }
  }
  void train_step(Args& a) {
    a.push_back("train-step");
    a.push_back("--predict-only");
    a.push_back("--model");
    a.push_back(pick({"cs336-small", "cs336-medium", "cs336-large", "cs336-xl"}));
    opt(a, "--batch", {"1", "2", "4", "8"});
    opt(a, "--seq-len", {"128", "256", "512", "1024"});
    opt(a, "--precision", {"fp32", "bf16-mixed"}, 0.3);
    opt(a, "--attention", {"flash", "naive"}, 0.3);
    opt(a, "--recompute", {"none", "selective", "full"}, 0.3);
    opt(a, "--num-gpus", {"1", "2", "4"}, 0.3);
    opt(a, "--ddp", {"none", "naive", "flat", "overlapped", "bucketed"}, 0.3);
    opt(a, "--bucket-mb", {"1", "25", "100"}, 0.2);
    opt(a, "--zero", {"0", "1"}, 0.2);
    opt(a, "--grad-accum", {"1", "2", "4"}, 0.2);
    opt(a, "--gpu", {"h200", "h100-sxm", "a100-80g"}, 0.3);
  }
  // A recorded file a user hands to `compare`, mutated (a key removed, retyped or added, at the
  // top or in a nested object, or the text cut short): a train-step line, a kernel profile, a
  // kernel-measurement document, a framework run (one line, or several with one repeated), a
  // two-GPU collectives document or an allocator trace (its header mutated, or a line of it).
  // The values put in include names that are paths (a data file must never open them) and
  // absurd sizes. Written under the run's temporary folder, one file per draw, so that a failing
  // invocation can be re-run.
  void mutated_record(Args& a, const std::string& results) {
    const std::string root = std::string(TRAINSIM_SOURCE_DIR) + "/validate/results/";
    struct Source {
      std::string path;
      bool jsonl;
    };
    static const std::vector<Source> sources{
        {results + "h200-train-step.jsonl", true},
        {root + "kernel-profiles-2026-12-02/fsdp-cs336-medium-bf16-mixed-flash-none-b4-s512.json",
         false},
        {results + "h200-held-out.json", false},
        {root + "runs-2026-12-02/runs-a.jsonl", true},
        {results + "collectives-h200x2.json", false},
        {root + "allocator-traces-2026-12-05-capped2/"
                "pytorch-cs336-large-bf16-mixed-flash-full-b30-s1024-cap24.trace.gz",
         true}};
    const std::size_t which = pick_index(sources.size());
    const bool trace = which == 5;
    std::istringstream in(trainsim::read_input_file(sources[which].path)); // traces: gzip
    std::string text, line, rest;
    if (sources[which].jsonl) {
      std::vector<std::string> lines;
      while (std::getline(in, line))
        if (!line.empty())
          lines.push_back(line);
      if (lines.empty()) // a source missing from the checkout is the test's own bug
        throw std::logic_error("property test: no lines in " + sources[which].path);
      if (trace) { // the header (JSON after "# "), or one request line among the first 200
        const std::size_t k =
            chance(0.5) ? 0 : pick_index(std::min<std::size_t>(lines.size(), 200));
        text = lines.empty() ? "#" : lines[k];
        for (std::size_t i = 0; i < std::min<std::size_t>(lines.size(), 400); ++i)
          if (i != k)
            rest += lines[i] + "\n";
        if (k != 0) { // a request line: its numbers made huge, negative or followed by junk
          const std::vector<std::string> edits{" 1125899906842624", " -1", " x", " 1e3", ""};
          text = text.substr(0, pick_index(text.size() + 1)) + edits[pick_index(edits.size())];
          const std::string file = fmt::format("{}/mut-{}.trace", tmp_, ++mutated_);
          std::ofstream(file) << lines[0] << "\n" << text << "\n" << rest;
          a = {"compare", "--allocator-traces", file};
          return;
        }
        text = text.substr(std::min<std::size_t>(text.size(), 2)); // the header's JSON
      } else if (which == 3 && chance(0.3)) { // several rows, one of them twice
        for (std::size_t i = 0; i < std::min<std::size_t>(lines.size(), 4); ++i)
          rest += lines[i] + "\n";
        rest += lines[pick_index(std::min<std::size_t>(lines.size(), 4))] + "\n";
        const std::string file = fmt::format("{}/mut-{}.jsonl", tmp_, ++mutated_);
        std::ofstream(file) << rest;
        a = {"compare", "--framework-runs", file};
        return;
      } else {
        text = lines.empty() ? "{}" : lines[pick_index(lines.size())];
      }
    } else {
      text = in.str();
    }
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    std::string out;
    if (j.is_discarded() || chance(0.1)) {
      out = text.substr(0, pick_index(text.size() + 1)); // cut short
    } else {
      const std::vector<nlohmann::json> extras{
          "trainsim",    -1,          0,          1e300,       "bf16-mixed", "/dev/urandom",
          "/etc/passwd", "../x.json", "a\x1b[2J", 99999999999, 1e-300};
      for (std::size_t k = 1 + pick_index(3); k > 0; --k) {
        nlohmann::json* target = &j;
        if (chance(0.5) && j.is_object() && !j.empty()) { // one level down, where there is one
          auto it = j.begin();
          std::advance(it, static_cast<long>(pick_index(j.size())));
          if (it->is_object() && !it->empty())
            target = &*it;
        }
        trainsim::testing::mutate_json_object(*target, rng_, extras);
      }
      out = j.dump();
    }
    const std::string file = fmt::format("{}/mut-{}{}", tmp_, ++mutated_,
                                         trace                  ? ".trace"
                                         : sources[which].jsonl ? ".jsonl"
                                                                : ".json");
    if (trace)
      std::ofstream(file) << "# " << out << "\n" << rest;
    else
      std::ofstream(file) << out << "\n";
    switch (which) {
    case 0: a = {"compare", "--calibration", "h200", "--train-step", file}; break;
    case 1: a = {"compare", "--kernel-profiles", file}; break;
    case 2: a = {"compare", "--calibration", "h200", "--measurements", file}; break;
    case 3: a = {"compare", "--framework-runs", file}; break;
    case 4: a = {"compare", "--calibration", "h200-x2-nvlink", "--collectives", file}; break;
    default:
      a = {"compare", "--allocator-traces", file};
      if (chance(0.5))
        a.push_back("--with-prediction");
      break;
    }
  }

 public:
  std::string tmp_; // the run's temporary folder (set by main)

 private:
  std::int64_t mutated_ = 0;

  // The slower or file-based commands, drawn less often.
  void rare(Args& a) {
    const std::string results = std::string(TRAINSIM_SOURCE_DIR) + "/validate/results/fixtures/";
    switch (pick_index(7)) {
    case 0:
      a = {"validate-published"};
      opt(a, "--max-error-pct", {"10", "5", "50"}, 0.3);
      break;
    case 1:
      a = {"compare", "--calibration", pick({"h200", "h200-x2-nvlink"}), "--train-step",
           results + pick({"h200-train-step.jsonl", "h200x2-dp-train-step.jsonl"})};
      opt(a, "--max-step-error-pct", {"0", "50"}, 0.3);
      break;
    case 2:
      a = {"compare", "--calibration", "h200-x2-nvlink", "--collectives",
           results + "collectives-h200x2-mpi.json"};
      opt(a, "--ops", {"all-reduce", "all-gather,broadcast", "all-sum"}, 0.4);
      break;
    case 3:
      a = {"compare", "--calibration", "h200", "--measurements", results + "h200-held-out.json",
           "--base",  "h200-datasheet"};
      break;
    case 4:
      a = {"compare", "--framework-runs",
           std::string(TRAINSIM_SOURCE_DIR) + "/validate/results/runs-2026-12-02/" +
               pick({"runs-a.jsonl", "runs-c.jsonl", "oom.jsonl"})};
      opt(a, "--framework", {"pytorch", "fsdp", "pytorch-compile", "megatron", "nope"}, 0.4);
      opt(a, "--only", {"fit", "test", "all", "half"}, 0.3);
      opt(a, "--max-test-error-pct", {"0", "50", "-1"}, 0.3);
      break;
    case 5: mutated_record(a, results); break;
    default:
      a = {pick({"frobnicate", "--help", "--version", "estimat", "model"})};
      if (chance(0.3))
        a = {pick({"plan", "estimate", "collective", "sweep"}), "--help"};
      break;
    }
  }
};

} // namespace

int main(int argc, char** argv) {
  std::int64_t runs = 3000;
  std::uint64_t seed = 18;
  bool verbose = false;
  if (const char* env = std::getenv("TRAINSIM_PROPERTY_RUNS"))
    runs = std::atoll(env);
  if (const char* env = std::getenv("TRAINSIM_PROPERTY_SEED"))
    seed = std::strtoull(env, nullptr, 10);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = std::atoll(argv[++i]);
    else if (a == "--seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--verbose")
      verbose = true;
    else {
      fmt::print(stderr, "usage: cli_property [--runs N] [--seed S] [--verbose]\n");
      return 2;
    }
  }
  g_stderr = ::dup(2);
  std::signal(SIGSEGV, on_crash);
  std::signal(SIGABRT, on_crash);
  std::signal(SIGFPE, on_crash);
  std::signal(SIGBUS, on_crash);
  std::thread(watchdog).detach();
  const auto tmp = std::filesystem::temp_directory_path() /
                   fmt::format("trainsim-property-{}", static_cast<long>(::getpid()));
  std::filesystem::create_directories(tmp);

  Gen gen(seed);
  gen.tmp_ = tmp.string();
  std::int64_t ok = 0, refused = 0, failures = 0;
  double slowest = 0;
  std::string slowest_line;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < runs; ++i) {
    const Args args = gen.next();
    const Result r = run(args, tmp.string());
    (r.rc == 0 ? ok : refused) += 1;
    if (r.seconds > slowest) {
      slowest = r.seconds;
      slowest_line = quoted(args);
    }
    const auto problems = check(args, r);
    if (verbose)
      fmt::print("{:7d} rc {} {:6.1f} ms  trainsim {}{}\n", i, r.rc, r.seconds * 1e3, quoted(args),
                 r.rc == 0 ? "" : "\n          " + r.err.substr(0, r.err.find('\n')));
    if (!problems.empty()) {
      ++failures;
      fmt::print("FAIL run {}: trainsim {}\n", i, quoted(args));
      for (const auto& p : problems)
        fmt::print("  {}\n", p);
      fmt::print("  stderr: {}\n", r.err.substr(0, 2000));
      if (failures >= 10)
        break;
    }
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (failures == 0)
    std::filesystem::remove_all(tmp);
  else
    fmt::print("the mutated files of the failing runs are kept in {}\n", tmp.string());
  fmt::print("property test: {} runs (seed {}) in {:.1f} s ({:.2f} ms each): {} ran, {} refused "
             "with exit 1, {} failed; slowest {:.0f} ms: trainsim {}\n",
             ok + refused, seed, elapsed, 1e3 * elapsed / static_cast<double>(ok + refused), ok,
             refused, failures, slowest * 1e3, slowest_line);
  return failures == 0 ? 0 : 1;
}
