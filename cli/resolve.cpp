// Shared flag groups and their resolution (resolve.hpp).
#include "cli/resolve.hpp"

#include <cctype>
#include <fmt/format.h>

#include "common/errors.hpp"
#include "hardware/load.hpp"
#include "model/load.hpp"

namespace trainsim::cli {

using model::AttentionImpl;
using model::Optimizer;
using model::Precision;
using model::Recompute;

void add_model_options(CLI::App& cmd, ModelOptions& o, bool required, bool short_alias) {
  auto* opt = cmd.add_option(short_alias ? "--model,-m" : "--model", o.model,
                             "Model: a preset name (`trainsim presets list models`), a preset "
                             "JSON file, or a Hugging Face config.json");
  if (required)
    opt->required();
  auto* g = cmd.add_option_group("model overrides", "Override fields of the model preset");
  g->add_option("--num-layers", o.num_layers, "Transformer layers");
  g->add_option("--hidden-size", o.hidden_size, "Hidden size (d_model)");
  g->add_option("--num-heads", o.num_heads, "Attention heads");
  g->add_option("--num-kv-heads", o.num_kv_heads, "Key/value heads (GQA/MQA)");
  g->add_option("--head-dim", o.head_dim, "Head dimension");
  g->add_option("--ffn-hidden-size", o.ffn_hidden_size, "FFN hidden size (d_ff)");
  g->add_option("--vocab-size", o.vocab_size, "Vocabulary size");
  g->add_option("--max-seq-len", o.max_seq_len, "Positions the model was built for");
  g->add_option("--num-experts", o.num_experts, "MoE experts (0 = dense)");
  g->add_option("--top-k", o.top_k, "MoE experts per token");
  g->add_option("--expert-ffn-hidden-size", o.expert_ffn_hidden_size, "MoE expert FFN size");
  g->add_option("--num-shared-experts", o.num_shared_experts, "MoE shared experts");
  g->add_option("--ffn", o.ffn, "gated (SwiGLU, 3 matrices) | plain (GELU, 2)");
  g->add_option("--norm", o.norm, "layernorm | rmsnorm");
  g->add_option("--position", o.position, "learned | rotary");
  g->add_option("--tied-embeddings", o.tied_embeddings, "true | false");
  g->add_option("--qkv-bias", o.qkv_bias, "true | false");
  g->add_option("--out-bias", o.out_bias, "true | false");
  g->add_option("--mlp-bias", o.mlp_bias, "true | false");
  g->add_option("--dropout", o.dropout, "true | false (dropout layers in training)");
}

model::ModelSpec resolve_model(const ModelOptions& o) {
  model::ModelSpec m = model::load_model(o.model);
  bool changed = false;
  auto set = [&](const std::optional<std::int64_t>& v, std::int64_t& field) {
    if (v) {
      field = *v;
      changed = true;
    }
  };
  // What depends on an overridden field is derived again, as the loaders derive it, unless it
  // is given too: a head's width is hidden / heads (MLA keeps its own head widths), and a
  // model with as many KV heads as heads (multi-head attention) keeps them equal.
  const bool mha = m.num_kv_heads == m.num_heads;
  set(o.num_layers, m.num_layers);
  set(o.hidden_size, m.hidden_size);
  set(o.num_heads, m.num_heads);
  std::string underived; // said after the sizes themselves are checked
  if ((o.hidden_size || o.num_heads) && !o.head_dim &&
      m.attention_kind != model::AttentionKind::mla) {
    if (m.num_heads > 0 && m.hidden_size % m.num_heads == 0)
      m.head_dim = m.hidden_size / m.num_heads;
    else
      underived = fmt::format("--num-heads {} with hidden size {}: the heads must divide the "
                              "hidden size to derive head_dim (or give --head-dim)",
                              m.num_heads, m.hidden_size);
  }
  if (o.num_heads && !o.num_kv_heads && mha)
    m.num_kv_heads = m.num_heads;
  set(o.num_kv_heads, m.num_kv_heads);
  set(o.head_dim, m.head_dim);
  set(o.ffn_hidden_size, m.ffn_hidden_size);
  set(o.vocab_size, m.vocab_size);
  set(o.max_seq_len, m.max_seq_len);
  set(o.num_experts, m.num_experts);
  set(o.top_k, m.top_k);
  set(o.expert_ffn_hidden_size, m.expert_ffn_hidden_size);
  set(o.num_shared_experts, m.num_shared_experts);
  auto flag = [&](const std::optional<bool>& v, bool& field) {
    if (v) {
      field = *v;
      changed = true;
    }
  };
  flag(o.tied_embeddings, m.tied_embeddings);
  flag(o.qkv_bias, m.qkv_bias);
  flag(o.out_bias, m.out_bias);
  flag(o.mlp_bias, m.mlp_bias);
  flag(o.dropout, m.dropout);
  if (o.ffn) {
    changed = true;
    if (*o.ffn == "gated")
      m.ffn = model::FfnKind::gated;
    else if (*o.ffn == "plain")
      m.ffn = model::FfnKind::plain;
    else
      throw ConfigError(fmt::format("--ffn = {}: must be gated or plain", *o.ffn));
  }
  if (o.norm) {
    changed = true;
    if (*o.norm == "layernorm")
      m.norm = model::NormKind::layernorm;
    else if (*o.norm == "rmsnorm")
      m.norm = model::NormKind::rmsnorm;
    else
      throw ConfigError(fmt::format("--norm = {}: must be layernorm or rmsnorm", *o.norm));
  }
  if (o.position) {
    changed = true;
    if (*o.position == "learned")
      m.position = model::PositionKind::learned;
    else if (*o.position == "rotary")
      m.position = model::PositionKind::rotary;
    else
      throw ConfigError(fmt::format("--position = {}: must be learned or rotary", *o.position));
  }
  if (changed)
    model::validate(m, "flags (model overrides)");
  if (!underived.empty())
    throw ConfigError(underived);
  return m;
}

namespace {
template <class E>
E parse_choice(const std::string& value, const char* flag,
               std::initializer_list<std::pair<const char*, E>> choices) {
  std::string allowed;
  for (const auto& [name, e] : choices) {
    if (value == name)
      return e;
    allowed += allowed.empty() ? name : std::string(", ") + name;
  }
  throw ConfigError(fmt::format("{} = {}: must be one of {}", flag, value, allowed));
}
} // namespace

model::Precision parse_precision(const std::string& s) {
  return parse_choice<Precision>(s, "--precision",
                                 {{"fp32", Precision::fp32},
                                  {"bf16-mixed", Precision::bf16_mixed},
                                  {"fp16-mixed", Precision::fp16_mixed},
                                  {"bf16", Precision::bf16},
                                  {"fp8", Precision::fp8_delayed},
                                  {"fp8-cs", Precision::fp8_current},
                                  {"mxfp8", Precision::mxfp8}});
}
model::Optimizer parse_optimizer(const std::string& s) {
  return parse_choice<Optimizer>(s, "--optimizer",
                                 {{"adamw", Optimizer::adamw}, {"sgd", Optimizer::sgd}});
}
model::Recompute parse_recompute(const std::string& s) {
  return parse_choice<Recompute>(s, "--recompute",
                                 {{"none", Recompute::none},
                                  {"selective", Recompute::selective},
                                  {"full", Recompute::full},
                                  {"selective-op", Recompute::selective_op}});
}
model::AttentionImpl parse_attention(const std::string& s) {
  return parse_choice<AttentionImpl>(
      s, "--attention", {{"flash", AttentionImpl::flash}, {"naive", AttentionImpl::naive}});
}

void add_setup_options(CLI::App& cmd, SetupOptions& o) {
  cmd.add_option("--micro-batch", o.micro_batch_size, "Sequences per micro-batch per GPU")
      ->capture_default_str();
  cmd.add_option("--global-batch", o.global_batch_size,
                 "Sequences per optimizer step (0 = micro-batch x dp)")
      ->capture_default_str();
  cmd.add_option(
      "--seq-len,-s", o.seq_len,
      "Sequence length (tokens); default: 2048, or the model's max_seq_len when smaller");
  cmd.add_option("--precision", o.precision,
                 "fp32 (4+4+8 B/param) | bf16-mixed, fp16-mixed (2+2+12: fp32 master, m, v) | "
                 "bf16 (2+2+8: no master copy) | fp8 (Transformer Engine, delayed scaling), "
                 "fp8-cs (current scaling), mxfp8 (Blackwell): FP8 GEMMs in the linear layers, "
                 "bf16 elsewhere, fp32 master weights, plus FP8 weight copies")
      ->capture_default_str();
  cmd.add_option("--attention", o.attention,
                 "flash (saves O + logsumexp) | naive (saves the s^2 scores)")
      ->capture_default_str();
  cmd.add_option("--optimizer", o.optimizer, "adamw (2 fp32 moments) | sgd (1 fp32 momentum)")
      ->capture_default_str();
  cmd.add_option("--moe-capacity-factor", o.moe_capacity_factor,
                 "MoE: expert buffers of this x the balanced share, overflow dropped, padded "
                 "(0 = dropless)")
      ->capture_default_str();
  cmd.add_option("--moe-imbalance", o.moe_imbalance_factor,
                 "MoE: routed tokens on the busiest expert-parallel rank / the mean (1 = "
                 "balanced; dropless)")
      ->capture_default_str();
}

void add_framework_setup_options(CLI::App& cmd, SetupOptions& o) {
  cmd.add_option("--grad-reduce-dtype", o.grad_reduce_dtype,
                 "Megatron-Core's gradient buffers under mixed precision (grad_reduce_in_fp32): "
                 "framework (the profile's default: fp32 buffers in memory, 4 B/param, "
                 "Megatron-Core's default, with the reduction priced at 16 bits) | fp32 (both "
                 "at 4 B) | bf16 (both at 2 B, as NVIDIA's Megatron-Bridge performance "
                 "configurations run)")
      ->capture_default_str();
  cmd.add_option("--offload-activation-layers", o.offload_activation_layers,
                 "Megatron-Core's activation CPU offload (cpu_offloading_num_layers, through "
                 "Transformer Engine): the saved activations of this many layers go to host "
                 "memory in forward and come back in backward over the GPU's host link, beside "
                 "the compute (0 = none; pp = 1 and fewer than the model's layers; --framework "
                 "megatron)")
      ->capture_default_str();
  cmd.add_option("--recompute-layers", o.recompute_layers,
                 "With --recompute full: fully recompute only this many layers of each pipeline "
                 "stage's model chunk, the others keeping all their activations (Megatron-Core's "
                 "--recompute-method block --recompute-num-layers N; torchtitan's checkpointing "
                 "of every k-th layer is num_layers / k of them); 0 = every layer; plan: searches "
                 "only full recompute then")
      ->capture_default_str();
  cmd.add_option(
         "--recompute-modules", o.recompute_modules,
         "With --recompute selective and --framework megatron: the modules re-run in "
         "backward, comma-separated, as Megatron-Core's --recompute-modules names them: "
         "core_attn (the default alone), layernorm (the pre-MLP norm of MoE layers and "
         "MLA's input norm: Transformer Engine fuses the others into the next GEMM), mlp "
         "(dense layers' MLP), moe_act (the experts' activation), moe (the whole MoE block, "
         "all-to-alls included), shared_experts; e.g. core_attn,layernorm,moe_act "
         "(docs/model.md)")
      ->delimiter(',');
}

std::int64_t resolve_seq_len(const std::optional<std::int64_t>& flag, const model::ModelSpec& m) {
  model::TrainingSetup s;
  s.seq_len = flag ? *flag : model::default_seq_len(m);
  model::validate(s, "flags");
  model::validate(model::ParallelPlan{}, m, s, 0, "flags"); // e.g. learned positions
  return s.seq_len;
}

model::TrainingSetup resolve_setup(const SetupOptions& o, const model::ModelSpec& m) {
  model::TrainingSetup s;
  s.micro_batch_size = o.micro_batch_size;
  s.global_batch_size = o.global_batch_size;
  s.seq_len = o.seq_len ? *o.seq_len : model::default_seq_len(m);
  s.precision = parse_precision(o.precision);
  s.attention = parse_attention(o.attention);
  s.optimizer = parse_optimizer(o.optimizer);
  s.moe_capacity_factor = o.moe_capacity_factor;
  s.moe_imbalance_factor = o.moe_imbalance_factor;
  s.offload_activation_layers = o.offload_activation_layers;
  s.recompute_layers = o.recompute_layers;
  s.recompute_modules = model::parse_recompute_modules(o.recompute_modules, "--recompute-modules");
  if (o.grad_reduce_dtype == "fp32")
    s.grad_reduce_bytes = 4;
  else if (o.grad_reduce_dtype == "bf16")
    s.grad_reduce_bytes = 2;
  else if (o.grad_reduce_dtype != "framework")
    throw ConfigError(fmt::format("--grad-reduce-dtype = {}: must be framework, fp32 or bf16",
                                  o.grad_reduce_dtype));
  model::validate(s, "flags");
  return s;
}

void add_stage_split_options(CLI::App& cmd, StageSplitOptions& o) {
  cmd.add_option("--pp-layers", o.pp_layers,
                 "Transformer layers on each pipeline stage, first to last, e.g. 7,8x14,7 (8x14: "
                 "14 stages of 8); default: num_layers / pp on every stage (plan: searched; "
                 "this pins it and pp)");
  cmd.add_option("--decoder-first-pipeline-num-layers", o.first_stage_layers,
                 "Layers on the first pipeline stage; the middle stages split the rest evenly "
                 "(Megatron-LM's flag; plan: pinned for every pp where they can)");
  cmd.add_option("--decoder-last-pipeline-num-layers", o.last_stage_layers,
                 "Layers on the last pipeline stage; the middle stages split the rest evenly "
                 "(Megatron-LM's flag; plan: pinned for every pp where they can)");
}

std::vector<std::int64_t> parse_stage_layers(const std::string& text, const char* flag) {
  // Bounds keep the sums far from overflow; validate() names the real limits.
  constexpr std::int64_t kMaxCount = 1 << 20, kMaxStages = 1 << 16;
  auto bad = [&](const std::string& why) {
    return ConfigError(
        fmt::format("{} = '{}': {} (expected counts such as 7,8x14,7)", flag, text, why));
  };
  auto number = [&](const std::string& item) -> std::int64_t {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !std::isdigit(static_cast<unsigned char>(item[0])))
      throw bad(fmt::format("'{}' is not a whole number", item));
    if (v < 1 || v > kMaxCount)
      throw bad(fmt::format("{} is out of range 1..{}", item, kMaxCount));
    return v;
  };
  std::vector<std::int64_t> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t x = item.find('x');
    const std::int64_t layers = number(item.substr(0, x));
    const std::int64_t repeat = x == std::string::npos ? 1 : number(item.substr(x + 1));
    if (static_cast<std::int64_t>(out.size()) + repeat > kMaxStages)
      throw bad(fmt::format("more than {} stages", kMaxStages));
    out.insert(out.end(), static_cast<std::size_t>(repeat), layers);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return out;
}

