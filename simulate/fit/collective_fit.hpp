// Regime (piecewise) alpha-beta fit of measured collective times. NCCL picks an algorithm and a
// protocol (LL, LL128, Simple) per call by message size, each with its own latency and bandwidth
// (its tuning model: latency + bytes / bandwidth per algorithm and protocol). So the fit is up to
// 3 contiguous size regimes, each time(bytes) = alpha_s + bytes * factor(P) / busbw (Hockney's
// model with nccl-tests' bus-bandwidth factor; docs/model.md), each fitted by robust
// weighted least squares on relative error so that latency-bound small sizes count as much as
// bandwidth-bound large ones. Pure C++: no CUDA; reads the JSON written by `bench collectives`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/collective.hpp"
#include "hardware/profile.hpp"

namespace trainsim::fitting {

/// nccl-tests' busbw factor (hw::busbw_factor, the one definition) by name, for series read
/// from JSON. Throws ConfigError for an unknown op.
[[nodiscard]] double busbw_factor(std::string_view op, std::int64_t num_ranks);
using hw::busbw_factor;

/// One measured size of one collective.
struct CollectivePoint {
  double bytes = 0;  // nccl-tests "size" (bytes)
  double time_s = 0; // max over ranks of the mean time per call
};

/// All measured sizes of one collective at one rank count.
struct CollectiveSeries {
  std::string op;                   // "all-reduce", ... (hardware/collective.hpp)
  std::string level = "intra-node"; // "intra-node" or "inter-node"
  std::int64_t num_ranks = 0;
  std::vector<CollectivePoint> points;
};

/// Choices of the regime fit (docs/collectives.md, "The fit").
struct CollectiveFitOptions {
  std::int64_t max_regimes = 3;          // 1..3; 1 = one alpha-beta line over all sizes
  std::int64_t min_sizes_per_regime = 4; // distinct measured sizes each regime must hold (>= 2):
                                         // a regime is a model, not a lookup table
};

/// How well the fit reproduces the measurements (relative errors |fit - t| / t).
/// NaN where no point falls in the range.
struct CollectiveFitQuality {
  std::int64_t num_points = 0;
  std::int64_t num_regimes = 0;
  double max_rel_error_large_fraction = 0; // points with bytes >= 1 MiB
  double mean_rel_error_large_fraction = 0;
  double max_rel_error_large_bytes = 0;    // the size (bytes) of that maximum
  double max_rel_error_small_fraction = 0; // points with bytes <= 64 KiB
  double mean_rel_error_small_fraction = 0;
  double max_rel_error_small_bytes = 0; // the size (bytes) of that maximum
  double max_rel_error_fraction = 0;    // all points
  /// Latency term: the alpha of the smallest-size regime against the median measured time of the
  /// sizes <= 64 KiB (where time is almost all latency); error = alpha / median - 1.
  double small_alpha_s = 0;
  double median_small_time_s = 0;
  double small_alpha_error_fraction = 0;
  /// Held-out check: the same fit (same options) on the even-indexed distinct sizes only (0, 2,
  /// 4, ... in increasing order), predicting the odd-indexed sizes >= 1 MiB: max relative error,
  /// and the size where it occurs. NaN when the even sizes cannot be fitted.
  double heldout_max_rel_error_large_fraction = 0;
  double heldout_max_rel_error_large_bytes = 0;
  /// The same, without the odd sizes that fall between the two even sizes around a breakpoint of
  /// the held-out fit: there the switch size is only known to within the sampling step.
  double heldout_max_rel_error_large_interior_fraction = 0;
  std::int64_t heldout_num_regimes = 0;
  /// Factor multiplying bytes in the fit: busbw_factor(op, P), or 1 when that is 0 (P = 1:
  /// the "bandwidth" is then the local copy rate, i.e. algbw; see docs/collectives.md).
  double bandwidth_factor = 0;
};

struct CollectiveFitResult {
  hw::CollectiveFit fit;
  CollectiveFitQuality quality;
};

/// The factor a fit multiplies bytes by: nccl-tests' busbw factor, or 1 at P = 1 (the local
/// rate, algbw). Throws ConfigError for an unknown op.
[[nodiscard]] double fit_bandwidth_factor(std::string_view op, std::int64_t num_ranks);

/// How well `fit` reproduces `series` (every field of CollectiveFitQuality except the held-out
/// ones, which need a refit): fit_collective's in-sample quality, and what
/// `compare --collectives` reports for a profile's fit against new measurements.
[[nodiscard]] CollectiveFitQuality fit_quality(const hw::CollectiveFit& fit,
                                               const CollectiveSeries& series);

/// Fits the regimes of one collective. Each regime: minimises sum(w_i * ((alpha + x_i * beta -
/// t_i) / t_i)^2), x_i = bytes_i * factor, with Huber weights w_i from iteratively reweighted
/// least squares so an outlier cannot drag the line; alpha is constrained to >= 0 and beta (=
/// 1 / busbw) to > 0. Breakpoints (between measured sizes; a regime starts at the geometric mean
/// of the sizes around it, rounded up to a whole byte) are searched exhaustively, each regime
/// holding >= min_sizes_per_regime sizes, and for each number of regimes the breakpoints with the
/// smallest sum of squared relative errors win, among those whose regimes have non-decreasing
/// alpha and busbw with size (the lower envelope of lines that a choice by least predicted time
/// gives) and whose bandwidth term reaches at least 10% of the regime's time at its largest size
/// (so a regime's busbw is measured, not fitted to noise in latency-bound sizes). A regime more is
/// kept only when it lowers the Bayesian information criterion n ln(SSE / n) + (3k - 1) ln n
/// (Schwarz 1978; 3 parameters per regime: alpha, busbw, start) and lowers the max relative error
/// at sizes >= 1 MiB (all sizes if none) by at least a quarter and by at least 2 percentage points.
/// Deterministic. Throws ConfigError naming the field for fewer than 2 distinct sizes, non-positive
/// bytes or time_s, num_ranks < 1, an unknown op, bad options, or times that do not grow with size
/// (no bandwidth term to fit).
[[nodiscard]] CollectiveFitResult fit_collective(const CollectiveSeries& series,
                                                 const CollectiveFitOptions& options = {});

/// The quality as JSON (percentages, microseconds and bytes, keys naming them; NaN as null), as
/// `calibrate` writes it beside each fit in the profile.
[[nodiscard]] nlohmann::json to_json(const CollectiveFitQuality& quality);

/// Groups the "results" list of a `bench collectives` JSON document by (op, num_ranks), using the
/// out-of-place time_s. Rows with wrong > 0 are errors (a wrong result is not a measurement).
/// `source` names the document in error messages.
[[nodiscard]] std::vector<CollectiveSeries> read_collective_series(const nlohmann::json& document,
                                                                   const std::string& source,
                                                                   const std::string& level);

/// Loads a `bench collectives --format json` file and fits every (op, num_ranks) in it.
/// This is what `trainsim calibrate --collectives FILE` calls.
[[nodiscard]] std::vector<CollectiveFitResult>
fit_collectives_file(const std::string& path, const std::string& level = "intra-node",
                     const CollectiveFitOptions& options = {});

} // namespace trainsim::fitting
