// StepEstimate printers and the breakdown chart (estimate_print.hpp).
#include "cli/estimate_print.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/plot.hpp"
#include "common/errors.hpp"
#include "common/units.hpp"
#include "model/count.hpp"
#include "simulate/framework.hpp"

namespace trainsim::cli {

void add_step_flags(CLI::App& cmd, StepFlags& f) {
  cmd.add_option("--bucket-mb", f.bucket_mb, "Data-parallel gradient bucket size (MiB)")
      ->capture_default_str();
  cmd.add_flag("--no-dp-overlap", f.no_dp_overlap,
               "Reduce gradients after backward instead of overlapping buckets with it");
  cmd.add_flag("--tp-overlap", f.tp_overlap,
               "Overlap tensor-parallel collectives with the layer's GEMMs (Megatron's TP comm "
               "overlap, PyTorch's async TP): the framework's share of them is hidden "
               "(tp_overlap_hidden_fraction: 1 in most profiles; fsdp 0, fitted on torchtitan's "
               "async-TP runs, docs/frameworks.md)");
  cmd.add_flag("--ep-overlap", f.ep_overlap,
               "Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm; "
               "moe_a2a_overlap in Megatron-Bridge): each micro-batch's forward runs merged with "
               "another's backward so the expert-parallel all-to-alls hide behind the other's "
               "compute; needs ep > 1, no full recompute, and --interleave > 1 with a pipeline "
               "(plan: applied to the candidates that allow it)");
  cmd.add_option(
         "--dp-algorithm", f.dp_algorithm,
         "auto (faster of ring and tree, as NCCL tunes) | ring | tree (data-parallel all-reduce)")
      ->capture_default_str();
  add_framework_option(cmd, f.framework);
  add_torch_compile_option(cmd, f.torch_compile);
}

void add_torch_compile_option(CLI::App& cmd, std::string& torch_compile) {
  cmd.add_option("--torch-compile", torch_compile,
                 "torch.compile over an eager PyTorch profile (pytorch, fsdp), as torchtitan "
                 "applies it: none | blocks (each transformer block: per-op checkpointing's "
                 "dispatch cost traced away, kernels as measured eager) | blocks+loss (the loss "
                 "too, torchtitan since April 2025: one 16-bit logits tensor at the loss instead "
                 "of eager's fp32 chain); docs/frameworks.md")
      ->capture_default_str();
}

sim::FrameworkProfile resolve_framework(const std::string& framework,
                                        const std::string& torch_compile) {
  const auto c = sim::parse_torch_compile(torch_compile, "--torch-compile");
  const sim::FrameworkProfile base = sim::load_framework(framework);
  try {
    return sim::with_torch_compile(base, c);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("--torch-compile {}: {}", torch_compile, e.what()));
  }
}

void add_framework_option(CLI::App& cmd, std::string& framework) {
  cmd.add_option("--framework", framework,
                 "Training framework whose kernels, host time, optimizer and memory rules to "
                 "assume: megatron (Megatron-Core + Transformer Engine), fsdp (PyTorch FSDP2), "
                 "deepspeed, pytorch (eager + autocast), pytorch-compile, trainsim (our own "
                 "fused trainer), or a profile file (presets/frameworks/, docs/frameworks.md)")
      ->capture_default_str();
}

std::string band_text(const sim::StepEstimate& e) {
  if (e.band_runs <= 0)
    return fmt::format("(no error band: the {} profile has no fit residuals)", e.framework);
  return fmt::format("+-{:.0f}% (1 sigma{}{} over {} {} runs)", 100 * e.band_sigma_fraction,
                     e.band_leave_one_out ? ", leave-one-out" : "",
                     e.band_dof > 0 ? fmt::format(", Student t with {} dof,", e.band_dof)
                                    : std::string(e.band_leave_one_out ? "," : ""),
                     e.band_runs,
                     !e.band_kind.empty() ? fmt::format("{} {}", e.band_kind, e.framework)
                     : e.band_multi_gpu   ? fmt::format("multi-GPU {}", e.framework)
                                          : e.framework);
}

double parse_tokens(const std::string& text) {
  return require_range("--tokens", parse_count(text, "--tokens"), Interval{0, 1e18, "tokens"});
}

