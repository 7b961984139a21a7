// Alpha-beta fit of measured collective times: time(bytes) = alpha_s + bytes * factor(P) / busbw
// (Hockney's model with nccl-tests' bus-bandwidth factor), by robust weighted least squares on
// relative error so that latency-bound small sizes count as much as bandwidth-bound large ones.
// Pure C++: no CUDA; reads the JSON written by `trainsim bench collectives`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/profile.hpp"

namespace trainsim::val {

/// One measured size of one collective.
struct CollectivePoint {
  double bytes = 0;  // nccl-tests "size" (bytes)
  double time_s = 0; // max over ranks of the mean time per call
};

/// All measured sizes of one collective at one rank count.
struct CollectiveSeries {
  std::string op;                   // "all-reduce", ... (see collectives.hpp)
  std::string level = "intra-node"; // "intra-node" or "inter-node"
  std::int64_t num_ranks = 0;
  std::vector<CollectivePoint> points;
};

/// How well the fitted line reproduces the measurements (relative errors |fit - t| / t).
/// NaN where no point falls in the range.
struct CollectiveFitQuality {
  std::int64_t num_points = 0;
  double max_rel_error_large_fraction = 0; // points with bytes >= 1 MiB
  double mean_rel_error_large_fraction = 0;
  double max_rel_error_small_fraction = 0; // points with bytes <= 64 KiB
  double mean_rel_error_small_fraction = 0;
  double max_rel_error_fraction = 0; // all points
  /// Factor multiplying bytes in the fit: busbw_factor(op, P), or 1 when that is 0 (P = 1:
  /// the "bandwidth" is then the local copy rate, i.e. algbw; see docs/collectives.md).
  double bandwidth_factor = 0;
};

struct CollectiveFitResult {
  hw::CollectiveFit fit;
  CollectiveFitQuality quality;
};

/// Fits alpha_s and busbw_bytes_per_s. Minimises sum(w_i * ((alpha + x_i * beta - t_i) / t_i)^2),
/// x_i = bytes_i * factor, with Huber weights w_i from iteratively reweighted least squares so an
/// outlier cannot drag the line; alpha is constrained to >= 0. Throws ConfigError naming the
/// field for fewer than 2 distinct sizes, non-positive bytes or time_s, num_ranks < 1, an unknown
/// op, or times that do not grow with size (no bandwidth term to fit).
[[nodiscard]] CollectiveFitResult fit_collective(const CollectiveSeries& series);

/// Groups the "results" list of a `bench collectives` JSON document by (op, num_ranks), using the
/// out-of-place time_s. Rows with wrong > 0 are errors (a wrong result is not a measurement).
/// `source` names the document in error messages.
[[nodiscard]] std::vector<CollectiveSeries> read_collective_series(const nlohmann::json& document,
                                                                   const std::string& source,
                                                                   const std::string& level);

/// Loads a `bench collectives --format json` file and fits every (op, num_ranks) in it.
/// This is what `trainsim calibrate --collectives FILE` calls.
[[nodiscard]] std::vector<CollectiveFitResult>
fit_collectives_file(const std::string& path, const std::string& level = "intra-node");

} // namespace trainsim::val
