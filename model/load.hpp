// Loading a ModelSpec from a project preset (presets/models/*.json) or a Hugging Face
// config.json (llama, mistral, mixtral, qwen2/3, qwen3_moe, gemma/2/3, phi, phi3, falcon,
// olmo/2, olmoe, dbrx, deepseek_v2/v3, gpt_oss, gpt2, gpt_neox model types).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/spec.hpp"

namespace trainsim::model {

/// A preset handle or a path; detects Hugging Face configs by their "model_type" key.
[[nodiscard]] ModelSpec load_model(const std::string& name_or_path);

/// From parsed JSON; `source` names the file in error messages. Validates the result.
[[nodiscard]] ModelSpec model_from_json(const nlohmann::json& j, const std::string& source);
[[nodiscard]] ModelSpec model_from_hf_config(const nlohmann::json& j, const std::string& source);

/// The project preset form of a spec (what `presets show` prints; round-trips).
[[nodiscard]] nlohmann::json model_to_json(const ModelSpec& m);

} // namespace trainsim::model
