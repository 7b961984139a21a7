// libFuzzer target for the command-line layer: the input is split at NUL bytes into the
// arguments of `trainsim ...` and run through run_cli in-process. Any argument list must end
// with exit 0, 1 (a clear error) or 3 (a failed check); a crash, a sanitizer report, an
// uncaught exception, a hang or exit 2 (an internal error: e.g. a NaN reaching a printer) is
// a finding. Argument lists that would write files (-o/--output, --out, --plot,
// --allocator-trace-out) or drive a
// GPU (bench, calibrate, train-step) are skipped. Built with -DTRAINSIM_FUZZ=ON (clang);
// docs/model.md, "Fuzzing", says how to run it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/app.hpp"

namespace {

bool writes_or_needs_gpu(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "bench" || args[0] == "calibrate" || args[0] == "train-step"))
    return true;
  for (const auto& a : args) {
    if (a.rfind("--out", 0) == 0 || a.rfind("--plot", 0) == 0 ||
        a.rfind("--allocator-trace-out", 0) == 0)
      return true;
    // Short options combine ("-qo file"): any single-dash word with an 'o' may be -o.
    if (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.find('o') != std::string::npos)
      return true;
  }
  return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  std::string current;
  for (std::size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else if (current.size() < 256) {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  if (!current.empty() && args.size() < 64)
    args.push_back(current);
  if (writes_or_needs_gpu(args))
    return 0;
  std::vector<const char*> argv{"trainsim"};
  for (const auto& a : args)
    argv.push_back(a.c_str());
  const int rc = trainsim::cli::run_cli(static_cast<int>(argv.size()), argv.data());
  if (rc != 0 && rc != 1 && rc != 3)
    __builtin_trap();
  return 0;
}
