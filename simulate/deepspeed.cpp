// DeepSpeed ZeRO estimators, config and offload placement (deepspeed.hpp).
#include "simulate/deepspeed.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "common/errors.hpp"
#include "common/json_io.hpp"

namespace trainsim::sim {

DeepSpeedStateEstimate estimate_zero2_model_states(double p, std::int64_t g, std::int64_t nodes,
                                                   bool cpu_offload, double f) {
  const double gpus = static_cast<double>(nodes * g);
  DeepSpeedStateEstimate e;
  if (cpu_offload) {
    e.gpu_bytes = static_cast<std::int64_t>(2 * p);
    e.cpu_bytes = static_cast<std::int64_t>(p * std::max(4 * gpus, 16.0) * f);
  } else {
    // 2 (16-bit params) + 18 / G (16-bit and fp32 grads, fp32 params, momentum, variance).
    e.gpu_bytes = static_cast<std::int64_t>(2 * p + std::floor(18 * p / gpus));
    e.cpu_bytes = static_cast<std::int64_t>(p * 4 * static_cast<double>(g) * f);
  }
  return e;
}

DeepSpeedStateEstimate estimate_zero3_model_states(double p, double largest, std::int64_t g,
                                                   std::int64_t nodes, bool cpu_offload,
                                                   bool cpu_offload_params, bool zero_init,
                                                   double f) {
  const double gpus = static_cast<double>(nodes * g);
  const double per_node = 1.0 / static_cast<double>(nodes);
  const double gd = static_cast<double>(g);
  DeepSpeedStateEstimate e;
  const double layer = 4 * largest;
  e.largest_layer_bytes = static_cast<std::int64_t>(layer);
  double gpu = 0, cpu = 0;
  if (cpu_offload) {
    if (cpu_offload_params) {
      gpu = layer;
      cpu = zero_init ? p * 18 * per_node * f : p * std::max(4 * gd, 18 * per_node) * f;
    } else {
      gpu = layer + std::floor(2 * p / gpus);
      cpu = zero_init ? p * 16 * per_node * f : p * std::max(4 * gd, 16 * per_node) * f;
    }
  } else {
    gpu = layer + std::floor(18 * p / gpus);
    cpu = zero_init ? largest * 4 * gd * f : p * 4 * gd * f;
  }
  e.gpu_bytes = static_cast<std::int64_t>(gpu);
  e.cpu_bytes = static_cast<std::int64_t>(cpu);
  return e;
}

std::string_view to_string(OffloadDevice d) {
  switch (d) {
  case OffloadDevice::none: return "none";
  case OffloadDevice::cpu: return "cpu";
  case OffloadDevice::nvme: return "nvme";
  }
  return "?";
}

namespace {

// Every key of the sections trainsim reads, with what it models; anything else is refused.
OffloadDevice read_device(const nlohmann::json& j, const std::string& where, Problems& p) {
  if (!j.is_object()) {
    p.add(fmt::format("{}: expected an object with \"device\"", where));
    return OffloadDevice::none;
  }
  OffloadDevice d = OffloadDevice::none;
  for (const auto& [k, v] : j.items()) {
    if (k == "device") {
      const std::string s = v.is_string() ? v.get<std::string>() : "";
      if (s == "cpu")
        d = OffloadDevice::cpu;
      else if (s == "nvme")
        d = OffloadDevice::nvme;
      else if (s != "none")
        p.add(fmt::format("{}.device = {}: must be \"none\", \"cpu\" or \"nvme\"", where,
                          json_brief(v)));
    } else if (k != "pin_memory" && k != "nvme_path" && k != "buffer_count" && k != "buffer_size" &&
               k != "fast_init" && k != "max_in_cpu") {
      p.add(fmt::format("{}.{}: not modelled by trainsim", where, k));
    }
  }
  return d;
}

// "auto" is the Hugging Face Trainer's placeholder, filled from its TrainingArguments before
// DeepSpeed reads the config (transformers' HfTrainerDeepSpeedConfig): name it.
bool is_auto(const nlohmann::json& v, const std::string& where, Problems& p, const char* give) {
  if (!v.is_string() || v.get<std::string>() != "auto")
    return false;
  p.add(fmt::format("{} = \"auto\": give {} (\"auto\" is filled in by the Hugging Face "
                    "Trainer from its TrainingArguments, not by DeepSpeed)",
                    where, give));
  return true;
}

double number(const nlohmann::json& v, const std::string& where, Problems& p, double lo,
              double hi) {
  if (is_auto(v, where, p, "a number"))
    return 0;
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo ||
      v.get<double>() > hi) {
    p.add(fmt::format("{} = {}: must be a number in [{:g}, {:g}]", where, json_brief(v), lo, hi));
    return 0;
  }
  return v.get<double>();
}

// A count: a whole number in [lo, hi] (DeepSpeed reads these as ints; 2.5 micro-batches is a
// mistake, not 2).
std::int64_t whole(const nlohmann::json& v, const std::string& where, Problems& p, double lo,
                   double hi) {
  const double x = number(v, where, p, lo, hi);
  if (x != 0 && x != std::floor(x)) {
    p.add(fmt::format("{} = {}: must be a whole number", where, json_brief(v)));
    return 0;
  }
  return static_cast<std::int64_t>(x);
}

bool flag(const nlohmann::json& v, const std::string& where, Problems& p, bool fallback) {
  if (is_auto(v, where, p, "true or false"))
    return fallback;
  if (!v.is_boolean()) {
    p.add(fmt::format("{} = {}: must be true or false", where, json_brief(v)));
    return fallback;
  }
  return v.get<bool>();
}

bool enabled(const nlohmann::json& section, const std::string& where, Problems& p) {
  bool on = false;
  if (!section.is_object()) {
    p.add(fmt::format("{}: expected an object", where));
    return false;
  }
  for (const auto& [k, v] : section.items()) {
    if (k == "enabled") {
      on = flag(v, where + ".enabled", p, false);
    } else if (k != "loss_scale" && k != "initial_scale_power" && k != "loss_scale_window" &&
               k != "hysteresis" && k != "min_loss_scale" && k != "consecutive_hysteresis" &&
               k != "immediate_grad_update") {
      p.add(fmt::format("{}.{}: not modelled by trainsim", where, k));
    }
  }
  return on;
}

} // namespace

