// float64 CPU references (reference.hpp). Straightforward loops; clarity over speed.
#include "validate/bench/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace trainsim::val {

double half_bits_to_double(std::uint16_t bits) {
  const int sign = bits >> 15, exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(static_cast<double>(mant), -24); // subnormal
  else if (exp == 31)
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -v : v;
}

double bf16_bits_to_double(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

double fp8_e4m3_bits_to_double(std::uint8_t bits) {
  const int sign = bits >> 7, exp = (bits >> 3) & 0xf, mant = bits & 0x7;
  if (exp == 15 && mant == 7)
    return std::numeric_limits<double>::quiet_NaN(); // e4m3 has NaN but no infinity
  const double v = exp == 0 ? std::ldexp(static_cast<double>(mant), -9) // subnormal: m/8 2^-6
                            : std::ldexp(1.0 + mant / 8.0, exp - 7);
  return sign ? -v : v;
}

std::uint16_t double_to_bf16_bits(double v) {
  const float f = static_cast<float>(v);
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f))
    return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1); // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}

std::uint16_t double_to_half_bits(double v) {
  if (std::isnan(v))
    return 0x7e00;
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (a >= 65520.0)
    return sign | 0x7c00; // overflow to inf
  int e;
  std::frexp(a, &e); // a = f * 2^e, f in [0.5, 1)
  int exp = e - 1 + 15;
  if (exp <= 0) { // subnormal: units of 2^-24
    const double q = std::nearbyint(std::ldexp(a, 24));
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(q));
  }
  double mant = std::nearbyint((std::ldexp(a, -(e - 1)) - 1.0) * 1024.0);
  if (mant >= 1024.0) {
    mant = 0;
    ++exp;
  }
  if (exp >= 31)
    return sign | 0x7c00;
  return static_cast<std::uint16_t>(sign | (exp << 10) | static_cast<int>(mant));
}

Vec elementwise_reference(ElementwiseKind kind, const Vec& x, const Vec& y, double alpha) {
  Vec out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    switch (kind) {
    case ElementwiseKind::relu: out[i] = v > 0 ? v : 0.0; break;
    case ElementwiseKind::gelu: {
      const double c = std::sqrt(2.0 / M_PI);
      out[i] = 0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v)));
      break;
    }
    case ElementwiseKind::add: out[i] = v + y.at(i); break;
    case ElementwiseKind::scale: out[i] = alpha * v; break;
    }
  }
  return out;
}

double gemm_reference_entry(const Vec& a, const Vec& b, std::int64_t n, std::int64_t k,
                            std::int64_t i, std::int64_t j) {
  double acc = 0;
  for (std::int64_t l = 0; l < k; ++l)
    acc += a[i * k + l] * b[l * n + j];
  return acc;
}

double gemm_bt_reference_entry(const Vec& a, const Vec& b, std::int64_t k, std::int64_t i,
                               std::int64_t j) {
  double acc = 0;
  for (std::int64_t l = 0; l < k; ++l)
    acc += a[i * k + l] * b[j * k + l];
  return acc;
}

Vec gemm_reference(const Vec& a, const Vec& b, std::int64_t m, std::int64_t n, std::int64_t k) {
  Vec c(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t l = 0; l < k; ++l) {
      const double av = a[i * k + l];
      for (std::int64_t j = 0; j < n; ++j)
        c[i * n + j] += av * b[l * n + j];
    }
  return c;
}

Vec softmax_reference(const Vec& x, std::int64_t rows, std::int64_t cols, double scale,
                      bool causal) {
  Vec y(x.size(), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t limit = causal ? std::min(cols, r % cols + 1) : cols;
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < limit; ++c)
      mx = std::max(mx, scale * x[r * cols + c]);
    double sum = 0;
    for (std::int64_t c = 0; c < limit; ++c)
      sum += std::exp(scale * x[r * cols + c] - mx);
    for (std::int64_t c = 0; c < limit; ++c)
      y[r * cols + c] = std::exp(scale * x[r * cols + c] - mx) / sum;
  }
  return y;
}

Vec softmax_backward_reference(const Vec& y, const Vec& dy, std::int64_t rows, std::int64_t cols) {
  Vec dx(y.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      dot += y[r * cols + c] * dy[r * cols + c];
    for (std::int64_t c = 0; c < cols; ++c)
      dx[r * cols + c] = y[r * cols + c] * (dy[r * cols + c] - dot);
  }
  return dx;
}

