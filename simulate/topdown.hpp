// Top-down training time: total FLOPs over (GPUs x peak x MFU). Training FLOPs ~ 6 N D
// (Kaplan et al. 2020; CS336 lecture 2): 2 per parameter per token forward, 4 backward.
#pragma once

#include <cstdint>

namespace trainsim::sim {

struct TopDownTime {
  double total_flops = 0;       // 6 N D
  double total_flops_exact = 0; // op-level model FLOPs per token x D (0 if no model given)
  double seconds = 0, days = 0, gpu_hours = 0; // from total_flops
  double seconds_exact = 0, days_exact = 0, gpu_hours_exact = 0;
  double cost_usd = 0; // gpu_hours x price (0 if no price)
};

/// `flops_per_token_exact` <= 0 means "not known" (only --params given).
[[nodiscard]] TopDownTime estimate_time_top_down(double params, double tokens,
                                                 double flops_per_token_exact,
                                                 double peak_flops_per_s, std::int64_t num_gpus,
                                                 double mfu_fraction, double usd_per_gpu_hour);

} // namespace trainsim::sim
