// comm_bench: a small driver of the collective benchmarks for ctest and device runs that do not
// need the full CLI. Same flags as `trainsim bench collectives`, text table on stdout, JSON with
// --json FILE. Exit codes: 0 ok, 1 config, 2 device, 3 check failed, 77 no GPU (ctest skip).
#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "common/errors.hpp"
#include "validate/comm/bench_flags.hpp"

int main(int argc, char** argv) {
  using namespace trainsim;
  CLI::App app{
      "comm_bench: NCCL collective benchmarks (test driver of trainsim bench collectives)"};
  val::CollectiveBenchFlags flags;
  val::add_bench_flags(app, flags);
  std::string json_path;
  app.add_option("--json", json_path, "Also write the JSON document to this file");
  try {
    app.parse(argc, argv);
    const val::CollectiveBenchOptions options = val::resolve_bench_flags(flags);
    if (options.bootstrap_only) {
      const val::BootstrapResult b = val::bootstrap_check();
      fmt::print("# bootstrap: rank {} of {} (local rank {}): {}-byte id from rank 0 {}\n", b.rank,
                 b.num_ranks, b.local_rank, b.id_bytes, b.ids_match ? "matches" : "DIFFERS");
      return b.ids_match ? 0 : 3;
    }
    const val::CollectiveReport report = val::run_collectives(options);
    if (!report.is_root)
      return 0;
    fmt::print("{}{}", val::format_collective_header(report), val::format_collective_table(report));
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      if (!out)
        throw ConfigError(fmt::format("--json {}: cannot open for writing", json_path));
      out << val::to_json(report).dump(2) << "\n";
    }
    for (const val::CollectiveRow& r : report.rows)
      if (r.wrong > 0 || r.in_place_wrong > 0)
        throw CheckFailed(fmt::format("{} at {} bytes: {} wrong out-of-place, {} in-place", r.op,
                                      r.bytes, r.wrong, r.in_place_wrong));
    return 0;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const ConfigError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const val::NoDeviceError& e) {
    fmt::print("# SKIP: {}\n", e.what());
    return 77;
  } catch (const DeviceError& e) {
    fmt::print(stderr, "device error: {}\n", e.what());
    return 2;
  } catch (const CheckFailed& e) {
    fmt::print(stderr, "check failed: {}\n", e.what());
    return 3;
  }
}
