// `trainsim bench collectives`: NCCL collective benchmarks in nccl-tests' format, single process
// over local GPUs or one rank per process under mpirun. Measures through validate/comm (pure
// header; CUDA/NCCL/MPI stay there) and prints table (nccl-tests layout), CSV or JSON.
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "common/errors.hpp"
#include "validate/comm/bench_flags.hpp"
#include "validate/comm/collectives.hpp"

namespace trainsim::cli {

struct BenchCollectivesOptions {
  val::CollectiveBenchFlags flags;
  OutputOptions out;
};

namespace {

std::string csv_number(double v) { return std::isnan(v) ? "" : fmt::format("{:.9g}", v); }

void print_csv(const val::CollectiveReport& report, Sink& sink) {
  Table table({}, {"op", "bytes", "count", "dtype", "redop", "root", "num_ranks", "time_s",
                   "algbw_bytes_per_s", "busbw_bytes_per_s", "wrong", "in_place_time_s",
                   "in_place_algbw_bytes_per_s", "in_place_busbw_bytes_per_s", "in_place_wrong"});
  for (const val::CollectiveRow& r : report.rows) {
    std::vector<std::string> cells = {r.op,
                                      fmt::format("{:.0f}", r.bytes),
                                      fmt::format("{}", r.count),
                                      r.dtype,
                                      r.redop,
                                      fmt::format("{}", r.root),
                                      fmt::format("{}", r.num_ranks),
                                      csv_number(r.time_s),
                                      csv_number(r.algbw_bytes_per_s),
                                      csv_number(r.busbw_bytes_per_s),
                                      fmt::format("{}", r.wrong),
                                      csv_number(r.in_place_time_s),
                                      csv_number(r.in_place_algbw_bytes_per_s),
                                      csv_number(r.in_place_busbw_bytes_per_s),
                                      fmt::format("{}", r.in_place_wrong)};
    table.add_row(cells, cells);
  }
  table.print(sink);
}

int run_bench_collectives(const BenchCollectivesOptions& opts) {
  const val::CollectiveBenchOptions options = val::resolve_bench_flags(opts.flags);
  if (options.bootstrap_only) {
    const val::BootstrapResult b = val::bootstrap_check();
    Sink sink(opts.out);
    sink.write(fmt::format(
        "# bootstrap: rank {} of {} (local rank {}): {}-byte id from rank 0 {}\n", b.rank,
        b.num_ranks, b.local_rank, b.id_bytes, b.ids_match ? "matches" : "DIFFERS"));
    if (!b.ids_match)
      throw CheckFailed("MPI bootstrap: ranks hold different ids");
    return 0;
  }
  const val::CollectiveReport report = val::run_collectives(options);
  if (!report.is_root)
    return 0; // under MPI only rank 0 prints
  Sink sink(opts.out);
  switch (opts.out.format) {
  case Format::json: sink.json(val::to_json(report)); break;
  case Format::csv: print_csv(report, sink); break;
  case Format::table:
    if (!opts.out.quiet)
      sink.write(val::format_collective_header(report));
    sink.write(val::format_collective_table(report));
    break;
  }
  for (const val::CollectiveRow& r : report.rows)
    if (r.wrong > 0 || r.in_place_wrong > 0)
      throw CheckFailed(fmt::format("{} at {:.0f} bytes: {} wrong elements out-of-place, {} "
                                    "in-place",
                                    r.op, r.bytes, r.wrong, r.in_place_wrong));
  return 0;
}

} // namespace

void add_bench_collectives(CLI::App& bench) {
  auto opts = std::make_shared<BenchCollectivesOptions>();
  auto* cmd = bench.add_subcommand(
      "collectives", "NCCL collective benchmarks (nccl-tests format): single process over local "
                     "GPUs, or one rank per process under mpirun");
  val::add_bench_flags(*cmd, opts->flags);
  add_output_options(*cmd, opts->out);
  cmd->footer("Example: trainsim bench collectives --ops all-reduce,all-gather --max-bytes 1G\n"
              "         mpirun -np 8 trainsim bench collectives --format json -o h200x8.json");
  cmd->callback([opts] { run_bench_collectives(*opts); });
}

} // namespace trainsim::cli