void require_modules_recompute(model::Recompute r, const model::TrainingSetup& s) {
  if (s.recompute_modules != model::kRecomputeCoreAttn && r != model::Recompute::selective)
    throw ConfigError(fmt::format("--recompute-modules {}: needs --recompute selective (the "
                                  "modules are what selective recompute re-runs), not {}",
                                  model::recompute_modules_string(s.recompute_modules),
                                  model::to_string(r)));
}

void require_recompute_supported(model::Recompute r, const sim::FrameworkProfile& fw) {
  if (r == model::Recompute::selective_op && !fw.caching_allocator)
    throw ConfigError(fmt::format(
        "--recompute selective-op: torchtitan's per-op checkpointing is a PyTorch framework's "
        "option (fsdp, pytorch, pytorch-compile); --framework {} has none (use none, selective "
        "or full)",
        fw.name));
}

void require_zero_supported(std::int64_t zero, const sim::FrameworkProfile& fw,
                            const char* option) {
  if (fw.runs_zero_stage(zero))
    return;
  throw ConfigError(fmt::format("{}{}: --framework {} runs only ZeRO stages {}: {}", option, zero,
                                fw.name, fmt::join(fw.zero_stages, ", "), fw.zero_stages_source));
}

void require_layout_supported(const model::ParallelPlan& p, const sim::FrameworkProfile& fw) {
  if (const std::string why = fw.layout_refusal(p); !why.empty())
    throw ConfigError(why);
}

void require_setup_supported(const model::TrainingSetup& s, const sim::FrameworkProfile& fw) {
  if (s.recompute_modules != model::kRecomputeCoreAttn && !fw.megatron_main_grads)
    throw ConfigError(fmt::format(
        "--recompute-modules {}: Megatron-Core's selective recompute modules "
        "(recompute_modules); --framework {} does not have them (its selective recompute is "
        "the attention core; use --framework megatron)",
        model::recompute_modules_string(s.recompute_modules), fw.name));
  if (s.offload_activation_layers > 0 && !fw.megatron_main_grads)
    throw ConfigError(fmt::format(
        "--offload-activation-layers {}: Megatron-Core's activation CPU offload "
        "(cpu_offloading_num_layers); --framework {} does not model it (use --framework megatron)",
        s.offload_activation_layers, fw.name));
  if (s.grad_reduce_bytes <= 0)
    return;
  const char* dtype = s.grad_reduce_bytes == 4 ? "fp32" : "bf16";
  if (!fw.megatron_main_grads)
    throw ConfigError(fmt::format(
        "--grad-reduce-dtype {}: Megatron-Core's gradient buffer dtype (grad_reduce_in_fp32); "
        "--framework {} keeps its own gradients (use framework, or --framework megatron)",
        dtype, fw.name));
  if (s.precision == model::Precision::fp32 || s.precision == model::Precision::bf16)
    throw ConfigError(fmt::format("--grad-reduce-dtype {}: applies to mixed precision (--precision "
                                  "{} has no separate gradient dtype)",
                                  dtype, model::to_string(s.precision)));
}

sim::StepOptions resolve_step_flags(const StepFlags& f) {
  require_range("--bucket-mb", f.bucket_mb, kBucketMb);
  sim::StepOptions o;
  o.bucket_bytes = f.bucket_mb * 1024 * 1024;
  o.dp_overlap = !f.no_dp_overlap;
  o.tp_overlap = f.tp_overlap;
  o.ep_overlap = f.ep_overlap;
  o.framework = std::make_shared<const sim::FrameworkProfile>(
      resolve_framework(f.framework, f.torch_compile));
  if (f.dp_algorithm == "ring")
    o.dp_algorithm = sim::Algorithm::ring;
  else if (f.dp_algorithm == "tree")
    o.dp_algorithm = sim::Algorithm::tree;
  else if (f.dp_algorithm == "auto")
    o.dp_algorithm = sim::Algorithm::automatic;
  else
    throw ConfigError(
        fmt::format("--dp-algorithm = {}: must be auto, ring or tree", f.dp_algorithm));
  return o;
}

