// Robust relative-error regime alpha-beta fit of collective times (collective_fit.hpp). Per regime:
// closed-form 2x2 weighted least squares inside an IRLS loop with Huber weights; scale from the
// median absolute relative residual (MAD), as in Huber, "Robust Statistics" (1981), ch. 7.
// Breakpoints: exhaustive search over segments of the sorted distinct sizes (each segment fitted
// once); number of regimes: BIC (Schwarz, "Estimating the dimension of a model", 1978) plus a
// required gain in the max error above 1 MiB.
#include "simulate/fit/collective_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/stats.hpp"

namespace trainsim::fitting {

double busbw_factor(std::string_view op, std::int64_t num_ranks) {
  hw::Collective parsed;
  if (!hw::parse_collective(op, parsed))
    throw ConfigError(fmt::format("op = '{}': unknown collective", op));
  return hw::busbw_factor(parsed, num_ranks);
}
namespace {

constexpr double kLargeBytes = 1024.0 * 1024.0; // quality: "large" sizes, >= 1 MiB
constexpr double kSmallBytes = 64.0 * 1024.0;   // quality: "small" sizes, <= 64 KiB
constexpr double kHuberK = 1.345;               // 95% efficiency under Gaussian noise
constexpr int kIrlsIterations = 20;
// Regime rules (collective_fit.hpp, docs/collectives.md "The fit"). A regime more must lower the
// max error at sizes >= 1 MiB by at least a quarter and by at least 2 percentage points.
constexpr double kMinRegimeGainFraction = 0.25;
constexpr double kMinRegimeGainAbs = 0.02;
// A regime's bandwidth term at its largest size must be at least this share of its time there:
// well above the few-percent scatter of measured times, so its busbw is measured, not noise.
constexpr double kMinBandwidthShare = 0.10;
// Floor of the RMS relative residual in the BIC (an exact fit would give ln 0).
constexpr double kMinRmsForBic = 1e-6;

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

// Robust line through (x, t): IRLS with Huber weights on the relative residual.
Line fit_line(const std::vector<double>& x, const std::vector<double>& t) {
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
  return line;
}

// Points sorted by size, grouped by distinct size: points [first[s], first[s + 1]) have size
// sizes[s].
struct Samples {
  std::vector<double> sizes;       // distinct bytes, increasing
  std::vector<std::size_t> first;  // sizes.size() + 1 entries
  std::vector<double> bytes, x, t; // per point; x = bytes * factor
};

Samples make_samples(std::vector<CollectivePoint> points, double factor) {
  std::stable_sort(
      points.begin(), points.end(),
      [](const CollectivePoint& a, const CollectivePoint& b) { return a.bytes < b.bytes; });
  Samples s;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i == 0 || points[i].bytes != points[i - 1].bytes) {
      s.sizes.push_back(points[i].bytes);
      s.first.push_back(i);
    }
    s.bytes.push_back(points[i].bytes);
    s.x.push_back(points[i].bytes * factor);
    s.t.push_back(points[i].time_s);
  }
  s.first.push_back(points.size());
  return s;
}

// One regime fitted on the distinct sizes [begin, end).
struct Segment {
  bool ok = false;                 // false: no bandwidth term (time does not grow with size)
  bool measured_bandwidth = false; // the bandwidth term reaches kMinBandwidthShare of the time
  Line line;
  double sse = 0; // sum of squared relative residuals
};

// The regime fit: regimes start at distinct-size indices starts[0] = 0 < starts[1] < ...
struct Model {
  std::vector<std::size_t> starts;
  std::vector<Line> lines;
  double sse = 0;
};

class ModelSearch {
 public:
  ModelSearch(const Samples& s, std::size_t min_sizes)
      : s_(s), n_(s.sizes.size()), min_(min_sizes), cache_((n_ + 1) * (n_ + 1)) {}

  // The best model of exactly `k` regimes (least SSE among those with non-decreasing alpha and
  // busbw, each regime holding >= min_ sizes when k > 1), or nullopt when none exists.
  std::optional<Model> best(std::size_t k) {
    std::optional<Model> result;
    if (k == 1) { // one line over every size: needs only the 2 sizes any line needs
      const Segment& all = segment(0, n_);
      if (all.ok)
        result = Model{{0}, {all.line}, all.sse};
      return result;
    }
    Model current;
    search(0, k, current, result);
    return result;
  }

