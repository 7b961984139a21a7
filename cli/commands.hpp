// Registration of every subcommand. Each cli/cmd_<name>.cpp defines add_<name>(app), which
// binds flags to its options struct and sets the callback that runs it.
#pragma once

#include <CLI/CLI.hpp>

namespace trainsim::cli {

void add_model(CLI::App& app);
void add_time(CLI::App& app);
void add_memory(CLI::App& app);
void add_presets(CLI::App& app);
void add_estimate(CLI::App& app);
void add_roofline(CLI::App& app);
void add_collective(CLI::App& app);
void add_sweep(CLI::App& app);
void add_plan(CLI::App& app);
void add_validate_published(CLI::App& app);
void add_bench(CLI::App& app); // parent of `bench kernels` and `bench collectives`
void add_bench_kernels(CLI::App& bench);
void add_bench_collectives(CLI::App& bench);
void add_calibrate(CLI::App& app);
void add_compare(CLI::App& app);
void add_train_step(CLI::App& app);

} // namespace trainsim::cli
