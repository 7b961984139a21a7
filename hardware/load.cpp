// JSON <-> GpuSpec / ClusterSpec / HardwareProfile with strict keys and unit conversion.
#include "hardware/load.hpp"

#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "common/checks.hpp"
#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "common/units.hpp"

namespace trainsim::hw {
namespace {

// Reads {"fp32": x, "bf16": y, ...} into a PerDtype, each value in `range` (file units), then
// scaled; unknown dtypes are errors.
void read_per_dtype(const nlohmann::json* obj, const char* key, double scale, const Interval& range,
                    PerDtype<double>& out, Problems& p) {
  if (!obj)
    return;
  if (!obj->is_object()) {
    p.add(fmt::format("{}: expected an object keyed by dtype (fp32, tf32, fp16, bf16, fp8)", key));
    return;
  }
  for (const auto& [name, value] : obj->items()) {
    auto d = parse_dtype(name);
    if (!d) {
      p.add(fmt::format("{}.{}: unknown dtype (known: fp32, tf32, fp16, bf16, fp8)", key, name));
      continue;
    }
    if (!value.is_number()) {
      p.add(fmt::format("{}.{} = {}: expected a number", key, name, json_brief(value)));
      continue;
    }
    if (check_range(p, fmt::format("{}.{}", key, name), value.get<double>(), range))
      out[*d] = value.get<double>() * scale;
  }
}

// Physical ranges of the preset fields, in the units of the files. Wide enough for every GPU
// built or announced (B200: 4.5 PFLOP/s dense fp8, 8 TB/s, 192 GB; MI300X: 304 CUs), narrow
// enough that no product or quotient of them overflows or vanishes (a peak of 1e308 TFLOP/s
// or a bandwidth of 1e-300 GB/s printed NaN and infinite days).
const Interval kPeakTflops{0.01, 1e5, "TFLOP/s", true}; // 0: the GPU lacks the dtype
const Interval kMemoryGb{0.1, 1e5, "GB"};
const Interval kHbmGbPerS{1, 1e6, "GB/s"};
const Interval kNvlinkGbPerS{1, 1e5, "GB/s", true}; // 0: PCIe only
const Interval kPcieGbPerS{0.1, 1e4, "GB/s"};
const Interval kL2Mb{0, 1e4, "MB"};
const Interval kNumSms{1, 1e5, ""};
const Interval kIntraNodeGbPerS{0.1, 1e5, "GB/s"};
const Interval kInterNodeGbPerS{0.01, 1e5, "GB/s", true}; // 0: a single node
// Calibrated collective lines: latency per call and bus bandwidth of one regime.
const Interval kAlphaUs{0, 1e6, "us"};
const Interval kBusbwGbPerS{1e-3, 1e6, "GB/s"};
const Interval kStepLatencyUs{0, 1e6, "us"};
const Interval kContextMb{0, 1e6, "MB"};

nlohmann::json per_dtype_json(const PerDtype<double>& v, double scale) {
  nlohmann::json j = nlohmann::json::object();
  for (Dtype d : kAllDtypes)
    if (v[d] > 0)
      j[std::string(dtype_name(d))] = v[d] / scale;
  return j;
}

} // namespace

void validate(const GpuSpec& g, const std::string& source) {
  Problems p(source);
  if (g.name.empty())
    p.add("name: must not be empty");
  for (Dtype d : kAllDtypes)
    check_range(p, fmt::format("peak_tflops.{}", dtype_name(d)), g.peak_flops_per_s[d] / kTera,
                kPeakTflops);
  if (g.peak_flops_per_s[Dtype::fp32] == 0)
    p.add("peak_tflops.fp32: must be positive");
  check_range(p, "memory_gb", g.memory_bytes / kGB, kMemoryGb);
  check_range(p, "hbm_bandwidth_gb_per_s", g.hbm_bandwidth_bytes_per_s / kGB, kHbmGbPerS);
  check_range(p, "nvlink_bandwidth_gb_per_s", g.nvlink_bandwidth_bytes_per_s / kGB, kNvlinkGbPerS);
  check_range(p, "pcie_bandwidth_gb_per_s", g.pcie_bandwidth_bytes_per_s / kGB, kPcieGbPerS);
  check_range(p, "l2_mb", g.l2_bytes / 1e6, kL2Mb);
  check_range(p, "num_sms", static_cast<double>(g.num_sms), kNumSms);
  p.throw_if_any();
}

void validate(const ClusterSpec& c, const std::string& source) {
  Problems p(source);
  if (c.gpu.empty())
    p.add("gpu: must not be empty");
  if (c.gpus_per_node <= 0 || c.gpus_per_node > 1024)
    p.add(fmt::format("gpus_per_node = {}: must be in 1..1024", c.gpus_per_node));
  if (c.num_nodes <= 0 || c.num_nodes > 1000000)
    p.add(fmt::format("num_nodes = {}: must be in 1..1000000", c.num_nodes));
  check_range(p, "intra_node_bandwidth_gb_per_s", c.intra_node_bandwidth_bytes_per_s / kGB,
              kIntraNodeGbPerS);
  check_range(p, "inter_node_bandwidth_gb_per_s", c.inter_node_bandwidth_bytes_per_s / kGB,
              kInterNodeGbPerS);
  if (c.num_nodes > 1 && c.inter_node_bandwidth_bytes_per_s <= 0)
    p.add("inter_node_bandwidth_gb_per_s: must be positive for more than one node");
  p.throw_if_any();
}

GpuSpec gpu_from_json(const nlohmann::json& j, const std::string& source) {
  Problems p(source);
  JsonObjectReader r(j, p);
  GpuSpec g;
  double memory_gb = 0, hbm = 0, nvlink = 0, pcie = 0, l2_mb = 0;
  r.get("name", g.name, true);
  r.get("source", g.source, true);
  read_per_dtype(r.take("peak_tflops"), "peak_tflops", kTera, kPeakTflops, g.peak_flops_per_s, p);
  if (!r.has("peak_tflops"))
    p.add("peak_tflops: missing required field");
  r.get("memory_gb", memory_gb, kMemoryGb, true);
  r.get("hbm_bandwidth_gb_per_s", hbm, kHbmGbPerS, true);
  r.get("nvlink_bandwidth_gb_per_s", nvlink, kNvlinkGbPerS);
  r.get("pcie_bandwidth_gb_per_s", pcie, kPcieGbPerS, true);
  r.get("l2_mb", l2_mb, kL2Mb);
  r.get("num_sms", g.num_sms, true);
  r.get("mx_block_scaling", g.mx_block_scaling);
  r.finish();
  p.throw_if_any();
  g.memory_bytes = memory_gb * kGB;
  g.hbm_bandwidth_bytes_per_s = hbm * kGB;
  g.nvlink_bandwidth_bytes_per_s = nvlink * kGB;
  g.pcie_bandwidth_bytes_per_s = pcie * kGB;
  g.l2_bytes = l2_mb * 1e6;
  validate(g, source);
  return g;
}

nlohmann::json gpu_to_json(const GpuSpec& g) {
  return {{"name", g.name},
          {"source", g.source},
          {"peak_tflops", per_dtype_json(g.peak_flops_per_s, kTera)},
          {"memory_gb", g.memory_bytes / kGB},
          {"hbm_bandwidth_gb_per_s", g.hbm_bandwidth_bytes_per_s / kGB},
          {"nvlink_bandwidth_gb_per_s", g.nvlink_bandwidth_bytes_per_s / kGB},
          {"pcie_bandwidth_gb_per_s", g.pcie_bandwidth_bytes_per_s / kGB},
          {"l2_mb", g.l2_bytes / 1e6},
          {"num_sms", g.num_sms},
          {"mx_block_scaling", g.mx_block_scaling}};
}

GpuSpec load_gpu(const std::string& name_or_path) {
  const std::string path = resolve_preset("gpus", name_or_path, "--gpu");
  return gpu_from_json(load_json_file(path), path);
}

ClusterSpec cluster_from_json(const nlohmann::json& j, const std::string& source) {
  Problems p(source);
  JsonObjectReader r(j, p);
  ClusterSpec c;
  double intra = 0, inter = 0;
  r.get("name", c.name, true);
  r.get("source", c.source, true);
  if (r.get("gpu", c.gpu, true))
    check_data_preset_name(p, "gpu", c.gpu);
  r.get("gpus_per_node", c.gpus_per_node, true);
  r.get("num_nodes", c.num_nodes);
  r.get("intra_node_bandwidth_gb_per_s", intra, kIntraNodeGbPerS, true);
  r.get("inter_node_bandwidth_gb_per_s", inter, kInterNodeGbPerS);
  r.finish();
  p.throw_if_any();
  c.intra_node_bandwidth_bytes_per_s = intra * kGB;
  c.inter_node_bandwidth_bytes_per_s = inter * kGB;
  validate(c, source);
  return c;
}

nlohmann::json cluster_to_json(const ClusterSpec& c) {
  return {{"name", c.name},
          {"source", c.source},
          {"gpu", c.gpu},
          {"gpus_per_node", c.gpus_per_node},
          {"num_nodes", c.num_nodes},
          {"intra_node_bandwidth_gb_per_s", c.intra_node_bandwidth_bytes_per_s / kGB},
          {"inter_node_bandwidth_gb_per_s", c.inter_node_bandwidth_bytes_per_s / kGB}};
}

ClusterSpec load_cluster(const std::string& name_or_path) {
  const std::string path = resolve_preset("clusters", name_or_path, "--cluster");
  return cluster_from_json(load_json_file(path), path);
}

ClusterSpec single_node_cluster(const GpuSpec& gpu, std::int64_t num_gpus) {
  ClusterSpec c;
  c.name = gpu.name + " x" + std::to_string(num_gpus);
  c.source = "one node of " + gpu.name + " (NVLink if the GPU has it, else PCIe)";
  c.gpu = gpu.name;
  c.gpus_per_node = num_gpus;
  c.num_nodes = 1;
  c.intra_node_bandwidth_bytes_per_s = gpu.nvlink_bandwidth_bytes_per_s > 0
                                           ? gpu.nvlink_bandwidth_bytes_per_s
                                           : gpu.pcie_bandwidth_bytes_per_s;
  c.inter_node_bandwidth_bytes_per_s = 0;
  return c;
}

void validate(const HardwareProfile& prof, const std::string& source) {
  Problems p(source);
  auto fraction = [&](const char* field, double v) {
    if (!(v > 0 && v <= 1.0))
      p.add(fmt::format("{} = {}: must be in (0, 1]", field, v));
  };
  for (Dtype d : kAllDtypes) {
    const double v = prof.gemm_peak_fraction[d];
    if (v < 0 || v > 1.0)
      p.add(fmt::format("gemm_peak_fraction.{} = {}: must be in [0, 1]", dtype_name(d), v));
  }
  if (prof.gemm_peak_fraction[Dtype::bf16] <= 0 && prof.gemm_peak_fraction[Dtype::fp32] <= 0)
    p.add("gemm_peak_fraction: needs at least fp32 or bf16");
  check_range(p, "gemm_tile_m", prof.gemm_tile_m, Interval{1, 65536, ""});
  check_range(p, "gemm_tile_n", prof.gemm_tile_n, Interval{1, 65536, ""});
  check_range(p, "gemm_k_half", prof.gemm_k_half, Interval{0, 1e7, "elements"});
  fraction("attention_fwd_peak_fraction", prof.attention_fwd_peak_fraction);
  fraction("attention_bwd_peak_fraction", prof.attention_bwd_peak_fraction);
  fraction("elementwise_bw_fraction", prof.elementwise_bw_fraction);
  fraction("reduction_bw_fraction", prof.reduction_bw_fraction);
  fraction("copy_bw_fraction", prof.copy_bw_fraction);
  auto optional_fraction = [&](const char* field, double v) {
    if (!(v >= 0 && v <= 1.0))
      p.add(fmt::format("{} = {}: must be in [0, 1] (0 = not set)", field, v));
  };
  optional_fraction("reduction_bwd_bw_fraction", prof.reduction_bwd_bw_fraction);
  optional_fraction("norm_bw_fraction", prof.norm_bw_fraction);
  optional_fraction("norm_bwd_bw_fraction", prof.norm_bwd_bw_fraction);
  if (!(prof.l2_resident_bw_fraction >= 0 && prof.l2_resident_bw_fraction <= 10))
    p.add(fmt::format("l2_resident_bw_fraction = {}: must be in [0, 10]",
                      prof.l2_resident_bw_fraction));
  if (!(prof.attention_kv_half >= 0 && prof.attention_kv_half <= 1e6))
    p.add(fmt::format("attention_kv_half = {}: must be in [0, 1e6]", prof.attention_kv_half));
  if (!(prof.attention_block_rows >= 1 && prof.attention_block_rows <= 1024))
    p.add(fmt::format("attention_block_rows = {}: must be in 1..1024", prof.attention_block_rows));
  fraction("optimizer_bw_fraction", prof.optimizer_bw_fraction);
  fraction("intra_node_busbw_fraction", prof.intra_node_busbw_fraction);
  fraction("inter_node_busbw_fraction", prof.inter_node_busbw_fraction);
  if (prof.launch_overhead_s < 0 || prof.launch_overhead_s > 1e-3)
    p.add(fmt::format("launch_overhead_us = {}: must be in 0..1000", prof.launch_overhead_s * 1e6));
  if (prof.host_launch_s < 0 || prof.host_launch_s > 1e-3)
    p.add(fmt::format("host_launch_us = {}: must be in 0..1000 (0 = not measured)",
                      prof.host_launch_s * 1e6));
  if (prof.host_gemm_launch_s < 0 || prof.host_gemm_launch_s > 1e-3)
    p.add(fmt::format("host_gemm_launch_us = {}: must be in 0..1000 (0 = not measured)",
                      prof.host_gemm_launch_s * 1e6));
  if (prof.gpu_launch_gap_s < 0 || prof.gpu_launch_gap_s > 1e-3)
    p.add(fmt::format("gpu_launch_gap_us = {}: must be in 0..1000", prof.gpu_launch_gap_s * 1e6));
  if (!(prof.overlap_compute_rate > 0 && prof.overlap_compute_rate <= 1))
    p.add(fmt::format("overlap_compute_rate = {}: must be in (0, 1] (1 = no interference)",
                      prof.overlap_compute_rate));
  if (!(prof.overlap_comm_rate > 0 && prof.overlap_comm_rate <= 1))
    p.add(fmt::format("overlap_comm_rate = {}: must be in (0, 1] (1 = no interference)",
                      prof.overlap_comm_rate));
  if (!(prof.host_link_bw_fraction > 0 && prof.host_link_bw_fraction <= 1.2))
    p.add(fmt::format("host_link_bw_fraction = {}: must be in (0, 1.2] (1 = the datasheet's)",
                      prof.host_link_bw_fraction));
  check_range(p, "context_overhead_mb", prof.context_overhead_bytes / 1e6, kContextMb);
  check_range(p, "intra_node_step_latency_us", prof.intra_node_step_latency_s * 1e6,
              kStepLatencyUs);
  check_range(p, "inter_node_step_latency_us", prof.inter_node_step_latency_s * 1e6,
              kStepLatencyUs);
  for (std::size_t i = 0; i < prof.collective_fits.size(); ++i) {
    const CollectiveFit& f = prof.collective_fits[i];
    const std::string where =
        fmt::format("collective_fits[{}] ({} {})", i, to_string(f.op), to_string(f.level));
    auto check_line = [&](const std::string& prefix, double alpha_s, double busbw) {
      check_range(p, prefix + ".alpha_us", alpha_s * 1e6, kAlphaUs);
      check_range(p, prefix + ".busbw_gb_per_s", busbw / kGB, kBusbwGbPerS);
    };
    if (f.regimes.empty())
      check_line(where, f.alpha_s, f.busbw_bytes_per_s);
    for (std::size_t k = 0; k < f.regimes.size(); ++k) {
      const CollectiveRegime& r = f.regimes[k];
      const std::string at = fmt::format("{}.regimes[{}]", where, k);
      check_range(p, at + ".min_bytes", r.min_bytes, Interval{0, 1e15, "bytes"});
      if (k == 0 && r.min_bytes != 0)
        p.add(fmt::format("{}.min_bytes = {}: must be 0 (the first regime starts at the smallest "
                          "message)",
                          at, r.min_bytes));
      if (k > 0 && !(r.min_bytes > f.regimes[k - 1].min_bytes))
        p.add(fmt::format("{}.min_bytes = {}: must be greater than regimes[{}].min_bytes = {} "
                          "(regimes are sorted by size)",
                          at, r.min_bytes, k - 1, f.regimes[k - 1].min_bytes));
      check_line(at, r.alpha_s, r.busbw_bytes_per_s);
    }
  }
  p.throw_if_any();
}

HardwareProfile profile_from_json(const nlohmann::json& j, const std::string& source) {
  Problems p(source);
  JsonObjectReader r(j, p);
  HardwareProfile prof;
  double launch_us = 0, intra_lat_us = 0, inter_lat_us = 0, context_mb = 0;
  double host_launch_us = 0, host_gemm_launch_us = 0, gpu_gap_us = 0;
  r.get("name", prof.name, true);
  r.get("source", prof.source, true);
  if (r.get("gpu", prof.gpu))
    check_data_preset_name(p, "gpu", prof.gpu);
  read_per_dtype(r.take("gemm_peak_fraction"), "gemm_peak_fraction", 1.0, Interval{0, 1, ""},
                 prof.gemm_peak_fraction, p);
  r.get("gemm_tile_m", prof.gemm_tile_m, true);
  r.get("gemm_tile_n", prof.gemm_tile_n, true);
  r.get("gemm_k_half", prof.gemm_k_half, true);
  r.get("attention_fwd_peak_fraction", prof.attention_fwd_peak_fraction, true);
  r.get("attention_bwd_peak_fraction", prof.attention_bwd_peak_fraction, true);
  r.get("elementwise_bw_fraction", prof.elementwise_bw_fraction, true);
  r.get("reduction_bw_fraction", prof.reduction_bw_fraction, true);
  r.get("reduction_bwd_bw_fraction", prof.reduction_bwd_bw_fraction);
  r.get("norm_bw_fraction", prof.norm_bw_fraction);
  r.get("norm_bwd_bw_fraction", prof.norm_bwd_bw_fraction);
  r.get("l2_resident_bw_fraction", prof.l2_resident_bw_fraction);
  r.get("attention_block_rows", prof.attention_block_rows);
  r.get("attention_kv_half", prof.attention_kv_half);
  r.get("copy_bw_fraction", prof.copy_bw_fraction, true);
  r.get("optimizer_bw_fraction", prof.optimizer_bw_fraction, true);
  r.get("launch_overhead_us", launch_us, true);
  r.get("host_launch_us", host_launch_us);
  r.get("host_gemm_launch_us", host_gemm_launch_us);
  r.get("gpu_launch_gap_us", gpu_gap_us);
  r.get("overlap_compute_rate", prof.overlap_compute_rate);
  r.get("overlap_comm_rate", prof.overlap_comm_rate);
  r.get("host_link_bw_fraction", prof.host_link_bw_fraction);
  r.get("context_overhead_mb", context_mb, kContextMb, true);
  r.get("intra_node_busbw_fraction", prof.intra_node_busbw_fraction, true);
  r.get("inter_node_busbw_fraction", prof.inter_node_busbw_fraction, true);
  r.get("intra_node_step_latency_us", intra_lat_us, kStepLatencyUs, true);
  r.get("inter_node_step_latency_us", inter_lat_us, kStepLatencyUs, true);
  (void)r.take("metadata"); // free-form: device, date, versions, command of a calibration
  if (const auto* fits = r.take("collective_fits")) {
    if (!fits->is_array()) {
      p.add("collective_fits: expected an array");
    } else {
      for (std::size_t i = 0; i < fits->size(); ++i) {
        const nlohmann::json& f = (*fits)[i];
        Problems fp(fmt::format("{}: collective_fits[{}]", source, i));
        JsonObjectReader fr(f, fp);
        CollectiveFit cf;
        std::string op, level;
        if (fr.get("op", op, true) && !parse_collective(op, cf.op))
          fp.add(fmt::format("op = '{}': unknown collective (all-reduce, reduce-scatter, "
                             "all-gather, broadcast, all-to-all, send-recv)",
                             op));
        if (fr.get("level", level, true) &&
            (!parse_link_level(level, cf.level) || cf.level == LinkLevel::none))
          fp.add(fmt::format("level = '{}': must be intra-node or inter-node", level));
        fr.get("num_ranks", cf.num_ranks);
        (void)fr.take("quality"); // free-form: how well the fit reproduced its measurements
        // One line (alpha_us, busbw_gb_per_s: the format before regimes) or a list of regimes.
        const nlohmann::json* regimes = fr.take("regimes");
        if (regimes && (fr.has("alpha_us") || fr.has("busbw_gb_per_s"))) {
          fp.add("alpha_us, busbw_gb_per_s and regimes: give one line (alpha_us, busbw_gb_per_s) "
                 "or a list of regimes, not both");
        } else if (regimes) {
          if (!regimes->is_array() || regimes->empty())
            fp.add("regimes: expected a non-empty array of {min_bytes, alpha_us, busbw_gb_per_s}");
          else
            for (std::size_t k = 0; k < regimes->size(); ++k) {
              Problems rp(fmt::format("{}: collective_fits[{}].regimes[{}]", source, i, k));
              JsonObjectReader rr((*regimes)[k], rp);
              CollectiveRegime reg;
              double alpha_us = 0, busbw_gb = 0;
              rr.get("min_bytes", reg.min_bytes, true);
              rr.get("alpha_us", alpha_us, kAlphaUs, true);
              rr.get("busbw_gb_per_s", busbw_gb, kBusbwGbPerS, true);
              rr.finish();
              rp.throw_if_any();
              reg.alpha_s = alpha_us * 1e-6;
              reg.busbw_bytes_per_s = busbw_gb * kGB;
              cf.regimes.push_back(reg);
            }
        } else {
          double alpha_us = 0, busbw_gb = 0;
          fr.get("alpha_us", alpha_us, kAlphaUs, true);
          fr.get("busbw_gb_per_s", busbw_gb, kBusbwGbPerS, true);
          cf.alpha_s = alpha_us * 1e-6; // no regimes: regime_for() gives this one line
          cf.busbw_bytes_per_s = busbw_gb * kGB;
        }
        fr.finish();
        fp.throw_if_any();
        if (!cf.regimes.empty()) {
          cf.alpha_s = cf.regimes.back().alpha_s;
          cf.busbw_bytes_per_s = cf.regimes.back().busbw_bytes_per_s;
        }
        prof.collective_fits.push_back(cf);
      }
    }
  }
  r.finish();
  p.throw_if_any();
  prof.launch_overhead_s = launch_us * 1e-6;
  prof.host_launch_s = host_launch_us * 1e-6;
  prof.host_gemm_launch_s = host_gemm_launch_us * 1e-6;
  prof.gpu_launch_gap_s = gpu_gap_us * 1e-6;
  prof.context_overhead_bytes = context_mb * 1e6;
  prof.intra_node_step_latency_s = intra_lat_us * 1e-6;
  prof.inter_node_step_latency_s = inter_lat_us * 1e-6;
  validate(prof, source);
  return prof;
}

nlohmann::json profile_to_json(const HardwareProfile& prof) {
  nlohmann::json fits = nlohmann::json::array();
  for (const auto& f : prof.collective_fits) {
    nlohmann::json fj{
        {"op", to_string(f.op)}, {"level", to_string(f.level)}, {"num_ranks", f.num_ranks}};
    if (f.regimes.size() <= 1) { // one line: the format older profiles use
      const CollectiveRegime r = regime_for(f, 0);
      fj["alpha_us"] = r.alpha_s * 1e6;
      fj["busbw_gb_per_s"] = r.busbw_bytes_per_s / kGB;
    } else {
      nlohmann::json regimes = nlohmann::json::array();
      for (const CollectiveRegime& r : f.regimes)
        regimes.push_back({{"min_bytes", r.min_bytes},
                           {"alpha_us", r.alpha_s * 1e6},
                           {"busbw_gb_per_s", r.busbw_bytes_per_s / kGB}});
      fj["regimes"] = regimes;
    }
    fits.push_back(fj);
  }
  nlohmann::json j{{"name", prof.name},
                   {"source", prof.source},
                   {"gpu", prof.gpu},
                   {"gemm_peak_fraction", per_dtype_json(prof.gemm_peak_fraction, 1.0)},
                   {"gemm_tile_m", prof.gemm_tile_m},
                   {"gemm_tile_n", prof.gemm_tile_n},
                   {"gemm_k_half", prof.gemm_k_half},
                   {"attention_fwd_peak_fraction", prof.attention_fwd_peak_fraction},
                   {"attention_bwd_peak_fraction", prof.attention_bwd_peak_fraction},
                   {"elementwise_bw_fraction", prof.elementwise_bw_fraction},
                   {"reduction_bw_fraction", prof.reduction_bw_fraction},
                   {"reduction_bwd_bw_fraction", prof.reduction_bwd_bw_fraction},
                   {"norm_bw_fraction", prof.norm_bw_fraction},
                   {"norm_bwd_bw_fraction", prof.norm_bwd_bw_fraction},
                   {"l2_resident_bw_fraction", prof.l2_resident_bw_fraction},
                   {"attention_block_rows", prof.attention_block_rows},
                   {"attention_kv_half", prof.attention_kv_half},
                   {"copy_bw_fraction", prof.copy_bw_fraction},
                   {"optimizer_bw_fraction", prof.optimizer_bw_fraction},
                   {"launch_overhead_us", prof.launch_overhead_s * 1e6},
                   {"host_launch_us", prof.host_launch_s * 1e6},
                   {"host_gemm_launch_us", prof.host_gemm_launch_s * 1e6},
                   {"gpu_launch_gap_us", prof.gpu_launch_gap_s * 1e6},
                   {"overlap_compute_rate", prof.overlap_compute_rate},
                   {"overlap_comm_rate", prof.overlap_comm_rate},
                   {"context_overhead_mb", prof.context_overhead_bytes / 1e6},
                   {"intra_node_busbw_fraction", prof.intra_node_busbw_fraction},
                   {"inter_node_busbw_fraction", prof.inter_node_busbw_fraction},
                   {"intra_node_step_latency_us", prof.intra_node_step_latency_s * 1e6},
                   {"inter_node_step_latency_us", prof.inter_node_step_latency_s * 1e6},
                   {"collective_fits", fits}};
  if (prof.host_link_bw_fraction != 1) // written where measured (profiles made before have none)
    j["host_link_bw_fraction"] = prof.host_link_bw_fraction;
  return j;
}

HardwareProfile load_profile(const std::string& name_or_path) {
  const std::string path = resolve_preset("profiles", name_or_path, "--calibration");
  return profile_from_json(load_json_file(path), path);
}

HardwareProfile default_profile(const std::string& gpu_name) {
  const auto names = list_presets("profiles");
  for (const auto& n : names)
    if (n == gpu_name)
      return load_profile(n);
  return load_profile("default");
}

} // namespace trainsim::hw
