// `trainsim presets list [KIND]` and `trainsim presets show NAME`: what is available, and one
// preset resolved (validated, in the file's units).
#include <algorithm>
#include <filesystem>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "hardware/load.hpp"
#include "model/count.hpp"
#include "model/load.hpp"
#include "simulate/framework.hpp"

namespace trainsim::cli {
namespace {

const std::vector<std::string> kKinds{"models", "gpus", "clusters", "profiles", "frameworks"};

void require_kind(const std::string& what, const std::string& kind) {
  if (!kind.empty() && std::find(kKinds.begin(), kKinds.end(), kind) == kKinds.end())
    throw ConfigError(fmt::format(
        "{} {}: unknown kind (models, gpus, clusters, profiles, frameworks)", what, kind));
}

struct PresetsOptions {
  std::string kind;
  std::string name;
  OutputOptions out;
};

std::string source_of(const std::string& kind, const std::string& name) {
  const std::string path = resolve_preset(kind, name, "preset");
  return optional_string(load_json_file(path), "source", "", path);
}

void list(const PresetsOptions& o) {
  require_kind("presets list", o.kind);
  Sink sink(o.out);
  nlohmann::json j;
  Table t({"kind", "name", "source"});
  for (const auto& kind : kKinds) {
    if (!o.kind.empty() && kind != o.kind)
      continue;
    for (const auto& name : list_presets(kind)) {
      const std::string src = source_of(kind, name);
      j[kind].push_back({{"name", name}, {"source", src}});
      t.add_row({kind, name, src.size() > 90 ? src.substr(0, 87) + "..." : src}, {kind, name, src});
    }
  }
  if (sink.format() == Format::json)
    sink.json(j);
  else
    t.print(sink);
}

void show(const PresetsOptions& o) {
  require_kind("presets show --kind", o.kind);
  std::vector<std::string> kinds = o.kind.empty() ? kKinds : std::vector<std::string>{o.kind};
  const bool path = is_preset_path(o.name);
  if (path && o.kind.empty()) {
    // A file is read as the kind of the folder it is in (presets/gpus/h100-sxm.json), else as
    // the kind --kind names: one loader, one set of errors.
    const std::string folder = std::filesystem::path(o.name).parent_path().filename().string();
    if (std::find(kKinds.begin(), kKinds.end(), folder) == kKinds.end())
      throw ConfigError(fmt::format("presets show {}: say which kind of preset the file is with "
                                    "--kind (models, gpus, clusters, frameworks or profiles)",
                                    o.name));
    kinds = {folder};
  }
  for (const auto& kind : kinds) {
    const auto names = list_presets(kind);
    if (!path && std::find(names.begin(), names.end(), o.name) == names.end())
      continue;
    nlohmann::json j;
    if (kind == "models") {
      const auto m = model::load_model(o.name);
      j = model::model_to_json(m);
      j["params_total"] = model::count_params(m).total;
    } else if (kind == "gpus") {
      j = hw::gpu_to_json(hw::load_gpu(o.name));
    } else if (kind == "clusters") {
      j = hw::cluster_to_json(hw::load_cluster(o.name));
    } else if (kind == "frameworks") {
      j = sim::framework_to_json(sim::load_framework(o.name));
    } else {
      j = hw::profile_to_json(hw::load_profile(o.name));
    }
    Sink sink(o.out);
    sink.json(j);
    return;
  }
  std::vector<std::string> all;
  for (const auto& kind : kKinds)
    for (const auto& n : list_presets(kind))
      all.push_back(n);
  const auto near = nearest_names(o.name, all);
  throw ConfigError(fmt::format("presets show {}: no such preset{}", o.name,
                                near.empty() ? "" : " (did you mean " + near.front() + "?)"));
}

} // namespace

void add_presets(CLI::App& app) {
  auto o = std::make_shared<PresetsOptions>();
  auto* cmd = app.add_subcommand("presets", "List presets, or show one resolved");
  cmd->require_subcommand(1);
  cmd->footer("Examples:\n  trainsim presets list gpus\n  trainsim presets show llama3-8b\n"
              "  trainsim presets list frameworks\n  trainsim presets show fsdp");
  auto* l = cmd->add_subcommand("list", "List presets with their sources");
  l->add_option("kind", o->kind, "models | gpus | clusters | profiles | frameworks (default: all)");
  add_output_options(*l, o->out);
  l->footer("Example: trainsim presets list gpus");
  l->callback([o] { list(*o); });
  auto* s = cmd->add_subcommand("show", "Print one preset as JSON (validated)");
  s->add_option("name", o->name, "Preset name or JSON file")->required();
  s->add_option("--kind", o->kind,
                "models | gpus | clusters | profiles | frameworks (when names clash)");
  s->footer("Example: trainsim presets show llama3-8b");
  s->callback([o] { show(*o); });
}

} // namespace trainsim::cli
