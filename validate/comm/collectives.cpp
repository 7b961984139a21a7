// Pure half of the collective benchmarks: op names, nccl-tests busbw factors, size sweeps,
// option validation, JSON output and MPI-launch detection. No CUDA, NCCL or MPI here.
#include "validate/comm/collectives.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace trainsim::val {

std::string_view collective_name(CollectiveOp op) { return sim::to_string(op); }

std::optional<CollectiveOp> parse_collective(std::string_view name) {
  CollectiveOp op;
  if (sim::parse_collective(name, op))
    return op;
  return std::nullopt;
}

std::vector<CollectiveOp> parse_collective_list(std::string_view text, std::string_view field) {
  std::vector<CollectiveOp> ops;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view name = text.substr(start, end - start);
    if (name == "all") {
      ops.assign(std::begin(kAllCollectiveOps), std::end(kAllCollectiveOps));
    } else if (auto op = parse_collective(name)) {
      ops.push_back(*op);
    } else {
      throw ConfigError(fmt::format(
          "{} = '{}': unknown collective '{}': expected all or a comma-separated list of "
          "all-reduce, all-gather, reduce-scatter, broadcast, all-to-all, send-recv",
          field, text, name));
    }
    start = end + 1;
  }
  return ops;
}

std::int64_t collective_count(CollectiveOp op, double bytes, Dtype dtype, std::int64_t num_ranks) {
  auto count = static_cast<std::int64_t>(bytes / dtype_bytes(dtype));
  switch (op) {
  case CollectiveOp::all_gather:
  case CollectiveOp::reduce_scatter:
  case CollectiveOp::all_to_all: return count / num_ranks * num_ranks;
  default: return count;
  }
}

std::vector<double> size_sweep(double min_bytes, double max_bytes, double factor) {
  if (!(min_bytes > 0))
    throw ConfigError(fmt::format("min_bytes = {}: must be > 0", min_bytes));
  if (!(max_bytes >= min_bytes))
    throw ConfigError(
        fmt::format("max_bytes = {}: must be >= min_bytes = {}", max_bytes, min_bytes));
  if (!(factor > 1))
    throw ConfigError(fmt::format("factor = {}: must be > 1", factor));
  std::vector<double> sizes;
  // Relative slack so 8 * 2^27 lands exactly on 1 GiB despite rounding.
  for (double b = min_bytes; b <= max_bytes * (1 + 1e-12); b *= factor)
    sizes.push_back(b);
  return sizes;
}

void validate(const CollectiveBenchOptions& o) {
  Problems problems("bench collectives");
  if (o.ops.empty())
    problems.add("ops: empty: name at least one collective");
  if (o.iters < 1)
    problems.add(fmt::format("iters = {}: must be >= 1", o.iters));
  if (o.repeats < 1 || o.repeats > 1000)
    problems.add(fmt::format("repeats = {}: must be in 1..1000", o.repeats));
  if (o.warmup < 0)
    problems.add(fmt::format("warmup = {}: must be >= 0", o.warmup));
  if (o.num_gpus < 0)
    problems.add(fmt::format("gpus = {}: must be >= 0 (0 = all)", o.num_gpus));
  if (!(o.timeout_s > 0))
    problems.add(fmt::format("timeout_s = {}: must be > 0", o.timeout_s));
  if (o.dtype != Dtype::fp32 && o.dtype != Dtype::bf16 && o.dtype != Dtype::fp16)
    problems.add(fmt::format("dtype = {}: must be fp32, bf16 or fp16", dtype_name(o.dtype)));
  if (!(o.min_bytes > 0))
    problems.add(fmt::format("min_bytes = {}: must be > 0", o.min_bytes));
  if (!(o.max_bytes >= o.min_bytes))
    problems.add(
        fmt::format("max_bytes = {}: must be >= min_bytes = {}", o.max_bytes, o.min_bytes));
  if (!(o.factor > 1))
    problems.add(fmt::format("factor = {}: must be > 1", o.factor));
  problems.throw_if_any();
}

namespace {

nlohmann::json number_or_null(double v) {
  if (std::isnan(v))
    return nullptr;
  return v;
}

} // namespace

