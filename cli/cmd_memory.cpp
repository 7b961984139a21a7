// `trainsim memory`: does it fit? Per-GPU weights, gradients, optimizer states, activations,
// buffers and overhead for a model, precision, ZeRO stage, parallel layout and recompute
// policy; or the model states of a bare parameter count; or the largest model that fits.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/estimate_print.hpp"
#include "cli/output.hpp"
#include "cli/plot.hpp"
#include "cli/resolve.hpp"
#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "common/units.hpp"
#include "model/count.hpp"
#include "model/load.hpp"
#include "model/ops.hpp"
#include "simulate/deepspeed.hpp"
#include "simulate/memory.hpp"
#include "simulate/roofline.hpp"
#include <optional>

namespace trainsim::cli {
namespace {

struct MemoryOptions {
  ModelOptions model;
  MachineOptions machine;
  PlanOptions plan;
  SetupOptions setup;
  std::string params;
  bool max_params = false;
  double bucket_mb = 25;
  std::string framework = "megatron";
  std::string torch_compile = "none";
  std::string deepspeed;      // ds_config.json: stage, offload, buckets, micro-batch, precision
  double nvme_gb_per_s = 6.0; // per node, for ZeRO-Infinity's NVMe traffic
  std::string plot;
  std::string allocator_trace_out; // the generated step's requests, as an allocator trace
  double allocator_cap_gb = 0;     // torch.cuda.set_per_process_memory_fraction, as bytes
  OutputOptions out;
};

// Writes the generated step that `b` was simulated with as an allocator trace (the format of
// scripts/peer_allocator_trace.py): a header naming the configuration, then every request and
// release in the order trainsim's step makes them. `trainsim compare --allocator-traces` replays
// it, with --with-prediction too; set beside a recorded PyTorch trace it shows where the two
// steps differ.
void write_allocator_trace(const std::string& file, const sim::MemoryBreakdown& b,
                           const nlohmann::json& header) {
  write_output_file(file, "--allocator-trace-out",
                    "# " + header.dump() + "\n" + sim::step_allocator_trace(*b.allocator_step));
}

std::string gb(double bytes) { return fmt::format("{:.2f}", bytes / 1e9); }
std::string gib(double bytes) { return fmt::format("{:.2f}", bytes / (1024.0 * 1024 * 1024)); }

void breakdown_table(Sink& sink, const sim::MemoryBreakdown& b) {
  Table t({"per GPU", "GB", "GiB", "share"}, {"part", "bytes", "gib", "fraction"});
  auto row = [&](const char* name, double v) {
    t.add_row({name, gb(v), gib(v), fmt::format("{:.1f}%", 100 * v / b.total)},
              {name, fmt::format("{:.0f}", v), gib(v), fmt::format("{:.4f}", v / b.total)});
  };
  row("weights", b.weights);
  row("gradients", b.gradients);
  row("optimizer", b.optimizer);
  row("activations", b.activations);
  row("buffers", b.buffers);
  if (b.transient > 0)
    row("optimizer step temporaries", b.transient);
  if (b.allocator > 0)
    row("allocator (reserved - allocated)", b.allocator);
  row("overhead", b.overhead);
  row("total", b.total);
  t.print(sink);
}

// --params and --max-params count model states as the ZeRO paper does, with no framework:
// an unset --zero is its baseline, stage 0.
std::int64_t states_only_zero(const std::optional<std::int64_t>& zero) {
  if (zero && (*zero < 0 || *zero > 3))
    throw ConfigError(fmt::format("--zero = {}: must be 0, 1, 2 or 3", *zero));
  return zero.value_or(0);
}

int run_max_params(const MemoryOptions& o) {
  const Machine mc = resolve_machine(o.machine);
  sim::check_precision_supported(mc.gpu, parse_precision(o.setup.precision));
  const std::int64_t n = mc.num_gpus;
  Sink sink(o.out);
  nlohmann::json j;
  j["gpu"] = mc.gpu.name;
  j["num_gpus"] = n;
  j["gpu_memory_bytes"] = mc.gpu.memory_bytes;
  j["precision"] = std::string(model::to_string(parse_precision(o.setup.precision)));
  j["optimizer"] = std::string(model::to_string(parse_optimizer(o.setup.optimizer)));
  const auto per = sim::state_bytes_per_param(parse_precision(o.setup.precision),
                                              parse_optimizer(o.setup.optimizer));
  j["bytes_per_param"] = per.total();
  nlohmann::json by_stage;
  Table t({"ZeRO stage", "max params", "exact"}, {"zero", "max_params", "exact"});
  for (std::int64_t z = 0; z <= 3; ++z) {
    const double p = sim::max_params(mc.gpu.memory_bytes, n, parse_precision(o.setup.precision),
                                     parse_optimizer(o.setup.optimizer), z);
    by_stage[fmt::format("zero{}", z)] = p;
    t.add_row({fmt::format("{}", z), format_count(p), fmt::format("{:.0f}", p)},
              {fmt::format("{}", z), fmt::format("{:.0f}", p), fmt::format("{:.0f}", p)});
  }
  j["max_params_by_zero"] = by_stage;
  j["max_params"] = by_stage[fmt::format("zero{}", states_only_zero(o.plan.zero_stage))];
  check_finite(j);
  if (sink.format() == Format::json) {
    sink.json(j);
    return 0;
  }
  sink.comment(fmt::format("largest model whose states fit: {} x {} ({} GB each = {} GB), {} "
                           "with {}: {} + {} + {} = {} bytes/param; activations not counted",
                           n, mc.gpu.name, gb(mc.gpu.memory_bytes), gb(n * mc.gpu.memory_bytes),
                           model::to_string(parse_precision(o.setup.precision)),
                           model::to_string(parse_optimizer(o.setup.optimizer)), per.weights,
                           per.gradients, per.optimizer, per.total()));
  t.print(sink);
  return 0;
}

int run_params_only(const MemoryOptions& o) {
  const double params = parse_count(o.params, "--params");
  if (params <= 0 || params > 1e16)
    throw ConfigError("--params: must be in (0, 1e16]");
  const std::int64_t dp = o.plan.dp > 0 ? o.plan.dp : o.machine.num_gpus.value_or(1);
  if (dp < 1 || dp > 10000000)
    throw ConfigError(fmt::format("--num-gpus/--dp = {}: must be in 1..10000000", dp));
  const std::int64_t zero = states_only_zero(o.plan.zero_stage);
  Sink sink(o.out);
  nlohmann::json stages = nlohmann::json::array();
  Table t({"ZeRO stage", "weights (GB)", "gradients (GB)", "optimizer (GB)", "total (GB)"},
          {"zero", "weights_bytes", "gradients_bytes", "optimizer_bytes", "total_bytes"});
  for (std::int64_t z = 0; z <= 3; ++z) {
    const auto b = sim::model_state_bytes(params, parse_precision(o.setup.precision),
                                          parse_optimizer(o.setup.optimizer), dp, z);
    stages.push_back({{"zero", z}, {"per_gpu_bytes", memory_json(b)}});
    t.add_row({fmt::format("{}{}", z, z == zero ? " *" : ""), gb(b.weights), gb(b.gradients),
               gb(b.optimizer), gb(b.total)},
              {fmt::format("{}", z), fmt::format("{:.0f}", b.weights),
               fmt::format("{:.0f}", b.gradients), fmt::format("{:.0f}", b.optimizer),
               fmt::format("{:.0f}", b.total)});
  }
  const auto sel = sim::model_state_bytes(params, parse_precision(o.setup.precision),
                                          parse_optimizer(o.setup.optimizer), dp, zero);
  const nlohmann::json j{
      {"params", params},
      {"dp", dp},
      {"precision", std::string(model::to_string(parse_precision(o.setup.precision)))},
      {"optimizer", std::string(model::to_string(parse_optimizer(o.setup.optimizer)))},
      {"zero", zero},
      {"per_gpu_bytes", memory_json(sel)},
      {"stages", stages}};
  check_finite(j);
  if (sink.format() == Format::json) {
    sink.json(j);
    return 0;
  }
  sink.comment(fmt::format("model states of {} parameters, data parallel over {} GPUs, {} with "
                           "{} (Rajbhandari et al. 2020); activations need --model",
                           format_count(params), dp,
                           model::to_string(parse_precision(o.setup.precision)),
                           model::to_string(parse_optimizer(o.setup.optimizer))));
  t.print(sink);
  return 0;
}

// A `trainsim memory` request resolved from its flags (and a DeepSpeed config).
struct MemoryRequest {
  model::ModelSpec m;
  Machine mc;
  model::TrainingSetup s;
  model::ParallelPlan p;
  sim::MemoryOptions mo;
  std::optional<sim::DeepSpeedConfig> ds;
  sim::DeepSpeedBatch ds_batch; // all 0: the config gives no batch
  std::string zero_note;
  double cap = 0; // --allocator-cap-gb in bytes (0: none)
};

MemoryRequest resolve_memory_request(const MemoryOptions& o) {
  require_range("--bucket-mb", o.bucket_mb, kBucketMb);
  require_range("--nvme-gb-per-s", o.nvme_gb_per_s, Interval{0.01, 1e4, "GB/s"});
  MemoryRequest q{resolve_model(o.model), resolve_machine(o.machine), {}, {}, {}, {}, {}, {}, 0};
  const model::ModelSpec& m = q.m;
  const Machine& mc = q.mc;
  model::TrainingSetup& s = q.s;
  s = resolve_setup(o.setup, m);
  sim::check_precision_supported(mc.gpu, s.precision);
  PlanOptions plan_options = o.plan;
  auto& ds = q.ds;
  std::string framework = o.framework;
  if (!o.deepspeed.empty()) {
    // The DeepSpeed config decides what it states: ZeRO stage, micro-batch, precision.
    ds = sim::deepspeed_config_from_json(load_json_file(o.deepspeed), o.deepspeed);
    plan_options.zero_stage = ds->zero_stage;
    s.precision = ds->precision;
    framework = "deepspeed";
    if (ds->autotp_size > 0) {
      if (plan_options.tp != 1 && plan_options.tp != ds->autotp_size)
        throw ConfigError(fmt::format(
            "--tp {}: the DeepSpeed config {} sets tensor_parallel.autotp_size = {}; give one",
            plan_options.tp, o.deepspeed, ds->autotp_size));
      plan_options.tp = ds->autotp_size;
    }
  }
  if (ds && o.torch_compile != "none")
    throw ConfigError("--torch-compile: a DeepSpeed config's run is modelled with the deepspeed "
                      "profile, which has no torch.compile variant; leave it at none");
  const auto fw =
      std::make_shared<const sim::FrameworkProfile>(resolve_framework(framework, o.torch_compile));
  q.p = resolve_plan(plan_options, m, s, mc.num_gpus, fw->default_zero_stage);
  const model::ParallelPlan& p = q.p;
  q.zero_note = zero_default_note(plan_options, *fw);
  sim::DeepSpeedBatch& ds_batch = q.ds_batch;
  if (ds) {
    // Its batch fields, completed and checked as DeepSpeed does on this layout's dp ranks.
    ds_batch = sim::deepspeed_batch(*ds, p.dp, o.deepspeed);
    if (ds_batch.micro > 0) {
      s.micro_batch_size = ds_batch.micro;
      s.global_batch_size = ds_batch.train;
    }
  }
  sim::MemoryOptions& mo = q.mo;
  mo.bucket_bytes = ds ? ds->reduce_bucket_elems * dtype_bytes(model::compute_dtype(s.precision)) /
                             (ds->overlap_comm ? 1.0 : 2.0)
                       : o.bucket_mb * 1024 * 1024;
  mo.framework = fw;
  require_recompute_supported(p.recompute, *mo.framework);
  require_zero_supported(p.zero_stage, *mo.framework,
                         ds ? "the DeepSpeed config's zero_optimization.stage " : "--zero ");
  try {
    require_layout_supported(p, *mo.framework);
  } catch (const ConfigError& e) {
    if (!ds)
      throw;
    throw ConfigError(fmt::format(
        "{} (zero_optimization.stage {}{}): {}", o.deepspeed, ds->zero_stage,
        ds->autotp_size > 0 ? fmt::format(", tensor_parallel.autotp_size {}", ds->autotp_size) : "",
        e.what()));
  }
  require_setup_supported(s, *mo.framework);
  require_modules_recompute(p.recompute, s);
  if (ds) {
    mo.offload_optimizer = ds->offload_optimizer != sim::OffloadDevice::none;
    mo.offload_params = ds->offload_param != sim::OffloadDevice::none;
  }
  // A cap on what the caching allocator may reserve (PyTorch's per-process memory fraction):
  // the step, its verdict and the searches below play under it.
  const double cap = q.cap = o.allocator_cap_gb * 1e9;
  if (cap > 0) {
    if (!mo.framework->caching_allocator)
      throw ConfigError(fmt::format(
          "--allocator-cap-gb: the {} profile does not simulate PyTorch's caching allocator, so "
          "there is no allocator to cap (profiles that do: pytorch, pytorch-compile, fsdp)",
          mo.framework->name));
    if (cap > mc.gpu.memory_bytes)
      throw ConfigError(fmt::format("--allocator-cap-gb {:g}: above the {} GB of the {} (the "
                                    "cap is a fraction of the GPU's memory)",
                                    o.allocator_cap_gb, gb(mc.gpu.memory_bytes), mc.gpu.name));
    mo.allocator_cap_bytes = cap;
  }
  return q;
}

// --allocator-trace-out: the step trainsim played, with a header naming its configuration.
void write_memory_trace(const MemoryOptions& o, const MemoryRequest& q,
                        const sim::MemoryBreakdown& b) {
  const auto& [m, mc, s, p, mo, ds, ds_batch, zero_note, cap] = q;
  if (!b.allocator_step)
    throw ConfigError(fmt::format(
        "--allocator-trace-out: the {} profile does not simulate PyTorch's caching allocator, "
        "so there is no step of requests to write (profiles that do: pytorch, "
        "pytorch-compile, fsdp)",
        mo.framework->name));
  nlohmann::json header{
      {"framework", mo.framework->name},
      {"model", m.name},
      {"gpu", mc.gpu.name},
      {"num_gpus", p.num_gpus()},
      {"precision", model::to_string(s.precision)},
      {"seq_len", s.seq_len},
      {"micro_batch", s.micro_batch_size},
      {"global_batch", s.global_batch_size > 0 ? s.global_batch_size : s.micro_batch_size * p.dp},
      {"tp", p.tp},
      {"pp", p.pp},
      {"cp", p.cp},
      {"dp", p.dp},
      {"zero_stage", p.zero_stage},
      {"recompute", model::to_string(p.recompute)},
      {"attention", model::to_string(s.attention)},
      {"id", fmt::format("trainsim-{}-{}-b{}-s{}", mo.framework->name, m.name, s.micro_batch_size,
                         s.seq_len)},
      {"source", "trainsim memory --allocator-trace-out (the generated step)"},
      {"pipeline_stage", b.stage}};
  header["segment_placement"] = "above"; // the generated step's (allocator.hpp)
  if (s.recompute_layers > 0)
    header["recompute_layers"] = s.recompute_layers;
  if (!o.machine.cluster.empty())
    header["cluster"] = mc.cluster.name;
  if (mo.framework->torch_compile != "none")
    header["torch_compile"] = mo.framework->torch_compile;
  write_allocator_trace(o.allocator_trace_out, b, header);
}

// The breakdown, the verdict, the largest micro-batch and the least recompute: JSON or a table.
// The memory band as the table says it.
std::string band_text(const sim::MemoryAnswer& a, const std::string& framework) {
  return a.band->memory_runs > 0
             ? fmt::format("+-{:.0f}% (1 sigma over {} {}{} runs)",
                           100 * a.band->memory_sigma_fraction, a.band->memory_runs,
                           a.band_multi_gpu ? "multi-GPU " : "", framework)
             : fmt::format("none (the {} profile has no memory residuals)", framework);
}

// The answer as JSON (raw base units), every figure the table prints among them.
nlohmann::json memory_answer_json(const MemoryRequest& q, const sim::MemoryAnswer& a,
                                  double params) {
  const sim::MemoryBreakdown& b = a.breakdown;
  const auto& fw = *q.mo.framework;
  nlohmann::json j{{"model", q.m.name},
                   {"gpu", q.mc.gpu.name},
                   {"num_gpus", q.mc.num_gpus},
                   {"setup", setup_json(q.s)},
                   {"plan", plan_json(q.p)},
                   {"params", params},
                   {"params_per_gpu", b.params_on_gpu},
                   {"pipeline_stage", b.stage},
                   {"pipeline_stage_layers", b.stage_num_layers},
                   {"in_flight_micro_batches", b.in_flight_micro_batches},
                   {"framework", fw.name},
                   {"torch_compile", fw.torch_compile},
                   {"per_gpu_bytes", memory_json(b)},
                   {"peak_allocated_bytes", b.peak_allocated()},
                   {"peak_reserved_bytes", b.peak_reserved()},
                   {"gpu_memory_bytes", q.mc.gpu.memory_bytes},
                   {"allocator_cap_bytes", q.cap},
                   {"headroom_bytes", a.capacity_bytes - a.need_bytes},
                   {"memory_band_fraction", a.band->memory_sigma_fraction},
                   {"band_source", band_text(a, fw.name)},
                   {"verdict", a.verdict},
                   {"fits", a.fits},
                   {"max_micro_batch", a.max_micro_batch},
                   {"fits_again_up_to", a.fits_again_up_to},
                   {"min_recompute_layers", a.min_recompute_layers},
                   {"min_recompute_layers_low", a.min_recompute_layers_low},
                   {"min_recompute_layers_high", a.min_recompute_layers_high}};
  j["caveats"] = a.caveats;
  if (!q.zero_note.empty())
    j["zero_stage_note"] = q.zero_note;
  if (q.ds_batch.micro > 0)
    j["deepspeed_batch"] = {{"train_batch_size", q.ds_batch.train},
                            {"train_micro_batch_size_per_gpu", q.ds_batch.micro},
                            {"gradient_accumulation_steps", q.ds_batch.grad_acc}};
  return j;
}

void print_memory(Sink& sink, const MemoryRequest& q, const sim::MemoryAnswer& a, double params) {
  const nlohmann::json j = memory_answer_json(q, a, params);
  const auto& [m, mc, s, p, mo, ds, ds_batch, zero_note, cap] = q;
  const sim::MemoryBreakdown& b = a.breakdown;
  const double sigma = a.band->memory_sigma_fraction;
  const std::string band = band_text(a, mo.framework->name);
  const double need = a.need_bytes, capacity = a.capacity_bytes;
  const bool fits = a.fits;
  const std::string& said = a.verdict;
  const std::int64_t max_mb = a.max_micro_batch, again = a.fits_again_up_to;
  const std::int64_t min_rc = a.min_recompute_layers, rc_low = a.min_recompute_layers_low,
                     rc_high = a.min_recompute_layers_high;
  const std::vector<std::string>& caveats = a.caveats;
  check_finite(j); // every printed figure below is one of these
  if (sink.format() == Format::json) {
    sink.json(j);
  } else {
    sink.comment(fmt::format("model {} ({} params), {} x {} ({} GB each)", m.name,
                             format_count(params), mc.num_gpus, mc.gpu.name,
                             gb(mc.gpu.memory_bytes)));
    sink.comment(
        fmt::format("framework: {}{}", mo.framework->name,
                    mo.framework->torch_compile == "none"
                        ? ""
                        : fmt::format(" under torch.compile ({})", mo.framework->torch_compile)));
    sink.comment(fmt::format("tp {} pp {}{} dp {} cp {}{}{}, ZeRO-{}, recompute {}, micro-batch "
                             "{}, seq_len {}, {} {}, {} attention",
                             p.tp, p.pp, stage_split_note(p), p.dp, p.cp, expert_note(p),
                             p.sequence_parallel ? " +SP" : "", p.zero_stage, recompute_label(p, s),
                             s.micro_batch_size, s.seq_len, model::to_string(s.precision),
                             model::to_string(s.optimizer), model::to_string(s.attention)));
    if (!zero_note.empty())
      sink.comment(zero_note);
    sink.comment(fmt::format(
        "fullest pipeline stage {}{} holds {} params and {:g} micro-batches "
        "of activations",
        b.stage, p.stage_layers.empty() ? "" : fmt::format(" ({} layers)", b.stage_num_layers),
        format_count(b.params_on_gpu), b.in_flight_micro_batches));
    breakdown_table(sink, b);
    if (sink.format() == Format::table)
      sink.write(fmt::format(
          "{}: {} ({:.0f}%), {} by {} GB; band {}; peak allocated {} GB, reserved {} GB; "
          "largest micro-batch that fits: {}\n",
          said == "fits"           ? "FITS"
          : said == "does not fit" ? "DOES NOT FIT"
                                   : "WITHIN THE BAND: TRY IT",
          cap > 0
              ? fmt::format("reserved {} GB of the allocator's {} GB cap", gb(need), gb(capacity))
              : fmt::format("{} GB of {} GB", gb(need), gb(capacity)),
          100 * need / capacity, fits ? "fits" : "misses", gb(std::abs(capacity - need)), band,
          gb(b.peak_allocated()), gb(b.peak_reserved()),
          max_mb > 0 ? fmt::format("{}", max_mb)
                     : std::string("none (micro-batch 1 does not fit with this recompute)")));
    if (sink.format() == Format::table) {
      auto layers = [](std::int64_t n) {
        return n < 0 ? std::string("more than every layer") : fmt::format("{}", n);
      };
      const std::string within = rc_low == rc_high
                                     ? std::string()
                                     : fmt::format("; within the memory band (+-{:.0f}%): {} to {}",
                                                   100 * sigma, layers(rc_low), layers(rc_high));
      sink.write(
          min_rc == 0 ? fmt::format("recompute needed to fit: none (it fits with every activation "
                                    "kept){}\n",
                                    within)
          : min_rc < 0
              ? fmt::format("recompute needed to fit: more than full recompute of every layer "
                            "(it does not fit even then){}\n",
                            within)
              : fmt::format("recompute needed to fit: full recompute of {} layer{} per model "
                            "chunk (--recompute full --recompute-layers {}){}\n",
                            min_rc, min_rc == 1 ? "" : "s", min_rc, within));
    }
    if (sink.format() == Format::table && again > 0)
      sink.write(fmt::format(
          "above it the verdict is not monotone: micro-batch {} fits again (the caching "
          "allocator's segments fall differently at each size); {} is the safe answer\n",
          again, max_mb));
    if (sink.format() == Format::table && b.host_activation_bytes > 0)
      sink.write(fmt::format("activation offload ({} layers): {} GB of activations in host "
                             "memory, not counted above\n",
                             s.offload_activation_layers, gb(b.host_activation_bytes)));
    if (sink.format() == Format::table)
      for (const auto& c : caveats)
        sink.write(fmt::format("caveat ({}): {}\n", mo.framework->name, c));
  }
}

// DeepSpeed's own view: model states as its estimator gives them, where they live, and the
// PCIe/NVMe traffic offload adds per step.
void print_deepspeed(Sink& sink, const MemoryOptions& o, const MemoryRequest& q, double params) {
  const auto& [m, mc, s, p, mo, ds, ds_batch, zero_note, cap] = q;
  // traffic offload adds per step.
  const auto ops = model::build_ops(m, model::OpContext{});
  double largest = 0;
  for (const auto& kind : ops.layers)
    for (const auto& op : kind.ops)
      largest = std::max(largest, op.params);
  const std::int64_t g = std::min(mc.cluster.gpus_per_node, mc.num_gpus);
  const std::int64_t nodes = std::max<std::int64_t>(mc.num_gpus / g, 1);
  const double link = hw::host_link_bytes_per_s(mc.gpu, mc.profile);
  // Under AutoTP each rank's module holds 1/tp of every sharded layer and the ZeRO group is
  // its dp ranks: the estimator runs on that shard (DeepSpeed's own counts the module it is
  // given, over every GPU, and knows nothing of tensor parallelism).
  const double tp = static_cast<double>(p.tp);
  const auto place =
      sim::offload_placement(*ds, params / tp, largest / tp, std::max<std::int64_t>(g / p.tp, 1),
                             nodes, link, o.nvme_gb_per_s * 1e9);
  if (sink.format() == Format::table) {
    sink.write(fmt::format(
        "# DeepSpeed ZeRO-{} (offload optimizer: {}, parameters: {}): model states per GPU "
        "{} GB (DeepSpeed's estimator{}); host RAM per node {} GB; NVMe per node {} GB; per "
        "step {} GB over PCIe ({:.3f} s at {} GB/s) and {:.3f} s of NVMe traffic at {} GB/s\n",
        ds->zero_stage, sim::to_string(ds->offload_optimizer), sim::to_string(ds->offload_param),
        gb(place.gpu_bytes),
        p.tp > 1 ? fmt::format(" on each rank's 1/{} tensor-parallel shard", p.tp) : "",
        gb(place.host_bytes), gb(place.nvme_bytes), gb(place.pcie_bytes), place.pcie_s,
        fmt::format("{:.3g}", link / 1e9), place.nvme_s, o.nvme_gb_per_s));
    if (ds_batch.micro > 0)
      sink.write(fmt::format("# DeepSpeed batch: train_batch_size {} = micro-batch {} x {} "
                             "accumulation steps x dp {}\n",
                             ds_batch.train, ds_batch.micro, ds_batch.grad_acc, p.dp));
  }
}

// --plot: allocated against reserved, by part.
void plot_memory(const MemoryOptions& o, const MemoryRequest& q, const sim::MemoryBreakdown& b) {
  const auto& [m, mc, s, p, mo, ds, ds_batch, zero_note, cap] = q;
  PlotSpec spec =
      plot_spec(o.plot,
                fmt::format("{} on {} x {}: per-GPU memory (tp {} pp {} dp {}, ZeRO-{}, "
                            "recompute {})",
                            m.name, mc.num_gpus, mc.gpu.name, p.tp, p.pp, p.dp, p.zero_stage,
                            recompute_label(p, s)),
                "", "GB per GPU");
  spec.hmarkers.push_back(
      {mc.gpu.memory_bytes / 1e9, fmt::format("GPU memory {:.0f} GB", mc.gpu.memory_bytes / 1e9)});
  spec.yrange = {0, 1.15 * std::max(b.total, mc.gpu.memory_bytes) / 1e9};
  // Two bars: what is allocated at the peak, and what the caching allocator has reserved
  // for it (the same parts plus its slack) beside the context outside the allocator.
  plot_bars(spec, {"allocated", "reserved+context"},
            {"weights", "gradients", "optimizer", "activations", "buffers", "temporaries",
             "allocator slack", "context"},
            {{b.weights / 1e9, b.weights / 1e9},
             {b.gradients / 1e9, b.gradients / 1e9},
             {b.optimizer / 1e9, b.optimizer / 1e9},
             {b.activations / 1e9, b.activations / 1e9},
             {b.buffers / 1e9, b.buffers / 1e9},
             {b.transient / 1e9, b.transient / 1e9},
             {0.0, b.allocator / 1e9},
             {0.0, b.overhead / 1e9}});
}

int run_memory(const MemoryOptions& o) {
  if (!o.plot.empty())
    check_plot_file(o.plot);
  if ((o.max_params || !o.params.empty()) && !o.allocator_trace_out.empty())
    throw ConfigError("--allocator-trace-out: needs --model (the step's requests come from the "
                      "model's tensors; --params and --max-params count model states only)");
  if ((o.max_params || !o.params.empty()) && o.allocator_cap_gb > 0)
    throw ConfigError("--allocator-cap-gb: needs --model (the cap bounds a step's caching "
                      "allocator; --params and --max-params count model states only)");
  if (o.max_params)
    return run_max_params(o);
  if (!o.params.empty()) {
    if (!o.model.model.empty())
      throw ConfigError("--params and --model: give only one");
    return run_params_only(o);
  }
  if (o.model.model.empty())
    throw ConfigError("--model: required (or --params N for model states only, or --max-params)");
  const MemoryRequest q = resolve_memory_request(o);
  const sim::MemoryAnswer a =
      sim::answer_memory(q.m, q.p, q.s, q.mc.profile, q.mc.gpu.memory_bytes, q.mo);
  if (!o.allocator_trace_out.empty())
    write_memory_trace(o, q, a.breakdown);
  const double params = model::count_params(q.m).total;
  Sink sink(o.out);
  print_memory(sink, q, a, params);
  if (q.ds)
    print_deepspeed(sink, o, q, params);
  if (!o.plot.empty())
    plot_memory(o, q, a.breakdown);
  return 0;
}

} // namespace

void add_memory(CLI::App& app) {
  auto o = std::make_shared<MemoryOptions>();
  auto* cmd = app.add_subcommand(
      "memory",
      "Does it fit? Per-GPU memory breakdown and verdict, or the largest model that fits");
  add_model_options(*cmd, o->model, false);
  add_machine_options(*cmd, o->machine, true);
  add_plan_options(*cmd, o->plan);
  add_setup_options(*cmd, o->setup);
  add_framework_setup_options(*cmd, o->setup);
  cmd->add_option("--params", o->params,
                  "Model states only, for a bare parameter count (e.g. 7.5e9); dp = --dp or "
                  "--num-gpus");
  cmd->add_flag("--max-params", o->max_params,
                "Print the largest parameter count whose model states fit (per ZeRO stage)");
  cmd->add_option("--bucket-mb", o->bucket_mb, "Gradient bucket size in MiB (buffers)")
      ->capture_default_str();
  add_framework_option(*cmd, o->framework);
  add_torch_compile_option(*cmd, o->torch_compile);
  cmd->add_option("--deepspeed", o->deepspeed,
                  "A DeepSpeed config (ds_config.json): its ZeRO stage, offload devices, "
                  "buckets, batch (train_batch_size, train_micro_batch_size_per_gpu, "
                  "gradient_accumulation_steps: the missing ones derived and the three checked "
                  "against dp as DeepSpeed does), precision and AutoTP's "
                  "tensor_parallel.autotp_size (tp); prints DeepSpeed's own model-state "
                  "estimate, host RAM, NVMe and the offload traffic. Keys trainsim does not "
                  "model are refused by name");
  cmd->add_option("--nvme-gb-per-s", o->nvme_gb_per_s,
                  "NVMe bandwidth per node for ZeRO-Infinity (GB/s)")
      ->capture_default_str();
  cmd->add_option("--plot", o->plot,
                  "Write a breakdown chart (.png or .svg): allocated vs reserved by category");
  cmd->add_option("--allocator-trace-out", o->allocator_trace_out,
                  "Write the step trainsim played through its caching-allocator model (pytorch, "
                  "pytorch-compile, fsdp) as an allocator trace: every request and release in "
                  "order, the format of scripts/peer_allocator_trace.py, to replay with `trainsim "
                  "compare --allocator-traces` or set beside PyTorch's own trace");
  cmd->add_option("--allocator-cap-gb", o->allocator_cap_gb,
                  "Cap what PyTorch's caching allocator may reserve (GB = 1e9 bytes; "
                  "torch.cuda.set_per_process_memory_fraction times the GPU's memory): the step, "
                  "the verdict, the largest micro-batch and the least recompute are those of a "
                  "training loop under the cap (pytorch, pytorch-compile, fsdp)")
      ->check(CLI::Range(1e-3, 1e6));
  add_output_options(*cmd, o->out);
  cmd->footer("Examples:\n  trainsim memory --model llama3-8b --gpu h100-sxm --num-gpus 8 --zero 3 "
              "--seq-len 8192\n  trainsim memory --params 7.5e9 --num-gpus 64 --zero 1\n  "
              "trainsim memory --gpu h100-sxm --num-gpus 8 --max-params --precision bf16");
  cmd->callback([o] { run_memory(*o); });
}

} // namespace trainsim::cli
