// The whole command line as a function: builds the subcommands, parses, runs the chosen one and
// maps exceptions to exit codes. main() calls it once; the property tests and the libFuzzer
// target call it many times in one process.
#pragma once

namespace trainsim::cli {

/// Runs `trainsim argv[1..]`; returns the exit code (0 ok, 1 usage/config, 2 device/runtime or
/// internal error, 3 check/tolerance failed). Messages go to stderr, results to stdout or -o.
int run_cli(int argc, const char* const* argv);

} // namespace trainsim::cli