void check_stage_split_flags(const StageSplitOptions& o, std::int64_t num_layers) {
  const bool megatron = o.first_stage_layers || o.last_stage_layers;
  if (!o.pp_layers.empty() && megatron)
    throw ConfigError("--pp-layers and --decoder-first/last-pipeline-num-layers: give only one "
                      "form of the stage split");
  for (const auto& [flag, v] :
       {std::pair{"--decoder-first-pipeline-num-layers", o.first_stage_layers},
        std::pair{"--decoder-last-pipeline-num-layers", o.last_stage_layers}})
    if (v && (*v < 1 || *v >= num_layers))
      throw ConfigError(
          fmt::format("{} = {}: must be in 1..num_layers - 1 = {}", flag, *v, num_layers - 1));
}

std::vector<std::int64_t> resolve_stage_split(const StageSplitOptions& o, std::int64_t num_layers,
                                              std::int64_t pp) {
  check_stage_split_flags(o, num_layers);
  if (!o.pp_layers.empty())
    return parse_stage_layers(o.pp_layers, "--pp-layers");
  if (!o.first_stage_layers && !o.last_stage_layers)
    return {};
  const char* flag = o.first_stage_layers ? "--decoder-first-pipeline-num-layers"
                                          : "--decoder-last-pipeline-num-layers";
  if (pp < 2)
    throw ConfigError(
        fmt::format("{}: needs pipeline parallelism (pp = {}, at least 2)", flag, pp));
  std::vector<std::int64_t> out;
  if (!model::first_last_stage_layers(num_layers, pp, o.first_stage_layers.value_or(-1),
                                      o.last_stage_layers.value_or(-1), out)) {
    const std::int64_t ends = (o.first_stage_layers ? 1 : 0) + (o.last_stage_layers ? 1 : 0);
    const std::int64_t rest =
        num_layers - o.first_stage_layers.value_or(0) - o.last_stage_layers.value_or(0);
    throw ConfigError(fmt::format(
        "{}{}: the other {} stages must split the remaining {} of num_layers = {} evenly, at "
        "least 1 each",
        o.first_stage_layers
            ? fmt::format("--decoder-first-pipeline-num-layers = {}", *o.first_stage_layers)
            : "",
        o.last_stage_layers ? fmt::format("{}--decoder-last-pipeline-num-layers = {}",
                                          o.first_stage_layers ? ", " : "", *o.last_stage_layers)
                            : "",
        pp - ends, rest, num_layers));
  }
  return out;
}

