// Regime lookup of measured collective fits (profile.hpp). Pure: no I/O.
#include "hardware/profile.hpp"

namespace trainsim::hw {

CollectiveRegime regime_for(const CollectiveFit& fit, double bytes) {
  if (fit.regimes.empty())
    return {0, fit.alpha_s, fit.busbw_bytes_per_s};
  CollectiveRegime r = fit.regimes.front();
  for (const CollectiveRegime& candidate : fit.regimes)
    if (candidate.min_bytes <= bytes)
      r = candidate;
  return r;
}

double collective_fit_time_s(const CollectiveFit& fit, double bytes, double busbw_factor) {
  const CollectiveRegime r = regime_for(fit, bytes);
  return r.alpha_s + bytes * busbw_factor / r.busbw_bytes_per_s;
}

} // namespace trainsim::hw
