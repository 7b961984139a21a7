// `trainsim train-step`: a real CS336 Transformer LM training step (forward, backward, AdamW;
// fp32 or bf16-mixed; naive or flash attention; recompute none/selective/full; data parallel
// over NCCL with naive/flat/overlapped/bucketed gradient sync, accumulation and ZeRO-1) timed
// with CUDA events, its memory measured by a tagged allocator, next to sim::estimate_step.
// Pure C++ API: cli/ includes this; the CUDA implementation is train_gpu.cpp, else a stub.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  bool capture_final = false;   // fill TrainResult::final_params only (train-step --check-params)
  bool trace = false; // one extra step after the measured ones, every launch timed (StepTrace)
};

/// Throws one ConfigError listing every invalid field (e.g. fp32 with flash attention).
void validate(const TrainOptions& o);

struct PhaseStats { // seconds over the measured steps
  double median_s = 0, min_s = 0, mean_s = 0, stdev_s = 0;
  std::int64_t samples = 0;
};
[[nodiscard]] PhaseStats phase_stats(std::vector<double> samples_s);

/// Groups of the per-op trace, shared by the measured launches and the op-list prediction so
/// the two compare category by category. recompute: forward work re-run inside backward.
enum class TraceCategory {
  gemm_fwd,
  gemm_bwd_dx,
  gemm_bwd_dw,
  attention_fwd,
  attention_bwd,
  norm,
  elementwise, // RoPE, permutes, SwiGLU, residual adds, casts
  embedding_loss,
  recompute,
  dp_comm,
  optimizer,
  other, // memsets
};
inline constexpr std::size_t kNumTraceCategories = 12;
[[nodiscard]] std::string_view to_string(TraceCategory c); // "GEMM bwd dX"

/// One named launch site of the traced step, summed over layers and micro-batches.
struct TraceEntry {
  std::string name; // "<pass> <op>", e.g. "bwd gemm qkv dW (TN)": row-major op(A) op(B)
  TraceCategory category = TraceCategory::other;
  std::int64_t count = 0; // launches
  double total_s = 0;     // summed CUDA-event time, each launch bracketed by its own events
};

/// --trace: one step after the measured ones, rank 0, compute stream only (collectives on the
/// comm stream of overlapped DDP run beside it; the exposed wait is traced).
struct StepTrace {
  std::vector<TraceEntry> ops; // in order of first launch
  double step_s = 0;           // first event to last: the traced step on the GPU
  double traced_s = 0;         // sum over ops; step_s - traced_s: GPU idle or untraced work
  std::int64_t num_launches = 0;
};

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
  StepTrace trace; // TrainOptions::trace only, else empty
};

/// A gradient bucket of overlapped DDP: a contiguous element range of the flat gradient.
struct GradBucket {
  std::int64_t lo = 0, hi = 0; // element range of the flat gradient
  std::size_t first = 0;       // lowest tensor index: its gradient is the last to become final
  std::vector<std::size_t> tensors;
};

/// The buckets of --ddp overlapped (one per tensor) or bucketed (tensors grouped until a bucket
/// holds at least bucket_bytes at elem_bytes per element), in the order backward makes them
/// final (reverse of the layout). The GPU step launches exactly these; the prediction prices
/// them (so the two cannot drift apart).
[[nodiscard]] std::vector<GradBucket> make_grad_buckets(const ParamLayout& layout, DdpMode ddp,
                                                        double bucket_bytes,
                                                        std::size_t elem_bytes);

/// The configuration of a recorded run from its "inputs" object (as `train-step --format json`
/// writes it: model preset name, batch_size, seq_len, precision, attention, recompute,
/// num_gpus, ddp, bucket_bytes, zero_stage, grad_accumulation), validated. ConfigError naming
/// `where` and the field for a missing, mistyped or out-of-range value.
[[nodiscard]] TrainOptions options_from_inputs_json(const nlohmann::json& inputs,
                                                    const std::string& where);

/// Runs warmup + steps optimizer steps. DeviceError without CUDA / GPUs / NCCL.
[[nodiscard]] TrainResult run_train_step(const TrainOptions& o);

/// trainsim's prediction for the same configuration (dp = num_gpus, one node of `gpu`).
[[nodiscard]] sim::StepEstimate predict_train_step(const TrainOptions& o, const hw::GpuSpec& gpu,
                                                   const hw::HardwareProfile& profile);

/// One entry of the simulator's op list over the whole step (per-op roofline time, as
/// `trainsim roofline --model` prints it, times layers and micro-batches), or a step-level
/// part of sim::estimate_step (recompute, dp_comm, optimizer: count 0, time in part_s).
struct PredictedOp {
  std::string name;       // "attn.qkv", "loss", ..., "recompute", "dp_comm", "optimizer"
  std::int64_t count = 0; // instances per step
  double fwd_s = 0, bwd_s = 0, part_s = 0;
  [[nodiscard]] double total_s() const { return fwd_s + bwd_s + part_s; }
};

struct TracePrediction {
  std::vector<PredictedOp> ops;
  /// Seconds per TraceCategory. A GEMM's backward is split evenly into dX and dW: the model
  /// gives both kernels the same FLOPs, bytes and efficiency (sim::op_cost).
  std::array<double, kNumTraceCategories> by_category_s{};
  double step_s = 0; // sim::StepEstimate::step_time_s: the sum of ops (and of by_category_s)
};

/// The simulator's per-op view of the same configuration as predict_train_step.
[[nodiscard]] TracePrediction predict_trace(const TrainOptions& o, const hw::GpuSpec& gpu,
                                            const hw::HardwareProfile& profile);

/// The simulator's inputs for this run (exposed for printing).
[[nodiscard]] model::ParallelPlan train_plan(const TrainOptions& o);
[[nodiscard]] model::TrainingSetup train_setup(const TrainOptions& o);

} // namespace trainsim::val::train