namespace {

NormForward norm_forward(const Vec& x, const Vec& gamma, const Vec* beta, std::int64_t rows,
                         std::int64_t cols, double eps) {
  const bool ln = beta != nullptr;
  NormForward f;
  f.y.resize(x.size());
  f.rstd.resize(static_cast<std::size_t>(rows));
  if (ln)
    f.mean.resize(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0;
    if (ln) {
      for (std::int64_t c = 0; c < cols; ++c)
        mean += x[r * cols + c];
      mean /= static_cast<double>(cols);
    }
    double var = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    var /= static_cast<double>(cols);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (std::int64_t c = 0; c < cols; ++c)
      f.y[r * cols + c] = (x[r * cols + c] - mean) * rstd * gamma[c] + (ln ? (*beta)[c] : 0.0);
    f.rstd[r] = rstd;
    if (ln)
      f.mean[r] = mean;
  }
  return f;
}

NormBackward norm_backward(const Vec& x, const Vec& gamma, const Vec& dy, std::int64_t rows,
                           std::int64_t cols, double eps, bool ln) {
  Vec beta(static_cast<std::size_t>(cols), 0.0);
  const NormForward f = norm_forward(x, gamma, ln ? &beta : nullptr, rows, cols, eps);
  NormBackward b;
  b.dx.resize(x.size());
  b.dgamma.assign(static_cast<std::size_t>(cols), 0.0);
  if (ln)
    b.dbeta.assign(static_cast<std::size_t>(cols), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double mean = ln ? f.mean[r] : 0.0, rstd = f.rstd[r];
    double sum_g = 0, sum_gx = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double xhat = (x[r * cols + c] - mean) * rstd;
      const double g = dy[r * cols + c] * gamma[c];
      sum_g += g;
      sum_gx += g * xhat;
      b.dgamma[c] += dy[r * cols + c] * xhat;
      if (ln)
        b.dbeta[c] += dy[r * cols + c];
    }
    const double mean_g = ln ? sum_g / static_cast<double>(cols) : 0.0;
    const double mean_gx = sum_gx / static_cast<double>(cols);
    for (std::int64_t c = 0; c < cols; ++c) {
      const double xhat = (x[r * cols + c] - mean) * rstd;
      b.dx[r * cols + c] = rstd * (dy[r * cols + c] * gamma[c] - mean_g - xhat * mean_gx);
    }
  }
  return b;
}

} // namespace

NormForward layernorm_reference(const Vec& x, const Vec& gamma, const Vec& beta, std::int64_t rows,
                                std::int64_t cols, double eps) {
  return norm_forward(x, gamma, &beta, rows, cols, eps);
}
NormBackward layernorm_backward_reference(const Vec& x, const Vec& gamma, const Vec& dy,
                                          std::int64_t rows, std::int64_t cols, double eps) {
  return norm_backward(x, gamma, dy, rows, cols, eps, true);
}
NormForward rmsnorm_reference(const Vec& x, const Vec& gamma, std::int64_t rows, std::int64_t cols,
                              double eps) {
  return norm_forward(x, gamma, nullptr, rows, cols, eps);
}
NormBackward rmsnorm_backward_reference(const Vec& x, const Vec& gamma, const Vec& dy,
                                        std::int64_t rows, std::int64_t cols, double eps) {
  return norm_backward(x, gamma, dy, rows, cols, eps, false);
}

Vec attention_row_reference(const double* q, const double* k, const double* v, std::int64_t seq_len,
                            std::int64_t head_dim, bool causal, double scale, std::int64_t i,
                            double* lse) {
  const std::int64_t limit = causal ? i + 1 : seq_len;
  Vec s(static_cast<std::size_t>(limit));
  double mx = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < limit; ++j) {
    double acc = 0;
    for (std::int64_t d = 0; d < head_dim; ++d)
      acc += q[i * head_dim + d] * k[j * head_dim + d];
    s[j] = acc * scale;
    mx = std::max(mx, s[j]);
  }
  double sum = 0;
  for (std::int64_t j = 0; j < limit; ++j) {
    s[j] = std::exp(s[j] - mx);
    sum += s[j];
  }
  Vec o(static_cast<std::size_t>(head_dim), 0.0);
  for (std::int64_t j = 0; j < limit; ++j)
    for (std::int64_t d = 0; d < head_dim; ++d)
      o[d] += s[j] / sum * v[j * head_dim + d];
  if (lse)
    *lse = mx + std::log(sum);
  return o;
}

