// Loading GPU, cluster and hardware-profile presets (presets/gpus, presets/clusters,
// presets/profiles) and writing profiles back (calibration output). Units are converted
// once here: *_tflops -> flops/s, *_gb_per_s -> bytes/s, memory_gb -> bytes (1e9).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"

namespace trainsim::hw {

[[nodiscard]] GpuSpec load_gpu(const std::string& name_or_path);
[[nodiscard]] GpuSpec gpu_from_json(const nlohmann::json& j, const std::string& source);
[[nodiscard]] nlohmann::json gpu_to_json(const GpuSpec& g);

[[nodiscard]] ClusterSpec load_cluster(const std::string& name_or_path);
[[nodiscard]] ClusterSpec cluster_from_json(const nlohmann::json& j, const std::string& source);
[[nodiscard]] nlohmann::json cluster_to_json(const ClusterSpec& c);
/// A one-node "cluster" of a GPU (used when only --gpu is given): NVLink inside the node.
[[nodiscard]] ClusterSpec single_node_cluster(const GpuSpec& gpu, std::int64_t num_gpus);

/// A profile file (preset handle or path).
[[nodiscard]] HardwareProfile load_profile(const std::string& name_or_path);
/// The default profile of a GPU: presets/profiles/<gpu>.json if present, else default.json.
[[nodiscard]] HardwareProfile default_profile(const std::string& gpu_name);
[[nodiscard]] HardwareProfile profile_from_json(const nlohmann::json& j, const std::string& source);
[[nodiscard]] nlohmann::json profile_to_json(const HardwareProfile& p);

} // namespace trainsim::hw