DeepSpeedConfig deepspeed_config_from_json(const nlohmann::json& j, const std::string& source) {
  Problems p(source);
  DeepSpeedConfig c;
  if (!j.is_object()) {
    p.add("expected a JSON object (a DeepSpeed config)");
    p.throw_if_any();
  }
  bool bf16 = false, fp16 = false;
  for (const auto& [k, v] : j.items()) {
    if (k == "train_micro_batch_size_per_gpu")
      c.micro_batch = whole(v, k, p, 1, 1e6);
    else if (k == "gradient_accumulation_steps")
      c.grad_accumulation = whole(v, k, p, 1, 1e6);
    else if (k == "train_batch_size")
      c.train_batch = whole(v, k, p, 1, 1e9);
    else if (k == "bf16")
      bf16 = enabled(v, k, p);
    else if (k == "fp16")
      fp16 = enabled(v, k, p);
    else if (k == "gradient_clipping" || k == "steps_per_print" || k == "wall_clock_breakdown" ||
             k == "optimizer" || k == "scheduler" || k == "zero_allow_untested_optimizer")
      continue; // no effect on memory or time as modelled (AdamW is assumed)
    else if (k == "zero_optimization") {
      if (!v.is_object()) {
        p.add("zero_optimization: expected an object");
        continue;
      }
      for (const auto& [zk, zv] : v.items()) {
        const std::string where = "zero_optimization." + zk;
        if (zk == "stage")
          c.zero_stage = whole(zv, where, p, 0, 3);
        else if (zk == "offload_optimizer")
          c.offload_optimizer = read_device(zv, where, p);
        else if (zk == "offload_param")
          c.offload_param = read_device(zv, where, p);
        else if (zk == "reduce_bucket_size")
          c.reduce_bucket_elems = number(zv, where, p, 1, 1e12);
        else if (zk == "allgather_bucket_size")
          c.allgather_bucket_elems = number(zv, where, p, 1, 1e12);
        else if (zk == "stage3_prefetch_bucket_size")
          c.prefetch_bucket_elems = number(zv, where, p, 0, 1e12);
        else if (zk == "stage3_max_live_parameters")
          c.max_live_parameters = number(zv, where, p, 0, 1e13);
        else if (zk == "overlap_comm")
          c.overlap_comm = flag(zv, where, p, false);
        else if (zk == "contiguous_gradients")
          c.contiguous_gradients = flag(zv, where, p, true);
        else if (zk == "reduce_scatter" || zk == "allgather_partitions" ||
                 zk == "stage3_max_reuse_distance" || zk == "stage3_param_persistence_threshold" ||
                 zk == "stage3_gather_16bit_weights_on_model_save" ||
                 zk == "round_robin_gradients" || zk == "sub_group_size")
          continue; // no effect on what trainsim computes
        else
          p.add(fmt::format("{}: not modelled by trainsim", where));
      }
    } else if (k == "tensor_parallel") {
      if (!v.is_object()) {
        p.add("tensor_parallel: expected an object");
        continue;
      }
      for (const auto& [tk, tv] : v.items()) {
        const std::string where = "tensor_parallel." + tk;
        if (tk == "autotp_size")
          c.autotp_size = whole(tv, where, p, 1, 1024);
        else
          p.add(fmt::format("{}: not modelled by trainsim", where));
      }
    } else {
      p.add(fmt::format("{}: not modelled by trainsim", k));
    }
  }
  if (bf16 && fp16)
    p.add("bf16.enabled and fp16.enabled: only one may be true");
  c.precision = bf16   ? model::Precision::bf16_mixed
                : fp16 ? model::Precision::fp16_mixed
                       : model::Precision::fp32;
  if (c.offload_param != OffloadDevice::none && c.zero_stage != 3)
    p.add(
        fmt::format("zero_optimization.offload_param: needs stage 3 (stage is {})", c.zero_stage));
  if (c.offload_optimizer != OffloadDevice::none && c.zero_stage < 1)
    p.add("zero_optimization.offload_optimizer: needs stage 1, 2 or 3");
  p.throw_if_any();
  return c;
}

