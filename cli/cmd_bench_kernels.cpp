// `trainsim bench kernels`: measure one kernel case (--op ...) or a named suite on a local GPU
// and print the measurements (table, CSV or JSON with a device block). The work and protocol
// live in validate/bench; this file binds flags and prints. Exit 3 when a check failed.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "common/errors.hpp"
#include "common/units.hpp"
#include "validate/bench/bench.hpp"

namespace trainsim::cli {

namespace {

struct BenchKernelsOptions {
  std::string suite; // "" = the single case described by --op
  std::string op = "gemm";
  std::string dtype = "bf16";
  std::int64_t m = 4096, n = 4096, k = 4096;
  std::string gemm_impl = "cublaslt";
  std::string size = "256M"; // elements, binary suffixes
  std::int64_t rows = 16384, cols = 4096;
  std::int64_t batch_size = 2, num_heads = 16, seq_len = 4096, head_dim = 128;
  bool causal = false, backward = false;
  std::string impl = "flash";
  int warmup = 5, min_samples = 20;
  double max_noise_pct = 1.0, timeout_s = 10.0;
  bool cold_l2 = false, no_check = false;
  int device = 0;
  std::uint64_t seed = 1;
  OutputOptions out;
};

std::string read_command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (char& c : raw)
    if (c == '\0')
      c = ' ';
  while (!raw.empty() && raw.back() == ' ')
    raw.pop_back();
  return raw;
}

fitting::KernelShape shape_from_flags(const BenchKernelsOptions& o) {
  fitting::KernelShape s;
  const auto op = fitting::parse_op(o.op);
  if (!op)
    throw ConfigError(fmt::format("--op {}: unknown op", o.op));
  const auto dt = parse_dtype(o.dtype);
  if (!dt)
    throw ConfigError(
        fmt::format("--dtype {}: unknown dtype (fp32, tf32, fp16, bf16, fp8)", o.dtype));
  if (*dt == Dtype::fp8) { // e4m3 GEMM through cuBLASLt only (kernels/gemm.cuh)
    if (*op != fitting::BenchOp::gemm)
      throw ConfigError(fmt::format("--dtype fp8: only --op gemm runs in fp8, not --op {}", o.op));
    if (o.gemm_impl == "cublas")
      throw ConfigError("--dtype fp8: --gemm-impl cublas has no fp8 path (cublasGemmEx); use "
                        "--gemm-impl cublaslt");
    if (o.m % 16 != 0 || o.n % 16 != 0 || o.k % 16 != 0)
      throw ConfigError(fmt::format("--dtype fp8: --m {} --n {} --k {}: must all be multiples of "
                                    "16 (cuBLASLt fp8 alignment)",
                                    o.m, o.n, o.k));
  }
  s.op = *op;
  s.dtype = *dt;
  s.m = o.m;
  s.n = o.n;
  s.k = o.k;
  s.gemm_impl = o.gemm_impl == "cublas" ? fitting::GemmImpl::cublas : fitting::GemmImpl::cublaslt;
  s.num_elements = static_cast<std::int64_t>(parse_bytes(o.size, "--size"));
  s.rows = o.rows;
  s.cols = o.cols;
  s.batch_size = o.batch_size;
  s.num_heads = o.num_heads;
  s.seq_len = o.seq_len;
  s.head_dim = o.head_dim;
  s.causal = o.causal;
  s.backward = o.backward;
  s.impl = o.impl == "naive" ? fitting::AttentionImpl::naive : fitting::AttentionImpl::flash;
  return s;
}

nlohmann::json device_json(const val::DeviceInfo& d) {
  return {{"gpu_name", d.gpu_name},
          {"device", d.device},
          {"compute_capability",
           fmt::format("{}.{}", d.compute_capability_major, d.compute_capability_minor)},
          {"num_sms", d.num_sms},
          {"l2_bytes", d.l2_bytes},
          {"memory_bytes", d.memory_bytes},
          {"driver_version", d.driver_version},
          {"runtime_version", d.runtime_version},
          {"cublas_version", d.cublas_version}};
}

nlohmann::json measurement_json(const val::Measurement& m) {
  const fitting::KernelShape& s = m.shape;
  nlohmann::json j = {{"name", m.name},
                      {"op", std::string(fitting::op_name(s.op))},
                      {"dtype", std::string(dtype_name(s.dtype))},
                      {"flops", m.work.flops},
                      {"bytes_read", m.work.bytes_read},
                      {"bytes_written", m.work.bytes_written},
                      {"median_s", m.median_s},
                      {"min_s", m.min_s},
                      {"mean_s", m.mean_s},
                      {"stdev_s", m.stdev_s},
                      {"noise_pct", m.noise_pct},
                      {"samples", m.samples},
                      {"cold_l2", m.cold_l2},
                      {"checked", m.checked},
                      {"check_passed", m.check_passed},
                      {"rel_err", m.rel_err},
                      {"max_abs_err", m.max_abs_err},
                      {"check_note", m.check_note},
                      {"device_bytes", m.device_bytes},
                      {"call_alloc_bytes", m.call_alloc_bytes},
                      {"command_line", m.command_line}};
  switch (s.op) {
  case fitting::BenchOp::gemm:
    j["m"] = s.m;
    j["n"] = s.n;
    j["k"] = s.k;
    j["impl"] = s.gemm_impl == fitting::GemmImpl::cublaslt ? "cublaslt" : "cublas";
    break;
  case fitting::BenchOp::softmax:
  case fitting::BenchOp::layernorm:
  case fitting::BenchOp::rmsnorm:
    j["rows"] = s.rows;
    j["cols"] = s.cols;
    j["backward"] = s.backward;
    break;
  case fitting::BenchOp::attention:
    j["batch_size"] = s.batch_size;
    j["num_heads"] = s.num_heads;
    j["seq_len"] = s.seq_len;
    j["head_dim"] = s.head_dim;
    j["causal"] = s.causal;
    j["backward"] = s.backward;
    j["impl"] = std::string(fitting::impl_name(s.impl));
    break;
  case fitting::BenchOp::empty: break;
  default: j["num_elements"] = s.num_elements; break;
  }
  return j;
}

void progress_bar(bool quiet, std::size_t done, std::size_t total, const std::string& name) {
  if (quiet)
    return;
  static const bool tty = isatty(fileno(stderr)) != 0;
  if (tty) {
    constexpr std::size_t kWidth = 30;
    const std::size_t filled = total ? done * kWidth / total : kWidth;
    fmt::print(stderr, "\r[{}{}] {}/{} {:<60}", std::string(filled, '#'),
               std::string(kWidth - filled, ' '), done, total, name);
    if (done == total)
      fmt::print(stderr, "\n");
  } else if (done < total) {
    fmt::print(stderr, "[{}/{}] {}\n", done + 1, total, name);
  }
  std::fflush(stderr);
}

int run_bench_kernels(const BenchKernelsOptions& o) {
  val::BenchOptions b;
  b.cases = o.suite.empty() ? std::vector<fitting::KernelShape>{shape_from_flags(o)}
                            : val::suite_cases(o.suite);
  b.warmup = o.warmup;
  b.min_samples = o.min_samples;
  b.max_noise_pct = o.max_noise_pct;
  b.timeout_s = o.timeout_s;
  b.cold_l2 = o.cold_l2;
  b.check = !o.no_check;
  b.device = o.device;
  b.seed = o.seed;
  b.command_line = read_command_line();

  const val::DeviceInfo dev = val::query_device(o.device);
  const auto results =
      val::run_kernel_benchmarks(b, [&](std::size_t d, std::size_t t, const std::string& name) {
        progress_bar(o.out.quiet, d, t, name);
      });

  Sink sink(o.out);
  if (sink.format() == Format::json) {
    nlohmann::json ms = nlohmann::json::array();
    for (const auto& m : results)
      ms.push_back(measurement_json(m));
    sink.json({{"device", device_json(dev)},
               {"command_line", b.command_line},
               {"suite", o.suite},
               {"measurements", ms}});
  } else {
    sink.comment(fmt::format("device: {} (sm_{}{}, {} SMs), driver {}, CUDA runtime {}, cuBLAS {}",
                             dev.gpu_name, dev.compute_capability_major,
                             dev.compute_capability_minor, dev.num_sms, dev.driver_version,
                             dev.runtime_version, dev.cublas_version));
    sink.comment("command: " + b.command_line);
    sink.comment(fmt::format("protocol: warmup {}, min samples {}, max noise {}%, timeout {} s, "
                             "L2 {}",
                             b.warmup, b.min_samples, b.max_noise_pct, b.timeout_s,
                             b.cold_l2 ? "cold (flushed per sample)" : "hot"));
    Table t({"case", "median (us)", "min (us)", "noise (%)", "samples", "TFLOP/s", "GB/s",
             "check (rel err)"},
            {"name", "median_s", "min_s", "noise_pct", "samples", "flops_per_s", "bytes_per_s",
             "rel_err"});
    for (const auto& m : results) {
      const double bytes = m.work.bytes_read + m.work.bytes_written;
      const std::string check =
          !m.checked ? "-" : fmt::format("{} {:.1e}", m.check_passed ? "ok" : "FAIL", m.rel_err);
      t.add_row({m.name, fmt::format("{:.2f}", m.median_s * 1e6),
                 fmt::format("{:.2f}", m.min_s * 1e6), fmt::format("{:.2f}", m.noise_pct),
                 fmt::format("{}", m.samples),
                 m.work.flops > 0 ? fmt::format("{:.1f}", m.work.flops / m.median_s / 1e12) : "-",
                 bytes > 0 ? fmt::format("{:.1f}", bytes / m.median_s / 1e9) : "-", check},
                {m.name, fmt::format("{:.9g}", m.median_s), fmt::format("{:.9g}", m.min_s),
                 fmt::format("{:.4g}", m.noise_pct), fmt::format("{}", m.samples),
                 fmt::format("{:.6g}", m.work.flops / m.median_s),
                 fmt::format("{:.6g}", bytes / m.median_s),
                 m.checked ? fmt::format("{:.3g}", m.rel_err) : ""});
    }
    t.print(sink);
  }
  std::string failed;
  for (const auto& m : results)
    if (m.checked && !m.check_passed)
      failed += fmt::format("\n  {}: {}", m.name, m.check_note);
  if (!failed.empty())
    throw CheckFailed("kernel results differ from the float64 reference:" + failed);
  return 0;
}

} // namespace