void require_ep_overlap_applies(const sim::StepOptions& o, const model::ParallelPlan& p) {
  if (!o.ep_overlap)
    return;
  const std::string_view rule = sim::ep_overlap_rule(p);
  if (!rule.empty())
    throw ConfigError(fmt::format("--ep-overlap: {}", rule));
}

std::string stage_split_note(const model::ParallelPlan& p) {
  return p.stage_layers.empty()
             ? ""
             : fmt::format(" (layers {})", model::format_stage_layers(p.stage_layers));
}

std::string expert_note(const model::ParallelPlan& p) {
  if (p.ep <= 1 && !p.experts_folded())
    return "";
  return fmt::format(" ep {}{}", p.ep,
                     p.experts_folded()
                         ? fmt::format(" (etp {}: experts folded over tp x dp x cp)", p.expert_tp())
                         : "");
}

nlohmann::json breakdown_json(const sim::StepBreakdown& b) {
  return {{"forward", b.forward},     {"backward", b.backward}, {"recompute", b.recompute},
          {"tp_comm", b.tp_comm},     {"cp_comm", b.cp_comm},   {"ep_comm", b.ep_comm},
          {"pp_comm", b.pp_comm},     {"dp_comm", b.dp_comm},   {"bubble", b.bubble},
          {"optimizer", b.optimizer}, {"host", b.host},         {"offload", b.offload}};
}

nlohmann::json memory_json(const sim::MemoryBreakdown& b) {
  return {{"weights", b.weights},
          {"gradients", b.gradients},
          {"optimizer", b.optimizer},
          {"activations", b.activations},
          {"buffers", b.buffers},
          {"transient", b.transient},
          {"allocator", b.allocator},
          {"overhead", b.overhead},
          {"peak_allocated_bytes", b.peak_allocated()},
          {"peak_reserved_bytes", b.peak_reserved()},
          {"total", b.total},
          {"host_activation_bytes", b.host_activation_bytes}};
}

nlohmann::json estimate_json(const model::ModelSpec& m, const Machine& mc,
                             const model::ParallelPlan& p, const model::TrainingSetup& s,
                             const sim::StepEstimate& e, double tokens,
                             const std::string& zero_note) {
  nlohmann::json j{{"model", m.name},
                   {"cluster", mc.cluster.name},
                   {"gpu", mc.gpu.name},
                   {"num_gpus", p.num_gpus()},
                   {"profile", mc.profile.name},
                   {"framework", e.framework},
                   {"torch_compile", e.torch_compile},
                   {"setup", setup_json(s)},
                   {"plan", plan_json(p)},
                   {"micro_batches", e.micro_batches},
                   {"global_batch_size", e.global_batch_size},
                   {"step_time_s", e.step_time_s},
                   {"step_time_s_low", e.step_time_s * (1 - e.band_sigma_fraction)},
                   {"step_time_s_high", e.step_time_s * (1 + e.band_sigma_fraction)},
                   {"band_source", band_text(e)},
                   {"caveats", e.caveats},
                   {"breakdown_s", breakdown_json(e.breakdown_s)},
                   {"offload_bytes_per_micro_batch", e.offload_bytes_per_micro_batch},
                   {"offload_transfer_s", e.offload_transfer_s},
                   {"host_issue_s",
                    {{"forward", e.host_forward_s},
                     {"backward", e.host_backward_s},
                     {"optimizer", e.host_optimizer_s},
                     {"total", e.host_issue_s()}}},
                   {"mfu", e.mfu},
                   {"hfu", e.hfu},
                   {"mfu_peak_flops_per_s", e.peak_flops_per_s},
                   {"mfu_note", e.hfu > 1 || e.mfu > 1 ? sim::kMfuAbovePeakNote : ""},
                   {"tokens_per_s", e.tokens_per_s},
                   {"model_flops_per_step", e.model_flops_per_step},
                   {"achieved_flops_per_s_per_gpu", e.achieved_flops_per_s_per_gpu},
                   {"per_gpu_bytes", memory_json(e.memory)},
                   {"slowest_stage", e.slowest_stage},
                   {"slowest_stage_layers", e.slowest_stage_layers},
                   {"fullest_stage", e.memory.stage},
                   {"fullest_stage_layers", e.memory.stage_num_layers},
                   {"gpu_memory_bytes", mc.gpu.memory_bytes},
                   {"fits", e.memory.total <= mc.gpu.memory_bytes},
                   {"ep_overlap", e.ep_overlap},
                   {"ep_overlap_merged_pairs", e.ep_merged_pairs},
                   {"ep_comm_hidden_s", e.ep_hidden_s}};
  if (!zero_note.empty())
    j["zero_stage_note"] = zero_note;
  if (tokens > 0) {
    const auto t = sim::training_time(e, model::count_params(m).active, tokens, p.num_gpus());
    j["tokens"] = tokens;
    j["days"] = t.days;
    j["gpu_hours"] = t.gpu_hours;
    j["days_top_down_6nd"] = t.days_top_down_6nd;
  }
  return j;
}

