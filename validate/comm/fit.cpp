// Robust relative-error alpha-beta fit of collective times (see fit.hpp). Closed-form 2x2
// weighted least squares inside an IRLS loop with Huber weights; scale from the median absolute
// relative residual (MAD), as in Huber, "Robust Statistics" (1981), ch. 7.
#include "validate/comm/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "validate/comm/collectives.hpp"

namespace trainsim::val {
namespace {

constexpr double kLargeBytes = 1024.0 * 1024.0; // quality: "large" sizes, >= 1 MiB
constexpr double kSmallBytes = 64.0 * 1024.0;   // quality: "small" sizes, <= 64 KiB
constexpr double kHuberK = 1.345;               // 95% efficiency under Gaussian noise
constexpr int kIrlsIterations = 20;

struct Line {
  double alpha_s = 0;
  double beta_s_per_byte = 0; // 1 / busbw
};

// Weighted least squares of t = a + b x with weights w / t^2 (relative error). If the free fit
// gives a < 0, refits through the origin (a = 0), the constrained optimum.
Line solve(const std::vector<double>& x, const std::vector<double>& t,
           const std::vector<double>& w) {
  double s = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double wi = w[i] / (t[i] * t[i]);
    s += wi;
    sx += wi * x[i];
    sxx += wi * x[i] * x[i];
    st += wi * t[i];
    sxt += wi * x[i] * t[i];
  }
  const double det = s * sxx - sx * sx;
  Line line;
  if (det > 0) {
    line.alpha_s = (sxx * st - sx * sxt) / det;
    line.beta_s_per_byte = (s * sxt - sx * st) / det;
  }
  if (!(det > 0) || line.alpha_s < 0) {
    line.alpha_s = 0;
    line.beta_s_per_byte = sxx > 0 ? sxt / sxx : 0;
  }
  return line;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace

CollectiveFitResult fit_collective(const CollectiveSeries& series) {
  const std::string src =
      fmt::format("collective fit '{}' at {} ranks", series.op, series.num_ranks);
  if (series.num_ranks < 1)
    throw ConfigError(fmt::format("{}: num_ranks = {}: must be >= 1", src, series.num_ranks));
  double factor = busbw_factor(series.op, series.num_ranks); // throws on unknown op
  if (factor == 0)
    factor = 1; // P = 1: fit the local rate bytes / time (algbw) instead

  std::set<double> sizes;
  for (std::size_t i = 0; i < series.points.size(); ++i) {
    const CollectivePoint& p = series.points[i];
    if (!(p.bytes > 0) || !std::isfinite(p.bytes))
      throw ConfigError(fmt::format("{}: points[{}].bytes = {}: must be > 0", src, i, p.bytes));
    if (!(p.time_s > 0) || !std::isfinite(p.time_s))
      throw ConfigError(fmt::format("{}: points[{}].time_s = {}: must be > 0", src, i, p.time_s));
    sizes.insert(p.bytes);
  }
  if (sizes.size() < 2)
    throw ConfigError(
        fmt::format("{}: bytes: {} distinct size(s): need at least 2 to fit latency and bandwidth",
                    src, sizes.size()));

  std::vector<double> x, t;
  for (const CollectivePoint& p : series.points) {
    x.push_back(p.bytes * factor);
    t.push_back(p.time_s);
  }
  std::vector<double> w(x.size(), 1.0);
  Line line = solve(x, t, w);
  for (int it = 0; it < kIrlsIterations; ++it) {
    std::vector<double> abs_res(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      abs_res[i] = std::abs((line.alpha_s + line.beta_s_per_byte * x[i] - t[i]) / t[i]);
    // MAD -> sigma for Gaussian noise; floor it so an exact fit does not divide by zero.
    const double scale = std::max(1.4826 * median(abs_res), 1e-6);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double u = abs_res[i] / scale;
      w[i] = u <= kHuberK ? 1.0 : kHuberK / u;
    }
    Line next = solve(x, t, w);
    const bool converged = std::abs(next.alpha_s - line.alpha_s) <= 1e-9 * std::abs(line.alpha_s) &&
                           std::abs(next.beta_s_per_byte - line.beta_s_per_byte) <=
                               1e-9 * std::abs(line.beta_s_per_byte);
    line = next;
    if (converged)
      break;
  }
  if (!(line.beta_s_per_byte > 0))
    throw ConfigError(fmt::format(
        "{}: time_s: does not grow with bytes (fitted slope {:.3g} s/B): no bandwidth term to "
        "fit; measure a wider size range",
        src, line.beta_s_per_byte));

  CollectiveFitResult result;
  result.fit.op = series.op;
  result.fit.level = series.level;
  result.fit.alpha_s = line.alpha_s;
  result.fit.busbw_bytes_per_s = 1.0 / line.beta_s_per_byte;
  result.fit.num_ranks = series.num_ranks;

  CollectiveFitQuality& q = result.quality;
  q.num_points = static_cast<std::int64_t>(x.size());
  q.bandwidth_factor = factor;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double sum_large = 0, sum_small = 0, max_large = 0, max_small = 0, max_all = 0;
  int n_large = 0, n_small = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double rel = std::abs(line.alpha_s + line.beta_s_per_byte * x[i] - t[i]) / t[i];
    const double bytes = series.points[i].bytes;
    max_all = std::max(max_all, rel);
    if (bytes >= kLargeBytes) {
      sum_large += rel;
      max_large = std::max(max_large, rel);
      ++n_large;
    }
    if (bytes <= kSmallBytes) {
      sum_small += rel;
      max_small = std::max(max_small, rel);
      ++n_small;
    }
  }
  q.max_rel_error_fraction = max_all;
  q.max_rel_error_large_fraction = n_large > 0 ? max_large : nan;
  q.mean_rel_error_large_fraction = n_large > 0 ? sum_large / n_large : nan;
  q.max_rel_error_small_fraction = n_small > 0 ? max_small : nan;
  q.mean_rel_error_small_fraction = n_small > 0 ? sum_small / n_small : nan;
  return result;
}

std::vector<CollectiveSeries> read_collective_series(const nlohmann::json& document,
                                                     const std::string& source,
                                                     const std::string& level) {
  if (!document.is_object() || !document.contains("results") || !document["results"].is_array())
    throw ConfigError(fmt::format("{}: results: missing or not a list (expected the JSON of "
                                  "`trainsim bench collectives --format json`)",
                                  source));
  std::map<std::pair<std::string, std::int64_t>, CollectiveSeries> groups;
  const nlohmann::json& results = document["results"];
  for (std::size_t i = 0; i < results.size(); ++i) {
    const nlohmann::json& row = results[i];
    const std::string where = fmt::format("{}: results[{}]", source, i);
    auto need = [&](const char* key) -> const nlohmann::json& {
      if (!row.is_object() || !row.contains(key) || row[key].is_null())
        throw ConfigError(fmt::format("{}.{}: missing", where, key));
      return row[key];
    };
    try {
      const std::string op = need("op").get<std::string>();
      const auto num_ranks = need("num_ranks").get<std::int64_t>();
      const double bytes = need("bytes").get<double>();
      const double time_s = need("time_s").get<double>();
      const std::int64_t wrong = row.value("wrong", std::int64_t{0});
      if (wrong > 0)
        throw ConfigError(fmt::format("{}.wrong = {}: the result failed its check; not a valid "
                                      "measurement",
                                      where, wrong));
      CollectiveSeries& s = groups[{op, num_ranks}];
      s.op = op;
      s.level = level;
      s.num_ranks = num_ranks;
      s.points.push_back({bytes, time_s});
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(fmt::format("{}: wrong type: {}", where, e.what()));
    }
  }
  std::vector<CollectiveSeries> out;
  for (auto& [key, series] : groups)
    out.push_back(std::move(series));
  return out;
}

std::vector<CollectiveFitResult> fit_collectives_file(const std::string& path,
                                                      const std::string& level) {
  const nlohmann::json document = load_json_file(path);
  std::vector<CollectiveFitResult> fits;
  for (const CollectiveSeries& s : read_collective_series(document, path, level))
    fits.push_back(fit_collective(s));
  return fits;
}

} // namespace trainsim::val