void add_bench_kernels(CLI::App& bench) {
  auto opts = std::make_shared<BenchKernelsOptions>();
  auto* cmd = bench.add_subcommand(
      "kernels", "Measure GEMM, element-wise, softmax/norm and attention kernels on a local GPU "
                 "(checked against a float64 CPU reference first)");
  cmd->add_option("--suite", opts->suite,
                  "Run a named case list instead of one case: calibration, held-out, perf, "
                  "fp8-shapes or fp8-held-out (FP8 GEMMs at training shapes: docs/kernels.md)")
      ->check(CLI::IsMember(val::suite_names()));
  cmd->add_option("--op", opts->op,
                  "Kernel: gemm, relu, gelu, add, scale, softmax, layernorm, "
                  "rmsnorm, attention, copy, empty")
      ->check(CLI::IsMember({"gemm", "relu", "gelu", "add", "scale", "softmax", "layernorm",
                             "rmsnorm", "attention", "copy", "empty"}))
      ->capture_default_str();
  cmd->add_option("--dtype", opts->dtype,
                  "Element type: fp32, tf32 (gemm), fp16, bf16, fp8 (gemm through cuBLASLt: e4m3 "
                  "A [m,k] and B stored [n,k], bf16 C; m, n, k multiples of 16)")
      ->check(CLI::IsMember({"fp32", "tf32", "fp16", "bf16", "fp8"}))
      ->capture_default_str();
  cmd->add_option("--m", opts->m, "gemm: rows of A and C")->capture_default_str();
  cmd->add_option("--n", opts->n, "gemm: columns of B and C")->capture_default_str();
  cmd->add_option("--k", opts->k, "gemm: inner dimension")->capture_default_str();
  cmd->add_option("--gemm-impl", opts->gemm_impl,
                  "gemm: cublaslt (ours) or cublas (one plain cublasGemmEx, the baseline)")
      ->check(CLI::IsMember({"cublaslt", "cublas"}))
      ->capture_default_str();
  cmd->add_option("--size", opts->size,
                  "Element-wise ops and copy: number of elements (K/M/G = 2^10/2^20/2^30)")
      ->capture_default_str();
  cmd->add_option("--rows", opts->rows, "softmax/layernorm/rmsnorm: rows")->capture_default_str();
  cmd->add_option("--cols", opts->cols, "softmax/layernorm/rmsnorm: row width")
      ->capture_default_str();
  cmd->add_option("--batch", opts->batch_size, "attention: batch size")->capture_default_str();
  cmd->add_option("--heads", opts->num_heads, "attention: heads")->capture_default_str();
  cmd->add_option("--seq-len", opts->seq_len, "attention: sequence length")->capture_default_str();
  cmd->add_option("--head-dim", opts->head_dim, "attention: head dimension (flash: 64 or 128)")
      ->capture_default_str();
  cmd->add_flag("--causal", opts->causal, "attention: causal mask")->capture_default_str();
  cmd->add_flag("--backward", opts->backward, "softmax/norms/attention: time the backward pass")
      ->capture_default_str();
  cmd->add_option("--impl", opts->impl, "attention: flash (ours, FlashAttention-2) or naive")
      ->check(CLI::IsMember({"flash", "naive"}))
      ->capture_default_str();
  cmd->add_option("--warmup", opts->warmup, "Untimed runs before sampling")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--min-samples", opts->min_samples, "Timed samples at least")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-noise-pct", opts->max_noise_pct,
                  "Stop sampling once stdev/mean (%) is below this")
      ->capture_default_str();
  cmd->add_option("--timeout-s", opts->timeout_s,
                  "Per case: stop sampling after this many seconds even if noisy")
      ->capture_default_str();
  cmd->add_flag("--cold-l2", opts->cold_l2, "Flush L2 before each sample (default: hot)")
      ->capture_default_str();
  cmd->add_flag("--no-check", opts->no_check, "Skip the correctness check against the reference")
      ->capture_default_str();
  cmd->add_option("--device", opts->device, "CUDA device index")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed for the random inputs")->capture_default_str();
  add_output_options(*cmd, opts->out);
  cmd->footer("Example: trainsim bench kernels --op attention --seq-len 4096 --head-dim 128 "
              "--causal --format json");
  cmd->callback([opts] { run_bench_kernels(*opts); });
}

} // namespace trainsim::cli
