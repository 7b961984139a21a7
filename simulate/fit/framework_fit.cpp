// Recorded framework runs: reading, prediction, fit (framework_fit.hpp).
#include "simulate/fit/framework_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "common/text.hpp"
#include "hardware/load.hpp"
#include "model/count.hpp"
#include "model/load.hpp"
#include "simulate/memory.hpp"
#include "simulate/plan.hpp"

namespace trainsim::fitting {

using namespace trainsim::sim; // the simulator this fits

namespace {

namespace fs = std::filesystem;

// Names a published table prints for models and GPUs, mapped to presets by the data file
// model-map.json beside the runs (validate/published/data/model-map.json); device runs name
// presets directly.
struct NameMap {
  std::map<std::string, std::string> models;   // printed name -> model preset
  std::map<std::string, std::string> clusters; // gpu name -> cluster preset
};

NameMap read_name_map(const std::string& runs_file) {
  NameMap m;
  const fs::path p = fs::path(runs_file).parent_path() / "model-map.json";
  std::error_code ec;
  if (!fs::exists(p, ec))
    return m;
  const auto j = parse_json_text(read_input_file(p.string(), /*regular_only=*/true), p.string());
  Problems problems(p.string());
  JsonObjectReader r(j, problems);
  for (const char* key : {"models", "clusters"}) {
    const auto* obj = r.take(key);
    if (!obj)
      continue;
    if (!obj->is_object()) {
      problems.add(fmt::format("{}: expected an object of name -> preset", key));
      continue;
    }
    for (const auto& [name, v] : obj->items()) {
      if (!v.is_string()) {
        problems.add(fmt::format("{}.{}: expected a preset name", key, printable(name)));
        continue;
      }
      if (!check_data_preset_name(problems, fmt::format("{}.{}", key, printable(name)),
                                  v.get_ref<const std::string&>()))
        continue;
      (std::string(key) == "models" ? m.models : m.clusters)[name] = v.get<std::string>();
    }
  }
  (void)r.take("notes");
  r.finish();
  problems.throw_if_any();
  return m;
}

double number_or(const nlohmann::json& j, const char* key, double fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::int64_t int_or(const nlohmann::json& j, const char* key, std::int64_t fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

std::string string_or(const nlohmann::json& j, const char* key, const std::string& fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// Precision as recorded -> trainsim's policy; empty optional: not modelled (reason set).
std::optional<model::Precision> map_precision(const std::string& p, std::string& why) {
  if (p == "bf16" || p == "bf16-mixed")
    return model::Precision::bf16_mixed;
  if (p == "fp32")
    return model::Precision::fp32;
  if (p == "fp16-mixed")
    return model::Precision::fp16_mixed;
  if (p == "fp8" || p == "fp8-ds" || p == "fp8-delayed")
    return model::Precision::fp8_delayed;
  if (p == "fp8-cs" || p == "fp8-current")
    return model::Precision::fp8_current;
  if (p == "mxfp8" || p == "fp8-mx")
    return model::Precision::mxfp8;
  why = p.empty() ? "precision not stated" : fmt::format("precision '{}' not modelled", p);
  return std::nullopt;
}

std::optional<model::Recompute> map_recompute(const std::string& r) {
  if (r.empty() || r == "none" || r == "no")
    return model::Recompute::none;
  // torchtitan's "selective op" is its per-op policy; its "selective layer" is a whole-layer
  // checkpoint every k-th layer: full recompute of some layers only (read_run sets how many).
  if (r == "selective layer")
    return model::Recompute::full;
  if (r == "selective op" || r == "selective-op")
    return model::Recompute::selective_op;
  if (r == "selective")
    return model::Recompute::selective;
  if (r == "full")
    return model::Recompute::full;
  return std::nullopt;
}

// A field the reader knows, present with the wrong JSON type, is an error (null: absent), so a
// typo'd value is never read as a missing one.
void check_field_types(const nlohmann::json& j, Problems& problems) {
  auto check = [&](const nlohmann::json& o, const std::string& prefix,
                   std::initializer_list<const char*> keys, const char* what, auto ok) {
    if (!o.is_object())
      return;
    for (const char* k : keys) {
      const auto it = o.find(k);
      if (it != o.end() && !it->is_null() && !ok(*it))
        problems.add(fmt::format("{}{}: expected {}, got {}", prefix, k, what, json_brief(*it)));
    }
  };
  auto is_number = [](const nlohmann::json& v) { return v.is_number(); };
  auto is_integer = [](const nlohmann::json& v) { return v.is_number_integer(); };
  auto is_string = [](const nlohmann::json& v) { return v.is_string(); };
  check(j, "",
        {"id", "source", "framework", "model", "error", "precision", "attention", "recompute",
         "gpu", "cluster"},
        "a string", is_string);
  check(j, "",
        {"seq_len", "num_gpus", "tp", "pp", "cp", "etp", "zero_stage", "micro_batch",
         "global_batch", "recompute_layers"},
        "an integer", is_integer);
  check(j, "", {"memory_cap_bytes"}, "a number", is_number);
  check(j, "", {"oom_search"}, "true or false",
        [](const nlohmann::json& v) { return v.is_boolean(); });
  if (const auto m = j.find("measured"); m != j.end()) {
    check(*m, "measured.",
          {"step_time_s", "tokens_per_s_per_gpu", "peak_allocated_bytes", "peak_reserved_bytes",
           "fresh_peak_allocated_bytes", "fresh_peak_reserved_bytes",
           "fresh_boundary_peak_allocated_bytes", "fresh_boundary_peak_reserved_bytes"},
          "a number", is_number);
    check(*m, "measured.",
          {"max_micro_batch", "fresh_max_micro_batch", "loop_max_micro_batch",
           "min_recompute_layers"},
          "an integer", is_integer);
    check(*m, "measured.", {"fresh_ok"}, "true or false",
          [](const nlohmann::json& v) { return v.is_boolean(); });
  }
  if (const auto o = j.find("other"); o != j.end())
    check(*o, "other.", {"local_batch_size"}, "an integer", is_integer);
}

// The measured figures: time, peaks, and an OOM boundary (the probes', fresh processes', or a
// user's loop's). Returns the batch the peaks were measured at (0: nothing ran under a cap).
std::int64_t read_measured(FrameworkRun& run, const nlohmann::json& j, const nlohmann::json& m,
                           Problems& problems) {
  run.step_time_s = number_or(m, "step_time_s", 0);
  run.tokens_per_s_per_gpu = number_or(m, "tokens_per_s_per_gpu", 0);
  // An OOM search's peaks re-measured in a fresh process (scripts/peer_framework_runs.py:
  // a probe that ran out of memory can leave state behind for the next) take precedence,
  // unless that fresh run itself ran out of memory ("fresh_ok": false): its peaks are then
  // those of a failed step, and the search's own are kept.
  const bool fresh_failed =
      m.contains("fresh_ok") && m["fresh_ok"].is_boolean() && !m["fresh_ok"].get<bool>();
  run.peak_allocated_bytes = number_or(m, "peak_allocated_bytes", 0);
  run.peak_reserved_bytes = number_or(m, "peak_reserved_bytes", 0);
  if (!fresh_failed) {
    run.peak_allocated_bytes = number_or(m, "fresh_peak_allocated_bytes", run.peak_allocated_bytes);
    run.peak_reserved_bytes = number_or(m, "fresh_peak_reserved_bytes", run.peak_reserved_bytes);
  }
  run.memory_cap_bytes = number_or(j, "memory_cap_bytes", 0);
  if (m.contains("max_micro_batch"))
    run.max_micro_batch = int_or(m, "max_micro_batch", -1);
  // The boundary re-measured one fresh process per probe (scripts/peer_oom_fresh_boundary.py)
  // takes precedence over the search's, with the peaks of its largest batch that ran; the
  // boundary a user's training loop finds (the same script with --steps 4 --keep-cache,
  // measured.loop_max_micro_batch) over both, the peaks staying those of the probes.
  const std::int64_t fresh_max = int_or(m, "fresh_max_micro_batch", -1);
  const std::int64_t loop_max = int_or(m, "loop_max_micro_batch", -1);
  if (run.max_micro_batch >= 0 && fresh_max >= 0) {
    run.searched_max_micro_batch = run.max_micro_batch;
    run.max_micro_batch = fresh_max;
    run.peak_allocated_bytes = number_or(m, "fresh_boundary_peak_allocated_bytes", 0);
    run.peak_reserved_bytes = number_or(m, "fresh_boundary_peak_reserved_bytes", 0);
  }
  // The batch the peaks were measured at (0: nothing ran under the cap).
  const std::int64_t peaks_batch = std::max<std::int64_t>(run.max_micro_batch, 0);
  run.boundary_peaks = peaks_batch > 0;
  if (run.max_micro_batch >= 0 && loop_max >= 0) {
    run.searched_max_micro_batch = run.max_micro_batch;
    run.max_micro_batch = loop_max;
    run.loop_boundary = true;
  }
  // What a training run can measure: a step under a day, a GPU's memory under 1 PiB.
  check_range(problems, "measured.step_time_s", run.step_time_s, Interval{1e-6, 86400, "s", true});
  check_range(problems, "measured.tokens_per_s_per_gpu", run.tokens_per_s_per_gpu,
              Interval{1e-3, 1e9, "tokens/s", true});
  check_range(problems, "measured.peak_allocated_bytes", run.peak_allocated_bytes,
              Interval{1, 0x1p50, "bytes", true});
  check_range(problems, "measured.peak_reserved_bytes", run.peak_reserved_bytes,
              Interval{1, 0x1p50, "bytes", true});
  check_range(problems, "memory_cap_bytes", run.memory_cap_bytes,
              Interval{1, 0x1p50, "bytes", true});
  problems.throw_if_any();
  return peaks_batch;
}

// What was trained, on how many GPUs and in what layout; false (skip_reason set) where
// trainsim cannot model it.
bool read_model_and_layout(FrameworkRun& run, const nlohmann::json& j, const NameMap& names,
                           Problems& problems, std::int64_t& num_gpus) {
  const auto mapped = names.models.find(run.model_name);
  const std::string model_preset = mapped != names.models.end() ? mapped->second : run.model_name;
  if (mapped == names.models.end() && !model_preset.empty()) {
    check_data_preset_name(problems, "model", model_preset);
    problems.throw_if_any();
  }
  if (model_preset.empty()) {
    run.skip_reason = fmt::format("model '{}' has no preset yet", run.model_name);
    return false;
  }
  try {
    run.model = model::load_model(model_preset);
  } catch (const ConfigError&) {
    run.skip_reason = fmt::format("model '{}' has no preset yet", run.model_name);
    return false;
  }
  std::string why;
  const auto precision = map_precision(string_or(j, "precision", ""), why);
  if (!precision) {
    run.skip_reason = why;
    return false;
  }
  run.setup.precision = *precision;
  run.setup.seq_len = int_or(j, "seq_len", 0);
  if (run.setup.seq_len <= 0) {
    run.skip_reason = "seq_len not stated";
    return false;
  }
  run.setup.attention = string_or(j, "attention", "flash") == "naive" ? model::AttentionImpl::naive
                                                                      : model::AttentionImpl::flash;
  num_gpus = int_or(j, "num_gpus", 1);
  run.plan.tp = int_or(j, "tp", 1);
  run.plan.pp = int_or(j, "pp", 1);
  run.plan.cp = int_or(j, "cp", 1);
  const auto vp = j.find("vp");
  run.plan.interleave = vp != j.end() && vp->is_number_integer() ? vp->get<std::int64_t>() : 1;
  const auto ep = j.find("ep");
  run.plan.ep = ep != j.end() && ep->is_number_integer() ? ep->get<std::int64_t>() : 1;
  run.plan.zero_stage = int_or(j, "zero_stage", 0);
  // The experts' tensor parallelism: a row's "etp" where it states one; else Megatron rows
  // run MoE parallel folding with whole experts (Megatron-Bridge's performance configs set
  // expert_tensor_parallel_size = 1 for every MoE model they publish: BASE_DEEPSEEK_V3_CONFIG,
  // BASE_QWEN3_235B_A22B_CONFIG, BASE_QWEN3_30B_A3B_CONFIG, BASE_GPT_OSS_120B_CONFIG in
  // scripts/performance/configs/*/*_workload_base_configs.py); other frameworks keep etp = tp.
  const auto etp = j.find("etp");
  if (etp != j.end() && etp->is_number_integer())
    run.plan.etp = etp->get<std::int64_t>();
  else if (run.framework == "megatron" && run.plan.ep > 1)
    run.plan.etp = 1;
  if (num_gpus < 1 || run.plan.tp < 1 || run.plan.pp < 1 || run.plan.cp < 1 ||
      num_gpus % (run.plan.tp * run.plan.pp * run.plan.cp) != 0) {
    run.skip_reason = "layout does not divide num_gpus";
    return false;
  }
  run.plan.dp = num_gpus / (run.plan.tp * run.plan.pp * run.plan.cp);
  const auto fsdp = j.find("fsdp");
  if (fsdp != j.end() && fsdp->is_boolean() && fsdp->get<bool>())
    run.plan.zero_stage = 3; // fully sharded: parameters, gradients and optimizer states
  // Megatron shards optimizer states over data-parallel ranks (distributed optimizer) and
  // runs sequence parallelism with tensor parallelism, as NVIDIA's recipes do.
  if (run.framework == "megatron") {
    if (run.plan.zero_stage == 0 && run.plan.dp_cp() > 1)
      run.plan.zero_stage = 1;
    run.plan.sequence_parallel = run.plan.tp > 1;
  }
  // torchtitan's tensor parallelism is always sequence parallel ("Apply tensor + sequence
  // parallelism to every transformer block": apply_tp in its parallelize_llama.py).
  if (run.framework == "fsdp")
    run.plan.sequence_parallel = run.plan.tp > 1;
  return true;
}

// The recompute policy, its layers and modules, and a recompute boundary's answer; false
// (skip_reason set) for a policy trainsim does not model.
bool read_recompute(FrameworkRun& run, const nlohmann::json& j, const nlohmann::json& m,
                    const std::string& where) {
  const auto recompute = map_recompute(string_or(j, "recompute", ""));
  if (!recompute) {
    run.skip_reason = "recompute policy not modelled";
    return false;
  }
  run.plan.recompute = *recompute;
  // Full recompute of some layers only: as recorded (`recompute_layers`, per pipeline stage's
  // model chunk), or torchtitan's "selective layer" policy at its default frequency: it wraps a
  // transformer block when its running count is a multiple of selective_ac_option = "2"
  // ("2 = checkpoint every other layer"; parallelize_llama.py, _apply_ac_to_transformer_block):
  // half of a model chunk's layers, rounded down (the count runs over the blocks a rank holds).
  if (const auto rl = j.find("recompute_layers"); rl != j.end() && !rl->is_null()) {
    if (!rl->is_number_integer() || rl->get<std::int64_t>() < 1 ||
        rl->get<std::int64_t>() > run.model.num_layers)
      throw ConfigError(fmt::format("{}: recompute_layers must be a whole number in [1, "
                                    "num_layers = {}], got {}",
                                    where, run.model.num_layers, json_brief(*rl)));
    if (run.plan.recompute != model::Recompute::full)
      throw ConfigError(fmt::format("{}: recompute_layers needs recompute \"full\"", where));
    run.setup.recompute_layers = rl->get<std::int64_t>();
  } else if (string_or(j, "recompute", "") == "selective layer") {
    const std::int64_t chunks =
        std::max<std::int64_t>(run.plan.pp, 1) * std::max<std::int64_t>(run.plan.interleave, 1);
    run.setup.recompute_layers = std::max<std::int64_t>(run.model.num_layers / chunks / 2, 1);
  }
  // Megatron-Core's selective recompute modules, as the run set them (recompute_modules).
  if (const auto rm = j.find("recompute_modules"); rm != j.end() && !rm->is_null()) {
    std::vector<std::string> names;
    if (rm->is_array())
      for (const auto& v : *rm)
        if (v.is_string())
          names.push_back(v.get<std::string>());
    if (!rm->is_array() || names.size() != rm->size() || names.empty())
      throw ConfigError(fmt::format("{}: recompute_modules must be a non-empty list of module "
                                    "names (e.g. [\"core_attn\", \"moe_act\"]), got {}",
                                    where, json_brief(*rm)));
    run.setup.recompute_modules =
        model::parse_recompute_modules(names, fmt::format("{}: recompute_modules", where));
    if (run.plan.recompute != model::Recompute::selective)
      throw ConfigError(fmt::format("{}: recompute_modules needs recompute \"selective\"", where));
    if (run.framework != "megatron")
      throw ConfigError(fmt::format("{}: recompute_modules is Megatron-Core's; framework \"{}\" "
                                    "has none",
                                    where, run.framework));
  }
  if (const auto mr = m.find("min_recompute_layers"); mr != m.end() && !mr->is_null()) {
    // A recompute boundary: its answer under the cap, and the probe its peaks come from.
    const std::int64_t n = mr->get<std::int64_t>();
    if (n < -1 || n > run.model.num_layers)
      throw ConfigError(fmt::format("{}: measured.min_recompute_layers must be -1 (not even every "
                                    "layer fits), 0 (none needed) or at most num_layers = {}, "
                                    "got {}",
                                    where, run.model.num_layers, n));
    if (run.memory_cap_bytes <= 0)
      throw ConfigError(
          fmt::format("{}: measured.min_recompute_layers needs memory_cap_bytes > 0", where));
    if (run.is_oom_search())
      throw ConfigError(fmt::format(
          "{}: measured.min_recompute_layers and measured.max_micro_batch: one record is "
          "either a recompute boundary or an OOM boundary",
          where));
    const bool all =
        run.setup.recompute_layers == 0 || run.setup.recompute_layers == run.model.num_layers;
    const bool agrees =
        n == 0  ? run.plan.recompute == model::Recompute::none
        : n < 0 ? run.plan.recompute == model::Recompute::full && all
                : run.plan.recompute == model::Recompute::full &&
                      (run.setup.recompute_layers == n || (n == run.model.num_layers && all));
    if (!agrees)
      throw ConfigError(fmt::format(
          "{}: measured.min_recompute_layers = {} needs recompute \"{}\"{} (the answer's own "
          "probe)",
          where, n, n == 0 ? "none" : "full",
          n > 0 && n < run.model.num_layers ? fmt::format(" with recompute_layers = {}", n) : ""));
    run.recompute_boundary = true;
    run.min_recompute_layers = n;
  }
  return true;
}

// The row's "other" object: torchtitan's local batch, overlaps, offload, gradient dtype,
// torch.compile.
void read_other(FrameworkRun& run, const nlohmann::json& o, const std::string& where) {
  // torchtitan prints the local batch per data-parallel rank; with pipeline parallelism it
  // is cut into micro-batches, of pipeline_parallel_microbatch_size = 1 (its default since
  // 2025) unless the row states its own micro-batch (torchtitan 2024: pp of them).
  const std::int64_t local = int_or(o, "local_batch_size", 0);
  if (local > 0) {
    if (run.setup.micro_batch_size <= 0)
      run.setup.micro_batch_size = run.plan.pp > 1 ? 1 : local;
    run.setup.global_batch_size = local * run.plan.dp;
  }
  const auto at = o.find("async_tp");
  run.tp_overlap = at != o.end() && at->is_boolean() && at->get<bool>();
  // Megatron-Core's TP communication overlap (Transformer Engine userbuffers; Megatron-Bridge
  // `comm_overlap.tp_comm_overlap`, NeMo `ub_tp_comm_overlap`), as transcribed from the
  // configuration the row ran.
  const auto ub = o.find("tp_comm_overlap");
  if (ub != o.end()) {
    if (!ub->is_boolean())
      throw ConfigError(fmt::format("{}: other.tp_comm_overlap must be true or false", where));
    if (ub->get<bool>() && run.plan.tp < 2)
      throw ConfigError(fmt::format(
          "{}: other.tp_comm_overlap: needs tensor parallelism (tp > 1; the row has tp {})", where,
          run.plan.tp));
    run.tp_overlap = run.tp_overlap || ub->get<bool>();
  }
  // Megatron-Bridge's workload configurations name Megatron-Core's combined 1F1B
  // `moe_a2a_overlap`; a row carries it as transcribed from the configuration it ran.
  const auto a2a = o.find("moe_a2a_overlap");
  if (a2a != o.end() && !a2a->is_boolean())
    throw ConfigError(fmt::format("{}: other.moe_a2a_overlap must be true or false", where));
  run.ep_overlap = a2a != o.end() && a2a->get<bool>();
  // Megatron-Core's activation CPU offload, as the configuration the row ran sets it.
  const auto off = o.find("cpu_offloading_num_layers");
  if (off != o.end()) {
    if (!off->is_number_integer() || off->get<std::int64_t>() < 0)
      throw ConfigError(
          fmt::format("{}: other.cpu_offloading_num_layers must be a whole number >= 0", where));
    run.setup.offload_activation_layers = off->get<std::int64_t>();
  }
  const auto fp32 = o.find("grad_reduce_in_fp32");
  if (fp32 != o.end()) {
    if (!fp32->is_boolean())
      throw ConfigError(fmt::format("{}: other.grad_reduce_in_fp32 must be true or false", where));
    run.setup.grad_reduce_bytes = fp32->get<bool>() ? 4 : 2;
  }
  const auto tc = o.find("torch_compile");
  run.compiled = tc != o.end() && tc->is_boolean() && tc->get<bool>();
  const auto cl = o.find("compiled_loss");
  run.compiled_loss = cl != o.end() && cl->is_boolean() && cl->get<bool>();
}

// Where it ran: the row's cluster, or the GPU's through the map, at the row's size; false
// (skip_reason set) where no preset fits.
bool read_machine(FrameworkRun& run, const nlohmann::json& j, const NameMap& names,
                  Problems& problems, std::int64_t num_gpus) {
  // A row's own "cluster" (a preset the transcriber chose from the source's hardware note,
  // where it differs from the usual machine of that GPU) wins over the GPU's cluster map.
  const std::string gpu = string_or(j, "gpu", "");
  const std::string row_cluster = string_or(j, "cluster", "");
  const auto cl = names.clusters.find(gpu);
  if (!row_cluster.empty())
    check_data_preset_name(problems, "cluster", row_cluster);
  else if (cl == names.clusters.end() && !gpu.empty())
    check_data_preset_name(problems, "gpu", gpu);
  problems.throw_if_any();
  try {
    if (!row_cluster.empty() || cl != names.clusters.end()) {
      run.cluster = hw::load_cluster(row_cluster.empty() ? cl->second : row_cluster);
      run.gpu = hw::load_gpu(run.cluster.gpu);
      if (num_gpus <= run.cluster.gpus_per_node) {
        run.cluster.gpus_per_node = num_gpus;
        run.cluster.num_nodes = 1;
      } else {
        run.cluster.num_nodes = num_gpus / run.cluster.gpus_per_node;
      }
    } else {
      run.gpu = hw::load_gpu(gpu);
      run.cluster = hw::single_node_cluster(run.gpu, num_gpus);
    }
  } catch (const ConfigError&) {
    run.skip_reason = row_cluster.empty() ? fmt::format("gpu '{}' has no preset yet", gpu)
                                          : fmt::format("cluster '{}' has no preset", row_cluster);
    return false;
  }
  if (run.cluster.num_gpus() != num_gpus) {
    run.skip_reason = "num_gpus is not a whole number of nodes";
    return false;
  }
  return true;
}

// The batch: micro-batch and global batch as the row states them (or as an OOM boundary's
// probes ran them), checked against the row's own accumulation count; the row's options that
// depend on the layout. False (skip_reason set) where no micro-batch follows.
bool read_batch(FrameworkRun& run, const nlohmann::json& j, const std::string& where,
                std::int64_t peaks_batch) {
  run.setup.micro_batch_size = int_or(j, "micro_batch", 0);
  if (j.contains("other") && j["other"].is_object())
    read_other(run, j["other"], where);
  if (j.contains("global_batch")) // else torchtitan's local batch x dp above, or micro x dp below
    run.setup.global_batch_size = int_or(j, "global_batch", 0);
  if (run.is_oom_search() && peaks_batch == 0) {
    run.setup.micro_batch_size = 1; // nothing fits: the verdict is checked from batch 1 up
    run.setup.global_batch_size = run.plan.dp;
  } else if (run.searched_max_micro_batch >= 0) {
    // A re-measured boundary: the peaks are those of the probes' own largest batch.
    run.setup.micro_batch_size = peaks_batch;
    run.setup.global_batch_size = peaks_batch * run.plan.dp;
  }
  if (run.setup.micro_batch_size <= 0 && run.setup.global_batch_size > 0 && run.plan.dp > 0 &&
      run.setup.global_batch_size % run.plan.dp == 0 && run.plan.pp == 1)
    run.setup.micro_batch_size = run.setup.global_batch_size / run.plan.dp; // no accumulation
  if (run.setup.micro_batch_size <= 0) {
    run.skip_reason = "micro-batch not stated";
    return false;
  }
  if (run.setup.global_batch_size <= 0)
    run.setup.global_batch_size = run.setup.micro_batch_size * run.plan.dp;
  // NVIDIA's tables print the gradient-accumulation steps (other.ga): a row whose count does not
  // follow from its own global batch, micro-batch and layout is predicted from the layout, and
  // says so.
  if (j.contains("other") && j["other"].is_object() && j["other"].contains("ga")) {
    const auto& ga = j["other"]["ga"];
    if (!ga.is_number_integer() || ga.get<std::int64_t>() < 1)
      throw ConfigError(fmt::format("{}: other.ga must be a whole number >= 1", where));
    const std::int64_t per_step = run.setup.micro_batch_size * run.plan.dp;
    if (ga.get<std::int64_t>() * per_step != run.setup.global_batch_size)
      run.notes.push_back(fmt::format(
          "its GA column ({}) disagrees with its layout: global batch {} / (dp {} x micro-batch "
          "{}) = {:.4g} micro-batches per step; predicted from the layout",
          ga.get<std::int64_t>(), run.setup.global_batch_size, run.plan.dp,
          run.setup.micro_batch_size,
          static_cast<double>(run.setup.global_batch_size) / static_cast<double>(per_step)));
  }
  // NVIDIA's Megatron-Bridge performance scripts reduce gradients in bf16: every model's
  // set_*_common_configs sets mixed_precision.grad_reduce_in_fp32 = ddp.grad_reduce_in_fp32 =
  // False (scripts/performance/configs/{llama/llama3_llm_pretrain.py, qwen/qwen3_llm_pretrain.py,
  // gpt_oss/gpt_oss_llm_pretrain.py, deepseek/deepseek_llm_pretrain.py}); a row's own
  // other.grad_reduce_in_fp32 wins.
  if (run.framework == "megatron" && run.setup.grad_reduce_bytes == 0 &&
      string_or(j, "source", "").find("Megatron-Bridge") != std::string::npos)
    run.setup.grad_reduce_bytes = 2;
  if (run.setup.offload_activation_layers > 0 && run.framework != "megatron")
    throw ConfigError(fmt::format("{}: other.cpu_offloading_num_layers: Megatron-Core's option; "
                                  "the row's framework is '{}'",
                                  where, run.framework));
  if (run.ep_overlap && !ep_overlap_rule(run.plan).empty())
    throw ConfigError(
        fmt::format("{}: other.moe_a2a_overlap: {}", where, ep_overlap_rule(run.plan)));
  return true;
}

FrameworkRun parse_run(const nlohmann::json& j, const std::string& where, const NameMap& names) {
  FrameworkRun run;
  Problems problems(where);
  if (!j.is_object()) {
    problems.add("expected a JSON object");
    problems.throw_if_any();
  }
  check_field_types(j, problems);
  problems.throw_if_any();
  run.oom_config =
      j.contains("oom_search") && j["oom_search"].is_boolean() && j["oom_search"].get<bool>();
  run.id = string_or(j, "id", "");
  run.source = string_or(j, "source", "");
  run.framework = string_or(j, "framework", "");
  run.model_name = string_or(j, "model", "");
  if (run.framework.empty())
    problems.add("framework: missing (a profile name such as pytorch, fsdp, megatron)");
  else
    check_data_preset_name(problems, "framework", run.framework);
  if (run.model_name.empty())
    problems.add("model: missing");
  problems.throw_if_any();
  if (j.contains("error")) {
    run.skip_reason = "the run failed: " + string_or(j, "error", "?");
    return run;
  }
  const auto mit = j.find("measured");
  if (mit == j.end() || !mit->is_object())
    problems.add("measured: missing (an object of measured figures)");
  problems.throw_if_any();
  const nlohmann::json& m = *mit;
  const std::int64_t peaks_batch = read_measured(run, j, m, problems);

  std::int64_t num_gpus = 1;
  if (!read_model_and_layout(run, j, names, problems, num_gpus))
    return run;
  if (!read_recompute(run, j, m, where))
    return run;
  if (!read_batch(run, j, where, peaks_batch))
    return run;
  if (!read_machine(run, j, names, problems, num_gpus))
    return run;
  run.profile = hw::default_profile(run.gpu.name);
  model::validate(run.setup, where); // sizes a run can have, as for the flags
  if (run.model.num_layers % (run.plan.pp * run.plan.interleave) != 0) {
    // Published layouts with layers that do not split evenly (Llama 3.1 405B: 126 layers on 8
    // stages) use uneven stages: the balanced split the plan search would choose.
    StepOptions so;
    run.plan.stage_layers = searched_stage_layers(run.model, run.cluster, run.gpu, run.profile,
                                                  run.plan, run.setup, so);
  }
  try {
    model::validate(run.plan, run.model, run.setup, num_gpus, where);
  } catch (const ConfigError& e) {
    run.skip_reason = std::string("layout not modelled: ") + e.what();
  }
  return run;
}

// Nelder-Mead on a few parameters (in log space, so they stay positive).
std::vector<double> minimise(const std::function<double(const std::vector<double>&)>& f,
                             std::vector<double> x0) {
  const std::size_t n = x0.size();
  std::vector<std::vector<double>> s{x0};
  for (std::size_t i = 0; i < n; ++i) {
    auto x = x0;
    x[i] += 0.5;
    s.push_back(x);
  }
  std::vector<double> v;
  for (const auto& x : s)
    v.push_back(f(x));
  for (int it = 0; it < 400 * static_cast<int>(n); ++it) {
    std::vector<std::size_t> order(s.size());
    for (std::size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return v[a] < v[b]; });
    const std::size_t best = order.front(), worst = order.back(), second = order[n - 1 + 0];
    if (std::abs(v[worst] - v[best]) < 1e-12)
      break;
    std::vector<double> c(n, 0.0);
    for (std::size_t i : order)
      if (i != worst)
        for (std::size_t k = 0; k < n; ++k)
          c[k] += s[i][k] / static_cast<double>(n);
    auto along = [&](double t) {
      std::vector<double> x(n);
      for (std::size_t k = 0; k < n; ++k)
        x[k] = c[k] + t * (s[worst][k] - c[k]);
      return x;
    };
    const auto r = along(-1.0);
    const double fr = f(r);
    if (fr < v[best]) {
      const auto e = along(-2.0);
      const double fe = f(e);
      s[worst] = fe < fr ? e : r;
      v[worst] = std::min(fe, fr);
    } else if (fr < v[second]) {
      s[worst] = r;
      v[worst] = fr;
    } else {
      const auto k = along(0.5);
      const double fk = f(k);
      if (fk < v[worst]) {
        s[worst] = k;
        v[worst] = fk;
      } else {
        for (std::size_t i : order)
          if (i != best) {
            for (std::size_t q = 0; q < n; ++q)
              s[i][q] = s[best][q] + 0.5 * (s[i][q] - s[best][q]);
            v[i] = f(s[i]);
          }
      }
    }
  }
  return s[static_cast<std::size_t>(std::min_element(v.begin(), v.end()) - v.begin())];
}

} // namespace

namespace {

// One runs file's text (the JSON lines of `file`), its names mapped by `names`, appended to
// `out`; `first_line_of_id` holds every id read so far, over all the files of one reading.
void read_runs_text(std::string_view text, const std::string& file, const NameMap& names,
                    std::map<std::string, std::string>& first_line_of_id,
                    std::vector<FrameworkRun>& out) {
  std::istringstream in{std::string(text)};
  std::map<std::string, std::int64_t> counter; // per framework (or OOM configuration)
  std::map<std::string, Split> oom_side;
  std::string line;
  for (std::int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const std::string where = fmt::format("{}:{}", file, n);
    const nlohmann::json j = parse_json_text(line, file, n);
    FrameworkRun run = parse_run(j, where, names);
    run.file = file;
    if (!run.id.empty()) {
      const auto [it, fresh] = first_line_of_id.emplace(run.id, where);
      if (!fresh)
        throw ConfigError(fmt::format("{}: id {}: given twice (first at {}): one row per run; a "
                                      "second pass of the same run goes to --repeat-runs",
                                      where, json_brief(run.id), it->second));
    }
    // A batch declared with its sides (docs/frameworks.md) states each row's: it takes no
    // place in the alternating order of the file's other rows.
    const auto side = j.is_object() ? j.find("split") : j.end();
    if (j.is_object() && side != j.end()) {
      if (!side->is_string() || (*side != "fit" && *side != "test"))
        throw ConfigError(fmt::format("{}: split must be \"fit\" or \"test\"", where));
      run.split = *side == "fit" ? Split::fit : Split::test;
    } else if (run.is_oom_search() || run.oom_config) {
      // The caps of one configuration share its id up to "-cap".
      const std::string config = run.id.substr(0, run.id.rfind("-cap"));
      auto it = oom_side.find(config);
      if (it == oom_side.end()) {
        const std::int64_t k = counter["oom"]++;
        it = oom_side.emplace(config, k % 2 == 0 ? Split::fit : Split::test).first;
      }
      run.split = it->second;
    } else {
      run.split = counter[run.framework]++ % 2 == 0 ? Split::fit : Split::test;
    }
    out.push_back(std::move(run));
  }
}

} // namespace

std::vector<FrameworkRun> read_framework_runs(const std::vector<std::string>& files) {
  std::vector<FrameworkRun> out;
  std::map<std::string, std::string> first_line_of_id; // over every file: one row per run
  for (const auto& file : files)
    read_runs_text(read_input_file(file), file, read_name_map(file), first_line_of_id, out);
  return out;
}

std::vector<FrameworkRun> read_framework_runs_text(std::string_view text, const std::string& file) {
  std::vector<FrameworkRun> out;
  std::map<std::string, std::string> first_line_of_id;
  read_runs_text(text, file, NameMap{}, first_line_of_id, out);
  return out;
}

void merge_repeat_runs(std::vector<FrameworkRun>& runs,
                       const std::vector<std::string>& repeat_files) {
  std::map<std::string, std::size_t> by_id;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (runs[i].step_time_s > 0)
      by_id.emplace(runs[i].id, i);
  std::map<std::size_t, double> log_sum;
  for (const auto& file : repeat_files) {
    std::istringstream in(read_input_file(file));
    const NameMap names = read_name_map(file);
    std::string line;
    for (std::int64_t n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos)
        continue;
      const std::string where = fmt::format("{}:{}", file, n);
      const FrameworkRun r = parse_run(parse_json_text(line, file, n), where, names);
      const auto it = by_id.find(r.id);
      if (it == by_id.end())
        throw ConfigError(fmt::format(
            "{}: run '{}' repeats no run with a step time in --framework-runs (a repeat pass "
            "measures rows already given, under the same id)",
            where, r.id));
      if (r.step_time_s <= 0)
        throw ConfigError(fmt::format("{}: run '{}' has no measured step_time_s", where, r.id));
      FrameworkRun& first = runs[it->second];
      if (!log_sum.count(it->second))
        log_sum[it->second] = std::log(first.step_time_s);
      log_sum[it->second] += std::log(r.step_time_s);
      ++first.time_passes;
    }
  }
  for (const auto& [i, s] : log_sum)
    runs[i].step_time_s = std::exp(s / static_cast<double>(runs[i].time_passes));
}

FrameworkRun parse_framework_run(const nlohmann::json& j, const std::string& where) {
  return parse_run(j, where, NameMap{});
}

RunPrediction predict_run(const FrameworkRun& run, const FrameworkProfile& fw) {
  RunPrediction p;
  StepOptions so;
  // torch.compile as the row says torchtitan ran it (framework.hpp, with_torch_compile).
  const TorchCompile compile = run.compiled_loss ? TorchCompile::blocks_and_loss
                               : run.compiled    ? TorchCompile::blocks
                                                 : TorchCompile::none;
  so.framework = std::make_shared<const FrameworkProfile>(
      compile != TorchCompile::none && torch_compile_applies(fw) ? with_torch_compile(fw, compile)
                                                                 : fw);
  so.tp_overlap = run.tp_overlap;
  so.ep_overlap = run.ep_overlap;
  auto estimate = [&](std::int64_t micro_batch) {
    model::TrainingSetup s = run.setup;
    s.micro_batch_size = micro_batch;
    if (run.is_oom_search())
      s.global_batch_size = micro_batch * run.plan.dp;
    return estimate_step(run.model, run.cluster, run.gpu, run.profile, run.plan, s, so);
  };
  // The memory under the run's cap (torch.cuda.set_per_process_memory_fraction caps reserved
  // bytes). A boundary is always the answer `trainsim memory --allocator-cap-gb` gives, a
  // user's training loop (MemoryOptions::kLoopSteps, the cache kept): one answer, whatever
  // protocol measured it. The peaks a probe measured at one batch are predicted as that probe
  // ran (scripts/peer_framework_runs.py probe_under_cap: two steps after emptying the cache).
  auto loop_options = [&](double cap) {
    MemoryOptions mo;
    mo.framework = so.framework;
    mo.allocator_cap_bytes = cap;
    return mo;
  };
  auto probe_options = [&](double cap) {
    MemoryOptions mo = loop_options(cap);
    mo.empty_cache_before_steps = true;
    mo.allocator_steps = MemoryOptions::kProbeSteps;
    return mo;
  };
  p.step = estimate(run.setup.micro_batch_size);
  p.step_time_s = p.step.step_time_s;
  p.tokens_per_s_per_gpu = p.step.tokens_per_s / static_cast<double>(run.plan.num_gpus());
  p.peak_allocated_bytes = p.step.memory.peak_allocated();
  p.peak_reserved_bytes = p.step.memory.peak_reserved();
  if (run.recompute_boundary) {
    // The answer `trainsim memory` gives (sim::min_recompute_layers) under the probes' cap,
    // and under the cap scaled by the memory band.
    auto answer_under = [&](double cap) {
      return sim::min_recompute_layers(run.model, run.plan, run.setup, run.profile,
                                       run.gpu.memory_bytes, loop_options(cap));
    };
    p.min_recompute_layers = answer_under(run.memory_cap_bytes);
    const double sigma = fw.memory_residuals(run.plan.num_gpus()).memory_sigma_fraction;
    p.min_recompute_layers_low = p.min_recompute_layers_high = p.min_recompute_layers;
    if (sigma > 0 && sigma < 1) {
      p.min_recompute_layers_low = answer_under(run.memory_cap_bytes / (1 - sigma));
      p.min_recompute_layers_high = answer_under(run.memory_cap_bytes / (1 + sigma));
    }
    // The measured peaks are those of the answer's probe, under the cap.
    if (run.min_recompute_layers >= 0) {
      model::ParallelPlan plan = run.plan;
      model::TrainingSetup s = run.setup;
      const std::int64_t n = run.min_recompute_layers;
      plan.recompute = n == 0 ? model::Recompute::none : model::Recompute::full;
      s.recompute_layers = n > 0 && n < run.model.num_layers ? n : 0;
      const MemoryBreakdown at =
          estimate_memory(run.model, plan, s, run.profile, probe_options(run.memory_cap_bytes));
      p.peak_allocated_bytes = at.peak_allocated();
      p.peak_reserved_bytes = at.peak_reserved();
    }
    return p;
  }
  if (run.is_oom_search()) {
    // The peaks of the probe at the largest batch that ran, under the cap, where the allocator
    // returns its wholly free cached segments before it reports out of memory.
    if (run.boundary_peaks) {
      const MemoryBreakdown capped = estimate_memory(run.model, run.plan, run.setup, run.profile,
                                                     probe_options(run.memory_cap_bytes));
      p.peak_allocated_bytes = capped.peak_allocated();
      p.peak_reserved_bytes = capped.peak_reserved();
    }
    // The boundary as `trainsim memory` finds it (sim::max_micro_batch: the first batch that
    // does not fit, less one).
    model::TrainingSetup s = run.setup;
    s.global_batch_size = s.micro_batch_size * run.plan.dp;
    p.max_micro_batch =
        sim::max_micro_batch(run.model, run.plan, s, run.profile, run.gpu.memory_bytes,
                             loop_options(run.memory_cap_bytes));
  }
  return p;
}

double time_error(const FrameworkRun& run, const RunPrediction& p) {
  if (run.step_time_s > 0)
    return (p.step_time_s - run.step_time_s) / run.step_time_s;
  if (run.tokens_per_s_per_gpu > 0)
    return (p.tokens_per_s_per_gpu - run.tokens_per_s_per_gpu) / run.tokens_per_s_per_gpu;
  return std::numeric_limits<double>::quiet_NaN();
}

double memory_error(const FrameworkRun& run, const RunPrediction& p) {
  if ((run.is_oom_search() && !run.boundary_peaks) ||
      (run.recompute_boundary && run.min_recompute_layers < 0))
    return std::numeric_limits<double>::quiet_NaN(); // nothing ran: no peak to compare
  if (run.peak_reserved_bytes > 0)
    return (p.peak_reserved_bytes - run.peak_reserved_bytes) / run.peak_reserved_bytes;
  if (run.peak_allocated_bytes > 0)
    return (p.peak_allocated_bytes - run.peak_allocated_bytes) / run.peak_allocated_bytes;
  return std::numeric_limits<double>::quiet_NaN();
}

FitOptions default_fit_options(const FrameworkProfile& base,
                               const std::vector<FrameworkRun>& runs) {
  FitOptions o;
  bool step_runs = false, published = false, memory = false, recompute = false;
  bool fp32_memory = false, moe = false, sac = false;
  for (const auto& r : runs) {
    if (r.framework != base.name || !r.skip_reason.empty() || r.split != Split::fit)
      continue;
    recompute = recompute || (r.step_time_s > 0 && r.plan.recompute != model::Recompute::none);
    sac = sac || (r.step_time_s > 0 && r.plan.recompute == model::Recompute::selective_op);
    moe = moe || (r.model.is_moe() && (r.step_time_s > 0 || r.tokens_per_s_per_gpu > 0));
    step_runs = step_runs || r.step_time_s > 0;
    published = published || (r.step_time_s <= 0 && r.tokens_per_s_per_gpu > 0);
    memory = memory || (r.peak_allocated_bytes > 0 && !r.recompute_boundary);
    fp32_memory =
        fp32_memory || (!r.is_oom_search() && !r.recompute_boundary && r.peak_allocated_bytes > 0 &&
                        r.setup.precision == model::Precision::fp32);
  }
  if (base.host_model == HostModel::queue && step_runs) {
    o.host_per_kernel = true;
    o.host_per_checkpoint = recompute;
    o.host_per_sac_kernel = sac;
  }
  o.gemm_efficiency = published || (base.host_model == HostModel::per_op && step_runs);
  o.gemm_efficiency_per_gpu = published;
  o.expert_efficiency = o.gemm_efficiency && moe;
  o.moe_dispatch = o.expert_efficiency;
  o.activation_factor = memory;
  o.activation_factor_fp32 = fp32_memory;
  o.allocator_overhead = memory && !base.caching_allocator; // simulated, not fitted
  return o;
}

FitResult fit_framework(const FrameworkProfile& base, const std::vector<FrameworkRun>& runs,
                        const FitOptions& options, const std::string& fitted_on) {
  std::vector<const FrameworkRun*> time_rows, memory_rows;
  for (const auto& r : runs) {
    if (r.framework != base.name || !r.skip_reason.empty() || r.split != Split::fit)
      continue;
    if (!r.is_oom_search() && (r.step_time_s > 0 || r.tokens_per_s_per_gpu > 0))
      time_rows.push_back(&r);
    // OOM-boundary rows record the peaks of the largest batch that ran under the cap. Rows with
    // per-op checkpointing were made to fit that policy's dispatch cost only (declared in
    // docs/frameworks.md, "Fit/test split"): their peaks are compared, not fitted on.
    // Recompute boundaries are a check only (docs/frameworks.md): never fitted on.
    if (r.plan.recompute != model::Recompute::selective_op && !r.recompute_boundary &&
        (!r.is_oom_search() || r.boundary_peaks) &&
        (r.peak_reserved_bytes > 0 || r.peak_allocated_bytes > 0))
      memory_rows.push_back(&r);
  }
  FitResult result;
  FrameworkProfile fw = base;

  // GPUs with a GEMM scale of their own: all but the one with most fit rows, each with at
  // least 3 fit rows.
  std::vector<std::string> own_scale;
  if (options.gemm_efficiency && options.gemm_efficiency_per_gpu) {
    std::map<std::string, int> rows_per_gpu;
    for (const FrameworkRun* r : time_rows)
      ++rows_per_gpu[r->gpu.name];
    std::string most;
    for (const auto& [gpu, n] : rows_per_gpu)
      if (most.empty() || n > rows_per_gpu[most])
        most = gpu;
    for (const auto& [gpu, n] : rows_per_gpu)
      if (gpu != most && n >= 3)
        own_scale.push_back(gpu);
  }
  // Time: the chosen parameters of a profile, and a fit of them minimising the squared log
  // error over `rows`.
  auto time_params = [&options, &own_scale](FrameworkProfile& f) {
    std::vector<double*> params;
    if (options.host_per_kernel)
      params.push_back(&f.host_s_per_kernel);
    if (options.host_per_checkpoint) {
      f.host_s_per_checkpoint = std::max(f.host_s_per_checkpoint, 1e-4);
      params.push_back(&f.host_s_per_checkpoint);
    }
    if (options.host_per_sac_kernel) {
      f.host_s_per_sac_kernel = std::max(f.host_s_per_sac_kernel, 1e-6);
      params.push_back(&f.host_s_per_sac_kernel);
    }
    if (options.gemm_efficiency)
      params.push_back(&f.gemm_efficiency_scale);
    for (const auto& gpu : own_scale)
      params.push_back(&f.gpu_gemm_efficiency_scale.emplace(gpu, 1.0).first->second);
    if (options.expert_efficiency)
      params.push_back(&f.expert_gemm_efficiency_scale);
    if (options.moe_dispatch) {
      f.moe_dispatch_s_per_layer = std::max(f.moe_dispatch_s_per_layer, 1e-4);
      params.push_back(&f.moe_dispatch_s_per_layer);
    }
    return params;
  };
  auto fit_time = [&](FrameworkProfile& f, const std::vector<const FrameworkRun*>& rows) {
    const std::vector<double*> params = time_params(f);
    std::vector<double> x0;
    for (double* p : params)
      x0.push_back(std::log(std::max(*p, 1e-9)));
    auto objective = [&](const std::vector<double>& x) {
      for (std::size_t i = 0; i < params.size(); ++i)
        *params[i] = std::exp(x[i]);
      if (f.gemm_efficiency_scale > 2 || f.expert_gemm_efficiency_scale > 2)
        return 1e9;
      for (const auto& [gpu, v] : f.gpu_gemm_efficiency_scale)
        if (v > 2)
          return 1e9;
      double sum = 0;
      for (const FrameworkRun* r : rows) {
        const double e = time_error(*r, predict_run(*r, f));
        sum += std::log1p(e) * std::log1p(e);
      }
      return sum;
    };
    const auto x = minimise(objective, x0);
    (void)objective(x);
  };
  const bool time_fitted = !time_params(fw).empty();
  if (time_fitted && time_rows.empty())
    throw ConfigError(fmt::format("--framework-runs: no fit row of framework '{}' has a "
                                  "measured step time or throughput",
                                  base.name));
  if (time_fitted)
    fit_time(fw, time_rows);
  // Memory: activation factor and allocator slack, fitted in turn (allocated first).
  if (options.activation_factor || options.allocator_overhead) {
    if (memory_rows.empty())
      throw ConfigError(fmt::format(
          "--framework-runs: no fit row of framework '{}' recorded peak memory", base.name));
    // which: 0 = mixed-precision rows, 1 = fp32 rows, 2 = all (the allocator's slack).
    auto fit_one = [&](double& param, bool reserved, int which) {
      auto objective = [&](const std::vector<double>& x) {
        param = reserved ? std::exp(x[0]) - 1e-3 : std::exp(x[0]);
        double sum = 0;
        for (const FrameworkRun* r : memory_rows) {
          const bool fp32 = r->setup.precision == model::Precision::fp32;
          if ((which == 0 && fp32 && options.activation_factor_fp32) || (which == 1 && !fp32))
            continue;
          const RunPrediction p = predict_run(*r, fw);
          const double measured = reserved ? r->peak_reserved_bytes : r->peak_allocated_bytes;
          const double predicted = reserved ? p.peak_reserved_bytes : p.peak_allocated_bytes;
          if (measured <= 0)
            continue;
          const double e = std::log(predicted / measured);
          sum += e * e;
        }
        return sum;
      };
      const auto x = minimise(objective, {std::log(reserved ? param + 1e-3 : param)});
      (void)objective(x);
    };
    if (options.activation_factor)
      fit_one(fw.activation_bytes_factor, false, 0);
    if (options.activation_factor_fp32) {
      fw.activation_bytes_factor_fp32 = std::max(fw.activation_bytes_factor_fp32, 1.0);
      fit_one(fw.activation_bytes_factor_fp32, false, 1);
    }
    if (options.allocator_overhead)
      fit_one(fw.allocator_overhead_fraction, true, 2);
    fw.allocator_overhead_fraction = std::max(fw.allocator_overhead_fraction, 0.0);
  }
  // Residuals on the fit rows.
  double t2 = 0, tb = 0, ta = 0, m2 = 0, ma = 0;
  for (const FrameworkRun* r : time_rows) {
    const double e = time_error(*r, predict_run(*r, fw));
    t2 += e * e;
    tb += e;
    ta += std::abs(e);
  }
  for (const FrameworkRun* r : memory_rows) {
    const double e = memory_error(*r, predict_run(*r, fw));
    m2 += e * e;
    ma += std::abs(e);
  }
  const auto nt = static_cast<double>(time_rows.size());
  const auto nm = static_cast<double>(memory_rows.size());
  fw.fit.time_runs = static_cast<std::int64_t>(time_rows.size());
  fw.fit.time_sigma_fraction = nt > 0 ? std::sqrt(t2 / nt) : 0;
  fw.fit.time_sigma_leave_one_out = false;
  fw.fit.set_time_dof(std::max<std::int64_t>(static_cast<std::int64_t>(time_rows.size()) -
                                                 static_cast<std::int64_t>(time_params(fw).size()),
                                             0));
  if (time_fitted && time_rows.size() >= 3) {
    // The band's sigma out of sample: each fit row predicted by the time parameters refitted
    // on the other fit rows (leave-one-out). In-sample residuals understate the error on a run
    // the fit has not seen, the more so the fewer rows per fitted parameter.
    double loo2 = 0;
    double kind2[2] = {0, 0}; // dense, MoE
    std::int64_t kind_n[2] = {0, 0};
    for (std::size_t i = 0; i < time_rows.size(); ++i) {
      std::vector<const FrameworkRun*> others;
      for (std::size_t j = 0; j < time_rows.size(); ++j)
        if (j != i)
          others.push_back(time_rows[j]);
      FrameworkProfile held = fw;
      fit_time(held, others);
      const double e = time_error(*time_rows[i], predict_run(*time_rows[i], held));
      loo2 += e * e;
      const int k = time_rows[i]->model.num_experts > 0 ? 1 : 0;
      kind2[k] += e * e;
      ++kind_n[k];
    }
    fw.fit.time_sigma_fraction = std::sqrt(loo2 / nt);
    fw.fit.time_sigma_leave_one_out = true;
    // By kind of model (FrameworkProfile::fit_dense, fit_moe), where both kinds have enough
    // rows; each kind gets its share of the degrees of freedom.
    fw.fit_dense = fw.fit_moe = FitResiduals{};
    if (std::min(kind_n[0], kind_n[1]) >= FrameworkProfile::kMinRowsPerKind)
      for (int k : {0, 1}) {
        FitResiduals& out = k == 1 ? fw.fit_moe : fw.fit_dense;
        out.time_runs = kind_n[k];
        out.time_sigma_fraction = std::sqrt(kind2[k] / static_cast<double>(kind_n[k]));
        out.time_sigma_leave_one_out = true;
        out.set_time_dof(std::lround(static_cast<double>(fw.fit.time_dof()) *
                                     static_cast<double>(kind_n[k]) / nt));
        out.fitted_on = fmt::format("{} (fit rows of models {} routed experts)", fitted_on,
                                    k == 1 ? "with" : "without");
      }
  }
  fw.fit.time_bias_fraction = nt > 0 ? tb / nt : 0;
  fw.fit.memory_runs = static_cast<std::int64_t>(memory_rows.size());
  fw.fit.memory_sigma_fraction = nm > 0 ? std::sqrt(m2 / nm) : 0;
  fw.fit.fitted_on = fitted_on;
  validate(fw, "fit result");
  result.profile = fw;
  result.fit_time_runs = fw.fit.time_runs;
  result.fit_memory_runs = fw.fit.memory_runs;
  result.fit_time_mape = nt > 0 ? ta / nt : 0;
  result.fit_memory_mape = nm > 0 ? ma / nm : 0;
  return result;
}

TpOverlapFit fit_tp_overlap_hidden(const FrameworkProfile& base,
                                   const std::vector<FrameworkRun>& runs) {
  std::vector<const FrameworkRun*> rows;
  for (const auto& r : runs)
    if (r.framework == base.name && r.skip_reason.empty() && r.split == Split::fit &&
        r.tp_overlap && r.plan.tp > 1 && r.plan.cp == 1 && !r.is_oom_search() &&
        (r.step_time_s > 0 || r.tokens_per_s_per_gpu > 0))
      rows.push_back(&r);
  if (rows.empty())
    throw ConfigError(fmt::format("--framework-runs: no fit row of framework '{}' overlaps "
                                  "tensor-parallel communication without context parallelism",
                                  base.name));
  TpOverlapFit best;
  best.profile = base;
  best.rows = static_cast<std::int64_t>(rows.size());
  best.mape = std::numeric_limits<double>::infinity();
  FrameworkProfile f = base;
  for (int step = 0; step <= 100; ++step) {
    f.tp_overlap_hidden_fraction = step / 100.0;
    double sum = 0;
    for (const FrameworkRun* r : rows)
      sum += std::abs(time_error(*r, predict_run(*r, f)));
    const double mape = sum / static_cast<double>(rows.size());
    if (mape < best.mape - 1e-12) {
      best.mape = mape;
      best.profile.tp_overlap_hidden_fraction = f.tp_overlap_hidden_fraction;
    }
  }
  return best;
}

FitResiduals multi_gpu_residuals(const FrameworkProfile& profile,
                                 const std::vector<FrameworkRun>& runs, std::int64_t fitted_params,
                                 const std::string& fitted_on) {
  FitResiduals out;
  double t2 = 0, tb = 0, m2 = 0;
  std::int64_t nt = 0, nm = 0;
  for (const auto& r : runs) {
    if (r.framework != profile.name || !r.skip_reason.empty() || r.split != Split::fit ||
        r.is_oom_search() || r.plan.num_gpus() <= 1)
      continue;
    const RunPrediction p = predict_run(r, profile);
    if (r.step_time_s > 0 || r.tokens_per_s_per_gpu > 0) {
      const double e = time_error(r, p);
      t2 += e * e;
      tb += e;
      ++nt;
    }
    const double me = memory_error(r, p);
    if (std::isfinite(me)) {
      m2 += me * me;
      ++nm;
    }
  }
  if (nt == 0)
    return out;
  out.time_runs = nt;
  out.time_sigma_fraction = std::sqrt(t2 / static_cast<double>(nt));
  out.time_bias_fraction = tb / static_cast<double>(nt);
  out.time_sigma_leave_one_out = false;
  out.set_time_dof(std::max<std::int64_t>(nt - fitted_params, 0));
  out.memory_runs = nm;
  out.memory_sigma_fraction = nm > 0 ? std::sqrt(m2 / static_cast<double>(nm)) : 0;
  out.fitted_on = fitted_on;
  return out;
}

} // namespace trainsim::fitting
