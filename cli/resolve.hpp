// Flags shared by several subcommands and their resolution into validated core structs:
// preset < plan file < flags.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"
#include "model/spec.hpp"
#include "simulate/framework.hpp"

namespace trainsim::cli {

struct ModelOptions {
  std::string model;
  std::optional<std::int64_t> num_layers, hidden_size, num_heads, num_kv_heads, head_dim,
      ffn_hidden_size, vocab_size, max_seq_len, num_experts, top_k, expert_ffn_hidden_size,
      num_shared_experts;
  std::optional<std::string> ffn, norm, position;
  std::optional<bool> tied_embeddings, qkv_bias, out_bias, mlp_bias, dropout;
};
/// short_alias = false leaves out -m (roofline, whose --m is a GEMM size).
void add_model_options(CLI::App& cmd, ModelOptions& o, bool required, bool short_alias = true);
/// Loads the preset/file, applies overrides, validates again.
[[nodiscard]] model::ModelSpec resolve_model(const ModelOptions& o);

struct SetupOptions {
  std::int64_t micro_batch_size = 1;
  std::int64_t global_batch_size = 0;
  std::optional<std::int64_t> seq_len; // unset: model::default_seq_len(model)
  std::string precision = "bf16-mixed";
  std::string attention = "flash";
  std::string optimizer = "adamw";
  double moe_capacity_factor = 0;              // 0 = dropless
  double moe_imbalance_factor = 1;             // 1 = balanced
  std::string grad_reduce_dtype = "framework"; // --grad-reduce-dtype (commands with a framework)
  std::int64_t offload_activation_layers = 0;  // --offload-activation-layers
  std::int64_t recompute_layers = 0;           // --recompute-layers
  std::vector<std::string> recompute_modules;  // --recompute-modules (empty: core_attn)
};
void add_setup_options(CLI::App& cmd, SetupOptions& o);
/// --grad-reduce-dtype framework|fp32|bf16, --offload-activation-layers N and
/// --recompute-layers N (estimate, memory, plan, sweep: the commands that take a framework);
/// checked against it by require_setup_supported.
void add_framework_setup_options(CLI::App& cmd, SetupOptions& o);
/// --seq-len of a command without a layout (model, time): the flag, or model::default_seq_len,
/// checked as every command checks it (positive, within the model's learned positions).
[[nodiscard]] std::int64_t resolve_seq_len(const std::optional<std::int64_t>& flag,
                                           const model::ModelSpec& m);
/// The model gives the default sequence length (model::default_seq_len).
[[nodiscard]] model::TrainingSetup resolve_setup(const SetupOptions& o, const model::ModelSpec& m);

/// How the layers split over pipeline stages: an explicit list, or Megatron-LM's first/last
/// stage counts (the middle stages divide the rest evenly); nothing: evenly.
struct StageSplitOptions {
  std::string pp_layers; // "7,8x14,7" (nxk = k stages of n layers)
  std::optional<std::int64_t> first_stage_layers, last_stage_layers;
  [[nodiscard]] bool given() const {
    return !pp_layers.empty() || first_stage_layers || last_stage_layers;
  }
};
/// --pp-layers, --decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers.
void add_stage_split_options(CLI::App& cmd, StageSplitOptions& o);
/// Parses "7,8x14,7" into counts (each item n or nxk, k repetitions), naming `flag` on error.
[[nodiscard]] std::vector<std::int64_t> parse_stage_layers(const std::string& text,
                                                           const char* flag);
/// Only one form given, and Megatron's counts in 1..num_layers - 1 (else ConfigError).
void check_stage_split_flags(const StageSplitOptions& o, std::int64_t num_layers);
/// The per-stage counts the options give for pp stages of num_layers (empty: none given).
/// Errors name the flag: both forms given, a count below 1, or a Megatron split whose middle
/// stages cannot divide the rest evenly. The counts themselves are checked by validate().
[[nodiscard]] std::vector<std::int64_t>
resolve_stage_split(const StageSplitOptions& o, std::int64_t num_layers, std::int64_t pp);

struct PlanOptions {
  std::int64_t tp = 1, pp = 1, dp = 0, cp = 1, ep = 1, etp = 0, interleave = 1;
  // Unset: the framework's default stage (FrameworkProfile::default_zero_stage).
  std::optional<std::int64_t> zero_stage;
  bool sequence_parallel = false;
  std::string recompute = "none";
  StageSplitOptions stages;
};
void add_plan_options(CLI::App& cmd, PlanOptions& o);
/// dp = 0 means num_gpus / (tp pp cp); an unset ZeRO stage is `default_zero` (the framework's,
/// FrameworkProfile::default_zero_stage). Validates against the model and num_gpus.
[[nodiscard]] model::ParallelPlan resolve_plan(const PlanOptions& o, const model::ModelSpec& m,
                                               const model::TrainingSetup& s, std::int64_t num_gpus,
                                               std::int64_t default_zero);

/// Where an unset --zero's stage came from, for the output: "ZeRO-3: the fsdp profile's
/// default, <its source>; --zero to choose"; empty when --zero was given or the default is 0.
[[nodiscard]] std::string zero_default_note(const PlanOptions& o, const sim::FrameworkProfile& fw);

struct MachineOptions {
  std::string gpu;
  std::string cluster;
  std::optional<std::int64_t> num_gpus; // unset: one node of the cluster, or the command's default
  std::string calibration;
  std::optional<double> gpu_memory_gb;
};
/// with_num_gpus = false leaves out --num-gpus/-n (roofline, whose --n is a GEMM size: newer
/// CLI11 treats "-n" and "--n" as one name).
void add_machine_options(CLI::App& cmd, MachineOptions& o, bool with_cluster,
                         bool with_num_gpus = true);

struct Machine {
  hw::GpuSpec gpu;
  hw::ClusterSpec cluster;
  hw::HardwareProfile profile;
  std::int64_t num_gpus = 1;
};
/// Needs --gpu or --cluster; --num-gpus sets the node count of a cluster (rounded up to
/// whole nodes is an error: it must be a multiple of gpus_per_node, or below one node).
/// --gpu with --cluster must name the cluster's own GPU: a cluster's bandwidths belong to its
/// GPUs, so another GPU is an error (a cluster file with that "gpu" is the way to model it).
[[nodiscard]] Machine resolve_machine(const MachineOptions& o, std::int64_t default_gpus = 1);

[[nodiscard]] model::Precision parse_precision(const std::string& s);
[[nodiscard]] model::Optimizer parse_optimizer(const std::string& s);
[[nodiscard]] model::Recompute parse_recompute(const std::string& s);
[[nodiscard]] model::AttentionImpl parse_attention(const std::string& s);

[[nodiscard]] nlohmann::json setup_json(const model::TrainingSetup& s);
/// The plan's recompute policy as printed: "full (4 layers per chunk)" under full recompute of
/// some layers only (TrainingSetup::recompute_layers), else its name.
[[nodiscard]] std::string recompute_label(const model::ParallelPlan& p,
                                          const model::TrainingSetup& s);
[[nodiscard]] nlohmann::json plan_json(const model::ParallelPlan& p);

/// Refuses the first of `flags` that `cmd` was given: a flag the command takes for another of
/// its modes and would ignore in this one ("--zero: not used by roofline --model: <why>").
void refuse_unused_flags(const CLI::App& cmd, std::initializer_list<const char*> flags,
                         std::string_view why);

} // namespace trainsim::cli