void add_plan_options(CLI::App& cmd, PlanOptions& o) {
  cmd.add_option("--tp", o.tp, "Tensor-parallel degree")->capture_default_str();
  cmd.add_option("--pp", o.pp, "Pipeline-parallel degree")->capture_default_str();
  cmd.add_option("--dp", o.dp, "Data-parallel degree (0 = num-gpus / (tp x pp x cp))")
      ->capture_default_str();
  cmd.add_option("--cp", o.cp, "Context-parallel degree")->capture_default_str();
  cmd.add_option("--ep", o.ep,
                 "Expert-parallel degree (MoE; divides dp, or with --etp 1 tp x dp x cp)")
      ->capture_default_str();
  cmd.add_option("--etp", o.etp,
                 "Expert tensor-parallel degree (MoE): 0 = tp (each expert split over the tp "
                 "ranks); 1 with tp > 1 = MoE parallel folding (Megatron-Core: whole experts, ep "
                 "laid over tp x dp x cp, tokens dispatched from their sequence-parallel shard; "
                 "needs --sequence-parallel), as NVIDIA's Megatron-Bridge MoE recipes run")
      ->capture_default_str();
  cmd.add_option("--zero", o.zero_stage,
                 "ZeRO stage 0..3 (shards optimizer / +gradients / +weights over dp); default: "
                 "the framework's: megatron 1 (the distributed optimizer of NeMo's and "
                 "Megatron-Bridge's recipes), fsdp 3 (FSDP2's fully_shard), deepspeed, pytorch, "
                 "pytorch-compile and trainsim 0; memory --params / --max-params: 0");
  cmd.add_option("--interleave", o.interleave, "Virtual pipeline chunks per stage (1 = 1F1B)")
      ->capture_default_str();
  cmd.add_flag("--sequence-parallel", o.sequence_parallel,
               "Megatron sequence parallelism (norms/dropout sharded over tp)");
  cmd.add_option("--recompute", o.recompute,
                 "Activation recomputation: none | selective (attention core, Megatron) | full "
                 "(per layer) | "
                 "selective-op (torchtitan's per-op policy: keeps every other matmul's output and "
                 "attention's, recomputes the rest; PyTorch frameworks; eager ones add the "
                 "policy's Python dispatch cost per kernel, fitted on H200 runs: "
                 "docs/frameworks.md)")
      ->capture_default_str();
  add_stage_split_options(cmd, o.stages);
}

