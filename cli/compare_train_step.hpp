// `trainsim compare --train-step`: recorded training-step runs vs trainsim's prediction now.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cli/output.hpp"
#include "hardware/profile.hpp"

namespace trainsim::cli {

/// Reads FILE.jsonl (scripts/train-step-bench.sh's train-step.jsonl), predicts every
/// "source": "trainsim" run with `cal` on `gpu_override` (default: the profile's GPU), prints
/// measured vs predicted step time, exposed dp_comm and peak memory, adds "train_step" to `out`,
/// plots measured and predicted step time when `plot` is set, and throws CheckFailed when
/// max_error_pct > 0 and a step-time |error| exceeds it. ConfigError names the line and field.
void compare_train_step(const std::string& file, const hw::HardwareProfile& cal,
                        const std::string& gpu_override, const std::string& plot,
                        double max_error_pct, Sink& sink, nlohmann::json& out);

} // namespace trainsim::cli
