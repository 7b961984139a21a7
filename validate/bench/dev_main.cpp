// bench_kernels_dev: `bench kernels` without the rest of trainsim's CLI (same options, printers
// and exit codes as `trainsim bench kernels`), for measuring kernels while the CLI is in flux.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "common/errors.hpp"

int main(int argc, char **argv) {
  CLI::App app{"bench_kernels_dev: trainsim's `bench kernels` on its own"};
  app.require_subcommand(1);
  auto *bench = app.add_subcommand("bench", "Measure kernels on local GPUs");
  bench->require_subcommand(1);
  trainsim::cli::add_bench_kernels(*bench);
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const trainsim::ConfigError &e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const trainsim::DeviceError &e) {
    std::fflush(stdout);
    fmt::print(stderr, "device error: {}\n", e.what());
    return 2;
  } catch (const trainsim::CheckFailed &e) {
    std::fflush(stdout);
    fmt::print(stderr, "check failed: {}\n", e.what());
    return 3;
  } catch (const std::exception &e) {
    std::fflush(stdout);
    fmt::print(stderr, "internal error: {}\n", e.what());
    return 2;
  }
}