 private:
  const Segment& segment(std::size_t begin, std::size_t end) {
    std::optional<Segment>& slot = cache_[begin * (n_ + 1) + end];
    if (!slot) {
      const std::size_t lo = s_.first[begin], hi = s_.first[end];
      const std::vector<double> x(s_.x.begin() + lo, s_.x.begin() + hi),
          t(s_.t.begin() + lo, s_.t.begin() + hi);
      Segment seg;
      seg.line = fit_line(x, t);
      seg.ok = seg.line.beta_s_per_byte > 0;
      const double x_max = x.back(), bandwidth_s = seg.line.beta_s_per_byte * x_max;
      seg.measured_bandwidth =
          seg.ok && bandwidth_s >= kMinBandwidthShare * (seg.line.alpha_s + bandwidth_s);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double r = (seg.line.alpha_s + seg.line.beta_s_per_byte * x[i] - t[i]) / t[i];
        seg.sse += r * r;
      }
      slot = seg;
    }
    return *slot;
  }

  // Regimes still to place: `left`, starting at distinct size `begin`.
  void search(std::size_t begin, std::size_t left, Model& current, std::optional<Model>& best) {
    if (n_ < begin + left * min_)
      return; // not enough sizes left for `left` regimes
    // The last regime ends at the largest size; earlier ones leave min_ sizes per regime left.
    const std::size_t first_end = left == 1 ? n_ : begin + min_;
    const std::size_t last_end = n_ - (left - 1) * min_;
    for (std::size_t end = first_end; end <= last_end; ++end) {
      const Segment& seg = segment(begin, end);
      if (!seg.measured_bandwidth) // (a single line over all sizes is exempt: best(1))
        continue;
      if (!current.lines.empty()) {
        const Line& prev = current.lines.back();
        // Lower envelope: larger sizes pick a line of no less latency and no less bandwidth.
        if (seg.line.alpha_s < prev.alpha_s || seg.line.beta_s_per_byte > prev.beta_s_per_byte)
          continue;
      }
      current.starts.push_back(begin);
      current.lines.push_back(seg.line);
      current.sse += seg.sse;
      if (left == 1) {
        if (!best || current.sse < best->sse)
          best = current;
      } else {
        search(end, left - 1, current, best);
      }
      current.sse -= seg.sse;
      current.starts.pop_back();
      current.lines.pop_back();
    }
  }

  const Samples& s_;
  std::size_t n_, min_;
  std::vector<std::optional<Segment>> cache_;
};

// The fit of a model: regime k starts at the geometric mean of the distinct sizes around its
// first size, rounded up to a whole byte (so each measured size stays in the regime it was
// fitted in); the first starts at 0.
hw::CollectiveFit to_fit(const Model& m, const Samples& s, const CollectiveSeries& series) {
  hw::CollectiveFit fit;
  // Both names were checked by fit_collective before the fit.
  if (!hw::parse_collective(series.op, fit.op) || !hw::parse_link_level(series.level, fit.level))
    throw std::logic_error("to_fit: unchecked op or level");
  fit.num_ranks = series.num_ranks;
  for (std::size_t k = 0; k < m.starts.size(); ++k) {
    double min_bytes = 0;
    if (k > 0) {
      const double lo = s.sizes[m.starts[k] - 1], hi = s.sizes[m.starts[k]];
      min_bytes = std::min(std::ceil(std::sqrt(lo * hi)), hi);
      if (!(min_bytes > lo))
        min_bytes = hi;
    }
    fit.regimes.push_back({min_bytes, m.lines[k].alpha_s, 1.0 / m.lines[k].beta_s_per_byte});
  }
  fit.alpha_s = fit.regimes.back().alpha_s;
  fit.busbw_bytes_per_s = fit.regimes.back().busbw_bytes_per_s;
  return fit;
}