AttentionForward attention_reference(const Vec& q, const Vec& k, const Vec& v,
                                     std::int64_t batch_heads, std::int64_t seq_len,
                                     std::int64_t head_dim, bool causal, double scale) {
  AttentionForward f;
  f.o.resize(q.size());
  f.lse.resize(static_cast<std::size_t>(batch_heads * seq_len));
  for (std::int64_t h = 0; h < batch_heads; ++h) {
    const std::int64_t off = h * seq_len * head_dim;
    for (std::int64_t i = 0; i < seq_len; ++i) {
      const Vec row =
          attention_row_reference(q.data() + off, k.data() + off, v.data() + off, seq_len, head_dim,
                                  causal, scale, i, &f.lse[h * seq_len + i]);
      std::copy(row.begin(), row.end(), f.o.begin() + off + i * head_dim);
    }
  }
  return f;
}

AttentionBackward attention_backward_head_reference(const double* q, const double* k,
                                                    const double* v, const double* dout,
                                                    std::int64_t seq_len, std::int64_t head_dim,
                                                    bool causal, double scale) {
  const std::int64_t n = seq_len * head_dim;
  AttentionBackward g{Vec(n, 0.0), Vec(n, 0.0), Vec(n, 0.0)};
  Vec p(static_cast<std::size_t>(seq_len)), dp(static_cast<std::size_t>(seq_len));
  for (std::int64_t i = 0; i < seq_len; ++i) {
    double lse = 0;
    const Vec o = attention_row_reference(q, k, v, seq_len, head_dim, causal, scale, i, &lse);
    double delta = 0; // rowsum(dO * O)
    for (std::int64_t d = 0; d < head_dim; ++d)
      delta += dout[i * head_dim + d] * o[d];
    const std::int64_t limit = causal ? i + 1 : seq_len;
    for (std::int64_t j = 0; j < limit; ++j) {
      double s = 0, dpv = 0;
      for (std::int64_t d = 0; d < head_dim; ++d) {
        s += q[i * head_dim + d] * k[j * head_dim + d];
        dpv += dout[i * head_dim + d] * v[j * head_dim + d];
      }
      p[j] = std::exp(s * scale - lse);
      dp[j] = dpv;
    }
    for (std::int64_t j = 0; j < limit; ++j) {
      const double ds = p[j] * (dp[j] - delta); // gradient wrt the scaled score
      for (std::int64_t d = 0; d < head_dim; ++d) {
        g.dv[j * head_dim + d] += p[j] * dout[i * head_dim + d];
        g.dk[j * head_dim + d] += ds * scale * q[i * head_dim + d];
        g.dq[i * head_dim + d] += ds * scale * k[j * head_dim + d];
      }
    }
  }
  return g;
}

ErrorStats compare_to_reference(const Vec& out, const Vec& ref) {
  if (out.size() != ref.size())
    throw std::logic_error("compare_to_reference: size mismatch");
  ErrorStats e;
  e.num_elements = static_cast<std::int64_t>(out.size());
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++e.num_nan;
      continue;
    }
    const double d = out[i] - ref[i];
    e.max_abs_err = std::max(e.max_abs_err, std::fabs(d));
    diff2 += d * d;
    ref2 += ref[i] * ref[i];
  }
  e.rel_l2_err = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return e;
}

double relative_error_limit(Dtype dtype) {
  switch (dtype) {
  case Dtype::fp32: return 1e-5;
  case Dtype::tf32: return 2e-3;
  case Dtype::fp16: return 5e-3;
  case Dtype::bf16: return 2e-2;
  case Dtype::fp8: return 1e-1;
  }
  return 1e-5;
}

bool passes(const ErrorStats& e, Dtype dtype) {
  return e.num_nan == 0 && e.num_elements > 0 && e.rel_l2_err <= relative_error_limit(dtype);
}

} // namespace trainsim::val
