// trainsim command line: builds the subcommands, dispatches, and maps exceptions to exit
// codes (0 ok, 1 usage/config, 2 device/runtime, 3 check/tolerance failed).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "common/errors.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "trainsim: how long will LLM training take, does it fit, and is the model right on my "
      "hardware.\nAnalytic cost model (params, FLOPs, memory, step time) with CUDA/NCCL "
      "validation."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "trainsim 0.1.0");
  app.footer("Example: trainsim model --model llama3-8b --seq-len 8192");
  trainsim::cli::add_model(app);
  trainsim::cli::add_time(app);
  trainsim::cli::add_memory(app);
  trainsim::cli::add_estimate(app);
  trainsim::cli::add_plan(app);
  trainsim::cli::add_sweep(app);
  trainsim::cli::add_roofline(app);
  trainsim::cli::add_collective(app);
  trainsim::cli::add_validate_published(app);
  trainsim::cli::add_presets(app);
  trainsim::cli::add_bench(app);
  trainsim::cli::add_calibrate(app);
  trainsim::cli::add_compare(app);
  trainsim::cli::add_train_step(app);
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 1;
  } catch (const trainsim::ConfigError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const trainsim::DeviceError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "device error: {}\n", e.what());
    return 2;
  } catch (const trainsim::CheckFailed& e) {
    std::fflush(stdout);
    fmt::print(stderr, "check failed: {}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "internal error: {}\n", e.what());
    return 2;
  }
}