nlohmann::json to_json(const CollectiveReport& report) {
  nlohmann::json results = nlohmann::json::array();
  for (const CollectiveRow& r : report.rows) {
    results.push_back({{"op", r.op},
                       {"bytes", r.bytes},
                       {"count", r.count},
                       {"dtype", r.dtype},
                       {"redop", r.redop},
                       {"root", r.root},
                       {"num_ranks", r.num_ranks},
                       {"time_s", r.time_s},
                       {"algbw_bytes_per_s", r.algbw_bytes_per_s},
                       {"busbw_bytes_per_s", r.busbw_bytes_per_s},
                       {"wrong", r.wrong},
                       {"in_place_time_s", number_or_null(r.in_place_time_s)},
                       {"in_place_algbw_bytes_per_s", number_or_null(r.in_place_algbw_bytes_per_s)},
                       {"in_place_busbw_bytes_per_s", number_or_null(r.in_place_busbw_bytes_per_s)},
                       {"in_place_wrong", r.in_place_wrong}});
  }
  const CollectiveDeviceInfo& d = report.device;
  nlohmann::json device = {{"launcher", d.launcher},
                           {"num_ranks", d.num_ranks},
                           {"gpu_names", d.gpu_names},
                           {"hostname", d.hostname},
                           {"nccl_version", d.nccl_version},
                           {"cuda_runtime_version", d.cuda_runtime_version},
                           {"cuda_driver_version", d.cuda_driver_version},
                           {"nccl_algo", d.nccl_algo},
                           {"nccl_proto", d.nccl_proto},
                           {"nccl_nvls_enable", d.nccl_nvls_enable},
                           {"command_line", d.command_line}};
  return {{"device", device}, {"notes", report.notes}, {"results", results}};
}

bool launched_under_mpi() {
  for (const char* name :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(name) != nullptr)
      return true;
  return false;
}

} // namespace trainsim::val

namespace trainsim::val {

std::string format_collective_header(const CollectiveReport& report) {
  const CollectiveDeviceInfo& d = report.device;
  std::string s;
  s += fmt::format("# command: {}\n", d.command_line);
  s += fmt::format("# launcher: {}, ranks: {}, host: {}\n", d.launcher, d.num_ranks, d.hostname);
  for (std::size_t r = 0; r < d.gpu_names.size(); ++r)
    s += fmt::format("#   rank {}: {}\n", r, d.gpu_names[r]);
  s += fmt::format("# NCCL {}, CUDA runtime {}, CUDA driver API {}, NCCL_NVLS_ENABLE={}\n",
                   d.nccl_version, d.cuda_runtime_version, d.cuda_driver_version,
                   d.nccl_nvls_enable);
  for (const std::string& note : report.notes)
    s += fmt::format("# note: {}\n", note);
  return s;
}

namespace {

std::string cell(double v, const char* spec) {
  if (std::isnan(v))
    return "N/A";
  return fmt::format(fmt::runtime(spec), v);
}

std::string wrong_cell(std::int64_t wrong, bool applicable) {
  if (!applicable)
    return "N/A";
  return wrong < 0 ? "-" : fmt::format("{}", wrong);
}

} // namespace

std::string format_collective_table(const CollectiveReport& report) {
  std::string s;
  std::string current;
  auto head = [&](const std::string& op) {
    s += fmt::format("#\n# {}\n", op);
    s += fmt::format("# {:>42}{:>26}{:>8}{:>25}\n", "", "out-of-place", "", "in-place");
    s += fmt::format("# {:>12} {:>12} {:>6} {:>6} {:>5} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} "
                     "{:>7} {:>6}\n",
                     "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                     "time", "algbw", "busbw", "#wrong");
    s += fmt::format("# {:>12} {:>12} {:>6} {:>6} {:>5} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} "
                     "{:>7} {:>6}\n",
                     "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                     "(GB/s)", "(GB/s)", "");
  };
  for (const CollectiveRow& r : report.rows) {
    if (r.op != current) {
      current = r.op;
      head(current);
    }
    const bool ip = !std::isnan(r.in_place_time_s);
    s += fmt::format(
        "  {:>12.0f} {:>12} {:>6} {:>6} {:>5} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} "
        "{:>7} {:>6}\n",
        r.bytes, r.count, r.dtype, r.redop, r.root, cell(r.time_s * 1e6, "{:.2f}"),
        cell(r.algbw_bytes_per_s / 1e9, "{:.2f}"), cell(r.busbw_bytes_per_s / 1e9, "{:.2f}"),
        wrong_cell(r.wrong, true), cell(r.in_place_time_s * 1e6, "{:.2f}"),
        cell(r.in_place_algbw_bytes_per_s / 1e9, "{:.2f}"),
        cell(r.in_place_busbw_bytes_per_s / 1e9, "{:.2f}"), wrong_cell(r.in_place_wrong, ip));
  }
  return s;
}

std::string current_command_line() {
  std::FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (!f)
    return "";
  std::string raw;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    raw.append(buf, n);
  std::fclose(f);
  std::string out;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\0') {
      if (i + 1 < raw.size())
        out += ' ';
    } else {
      out += raw[i];
    }
  }
  return out;
}

} // namespace trainsim::val
