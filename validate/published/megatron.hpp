// Published runs trainsim must predict: Narayanan et al. 2021 (Megatron-LM on Selene,
// A100 80GB SXM, 312 TFLOP/s bf16/fp16), Table 1, with the run configurations of the
// paper's published scripts (examples/sc21/run_table_1.sh in the Megatron-LM repository:
// micro-batch size, virtual pipeline stages, DDP implementation).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "simulate/framework.hpp"
#include "simulate/step.hpp"

namespace trainsim::val {

struct PublishedRun {
  std::string name; // "1.7B"
  std::int64_t num_heads = 0, hidden_size = 0, num_layers = 0;
  std::int64_t tp = 1, pp = 1, num_gpus = 0, global_batch = 0, micro_batch = 1;
  std::int64_t interleave = 1; // virtual stages per pipeline stage
  bool torch_ddp = true;       // PyTorch DDP (bucketed, overlapped) vs Megatron "local" DDP
  double published_tflops_per_gpu = 0;
};

/// The ten rows of Table 1.
[[nodiscard]] const std::vector<PublishedRun>& megatron_table1();

struct PublishedPrediction {
  PublishedRun run;
  model::ModelSpec model;     // the row's GPT model
  model::TrainingSetup setup; // its batch, sequence and precision
  model::ParallelPlan plan;   // its published layout
  sim::StepEstimate step;
  double predicted_tflops_per_gpu = 0; // the paper's count (Eq. 3) / predicted step time
  double error_pct = 0;                // (predicted - published) / published
};

/// Predicts one row on `cluster_name` GPUs with the given profile (preset or file; empty =
/// the GPU's default profile). seq 2048, vocab 51200, fp16 mixed, full recompute.
/// `framework`: a framework profile (name or file) for the step, "" = trainsim's identity.
[[nodiscard]] PublishedPrediction predict_megatron(const PublishedRun& run,
                                                   const std::string& profile = "",
                                                   const std::string& framework = "");

/// The paper's FLOP count per iteration with full recompute (Narayanan et al. 2021 Eq. 3):
/// 96 B s L h^2 (1 + s/(6h) + V/(16 L h)).
[[nodiscard]] double megatron_eq3_flops(double batch, double seq, double layers, double hidden,
                                        double vocab);

/// Eq. 4: end-to-end training time = 8 T P / (n X) for T tokens, P params, n GPUs at X FLOP/s.
[[nodiscard]] double megatron_eq4_seconds(double tokens, double params, double num_gpus,
                                          double flops_per_s_per_gpu);

} // namespace trainsim::val
