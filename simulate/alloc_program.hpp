// Recorded allocation programs: the order in which a recorded PyTorch training step makes and
// frees its blocks (each transformer layer's, forward and backward; the embedding's and head's
// around them; the parameters, the token batch, the first step's own workspaces), with each
// block's size a formula of the configuration. Recorded from two allocator traces of one training
// loop at different sizes (scripts/derive-alloc-program.py, which refuses traces that disagree
// event for event); presets/alloc-programs/*.json; played by the generated step (allocator.hpp,
// LayerAllocProgram) where the configuration is the one the program was recorded for.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "model/ops.hpp"
#include "model/spec.hpp"
#include "simulate/allocator.hpp"

namespace trainsim::sim {

struct AllocProgram {
  std::string name, source;
  std::string framework = "pytorch"; // "pytorch" (eager) or "fsdp" (FSDP2 on one GPU)
  // Where it applies: the framework profile naming it, and these.
  model::Precision precision = model::Precision::bf16_mixed;
  model::AttentionImpl attention = model::AttentionImpl::naive;
  model::Recompute recompute = model::Recompute::full;
  std::string layer_like_model; // a model preset whose layer has the op roles recorded
  double ffn_over_hidden = 0;   // FFN width / hidden size of the recorded models
  std::int64_t head_dim = 0;    // hidden size / heads of the recorded models
  // Sizes: bytes = coefficient x a product of B (micro-batch), S (sequence), D (hidden),
  // F (FFN width), H (heads on this GPU); "1" for a constant.
  struct Event {
    LayerAllocProgram::Kind kind = LayerAllocProgram::Kind::alloc;
    std::int32_t block = -1;
    double coefficient = 0;
    std::string product;
    double offset = 0;     // around the layers: bytes = coefficient x product + offset
    std::int8_t part = -1; // f_part: which part
    std::int64_t stream = 0;
  };
  struct Pass {
    std::vector<Event> events;
    std::vector<LayerAllocProgram::Kept> kept;
    std::int32_t blocks = 0;
  };
  Pass forward, backward;
  // The parts around the layers (LayerAllocProgram::around), when recorded; they apply only at
  // the recorded vocabulary (vocab_size), since every recorded model had the same one.
  std::array<Pass, LayerAllocProgram::num_parts> around;
  std::vector<std::pair<std::int32_t, std::int32_t>> top_prev;
  std::int64_t vocab_size = 0;
  struct FirstStepBlock {
    std::int8_t part = -1; // -1: the first layer's forward window
    std::int32_t before = 0;
    double coefficient = 0;
    std::string product;
  };
  std::vector<FirstStepBlock> first_step;
  struct Size {
    double coefficient = 0;
    std::string product;
  };
  // Blocks made before the first step (LayerAllocProgram::init_*).
  std::vector<Size> init_embedding, init_layer, init_rest;
  // The token batch: bytes per token and per sequence (B x (S + 1) ids); 0: none recorded.
  double batch_bytes_per_token = 0, batch_bytes_per_sequence = 0;
  // FSDP2 (LayerAllocProgram): middle backward windows, forward windows keeping their output,
  // the recorded zero_grad order.
  bool middle_backward = false, forward_keeps_output = false;
  std::vector<LayerAllocProgram::ZeroGradFree> zero_grad_sequence;
  // FSDP2's initialisation (sections before, create per layer, between, shard per layer,
  // after): allocations as sizes, frees as [section, block].
  struct InitEvent {
    bool alloc = true;
    Size size;
    double offset = 0;
    std::int8_t section = -1;
    std::int32_t block = -1;
  };
  std::array<std::vector<InitEvent>, 5> init_sequence;
};

/// Reads a program (a preset handle in presets/alloc-programs or a path). Throws ConfigError
/// naming the file and field: unknown keys, a product with letters other than BSDFHV or "1", a
/// free of a block not yet made or already freed, a kept block that does not exist, a part
/// freeing a block of a part not yet played.
/// Read once per name or path and kept for the process.
[[nodiscard]] const AllocProgram& load_alloc_program(const std::string& name_or_path);
/// The same from parsed JSON (`source` names it in errors); not cached.
[[nodiscard]] AllocProgram alloc_program_from_json(const nlohmann::json& j,
                                                   const std::string& source);

/// The program's events in bytes for this configuration, or nothing when the configuration is
/// not the one recorded (precision, attention, recompute, one layer kind with the recorded
/// layer's op roles and shape ratios, no tensor/context/pipeline/expert parallelism). The parts
/// around the layers come with it where the vocabulary is the recorded one.
[[nodiscard]] std::optional<LayerAllocProgram>
layer_alloc_program(const AllocProgram& program, const model::ModelSpec& model,
                    const model::ParallelPlan& plan, const model::TrainingSetup& setup);

} // namespace trainsim::sim
