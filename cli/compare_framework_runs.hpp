// `trainsim compare --framework-runs` and `trainsim calibrate --framework-runs`: recorded runs
// of training frameworks (docs/frameworks.md) against trainsim's prediction with a framework
// profile, per run and summarised per framework and fit/test half; and the fit of a profile.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/output.hpp"

namespace trainsim::cli {

struct FrameworkRunsOptions {
  std::vector<std::string> files;
  std::vector<std::string> repeat_files; // further passes of the same runs (merged by id)
  std::string framework;                 // "" = each run with its own framework's profile
  std::string only;                      // "" = every framework; else only runs of this framework
  std::string plot;
  double max_test_error_pct = 0; // 0 = report only; else CheckFailed over the test half's mean
};

/// Prints one row per run (predicted, measured, error, inside the 1/2-sigma band), skipped runs
/// with their reason, and per framework and half: mean and worst |error| of time and memory,
/// band coverage, OOM-boundary verdicts.
void compare_framework_runs(const FrameworkRunsOptions& o, Sink& sink, nlohmann::json& out);

/// Fits `framework`'s free parameters on the fit half of the runs and writes the profile to
/// `out_file`; prints the fitted values and the fit/test errors. fit_only "tp-overlap" fits
/// tp_overlap_hidden_fraction alone (fitting::fit_tp_overlap_hidden) and keeps the rest.
void calibrate_framework(const std::vector<std::string>& files,
                         const std::vector<std::string>& repeat_files, const std::string& framework,
                         const std::string& fit_only, const std::string& out_file, Sink& sink);

} // namespace trainsim::cli