DeepSpeedBatch deepspeed_batch(const DeepSpeedConfig& c, std::int64_t dp,
                               const std::string& source) {
  // DeepSpeed's rule (deepspeed/runtime/config.py, DeepSpeedConfig._set_batch_related_parameters
  // and _batch_assertion): the fields not given follow from those given, with integer
  // division, and then train_batch_size = micro-batch x accumulation steps x data-parallel
  // size must hold exactly; a config that breaks it does not start.
  DeepSpeedBatch b{c.micro_batch, c.grad_accumulation, c.train_batch};
  if (dp < 1)
    throw ConfigError(fmt::format("{}: data-parallel size {} must be at least 1", source, dp));
  if (b.train > 0 && b.micro > 0 && b.grad_acc == 0)
    b.grad_acc = b.train / b.micro / dp;
  else if (b.train > 0 && b.grad_acc > 0 && b.micro == 0)
    b.micro = b.train / dp / b.grad_acc;
  else if (b.micro > 0 && b.grad_acc > 0 && b.train == 0)
    b.train = b.micro * b.grad_acc * dp;
  else if (b.train > 0 && b.micro == 0 && b.grad_acc == 0) {
    b.grad_acc = 1;
    b.micro = b.train / dp;
  } else if (b.micro > 0 && b.train == 0 && b.grad_acc == 0) {
    b.grad_acc = 1;
    b.train = b.micro * dp;
  } else if (b.train == 0 && b.micro == 0) {
    if (b.grad_acc > 0)
      throw ConfigError(
          fmt::format("{}: gradient_accumulation_steps = {} needs train_batch_size or "
                      "train_micro_batch_size_per_gpu (DeepSpeed derives neither from it)",
                      source, b.grad_acc));
    return DeepSpeedBatch{}; // no batch fields: trainsim's own micro-batch stands
  }
  if (b.micro < 1 || b.grad_acc < 1 || b.train != b.micro * b.grad_acc * dp)
    throw ConfigError(fmt::format(
        "{}: train_batch_size ({}) must equal train_micro_batch_size_per_gpu ({}) x "
        "gradient_accumulation_steps ({}) x data-parallel size ({}), as DeepSpeed checks",
        source, c.train_batch > 0 ? fmt::to_string(c.train_batch) : "not given",
        c.micro_batch > 0 ? fmt::to_string(c.micro_batch) : "not given",
        c.grad_accumulation > 0 ? fmt::to_string(c.grad_accumulation) : "not given", dp));
  return b;
}

OffloadPlacement offload_placement(const DeepSpeedConfig& c, double params, double largest,
                                   std::int64_t g, std::int64_t nodes, double pcie_bytes_per_s,
                                   double nvme_bytes_per_s) {
  OffloadPlacement o;
  const bool opt_off = c.offload_optimizer != OffloadDevice::none;
  const bool par_off = c.offload_param != OffloadDevice::none;
  const double gpus = static_cast<double>(g * nodes);
  DeepSpeedStateEstimate e;
  if (c.zero_stage == 3)
    e = estimate_zero3_model_states(params, largest, g, nodes, opt_off, par_off, true);
  else
    e = estimate_zero2_model_states(params, g, nodes, opt_off);
  o.gpu_bytes = static_cast<double>(e.gpu_bytes);
  o.host_bytes = static_cast<double>(e.cpu_bytes);
  // ZeRO-Infinity on NVMe (Rajbhandari et al. 2021, Sec. 5): the fp32 master weights, gradients
  // and Adam moments (16 B/param) and, with parameter offload, the 16-bit parameters (2 B/param)
  // live on the node's NVMe instead of host RAM; host RAM keeps the swap buffers (trainsim's
  // approximation: the estimator's figure less what moved).
  const double per_node = params / static_cast<double>(nodes);
  if (c.offload_optimizer == OffloadDevice::nvme)
    o.nvme_bytes += 16 * per_node;
  if (c.offload_param == OffloadDevice::nvme)
    o.nvme_bytes += 2 * per_node;
  o.host_bytes = std::max(0.0, o.host_bytes - 1.5 * o.nvme_bytes);
  // Per step and GPU: an offloaded optimizer receives this GPU's 16-bit gradient partition and
  // returns its updated 16-bit parameters (ZeRO-Offload, Ren et al. 2021); offloaded
  // parameters are brought up for forward and again for backward.
  if (opt_off)
    o.pcie_bytes += 2 * (2 * params / gpus);
  if (par_off)
    o.pcie_bytes += 2 * (2 * params / gpus);
  o.pcie_s = pcie_bytes_per_s > 0 ? o.pcie_bytes / pcie_bytes_per_s : 0;
  // The optimizer step reads and writes the NVMe-resident states once per step.
  o.nvme_s = nvme_bytes_per_s > 0 ? 2 * o.nvme_bytes / nvme_bytes_per_s : 0;
  return o;
}

} // namespace trainsim::sim
