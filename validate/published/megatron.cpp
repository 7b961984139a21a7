// Megatron-LM Table 1 (Narayanan et al. 2021) as data, and trainsim's prediction of each row.
#include "validate/published/megatron.hpp"

#include "hardware/load.hpp"
#include "model/spec.hpp"

namespace trainsim::val {

const std::vector<PublishedRun>& megatron_table1() {
  // name, heads, hidden, layers, tp, pp, GPUs, batch, micro-batch, interleave, torch DDP,
  // published TFLOP/s per GPU. Micro-batch, virtual stages (layers per virtual stage ->
  // chunks per stage) and DDP implementation from examples/sc21/run_table_1.sh.
  static const std::vector<PublishedRun> rows{
      {"1.7B", 24, 2304, 24, 1, 1, 32, 512, 16, 1, true, 137},
      {"3.6B", 32, 3072, 30, 2, 1, 64, 512, 16, 1, true, 138},
      {"7.5B", 32, 4096, 36, 4, 1, 128, 512, 16, 1, true, 142},
      {"18.4B", 48, 6144, 40, 8, 1, 256, 1024, 8, 1, true, 135},
      {"39.1B", 64, 8192, 48, 8, 2, 512, 1536, 4, 1, false, 138},
      {"76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 2, 3, false, 140},  // 15 layers/stage, 5 per chunk
      {"145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 2, 2, false, 148}, // 10 / 5
      {"310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 1, 2, false, 155},  // 6 / 3
      {"529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 1, 3, false, 163}, // 3 / 1
      {"1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 1, 1, false, 163},
  };
  return rows;
}

double megatron_eq3_flops(double B, double s, double L, double h, double V) {
  return 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
}

double megatron_eq4_seconds(double tokens, double params, double n, double x) {
  return 8 * tokens * params / (n * x);
}

PublishedPrediction predict_megatron(const PublishedRun& run, const std::string& profile_name,
                                     const std::string& framework) {
  model::ModelSpec m;
  m.name = "megatron-" + run.name;
  m.source = "Narayanan et al. 2021, Table 1";
  m.num_layers = run.num_layers;
  m.hidden_size = run.hidden_size;
  m.num_heads = run.num_heads;
  m.num_kv_heads = run.num_heads;
  m.head_dim = run.hidden_size / run.num_heads;
  m.ffn_hidden_size = 4 * run.hidden_size;
  m.vocab_size = 51200;
  m.max_seq_len = 2048;
  m.ffn = model::FfnKind::plain;
  m.norm = model::NormKind::layernorm;
  m.position = model::PositionKind::learned;
  m.tied_embeddings = true;
  m.qkv_bias = m.out_bias = m.mlp_bias = true;
  m.dropout = true;
  model::validate(m, m.name);

  model::TrainingSetup s;
  s.seq_len = 2048;
  s.micro_batch_size = run.micro_batch;
  s.global_batch_size = run.global_batch;
  s.precision = model::Precision::fp16_mixed;
  s.attention = model::AttentionImpl::naive; // 2021: fused softmax, no FlashAttention

  model::ParallelPlan p;
  p.tp = run.tp;
  p.pp = run.pp;
  p.dp = run.num_gpus / (run.tp * run.pp);
  p.interleave = run.interleave;
  p.recompute = model::Recompute::full;
  model::validate(p, m, s, run.num_gpus, m.name);

  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  cluster.num_nodes = run.num_gpus / cluster.gpus_per_node;
  const hw::GpuSpec gpu = hw::load_gpu(cluster.gpu);
  const hw::HardwareProfile profile =
      profile_name.empty() ? hw::default_profile(gpu.name) : hw::load_profile(profile_name);

  sim::StepOptions opt;
  opt.dp_overlap = run.torch_ddp; // Megatron's local DDP all-reduced after backward
  if (!framework.empty())
    opt.framework = std::make_shared<const sim::FrameworkProfile>(sim::load_framework(framework));

  PublishedPrediction out;
  out.run = run;
  out.model = m;
  out.setup = s;
  out.plan = p;
  out.step = sim::estimate_step(m, cluster, gpu, profile, p, s, opt);
  const double flops = megatron_eq3_flops(static_cast<double>(run.global_batch), 2048,
                                          static_cast<double>(run.num_layers),
                                          static_cast<double>(run.hidden_size), 51200);
  out.predicted_tflops_per_gpu =
      flops / (out.step.step_time_s * static_cast<double>(run.num_gpus)) / 1e12;
  out.error_pct = 100 * (out.predicted_tflops_per_gpu - run.published_tflops_per_gpu) /
                  run.published_tflops_per_gpu;
  return out;
}

} // namespace trainsim::val