model::ParallelPlan resolve_plan(const PlanOptions& o, const model::ModelSpec& m,
                                 const model::TrainingSetup& s, std::int64_t num_gpus,
                                 std::int64_t default_zero) {
  model::ParallelPlan p;
  p.tp = o.tp;
  p.pp = o.pp;
  p.cp = o.cp;
  p.ep = o.ep;
  p.etp = o.etp;
  if (o.zero_stage && (*o.zero_stage < 0 || *o.zero_stage > 3))
    throw ConfigError(fmt::format("--zero = {}: must be 0, 1, 2 or 3 (or unset: the "
                                  "framework's default)",
                                  *o.zero_stage));
  p.zero_stage = o.zero_stage.value_or(default_zero);
  p.interleave = o.interleave;
  p.sequence_parallel = o.sequence_parallel;
  p.recompute = parse_recompute(o.recompute);
  if (o.dp < 0)
    throw ConfigError(
        fmt::format("--dp = {}: must be positive (or 0: num-gpus / (tp x pp x cp))", o.dp));
  if (o.dp > 0) {
    p.dp = o.dp;
  } else {
    const std::int64_t denom = std::max<std::int64_t>(1, o.tp * o.pp * o.cp);
    if (o.tp <= 0 || o.pp <= 0 || o.cp <= 0 || num_gpus % denom != 0)
      throw ConfigError(fmt::format("--num-gpus = {}: must be a multiple of tp x pp x cp = {} x {} "
                                    "x {} (or give --dp)",
                                    num_gpus, o.tp, o.pp, o.cp));
    p.dp = num_gpus / denom;
  }
  p.stage_layers = resolve_stage_split(o.stages, m.num_layers, o.pp);
  model::validate(p, m, s, num_gpus, "flags");
  return p;
}

