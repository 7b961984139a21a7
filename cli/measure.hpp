// Shared by `calibrate` and `compare`: where kernel measurements come from.
#pragma once

#include <string>

#include "simulate/fit/kernel_fit.hpp"

namespace trainsim::cli {

/// Preset handle for a device name such as "NVIDIA H200" ("h200"), or "" if none matches.
[[nodiscard]] std::string gpu_preset_for_device(const std::string& device_name);

/// Measurements from `file` (bench kernels JSON), or, if empty, by running `suite` on GPU 0.
[[nodiscard]] fitting::MeasurementSet measurements_from(const std::string& file,
                                                        const std::string& suite);

} // namespace trainsim::cli
