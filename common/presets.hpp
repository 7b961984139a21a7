// Where preset files live and how a --model/--gpu/--cluster value becomes a file.
// Search order for the presets directory: $TRAINSIM_PRESETS, the source tree the binary was
// configured from, then "presets" next to or above the executable (a carried build folder).
#pragma once

#include <string>
#include <vector>

namespace trainsim {

/// The presets directory, or throws ConfigError saying how to set TRAINSIM_PRESETS.
[[nodiscard]] std::string preset_dir();

/// Handles of the presets of one kind ("models", "gpus", "clusters", "profiles"), sorted.
[[nodiscard]] std::vector<std::string> list_presets(const std::string& kind);

/// A preset handle ("llama3-8b") or a path to a JSON file; returns the file path.
/// Unknown handles throw ConfigError with the nearest known names.
/// Whether a preset argument names a file (a '/' or a ".json" ending) rather than a preset.
[[nodiscard]] bool is_preset_path(const std::string& name_or_path);
[[nodiscard]] std::string resolve_preset(const std::string& kind, const std::string& name_or_path,
                                         const std::string& flag);

} // namespace trainsim