std::string zero_default_note(const PlanOptions& o, const sim::FrameworkProfile& fw) {
  if (o.zero_stage || fw.default_zero_stage == 0)
    return {};
  return fmt::format("ZeRO-{}: the {} profile's default, {}; --zero to choose",
                     fw.default_zero_stage, fw.name, fw.default_zero_stage_source);
}

void add_machine_options(CLI::App& cmd, MachineOptions& o, bool with_cluster, bool with_num_gpus) {
  cmd.add_option("--gpu,-g", o.gpu,
                 "GPU preset or JSON file (`trainsim presets list gpus`); with --cluster, only "
                 "the cluster's own GPU");
  if (with_cluster)
    cmd.add_option("--cluster,-c", o.cluster,
                   "Cluster preset or JSON file (nodes of GPUs with NVLink + InfiniBand)");
  if (with_num_gpus)
    cmd.add_option("--num-gpus,-n", o.num_gpus,
                   "GPUs in total, whole nodes of --cluster (default: one node; with --gpu alone, "
                   "a node of 8 for estimate/plan/sweep/collective, 1 GPU for memory)");
  cmd.add_option("--calibration", o.calibration,
                 "Hardware profile JSON (from `trainsim calibrate`, or a preset in "
                 "presets/profiles); default: presets/profiles/<gpu>.json (datasheet figures, or a "
                 "committed calibration as for h200), else default.json");
  cmd.add_option("--gpu-memory-gb", o.gpu_memory_gb,
                 "Override the GPU memory capacity (GB = 1e9 bytes)");
}

