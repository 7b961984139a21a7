// Top-down time to train (topdown.hpp): days = 6 N D / (GPUs x peak x MFU) / 86400.
#include "simulate/topdown.hpp"

#include "common/units.hpp"

namespace trainsim::sim {

TopDownTime estimate_time_top_down(double params, double tokens, double flops_per_token_exact,
                                   double peak_flops_per_s, std::int64_t num_gpus,
                                   double mfu_fraction, double usd_per_gpu_hour) {
  TopDownTime t;
  const double rate = static_cast<double>(num_gpus) * peak_flops_per_s * mfu_fraction;
  t.total_flops = 6.0 * params * tokens;
  t.seconds = t.total_flops / rate;
  t.days = t.seconds / kSecondsPerDay;
  t.gpu_hours = t.seconds * static_cast<double>(num_gpus) / 3600.0;
  if (flops_per_token_exact > 0) {
    t.total_flops_exact = flops_per_token_exact * tokens;
    t.seconds_exact = t.total_flops_exact / rate;
    t.days_exact = t.seconds_exact / kSecondsPerDay;
    t.gpu_hours_exact = t.seconds_exact * static_cast<double>(num_gpus) / 3600.0;
  }
  t.cost_usd = t.gpu_hours * usd_per_gpu_hour;
  return t;
}

} // namespace trainsim::sim
