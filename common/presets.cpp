// Preset directory discovery and name resolution (presets.hpp).
#include "common/presets.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>

#include "common/errors.hpp"
#include "common/json_io.hpp"

#ifndef TRAINSIM_PRESET_DIR
#define TRAINSIM_PRESET_DIR ""
#endif

namespace trainsim {
namespace fs = std::filesystem;

namespace {
bool looks_like_presets(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p / "models", ec) && fs::is_directory(p / "gpus", ec);
}
} // namespace

std::string preset_dir() {
  if (const char* env = std::getenv("TRAINSIM_PRESETS"); env && *env) {
    if (!looks_like_presets(env))
      throw ConfigError(fmt::format("TRAINSIM_PRESETS = {}: not a presets directory (needs "
                                    "models/ and gpus/)",
                                    env));
    return env;
  }
  if (looks_like_presets(TRAINSIM_PRESET_DIR))
    return TRAINSIM_PRESET_DIR;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (looks_like_presets(dir / "presets"))
        return (dir / "presets").string();
      if (looks_like_presets(dir / "share/trainsim/presets"))
        return (dir / "share/trainsim/presets").string();
      if (dir == dir.parent_path())
        break;
    }
  }
  throw ConfigError("cannot find the presets directory: set TRAINSIM_PRESETS to the repository's "
                    "presets/ folder");
}

std::vector<std::string> list_presets(const std::string& kind) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(preset_dir()) / kind, ec)) {
    if (entry.path().extension() == ".json")
      names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool is_preset_path(const std::string& name_or_path) {
  return name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json");
}

std::string resolve_preset(const std::string& kind, const std::string& name_or_path,
                           const std::string& flag) {
  if (name_or_path.empty())
    throw ConfigError(fmt::format("{}: empty value", flag));
  const bool path_like = is_preset_path(name_or_path);
  std::error_code ec;
  if (path_like) {
    const fs::file_status st = fs::status(name_or_path, ec);
    if (st.type() == fs::file_type::directory)
      throw ConfigError(
          fmt::format("{} = {}: is a directory, expected a JSON file", flag, name_or_path));
    if (!fs::exists(st))
      throw ConfigError(fmt::format("{} = {}: no such file", flag, name_or_path));
    return name_or_path; // read_input_file says why if it cannot be read
  }
  const fs::path candidate = fs::path(preset_dir()) / kind / (name_or_path + ".json");
  if (fs::is_regular_file(candidate, ec))
    return candidate.string();
  const auto known = list_presets(kind);
  const auto near = nearest_names(name_or_path, known);
  std::string hint;
  if (!near.empty()) {
    hint = " (did you mean ";
    for (std::size_t i = 0; i < near.size(); ++i)
      hint += (i ? ", " : "") + near[i];
    hint += "?)";
  }
  throw ConfigError(fmt::format("{} = {}: unknown {} preset{}; `trainsim presets list {}` shows "
                                "all {}",
                                flag, name_or_path, kind.substr(0, kind.size() - 1), hint, kind,
                                known.size()));
}

bool check_data_preset_name(Problems& problems, std::string_view field, std::string_view name) {
  constexpr std::size_t kMaxNameChars = 128;
  const bool control = std::any_of(name.begin(), name.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7f;
  });
  const bool path_like = name.find('/') != std::string_view::npos ||
                         name.find('\\') != std::string_view::npos || name.ends_with(".json") ||
                         name.starts_with(".");
  if (!control && !path_like && name.size() <= kMaxNameChars)
    return true;
  problems.add(fmt::format("{} = {}: must be a preset's name, not a path (no '/', no '.json' "
                           "ending, at most {} printable characters): a data file names presets; "
                           "a file is given by its flag on the command line",
                           field, json_brief(nlohmann::json(std::string(name))), kMaxNameChars));
  return false;
}

const std::string& require_data_preset_name(const std::string& name, std::string_view field,
                                            std::string_view source) {
  Problems p{std::string(source)};
  check_data_preset_name(p, field, name);
  p.throw_if_any();
  return name;
}

} // namespace trainsim