Machine resolve_machine(const MachineOptions& o, std::int64_t default_gpus) {
  Machine mc;
  if (o.gpu.empty() && o.cluster.empty())
    throw ConfigError("--gpu or --cluster: one is required (e.g. --gpu h100-sxm)");
  const bool given = o.num_gpus.has_value();
  const std::int64_t num_gpus = o.num_gpus.value_or(0);
  if (given && (num_gpus < 1 || num_gpus > 10000000))
    throw ConfigError(fmt::format("--num-gpus = {}: must be in 1..10000000", num_gpus));
  if (!o.cluster.empty()) {
    mc.cluster = hw::load_cluster(o.cluster);
    mc.gpu = hw::load_gpu(o.gpu.empty() ? mc.cluster.gpu : o.gpu);
    if (mc.gpu.name != mc.cluster.gpu)
      throw ConfigError(fmt::format(
          "--gpu = {}: the cluster {} is built of {} (its NVLink and network bandwidths are "
          "theirs); leave out --gpu, or give a cluster file whose \"gpu\" is {}",
          o.gpu, mc.cluster.name, mc.cluster.gpu, mc.gpu.name));
    if (given) {
      if (num_gpus <= mc.cluster.gpus_per_node) {
        mc.cluster.gpus_per_node = num_gpus;
        mc.cluster.num_nodes = 1;
      } else if (num_gpus % mc.cluster.gpus_per_node != 0) {
        throw ConfigError(fmt::format("--num-gpus = {}: must be a multiple of the cluster's "
                                      "gpus_per_node = {} (or at most one node)",
                                      num_gpus, mc.cluster.gpus_per_node));
      } else {
        mc.cluster.num_nodes = num_gpus / mc.cluster.gpus_per_node;
      }
      hw::validate(mc.cluster, "flags (--num-gpus)");
    }
  } else {
    mc.gpu = hw::load_gpu(o.gpu);
    mc.cluster = hw::single_node_cluster(mc.gpu, given ? num_gpus : default_gpus);
  }
  if (o.gpu_memory_gb) {
    mc.gpu.memory_bytes = *o.gpu_memory_gb * 1e9;
    hw::validate(mc.gpu, "--gpu-memory-gb"); // the presets' range for memory_gb
  }
  mc.num_gpus = mc.cluster.num_gpus();
  mc.profile =
      o.calibration.empty() ? hw::default_profile(mc.gpu.name) : hw::load_profile(o.calibration);
  return mc;
}

