// `trainsim train-step`: a real CS336 Transformer LM training step (forward, backward, AdamW;
// fp32 or bf16-mixed; naive or flash attention; recompute none/selective/full; data parallel
// over NCCL with naive/flat/overlapped/bucketed gradient sync, accumulation and ZeRO-1) timed
// with CUDA events, its memory measured by a tagged allocator, next to sim::estimate_step.
// Pure C++ API: cli/ includes this; the CUDA implementation is train_gpu.cpp, else a stub.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"
#include "model/spec.hpp"
#include "simulate/step.hpp"
#include "validate/train/memory.hpp"
#include "validate/train/reference.hpp"

namespace trainsim::val::train {

/// Gradient synchronisation across data-parallel ranks.
/// none: no communication (one GPU only); naive: one all-reduce per parameter after backward;
/// flat: one all-reduce of the flat gradient buffer after backward; overlapped: per-parameter
/// all-reduce on a comm stream as soon as each gradient is final; bucketed: overlapped, in
/// buckets of at least bucket_bytes.
enum class DdpMode { none, naive, flat, overlapped, bucketed };
[[nodiscard]] std::string_view to_string(DdpMode m);
/// ConfigError naming the flag and the accepted values.
[[nodiscard]] DdpMode parse_ddp(const std::string& s);

struct TrainOptions {
  model::ModelSpec model;
  std::string source = "train-step"; // names inputs in error messages
  std::int64_t batch_size = 4;       // sequences per micro-batch per GPU
  std::int64_t seq_len = 512;
  model::Precision precision = model::Precision::bf16_mixed; // fp32 or bf16_mixed
  model::AttentionImpl attention = model::AttentionImpl::flash;
  model::Recompute recompute = model::Recompute::none;
  std::int64_t num_gpus = 1; // data-parallel ranks, one thread per local GPU
  DdpMode ddp = DdpMode::none;
  double bucket_bytes = 25.0 * 1024 * 1024;
  std::int64_t zero_stage = 0;        // 0 or 1
  std::int64_t grad_accumulation = 1; // micro-batches per optimizer step
  std::int64_t steps = 10, warmup = 5;
  AdamWConfig adamw;
  std::uint64_t seed = 1;
  std::int64_t data_period = 8; // synthetic task: repeating pattern length
  bool capture_params = false;  // fill TrainResult initial/final params and first gradients
};

/// Throws one ConfigError listing every invalid field (e.g. fp32 with flash attention).
void validate(const TrainOptions& o);

struct PhaseStats { // seconds over the measured steps
  double median_s = 0, min_s = 0, mean_s = 0, stdev_s = 0;
  std::int64_t samples = 0;
};
[[nodiscard]] PhaseStats phase_stats(std::vector<double> samples_s);

struct TrainResult {
  std::string gpu_name;
  std::string versions; // "driver 13.0, runtime 13.0, NCCL 2.27.7" (what was linked/loaded)
  std::int64_t num_gpus = 1;
  // Rank 0, measured steps only. forward/backward sum over micro-batches (recomputation is
  // inside backward); dp_comm is the exposed wait for gradient sync after backward; optimizer
  // includes ZeRO-1's all-gather.
  PhaseStats forward, backward, dp_comm, optimizer, step;
  std::vector<double> losses;    // mean loss per step (warm-up steps included), all ranks
  CategoryBytes peak_bytes{};    // per-category maximum over the recorded step (rank 0)
  CategoryBytes at_peak_bytes{}; // per category when the total peaked
  double peak_total_bytes = 0;
  double reserved_bytes = 0;         // cudaMalloc'ed by the caching allocator
  std::vector<MemoryPoint> timeline; // the last measured step, rank 0
  std::int64_t num_padded_params = 0;
  // capture_params only: fp32 master parameters before the first step and after the last,
  // and the synchronised gradient of the first step (d mean loss / d params).
  std::vector<float> initial_params, first_grads, final_params;
};

/// Runs warmup + steps optimizer steps. DeviceError without CUDA / GPUs / NCCL.
[[nodiscard]] TrainResult run_train_step(const TrainOptions& o);

/// trainsim's prediction for the same configuration (dp = num_gpus, one node of `gpu`).
[[nodiscard]] sim::StepEstimate predict_train_step(const TrainOptions& o, const hw::GpuSpec& gpu,
                                                   const hw::HardwareProfile& profile);

/// The simulator's inputs for this run (exposed for printing).
[[nodiscard]] model::ParallelPlan train_plan(const TrainOptions& o);
[[nodiscard]] model::TrainingSetup train_setup(const TrainOptions& o);

} // namespace trainsim::val::train
