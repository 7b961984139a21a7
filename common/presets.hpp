// Where preset files live and how a --model/--gpu/--cluster value becomes a file.
// Search order for the presets directory: $TRAINSIM_PRESETS, the source tree the binary was
// configured from, then "presets" next to or above the executable (a carried build folder).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace trainsim {

class Problems;

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

/// Checks a preset named inside a data file (a run's model or gpu, a cluster's gpu, a profile's
/// compiled_loss_profile): data files are untrusted input, so a name in one is a preset handle,
/// never a path that could open a FIFO, a device or a file the user did not pass (files are
/// passed by their flags: --model FILE, --framework FILE). Adds "field = "name": ..." to
/// `problems` and returns false for a path-like, over-long or non-printable name.
bool check_data_preset_name(Problems& problems, std::string_view field, std::string_view name);
/// The same check, throwing ConfigError "source: field = ...": returns `name`.
const std::string& require_data_preset_name(const std::string& name, std::string_view field,
                                            std::string_view source);

} // namespace trainsim
