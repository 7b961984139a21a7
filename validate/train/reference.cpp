// float64 CPU reference of the CS336 Transformer LM: forward, hand-written backward, AdamW.
// Plain loops over row-major arrays, no cleverness: this is the specification.
#include "validate/train/reference.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "common/errors.hpp"

namespace trainsim::val::train {
namespace {

using Vec = std::vector<double>;
using Index = std::int64_t;

std::uint64_t mix(std::uint64_t x) { // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Y[n, out] = X[n, in] W[out, in]^T
void linear(const double* x, const double* w, double* y, Index n, Index in, Index out) {
  for (Index i = 0; i < n; ++i)
    for (Index o = 0; o < out; ++o) {
      double s = 0;
      for (Index k = 0; k < in; ++k)
        s += x[i * in + k] * w[o * in + k];
      y[i * out + o] = s;
    }
}

// dX += dY W; dW += dY^T X
void linear_backward(const double* dy, const double* x, const double* w, double* dx, double* dw,
                     Index n, Index in, Index out) {
  for (Index i = 0; i < n; ++i)
    for (Index o = 0; o < out; ++o) {
      const double g = dy[i * out + o];
      for (Index k = 0; k < in; ++k) {
        dx[i * in + k] += g * w[o * in + k];
        dw[o * in + k] += g * x[i * in + k];
      }
    }
}

void rmsnorm(const double* x, const double* g, double* y, double* rstd, Index n, Index c) {
  for (Index i = 0; i < n; ++i) {
    double ms = 0;
    for (Index k = 0; k < c; ++k)
      ms += x[i * c + k] * x[i * c + k];
    rstd[i] = 1.0 / std::sqrt(ms / static_cast<double>(c) + kRmsNormEps);
    for (Index k = 0; k < c; ++k)
      y[i * c + k] = x[i * c + k] * rstd[i] * g[k];
  }
}

// dx += rstd (dy g - xhat mean(dy g xhat)); dg += sum_rows dy xhat
void rmsnorm_backward(const double* x, const double* g, const double* rstd, const double* dy,
                      double* dx, double* dg, Index n, Index c) {
  for (Index i = 0; i < n; ++i) {
    double dot = 0;
    for (Index k = 0; k < c; ++k)
      dot += dy[i * c + k] * g[k] * x[i * c + k] * rstd[i];
    dot /= static_cast<double>(c);
    for (Index k = 0; k < c; ++k) {
      const double xhat = x[i * c + k] * rstd[i];
      dx[i * c + k] += rstd[i] * (dy[i * c + k] * g[k] - xhat * dot);
      dg[k] += dy[i * c + k] * xhat;
    }
  }
}

// Rotates pairs (2i, 2i+1) of each head by angle sign * t * theta^(-2i/D), in place on the
// first `cols` = heads * head_dim columns starting at `col0` of a [n, stride] matrix.
void rope(double* x, Index n, Index seq_len, Index stride, Index col0, Index heads, Index d,
          double sign) {
  for (Index r = 0; r < n; ++r) {
    const double t = static_cast<double>(r % seq_len);
    for (Index h = 0; h < heads; ++h)
      for (Index i = 0; i < d / 2; ++i) {
        const double ang =
            sign * t * std::pow(kRopeTheta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
        double* p = x + r * stride + col0 + h * d + 2 * i;
        const double a = p[0], b = p[1];
        p[0] = a * std::cos(ang) - b * std::sin(ang);
        p[1] = a * std::sin(ang) + b * std::cos(ang);
      }
  }
}

struct LayerCache {
  Vec x, h, rstd1, qkv, p, att, x2, h2, rstd2, ab, g;
};

} // namespace

ParamLayout make_layout(const model::ModelSpec& m, const std::string& source) {
  Problems problems(source);
  if (m.is_moe())
    problems.add("num_experts > 0: the training workload is dense only");
  if (m.ffn != model::FfnKind::gated)
    problems.add("ffn: must be gated (SwiGLU)");
  if (m.norm != model::NormKind::rmsnorm)
    problems.add("norm: must be rmsnorm");
  if (m.position != model::PositionKind::rotary)
    problems.add("position: must be rotary");
  if (m.tied_embeddings)
    problems.add("tied_embeddings: must be false (untied LM head)");
  if (m.qkv_bias || m.out_bias || m.mlp_bias)
    problems.add("biases: must be absent");
  if (m.num_kv_heads != 0 && m.num_kv_heads != m.num_heads)
    problems.add(fmt::format("num_kv_heads = {}: must equal num_heads = {} (multi-head)",
                             m.num_kv_heads, m.num_heads));
  if (m.num_heads * m.head_dim != m.hidden_size)
    problems.add(fmt::format("num_heads * head_dim = {} * {}: must equal hidden_size = {}",
                             m.num_heads, m.head_dim, m.hidden_size));
  if (m.head_dim % 2 != 0)
    problems.add(fmt::format("head_dim = {}: must be even (RoPE pairs)", m.head_dim));
  for (auto [name, v] : {std::pair{"num_layers", m.num_layers},
                         {"hidden_size", m.hidden_size},
                         {"ffn_hidden_size", m.ffn_hidden_size},
                         {"vocab_size", m.vocab_size}})
    if (v <= 0)
      problems.add(fmt::format("{} = {}: must be positive", name, v));
  problems.throw_if_any();

  ParamLayout p;
  p.num_layers = m.num_layers;
  p.hidden_size = m.hidden_size;
  p.num_heads = m.num_heads;
  p.head_dim = m.head_dim;
  p.ffn_hidden_size = m.ffn_hidden_size;
  p.vocab_size = m.vocab_size;
  Index offset = 0;
  auto add = [&](std::string name, Index rows, Index cols, bool norm) {
    p.tensors.push_back({std::move(name), offset, rows, cols, norm});
    p.num_params += rows * cols;
    offset += (rows * cols + 15) / 16 * 16;
  };
  const Index c = m.hidden_size, f = m.ffn_hidden_size;
  add("embedding", m.vocab_size, c, false);
  for (Index l = 0; l < m.num_layers; ++l) {
    const std::string pre = fmt::format("layer{}.", l);
    add(pre + "ln1", 1, c, true);
    add(pre + "wqkv", 3 * c, c, false);
    add(pre + "wo", c, c, false);
    add(pre + "ln2", 1, c, true);
    add(pre + "w13", 2 * f, c, false);
    add(pre + "w2", c, f, false);
  }
  add("final_norm", 1, c, true);
  add("lm_head", m.vocab_size, c, false);
  p.num_padded_params = offset;
  return p;
}

TokenBatch synthetic_batch(Index batch_size, Index seq_len, Index vocab_size, std::uint64_t seed,
                           Index first_sample, Index period) {
  TokenBatch b;
  b.batch_size = batch_size;
  b.seq_len = seq_len;
  b.inputs.resize(static_cast<std::size_t>(batch_size * seq_len));
  b.targets.resize(b.inputs.size());
  // One pattern per seed; each sample starts it at its own phase.
  auto token = [&](Index i) {
    return static_cast<std::int32_t>(
        mix(seed * 1000003ULL + static_cast<std::uint64_t>(i % period)) %
        static_cast<std::uint64_t>(vocab_size));
  };
  for (Index s = 0; s < batch_size; ++s) {
    const auto phase =
        static_cast<Index>(mix(~seed + static_cast<std::uint64_t>(first_sample + s)) %
                           static_cast<std::uint64_t>(period));
    for (Index t = 0; t < seq_len; ++t) {
      b.inputs[static_cast<std::size_t>(s * seq_len + t)] = token(phase + t);
      b.targets[static_cast<std::size_t>(s * seq_len + t)] = token(phase + t + 1);
    }
  }
  return b;
}

std::vector<double> reference_init(const ParamLayout& layout, std::uint64_t seed) {
  Vec p(static_cast<std::size_t>(layout.num_padded_params), 0.0);
  const double half_width = 0.02 * std::sqrt(3.0); // uniform with std 0.02
  for (const ParamTensor& t : layout.tensors)
    for (Index i = 0; i < t.num_elements(); ++i) {
      const auto idx = static_cast<std::size_t>(t.offset + i);
      const double u = static_cast<double>(mix(seed ^ (idx * 0x2545F4914F6CDD1DULL)) >> 11) *
                       (1.0 / 9007199254740992.0);
      p[idx] = t.is_norm ? 1.0 : (2 * u - 1) * half_width;
    }
  return p;
}

double reference_loss(const ParamLayout& L, const Vec& params, const TokenBatch& batch,
                      Vec* grads) {
  const Index n = batch.batch_size * batch.seq_len, c = L.hidden_size, f = L.ffn_hidden_size,
              v = L.vocab_size, hh = L.num_heads, d = L.head_dim, tt = batch.seq_len;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  auto P = [&](const ParamTensor& t) { return params.data() + t.offset; };
  auto sz = [](Index k) { return static_cast<std::size_t>(k); };

  // ---- forward ----
  Vec x(sz(n * c));
  for (Index i = 0; i < n; ++i)
    std::copy_n(P(L.embedding()) + batch.inputs[sz(i)] * c, c, x.begin() + i * c);
  std::vector<LayerCache> cache(sz(L.num_layers));
  for (Index l = 0; l < L.num_layers; ++l) {
    LayerCache& k = cache[sz(l)];
    k.x = x;
    k.h.resize(sz(n * c));
    k.rstd1.resize(sz(n));
    rmsnorm(x.data(), P(L.layer(l, ParamLayout::kLn1)), k.h.data(), k.rstd1.data(), n, c);
    k.qkv.resize(sz(n * 3 * c));
    linear(k.h.data(), P(L.layer(l, ParamLayout::kWqkv)), k.qkv.data(), n, c, 3 * c);
    rope(k.qkv.data(), n, tt, 3 * c, 0, hh, d, 1.0);
    rope(k.qkv.data(), n, tt, 3 * c, c, hh, d, 1.0);
    k.p.assign(sz(batch.batch_size * hh * tt * tt), 0.0); // [batch, heads, seq, seq]
    k.att.assign(sz(n * c), 0.0);
    for (Index b = 0; b < batch.batch_size; ++b)
      for (Index h = 0; h < hh; ++h)
        for (Index i = 0; i < tt; ++i) {
          const double* q = k.qkv.data() + (b * tt + i) * 3 * c + h * d;
          double* pr = k.p.data() + ((b * hh + h) * tt + i) * tt;
          double mx = -1e300;
          for (Index j = 0; j <= i; ++j) {
            const double* kk = k.qkv.data() + (b * tt + j) * 3 * c + c + h * d;
            double s = 0;
            for (Index e = 0; e < d; ++e)
              s += q[e] * kk[e];
            pr[j] = s * scale;
            mx = std::max(mx, pr[j]);
          }
          double sum = 0;
          for (Index j = 0; j <= i; ++j)
            sum += (pr[j] = std::exp(pr[j] - mx));
          for (Index j = 0; j <= i; ++j) {
            pr[j] /= sum;
            const double* vv = k.qkv.data() + (b * tt + j) * 3 * c + 2 * c + h * d;
            for (Index e = 0; e < d; ++e)
              k.att[sz((b * tt + i) * c + h * d + e)] += pr[j] * vv[e];
          }
        }
    Vec y(sz(n * c));
    linear(k.att.data(), P(L.layer(l, ParamLayout::kWo)), y.data(), n, c, c);
    k.x2.resize(sz(n * c));
    for (Index i = 0; i < n * c; ++i)
      k.x2[sz(i)] = x[sz(i)] + y[sz(i)];
    k.h2.resize(sz(n * c));
    k.rstd2.resize(sz(n));
    rmsnorm(k.x2.data(), P(L.layer(l, ParamLayout::kLn2)), k.h2.data(), k.rstd2.data(), n, c);
    k.ab.resize(sz(n * 2 * f));
    linear(k.h2.data(), P(L.layer(l, ParamLayout::kW13)), k.ab.data(), n, c, 2 * f);
    k.g.resize(sz(n * f));
    for (Index i = 0; i < n; ++i)
      for (Index e = 0; e < f; ++e) {
        const double a = k.ab[sz(i * 2 * f + e)], bb = k.ab[sz(i * 2 * f + f + e)];
        k.g[sz(i * f + e)] = a / (1 + std::exp(-a)) * bb;
      }
    Vec z(sz(n * c));
    linear(k.g.data(), P(L.layer(l, ParamLayout::kW2)), z.data(), n, f, c);
    for (Index i = 0; i < n * c; ++i)
      x[sz(i)] = k.x2[sz(i)] + z[sz(i)];
  }
  Vec hf(sz(n * c)), rstdf(sz(n)), logits(sz(n * v));
  rmsnorm(x.data(), P(L.final_norm()), hf.data(), rstdf.data(), n, c);
  linear(hf.data(), P(L.lm_head()), logits.data(), n, c, v);
  double loss = 0;
  Vec dlogits(sz(n * v));
  for (Index i = 0; i < n; ++i) {
    const double* r = logits.data() + i * v;
    const double mx = *std::max_element(r, r + v);
    double sum = 0;
    for (Index j = 0; j < v; ++j)
      sum += std::exp(r[j] - mx);
    const double lse = mx + std::log(sum);
    loss += lse - r[batch.targets[sz(i)]];
    for (Index j = 0; j < v; ++j)
      dlogits[sz(i * v + j)] =
          (std::exp(r[j] - lse) - (j == batch.targets[sz(i)] ? 1.0 : 0.0)) / static_cast<double>(n);
  }
  loss /= static_cast<double>(n);
  if (grads == nullptr)
    return loss;

  // ---- backward ----
  grads->assign(sz(L.num_padded_params), 0.0);
  auto G = [&](const ParamTensor& t) { return grads->data() + t.offset; };
  Vec dhf(sz(n * c), 0.0), dx(sz(n * c), 0.0);
  linear_backward(dlogits.data(), hf.data(), P(L.lm_head()), dhf.data(), G(L.lm_head()), n, c, v);
  rmsnorm_backward(x.data(), P(L.final_norm()), rstdf.data(), dhf.data(), dx.data(),
                   G(L.final_norm()), n, c);
  for (Index l = L.num_layers - 1; l >= 0; --l) {
    LayerCache& k = cache[sz(l)];
    // x3 = x2 + z: dx2 = dx3, dz = dx3
    Vec dg(sz(n * f), 0.0);
    linear_backward(dx.data(), k.g.data(), P(L.layer(l, ParamLayout::kW2)), dg.data(),
                    G(L.layer(l, ParamLayout::kW2)), n, f, c);
    Vec dab(sz(n * 2 * f));
    for (Index i = 0; i < n; ++i)
      for (Index e = 0; e < f; ++e) {
        const double a = k.ab[sz(i * 2 * f + e)], bb = k.ab[sz(i * 2 * f + f + e)];
        const double s = 1 / (1 + std::exp(-a)), go = dg[sz(i * f + e)];
        dab[sz(i * 2 * f + e)] = go * bb * s * (1 + a * (1 - s));
        dab[sz(i * 2 * f + f + e)] = go * a * s;
      }
    Vec dh2(sz(n * c), 0.0);
    linear_backward(dab.data(), k.h2.data(), P(L.layer(l, ParamLayout::kW13)), dh2.data(),
                    G(L.layer(l, ParamLayout::kW13)), n, c, 2 * f);
    Vec dx2 = dx;
    rmsnorm_backward(k.x2.data(), P(L.layer(l, ParamLayout::kLn2)), k.rstd2.data(), dh2.data(),
                     dx2.data(), G(L.layer(l, ParamLayout::kLn2)), n, c);
    Vec datt(sz(n * c), 0.0);
    linear_backward(dx2.data(), k.att.data(), P(L.layer(l, ParamLayout::kWo)), datt.data(),
                    G(L.layer(l, ParamLayout::kWo)), n, c, c);
    Vec dqkv(sz(n * 3 * c), 0.0);
    for (Index b = 0; b < batch.batch_size; ++b)
      for (Index h = 0; h < hh; ++h)
        for (Index i = 0; i < tt; ++i) {
          const double* pr = k.p.data() + ((b * hh + h) * tt + i) * tt;
          const double* dO = datt.data() + (b * tt + i) * c + h * d;
          Vec dp(sz(i + 1));
          double dot = 0;
          for (Index j = 0; j <= i; ++j) {
            const double* vv = k.qkv.data() + (b * tt + j) * 3 * c + 2 * c + h * d;
            double* dv = dqkv.data() + (b * tt + j) * 3 * c + 2 * c + h * d;
            double s = 0;
            for (Index e = 0; e < d; ++e) {
              s += dO[e] * vv[e];
              dv[e] += pr[j] * dO[e];
            }
            dp[sz(j)] = s;
            dot += pr[j] * s;
          }
          const double* q = k.qkv.data() + (b * tt + i) * 3 * c + h * d;
          double* dq = dqkv.data() + (b * tt + i) * 3 * c + h * d;
          for (Index j = 0; j <= i; ++j) {
            const double ds = pr[j] * (dp[sz(j)] - dot) * scale;
            const double* kk = k.qkv.data() + (b * tt + j) * 3 * c + c + h * d;
            double* dk = dqkv.data() + (b * tt + j) * 3 * c + c + h * d;
            for (Index e = 0; e < d; ++e) {
              dq[e] += ds * kk[e];
              dk[e] += ds * q[e];
            }
          }
        }
    rope(dqkv.data(), n, tt, 3 * c, 0, hh, d, -1.0);
    rope(dqkv.data(), n, tt, 3 * c, c, hh, d, -1.0);
    Vec dh(sz(n * c), 0.0);
    linear_backward(dqkv.data(), k.h.data(), P(L.layer(l, ParamLayout::kWqkv)), dh.data(),
                    G(L.layer(l, ParamLayout::kWqkv)), n, c, 3 * c);
    dx = dx2;
    rmsnorm_backward(k.x.data(), P(L.layer(l, ParamLayout::kLn1)), k.rstd1.data(), dh.data(),
                     dx.data(), G(L.layer(l, ParamLayout::kLn1)), n, c);
  }
  for (Index i = 0; i < n; ++i)
    for (Index e = 0; e < c; ++e)
      G(L.embedding())[batch.inputs[sz(i)] * c + e] += dx[sz(i * c + e)];
  return loss;
}

void reference_adamw(const AdamWConfig& c, std::int64_t t, const Vec& grads, Vec& params, Vec& m,
                     Vec& v) {
  const double bc1 = 1 - std::pow(c.beta1, static_cast<double>(t));
  const double bc2 = 1 - std::pow(c.beta2, static_cast<double>(t));
  for (std::size_t i = 0; i < params.size(); ++i) {
    m[i] = c.beta1 * m[i] + (1 - c.beta1) * grads[i];
    v[i] = c.beta2 * v[i] + (1 - c.beta2) * grads[i] * grads[i];
    params[i] -= c.lr * c.weight_decay * params[i];
    params[i] -= c.lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + c.eps);
  }
}

} // namespace trainsim::val::train