// Max relative error at sizes >= 1 MiB (all sizes if none) of a model on its own samples.
double max_large_error(const Model& m, const Samples& s) {
  double max_large = 0, max_all = 0;
  bool any_large = false;
  for (std::size_t k = 0; k < m.starts.size(); ++k) {
    const std::size_t end = k + 1 < m.starts.size() ? m.starts[k + 1] : s.sizes.size();
    for (std::size_t i = s.first[m.starts[k]]; i < s.first[end]; ++i) {
      const double rel =
          std::abs(m.lines[k].alpha_s + m.lines[k].beta_s_per_byte * s.x[i] - s.t[i]) / s.t[i];
      max_all = std::max(max_all, rel);
      if (s.bytes[i] >= kLargeBytes) {
        max_large = std::max(max_large, rel);
        any_large = true;
      }
    }
  }
  return any_large ? max_large : max_all;
}

double bic(const Model& m, const Samples& s) {
  const double n = static_cast<double>(s.t.size());
  const double mse = std::max(m.sse / n, kMinRmsForBic * kMinRmsForBic);
  return n * std::log(mse) + (3.0 * static_cast<double>(m.lines.size()) - 1) * std::log(n);
}

// The chosen model (collective_fit.hpp states the rule), or nullopt when even one line has no
// bandwidth term.
std::optional<Model> choose_model(const Samples& s, const CollectiveFitOptions& options) {
  ModelSearch search(s, static_cast<std::size_t>(options.min_sizes_per_regime));
  std::optional<Model> chosen = search.best(1);
  if (!chosen)
    return chosen;
  for (std::int64_t k = 2; k <= options.max_regimes; ++k) {
    const std::optional<Model> more = search.best(static_cast<std::size_t>(k));
    if (!more)
      continue;
    const double err = max_large_error(*chosen, s), err_more = max_large_error(*more, s);
    if (bic(*more, s) < bic(*chosen, s) && err_more <= (1 - kMinRegimeGainFraction) * err &&
        err - err_more >= kMinRegimeGainAbs)
      chosen = more;
  }
  return chosen;
}

std::size_t regime_index(const hw::CollectiveFit& fit, double bytes) {
  std::size_t k = 0;
  for (std::size_t i = 0; i < fit.regimes.size(); ++i)
    if (fit.regimes[i].min_bytes <= bytes)
      k = i;
  return k;
}

} // namespace

double fit_bandwidth_factor(std::string_view op, std::int64_t num_ranks) {
  const double factor = busbw_factor(op, num_ranks); // throws on unknown op
  return factor == 0 ? 1 : factor;                   // P = 1: the local rate bytes / time (algbw)
}

CollectiveFitQuality fit_quality(const hw::CollectiveFit& fit, const CollectiveSeries& series) {
  const double factor = fit_bandwidth_factor(series.op, series.num_ranks);
  std::vector<CollectivePoint> points = series.points;
  std::stable_sort(
      points.begin(), points.end(),
      [](const CollectivePoint& a, const CollectivePoint& b) { return a.bytes < b.bytes; });
  CollectiveFitQuality q;
  q.num_points = static_cast<std::int64_t>(points.size());
  q.num_regimes = static_cast<std::int64_t>(fit.regimes.size());
  q.bandwidth_factor = factor;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double sum_large = 0, sum_small = 0, max_large = 0, max_small = 0, max_all = 0;
  double max_large_bytes = nan, max_small_bytes = nan;
  int n_large = 0, n_small = 0;
  std::vector<double> small_times;
  for (const CollectivePoint& p : points) {
    const double bytes = p.bytes, t = p.time_s;
    const double rel = std::abs(hw::collective_fit_time_s(fit, bytes, factor) - t) / t;
    max_all = std::max(max_all, rel);
    if (bytes >= kLargeBytes) {
      sum_large += rel;
      if (n_large == 0 || rel > max_large) {
        max_large = rel;
        max_large_bytes = bytes;
      }
      ++n_large;
    }
    if (bytes <= kSmallBytes) {
      sum_small += rel;
      if (n_small == 0 || rel > max_small) {
        max_small = rel;
        max_small_bytes = bytes;
      }
      ++n_small;
      small_times.push_back(t);
    }
  }
  q.max_rel_error_fraction = max_all;
  q.max_rel_error_large_fraction = n_large > 0 ? max_large : nan;
  q.mean_rel_error_large_fraction = n_large > 0 ? sum_large / n_large : nan;
  q.max_rel_error_large_bytes = max_large_bytes;
  q.max_rel_error_small_fraction = n_small > 0 ? max_small : nan;
  q.mean_rel_error_small_fraction = n_small > 0 ? sum_small / n_small : nan;
  q.max_rel_error_small_bytes = max_small_bytes;
  q.small_alpha_s = fit.regimes.empty() ? nan : fit.regimes.front().alpha_s;
  q.median_small_time_s = small_times.empty() ? nan : median(small_times);
  q.small_alpha_error_fraction = q.small_alpha_s / q.median_small_time_s - 1;
  return q;
}