void print_estimate(Sink& sink, const model::ModelSpec& m, const Machine& mc,
                    const model::ParallelPlan& p, const model::TrainingSetup& s,
                    const sim::StepEstimate& e, double tokens, const std::string& zero_note) {
  const nlohmann::json j = estimate_json(m, mc, p, s, e, tokens, zero_note);
  check_finite(j); // every printed figure below is one of these
  if (sink.format() == Format::json) {
    sink.json(j);
    return;
  }
  sink.comment(fmt::format("model {} ({} params) on {} ({} GPUs of {}, {} per node), profile: {}",
                           m.name, format_count(model::count_params(m).total), mc.cluster.name,
                           p.num_gpus(), mc.gpu.name, mc.cluster.gpus_per_node, mc.profile.name));
  sink.comment(fmt::format(
      "framework: {}{}", e.framework,
      e.torch_compile == "none" ? "" : fmt::format(" under torch.compile ({})", e.torch_compile)));
  sink.comment(fmt::format(
      "tp {} pp {}{} dp {} cp {}{}{}{}, ZeRO-{}, recompute {}, {} attention, {}; "
      "micro-batch {} x {} accumulation x dp {} = global batch {} of {} "
      "tokens",
      p.tp, p.pp, stage_split_note(p), p.dp, p.cp, expert_note(p),
      p.sequence_parallel ? " +SP" : "",
      p.interleave > 1 ? fmt::format(", {} chunks/stage", p.interleave) : "", p.zero_stage,
      recompute_label(p, s), model::to_string(s.attention), model::to_string(s.precision),
      s.micro_batch_size, e.micro_batches, p.dp, e.global_batch_size, s.seq_len));
  if (!zero_note.empty())
    sink.comment(zero_note);
  const auto& b = e.breakdown_s;
  Table t({"part", "time (ms)", "share"}, {"part", "time_s", "fraction"});
  auto row = [&](const char* name, double v) {
    if (v == 0 && sink.format() == Format::table && std::string(name) != "total")
      return;
    t.add_row(
        {name, fmt::format("{:.2f}", v * 1e3), fmt::format("{:.1f}%", 100 * v / e.step_time_s)},
        {name, fmt::format("{:.9g}", v), fmt::format("{:.6f}", v / e.step_time_s)});
  };
  row("forward", b.forward);
  row("backward", b.backward);
  row("recompute", b.recompute);
  row("tp_comm (exposed)", b.tp_comm);
  row("cp_comm (exposed)", b.cp_comm);
  row("ep_comm + MoE dispatch (exposed)", b.ep_comm);
  row("pp_comm (p2p sends)", b.pp_comm);
  row("dp_comm (exposed)", b.dp_comm);
  row("bubble", b.bubble);
  row("optimizer", b.optimizer);
  row("host (CPU-bound)", b.host);
  row("offload (exposed)", b.offload);
  row("total", e.step_time_s);
  t.print(sink);
  if (sink.format() != Format::table)
    return;
  const Dtype wanted = sim::mfu_peak_dtype(s.precision);
  const Dtype used = sim::effective_peak_dtype(mc.gpu, wanted);
  const std::string peak_dtype =
      used == wanted
          ? fmt::format("{} peak", dtype_name(used))
          : fmt::format("{} peak: {} has no {} units, {} runs at {} speed", dtype_name(used),
                        mc.gpu.name, dtype_name(wanted), dtype_name(wanted), dtype_name(used));
  sink.write(fmt::format("step {} {}  |  MFU {:.1f}%  HFU {:.1f}% (of the {})  |  {:.3g} "
                         "tokens/s  |  {:.1f} TFLOP/s per GPU (model)\n",
                         format_seconds(e.step_time_s), band_text(e), 100 * e.mfu, 100 * e.hfu,
                         peak_dtype, e.tokens_per_s, e.achieved_flops_per_s_per_gpu / 1e12));
  if (e.hfu > 1 || e.mfu > 1) // HFU counts recompute too: the same cause
    sink.write(fmt::format("note: {}\n", sim::kMfuAbovePeakNote));
  for (const auto& c : e.caveats)
    sink.write(fmt::format("caveat ({}): {}\n", e.framework, c));
  sink.write(fmt::format("memory per GPU {:.2f} GB of {:.4g} GB: {}\n", e.memory.total / 1e9,
                         mc.gpu.memory_bytes / 1e9,
                         e.memory.total <= mc.gpu.memory_bytes
                             ? "fits"
                             : "DOES NOT FIT (`trainsim memory` with the same options breaks it "
                               "down and says what recompute would fit; `trainsim plan` searches "
                               "the layouts that fit)"));
  if (e.offload_bytes_per_micro_batch > 0)
    sink.write(fmt::format(
        "activation offload: {:.2f} GB per micro-batch to host memory and "
        "back, {} each way over the host link, beside {} of forward and {} of "
        "backward; {:.2f} GB of host memory at the peak\n",
        e.offload_bytes_per_micro_batch / 1e9, format_seconds(e.offload_transfer_s),
        format_seconds(e.breakdown_s.forward / e.micro_batches),
        format_seconds((e.breakdown_s.backward + e.breakdown_s.recompute) / e.micro_batches),
        e.memory.host_activation_bytes / 1e9));
  if (e.ep_overlap)
    sink.write(fmt::format("expert-parallel all-to-alls overlapped (combined 1F1B): {} merged "
                           "forward/backward pairs per rank hid {}; the rest is in ep_comm\n",
                           e.ep_merged_pairs, format_seconds(e.ep_hidden_s)));
  if (!p.stage_layers.empty())
    sink.write(fmt::format("uneven stages {}: the slowest is stage {} ({} layers, {} per "
                           "micro-batch); the fullest is stage {} ({} layers, {:g} micro-batches "
                           "in flight)\n",
                           model::format_stage_layers(p.stage_layers), e.slowest_stage,
                           e.slowest_stage_layers, format_seconds(e.micro_batch_stage_s),
                           e.memory.stage, e.memory.stage_num_layers,
                           e.memory.in_flight_micro_batches));
  if (tokens > 0) {
    const auto tt = sim::training_time(e, model::count_params(m).active, tokens, p.num_gpus());
    sink.write(fmt::format("{} tokens: {:.1f} days, {:.3g} GPU-hours (top-down 6ND at this MFU: "
                           "{:.1f} days)\n",
                           format_count(tokens), tt.days, tt.gpu_hours, tt.days_top_down_6nd));
  }
}

void plot_breakdown(const std::string& file, const model::ModelSpec& m, const Machine& mc,
                    const model::ParallelPlan& p, const sim::StepEstimate& e) {
  const auto& b = e.breakdown_s;
  const std::vector<std::string> parts{"forward", "backward",  "recompute", "tp_comm",
                                       "cp_comm", "ep_comm",   "pp_comm",   "dp_comm",
                                       "bubble",  "optimizer", "host",      "offload"};
  const std::vector<double> values{b.forward, b.backward,  b.recompute, b.tp_comm,
                                   b.cp_comm, b.ep_comm,   b.pp_comm,   b.dp_comm,
                                   b.bubble,  b.optimizer, b.host,      b.offload};
  std::vector<std::vector<double>> groups;
  for (double v : values)
    groups.push_back({v});
  const PlotSpec spec = plot_spec(
      file,
      fmt::format("{} on {} x {}: one step = {:.3f} s (tp {} pp {} dp {}, MFU {:.1f}%)", m.name,
                  p.num_gpus(), mc.gpu.name, e.step_time_s, p.tp, p.pp, p.dp, 100 * e.mfu),
      "", "seconds per step");
  plot_bars(spec, {"step"}, parts, groups);
}

} // namespace trainsim::cli