nlohmann::json setup_json(const model::TrainingSetup& s) {
  return {{"micro_batch_size", s.micro_batch_size},
          {"global_batch_size", s.global_batch_size},
          {"seq_len", s.seq_len},
          {"precision", std::string(model::to_string(s.precision))},
          {"attention", std::string(model::to_string(s.attention))},
          {"optimizer", std::string(model::to_string(s.optimizer))},
          {"moe_capacity_factor", s.moe_capacity_factor},
          {"moe_imbalance_factor", s.moe_imbalance_factor},
          {"grad_reduce_bytes_per_param", s.grad_reduce_bytes},
          {"offload_activation_layers", s.offload_activation_layers},
          {"recompute_layers", s.recompute_layers},
          {"recompute_modules", model::recompute_modules_string(s.recompute_modules)}};
}

std::string recompute_label(const model::ParallelPlan& p, const model::TrainingSetup& s) {
  if (p.recompute == model::Recompute::full && s.recompute_layers > 0)
    return fmt::format("full ({} layer{} per chunk)", s.recompute_layers,
                       s.recompute_layers == 1 ? "" : "s");
  if (p.recompute == model::Recompute::selective &&
      s.recompute_modules != model::kRecomputeCoreAttn)
    return fmt::format("selective ({})", model::recompute_modules_string(s.recompute_modules));
  return std::string(model::to_string(p.recompute));
}

nlohmann::json plan_json(const model::ParallelPlan& p) {
  nlohmann::json j{{"tp", p.tp},
                   {"pp", p.pp},
                   {"dp", p.dp},
                   {"cp", p.cp},
                   {"ep", p.ep},
                   {"etp", p.expert_tp()},
                   {"zero", p.zero_stage},
                   {"interleave", p.interleave},
                   {"sequence_parallel", p.sequence_parallel},
                   {"recompute", std::string(model::to_string(p.recompute))}};
  if (!p.stage_layers.empty()) // absent: num_layers / pp on every stage
    j["stage_layers"] = p.stage_layers;
  return j;
}

void refuse_unused_flags(const CLI::App& cmd, std::initializer_list<const char*> flags,
                         std::string_view why) {
  for (const char* flag : flags) {
    const CLI::Option* opt = cmd.get_option_no_throw(flag);
    if (opt == nullptr)
      throw std::logic_error(
          fmt::format("refuse_unused_flags: {} has no {}", cmd.get_name(), flag));
    if (opt->count() > 0)
      throw ConfigError(fmt::format("{}: not used by {}", flag, why));
  }
}

} // namespace trainsim::cli