CollectiveFitResult fit_collective(const CollectiveSeries& series,
                                   const CollectiveFitOptions& options) {
  const std::string src =
      fmt::format("collective fit '{}' at {} ranks", series.op, series.num_ranks);
  if (series.num_ranks < 1)
    throw ConfigError(fmt::format("{}: num_ranks = {}: must be >= 1", src, series.num_ranks));
  if (options.max_regimes < 1 || options.max_regimes > 3)
    throw ConfigError(
        fmt::format("{}: max_regimes = {}: must be 1, 2 or 3", src, options.max_regimes));
  if (options.min_sizes_per_regime < 2)
    throw ConfigError(fmt::format("{}: min_sizes_per_regime = {}: must be >= 2 (a line needs two "
                                  "sizes)",
                                  src, options.min_sizes_per_regime));
  hw::LinkLevel level;
  if (!hw::parse_link_level(series.level, level) || level == hw::LinkLevel::none)
    throw ConfigError(
        fmt::format("{}: level = '{}': must be intra-node or inter-node", src, series.level));
  const double factor = fit_bandwidth_factor(series.op, series.num_ranks); // throws on unknown op

  for (std::size_t i = 0; i < series.points.size(); ++i) {
    const CollectivePoint& p = series.points[i];
    if (!(p.bytes > 0) || !std::isfinite(p.bytes))
      throw ConfigError(fmt::format("{}: points[{}].bytes = {}: must be > 0", src, i, p.bytes));
    if (!(p.time_s > 0) || !std::isfinite(p.time_s))
      throw ConfigError(fmt::format("{}: points[{}].time_s = {}: must be > 0", src, i, p.time_s));
  }
  const Samples samples = make_samples(series.points, factor);
  if (samples.sizes.size() < 2)
    throw ConfigError(
        fmt::format("{}: bytes: {} distinct size(s): need at least 2 to fit latency and bandwidth",
                    src, samples.sizes.size()));

  const std::optional<Model> model = choose_model(samples, options);
  if (!model)
    throw ConfigError(fmt::format(
        "{}: time_s: does not grow with bytes (fitted slope <= 0 s/B): no bandwidth term to "
        "fit; measure a wider size range",
        src));

  CollectiveFitResult result;
  result.fit = to_fit(*model, samples, series);

  CollectiveFitQuality& q = result.quality;
  q = fit_quality(result.fit, series);
  const double nan = std::numeric_limits<double>::quiet_NaN();

  // Held-out: fit the even-indexed distinct sizes, predict the odd-indexed ones >= 1 MiB.
  q.heldout_max_rel_error_large_fraction = nan;
  q.heldout_max_rel_error_large_bytes = nan;
  q.heldout_max_rel_error_large_interior_fraction = nan;
  CollectiveSeries even = series;
  even.points.clear();
  for (const CollectivePoint& p : series.points) {
    const auto idx = std::lower_bound(samples.sizes.begin(), samples.sizes.end(), p.bytes) -
                     samples.sizes.begin();
    if (idx % 2 == 0)
      even.points.push_back(p);
  }
  const Samples even_samples = make_samples(even.points, factor);
  if (even_samples.sizes.size() >= 2) {
    if (const std::optional<Model> held = choose_model(even_samples, options)) {
      const hw::CollectiveFit hf = to_fit(*held, even_samples, even);
      q.heldout_num_regimes = static_cast<std::int64_t>(hf.regimes.size());
      double worst = 0, worst_interior = 0, worst_bytes = nan;
      bool any = false, any_interior = false;
      for (std::size_t i = 0; i < samples.t.size(); ++i) {
        const double bytes = samples.bytes[i];
        const auto idx = static_cast<std::size_t>(
            std::lower_bound(samples.sizes.begin(), samples.sizes.end(), bytes) -
            samples.sizes.begin());
        if (idx % 2 == 0 || bytes < kLargeBytes)
          continue;
        const double rel =
            std::abs(hw::collective_fit_time_s(hf, bytes, factor) - samples.t[i]) / samples.t[i];
        if (!any || rel > worst) {
          worst = rel;
          worst_bytes = bytes;
        }
        any = true;
        // Between even sizes idx - 1 and idx + 1: at a breakpoint when they are in different
        // regimes of the held-out fit.
        const bool at_breakpoint =
            idx + 1 < samples.sizes.size() &&
            regime_index(hf, samples.sizes[idx - 1]) != regime_index(hf, samples.sizes[idx + 1]);
        if (!at_breakpoint) {
          worst_interior = any_interior ? std::max(worst_interior, rel) : rel;
          any_interior = true;
        }
      }
      if (any) {
        q.heldout_max_rel_error_large_fraction = worst;
        q.heldout_max_rel_error_large_bytes = worst_bytes;
      }
      if (any_interior)
        q.heldout_max_rel_error_large_interior_fraction = worst_interior;
    }
  }
  return result;
}

nlohmann::json to_json(const CollectiveFitQuality& q) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return {
      {"num_points", q.num_points},
      {"num_regimes", q.num_regimes},
      {"max_error_pct_at_or_above_1mib", num(100 * q.max_rel_error_large_fraction)},
      {"max_error_bytes_at_or_above_1mib", num(q.max_rel_error_large_bytes)},
      {"mean_error_pct_at_or_above_1mib", num(100 * q.mean_rel_error_large_fraction)},
      {"max_error_pct_at_or_below_64kib", num(100 * q.max_rel_error_small_fraction)},
      {"max_error_bytes_at_or_below_64kib", num(q.max_rel_error_small_bytes)},
      {"mean_error_pct_at_or_below_64kib", num(100 * q.mean_rel_error_small_fraction)},
      {"small_alpha_us", num(1e6 * q.small_alpha_s)},
      {"median_time_us_at_or_below_64kib", num(1e6 * q.median_small_time_s)},
      {"small_alpha_error_pct", num(100 * q.small_alpha_error_fraction)},
      {"heldout_num_regimes", q.heldout_num_regimes},
      {"heldout_max_error_pct_at_or_above_1mib", num(100 * q.heldout_max_rel_error_large_fraction)},
      {"heldout_max_error_bytes", num(q.heldout_max_rel_error_large_bytes)},
      {"heldout_max_error_pct_away_from_breakpoints",
       num(100 * q.heldout_max_rel_error_large_interior_fraction)}};
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
      // Ranges a measured collective can have: ranks of one job, up to 1 PiB, [1 ns, 1 h].
      if (num_ranks < 1 || num_ranks > (1 << 20))
        throw ConfigError(fmt::format("{}.num_ranks = {}: must be in 1..2^20", where, num_ranks));
      if (!(bytes >= 1 && bytes <= 0x1p50))
        throw ConfigError(fmt::format("{}.bytes = {:g}: must be in [1, 2^50]", where, bytes));
      if (!(time_s >= 1e-9 && time_s <= 3600))
        throw ConfigError(
            fmt::format("{}.time_s = {:g}: must be in [1e-9, 3600] s", where, time_s));
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
                                                      const std::string& level,
                                                      const CollectiveFitOptions& options) {
  const nlohmann::json document = load_json_file(path);
  std::vector<CollectiveFitResult> fits;
  for (const CollectiveSeries& s : read_collective_series(document, path, level))
    fits.push_back(fit_collective(s, options));
  return fits;
}

} // namespace trainsim::fitting
