// CUDA implementation of bench.hpp: allocates each case's tensors, fills them with fresh random
// values, poisons the outputs (0xFF bytes = NaN), runs once and checks against the float64 CPU
// reference, then warms up and samples CUDA-event times on the case's stream until the sample
// count and noise targets are met (nvbench's protocol). Large outputs are checked on sampled
// rows or entries, always after a NaN scan of the whole output.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <numeric>

#include "common/errors.hpp"
#include "common/stats.hpp"
#include "kernels/attention.cuh"
#include "kernels/device.hpp"
#include "kernels/elementwise.cuh"
#include "kernels/gemm.cuh"
#include "kernels/layernorm.cuh"
#include "kernels/rmsnorm.cuh"
#include "kernels/softmax.cuh"
#include "validate/bench/bench.hpp"
#include "validate/bench/reference.hpp"

namespace trainsim::val {
namespace {

using kern::DeviceBuffer;

/// Bytes per stored element: 4 (fp32, tf32), 2 (fp16, bf16), 1 (fp8 e4m3).
std::size_t storage_bytes(Dtype d) { return static_cast<std::size_t>(dtype_bytes(d)); }

struct Tensor {
  DeviceBuffer buf;
  Dtype dtype = Dtype::bf16;
  std::int64_t n = 0;
  Tensor(Dtype d, std::int64_t count)
      : buf(static_cast<std::size_t>(count) * storage_bytes(d)), dtype(d), n(count) {}
  [[nodiscard]] void* ptr() const { return buf.get(); }
  [[nodiscard]] float* f32() const { return buf.as<float>(); }
};

/// A host copy of a device tensor, read element by element as double.
struct HostTensor {
  Dtype dtype = Dtype::bf16;
  std::vector<std::uint16_t> h; // fp16 / bf16 bits
  std::vector<float> f;         // fp32 / tf32
  std::vector<std::uint8_t> q;  // fp8 e4m3 bits
  [[nodiscard]] std::int64_t size() const {
    switch (storage_bytes(dtype)) {
    case 4: return static_cast<std::int64_t>(f.size());
    case 2: return static_cast<std::int64_t>(h.size());
    default: return static_cast<std::int64_t>(q.size());
    }
  }
  [[nodiscard]] double at(std::int64_t i) const {
    switch (dtype) {
    case Dtype::fp16: return half_bits_to_double(h[i]);
    case Dtype::bf16: return bf16_bits_to_double(h[i]);
    case Dtype::fp8: return fp8_e4m3_bits_to_double(q[i]);
    default: return f[i];
    }
  }
  [[nodiscard]] Vec slice(std::int64_t begin, std::int64_t count) const {
    Vec v(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i)
      v[i] = at(begin + i);
    return v;
  }
  [[nodiscard]] std::int64_t count_nonfinite() const {
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < size(); ++i)
      bad += std::isfinite(at(i)) ? 0 : 1;
    return bad;
  }
};

HostTensor fetch(const Tensor& t, cudaStream_t stream) {
  CUDA_CHECK(cudaStreamSynchronize(stream));
  HostTensor h;
  h.dtype = t.dtype;
  const std::size_t n = static_cast<std::size_t>(t.n);
  switch (storage_bytes(t.dtype)) {
  case 4:
    h.f.resize(n);
    CUDA_CHECK(cudaMemcpy(h.f.data(), t.ptr(), n * 4, cudaMemcpyDeviceToHost));
    break;
  case 2:
    h.h.resize(n);
    CUDA_CHECK(cudaMemcpy(h.h.data(), t.ptr(), n * 2, cudaMemcpyDeviceToHost));
    break;
  default:
    h.q.resize(n);
    CUDA_CHECK(cudaMemcpy(h.q.data(), t.ptr(), n, cudaMemcpyDeviceToHost));
    break;
  }
  return h;
}

/// Rows [r0, r1, ...] of a [rows, cols] tensor, concatenated.
Vec gather_rows(const HostTensor& t, std::int64_t cols, const std::vector<std::int64_t>& rows) {
  Vec v;
  v.reserve(rows.size() * cols);
  for (std::int64_t r : rows)
    for (std::int64_t c = 0; c < cols; ++c)
      v.push_back(t.at(r * cols + c));
  return v;
}

/// At most max_count indices in [0, n), evenly spaced, always including 0 and n - 1.
std::vector<std::int64_t> sample_indices(std::int64_t n, std::int64_t max_count) {
  std::vector<std::int64_t> v;
  if (n <= max_count) {
    v.resize(static_cast<std::size_t>(n));
    std::iota(v.begin(), v.end(), 0);
    return v;
  }
  for (std::int64_t i = 0; i < max_count; ++i)
    v.push_back(i * (n - 1) / (max_count - 1));
  return v;
}

struct CheckResult {
  ErrorStats worst;
  bool passed = true;
  std::string note;
  void add(const std::string& what, const Vec& out, const Vec& ref, Dtype dtype,
           std::int64_t nonfinite = 0) {
    ErrorStats e = compare_to_reference(out, ref);
    e.num_nan += nonfinite;
    const bool ok = passes(e, dtype);
    passed = passed && ok;
    worst.rel_l2_err = std::max(worst.rel_l2_err, e.rel_l2_err);
    worst.max_abs_err = std::max(worst.max_abs_err, e.max_abs_err);
    worst.num_nan += e.num_nan;
    if (!note.empty())
      note += "; ";
    note += fmt::format("{}: rel {:.2e} max_abs {:.2e} nonfinite {}{}", what, e.rel_l2_err,
                        e.max_abs_err, e.num_nan, ok ? "" : " FAIL");
  }
};

struct Context {
  kern::Stream stream;
  kern::CublasHandle cublas;
  kern::CublasLtHandle lt;
  DeviceBuffer workspace{32u << 20};
  std::uint64_t seed = 1;
  DeviceBuffer l2_flush;
  int compute_capability = 0; // major * 10 + minor, e.g. 90
};

/// One prepared case: owned tensors, the outputs to poison, run and check functions.
struct Prepared {
  std::deque<Tensor> tensors;
  std::vector<Tensor*> outputs;
  std::function<void(cudaStream_t)> run;
  std::function<CheckResult(cudaStream_t)> check;

  Tensor& add(Dtype d, std::int64_t n) { return tensors.emplace_back(d, n); }
  Tensor& input(Context& ctx, Dtype d, std::int64_t n, float lo = -1.0f, float hi = 1.0f) {
    Tensor& t = add(d, n);
    kern::FillRandomArgs f;
    f.dtype = d == Dtype::tf32 ? Dtype::fp32 : d;
    f.out = t.ptr();
    f.num_elements = n;
    f.seed = ctx.seed++;
    f.lo = lo;
    f.hi = hi;
    kern::launch_fill_random(f, ctx.stream.get());
    return t;
  }
  Tensor& output(Dtype d, std::int64_t n) {
    Tensor& t = add(d, n);
    outputs.push_back(&t);
    return t;
  }
  [[nodiscard]] double device_bytes() const {
    double b = 0;
    for (const Tensor& t : tensors)
      b += static_cast<double>(t.buf.bytes());
    return b;
  }
};

kern::ElementwiseOp to_kern(BenchOp op) {
  switch (op) {
  case BenchOp::relu: return kern::ElementwiseOp::relu;
  case BenchOp::gelu: return kern::ElementwiseOp::gelu;
  case BenchOp::add: return kern::ElementwiseOp::add;
  default: return kern::ElementwiseOp::scale;
  }
}
ElementwiseKind to_ref(BenchOp op) {
  switch (op) {
  case BenchOp::relu: return ElementwiseKind::relu;
  case BenchOp::gelu: return ElementwiseKind::gelu;
  case BenchOp::add: return ElementwiseKind::add;
  default: return ElementwiseKind::scale;
  }
}

constexpr float kScaleAlpha = 1.75f;
constexpr std::int64_t kMaxCheckedRows = 256;
constexpr std::int64_t kMaxCheckedElements = 1 << 21;

void prepare_gemm(const KernelShape& s, Context& ctx, Prepared& p) {
  // fp8 (gemm.cuh): B is stored transposed, [n, k], and C is bf16.
  const bool b_transposed = s.dtype == Dtype::fp8;
  if (b_transposed && ctx.compute_capability < 89)
    throw ConfigError(fmt::format("{}: dtype fp8 needs compute capability 8.9 or later (cuBLASLt "
                                  "e4m3 GEMM); this device is {}.{}",
                                  case_name(s), ctx.compute_capability / 10,
                                  ctx.compute_capability % 10));
  const Dtype c_dtype = fitting::gemm_output_dtype(s.dtype);
  Tensor& a = p.input(ctx, s.dtype, s.m * s.k);
  Tensor& b = p.input(ctx, s.dtype, s.k * s.n);
  Tensor& c = p.output(c_dtype, s.m * s.n);
  kern::GemmArgs g;
  g.dtype = s.dtype;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = a.ptr();
  g.b = b.ptr();
  g.c = c.ptr();
  g.lt = ctx.lt.get();
  g.cublas = ctx.cublas.get();
  g.workspace = ctx.workspace.get();
  g.workspace_bytes = ctx.workspace.bytes();
  const bool lt = s.gemm_impl == GemmImpl::cublaslt;
  p.run = [g, lt](cudaStream_t st) {
    lt ? kern::launch_gemm(g, st) : kern::launch_gemm_cublas(g, st);
  };
  p.check = [&a, &b, &c, s, b_transposed, c_dtype](cudaStream_t st) {
    const HostTensor ha = fetch(a, st), hb = fetch(b, st), hc = fetch(c, st);
    Vec av = ha.slice(0, ha.size()), bv = hb.slice(0, hb.size());
    Vec out, ref;
    const std::int64_t entries = std::min<std::int64_t>(s.m * s.n, 2048);
    for (std::int64_t t = 0; t < entries; ++t) {
      const std::int64_t idx = entries == s.m * s.n ? t : (t * 7919 * 104729) % (s.m * s.n);
      const std::int64_t i = idx / s.n, j = idx % s.n;
      out.push_back(hc.at(idx));
      ref.push_back(b_transposed ? gemm_bt_reference_entry(av, bv, s.k, i, j)
                                 : gemm_reference_entry(av, bv, s.n, s.k, i, j));
    }
    // The tolerance is the output dtype's: fp8 inputs decode exactly, so the reference is exact
    // and what remains is fp32 accumulation and the rounding of C (bf16 for fp8).
    CheckResult r;
    r.add(fmt::format("C ({} entries)", entries), out, ref, c_dtype, hc.count_nonfinite());
    return r;
  };
}

void prepare_elementwise(const KernelShape& s, Context& ctx, Prepared& p) {
  Tensor& x = p.input(ctx, s.dtype, s.num_elements, -3.0f, 3.0f);
  Tensor* y = s.op == BenchOp::add ? &p.input(ctx, s.dtype, s.num_elements) : nullptr;
  Tensor& out = p.output(s.dtype, s.num_elements);
  kern::ElementwiseArgs e;
  e.op = to_kern(s.op);
  e.dtype = s.dtype;
  e.x = x.ptr();
  e.y = y ? y->ptr() : nullptr;
  e.out = out.ptr();
  e.num_elements = s.num_elements;
  e.alpha = kScaleAlpha;
  p.run = [e](cudaStream_t st) { kern::launch_elementwise(e, st); };
  p.check = [&x, y, &out, s](cudaStream_t st) {
    const HostTensor hx = fetch(x, st), ho = fetch(out, st);
    HostTensor hy;
    if (y)
      hy = fetch(*y, st);
    const auto idx = sample_indices(s.num_elements, kMaxCheckedElements);
    Vec xs, ys, os;
    for (std::int64_t i : idx) {
      xs.push_back(hx.at(i));
      ys.push_back(y ? hy.at(i) : 0.0);
      os.push_back(ho.at(i));
    }
    CheckResult r;
    r.add(fmt::format("out ({} elements)", idx.size()), os,
          elementwise_reference(to_ref(s.op), xs, ys, kScaleAlpha), s.dtype, ho.count_nonfinite());
    return r;
  };
}

void prepare_copy(const KernelShape& s, Context& ctx, Prepared& p) {
  Tensor& src = p.input(ctx, s.dtype, s.num_elements);
  Tensor& dst = p.output(s.dtype, s.num_elements);
  const std::size_t bytes = src.buf.bytes();
  p.run = [&src, &dst, bytes](cudaStream_t st) {
    CUDA_CHECK(cudaMemcpyAsync(dst.ptr(), src.ptr(), bytes, cudaMemcpyDeviceToDevice, st));
  };
  p.check = [&src, &dst, s](cudaStream_t st) {
    const HostTensor a = fetch(src, st), b = fetch(dst, st);
    const auto idx = sample_indices(s.num_elements, kMaxCheckedElements);
    Vec x, y;
    for (std::int64_t i : idx) {
      x.push_back(b.at(i));
      y.push_back(a.at(i));
    }
    CheckResult r;
    r.add("copy", x, y, s.dtype, b.count_nonfinite());
    return r;
  };
}

void prepare_softmax(const KernelShape& s, Context& ctx, Prepared& p) {
  const std::int64_t n = s.rows * s.cols;
  const auto rows = sample_indices(s.rows, kMaxCheckedRows);
  if (!s.backward) {
    Tensor& x = p.input(ctx, s.dtype, n, -4.0f, 4.0f);
    Tensor& y = p.output(s.dtype, n);
    kern::SoftmaxArgs a;
    a.dtype = s.dtype;
    a.x = x.ptr();
    a.y = y.ptr();
    a.rows = s.rows;
    a.cols = s.cols;
    p.run = [a](cudaStream_t st) { kern::launch_softmax(a, st); };
    p.check = [&x, &y, s, rows](cudaStream_t st) {
      const HostTensor hx = fetch(x, st), hy = fetch(y, st);
      const auto nr = static_cast<std::int64_t>(rows.size());
      CheckResult r;
      r.add(fmt::format("y ({} rows)", nr), gather_rows(hy, s.cols, rows),
            softmax_reference(gather_rows(hx, s.cols, rows), nr, s.cols, 1.0, false), s.dtype,
            hy.count_nonfinite());
      return r;
    };
  } else {
    Tensor& y = p.input(ctx, s.dtype, n, 0.0f, 1.0f);
    Tensor& dy = p.input(ctx, s.dtype, n);
    Tensor& dx = p.output(s.dtype, n);
    kern::SoftmaxBackwardArgs a;
    a.dtype = s.dtype;
    a.y = y.ptr();
    a.dy = dy.ptr();
    a.dx = dx.ptr();
    a.rows = s.rows;
    a.cols = s.cols;
    p.run = [a](cudaStream_t st) { kern::launch_softmax_backward(a, st); };
    p.check = [&y, &dy, &dx, s, rows](cudaStream_t st) {
      const HostTensor hy = fetch(y, st), hdy = fetch(dy, st), hdx = fetch(dx, st);
      const auto nr = static_cast<std::int64_t>(rows.size());
      CheckResult r;
      r.add(fmt::format("dx ({} rows)", nr), gather_rows(hdx, s.cols, rows),
            softmax_backward_reference(gather_rows(hy, s.cols, rows),
                                       gather_rows(hdy, s.cols, rows), nr, s.cols),
            s.dtype, hdx.count_nonfinite());
      return r;
    };
  }
}

constexpr float kLayerNormEps = 1e-5f, kRmsNormEps = 1e-6f;

void prepare_norm(const KernelShape& s, Context& ctx, Prepared& p) {
  const bool ln = s.op == BenchOp::layernorm;
  const double eps = ln ? kLayerNormEps : kRmsNormEps;
  const std::int64_t n = s.rows * s.cols;
  const auto rows = sample_indices(s.rows, kMaxCheckedRows);
  const auto nr = static_cast<std::int64_t>(rows.size());
  Tensor& x = p.input(ctx, s.dtype, n, -2.0f, 3.0f);
  Tensor& gamma = p.input(ctx, s.dtype, s.cols, 0.5f, 1.5f);
  Tensor* beta = ln ? &p.input(ctx, s.dtype, s.cols) : nullptr;
  const cudaStream_t st0 = ctx.stream.get();
  // The forward launch (the measured op, or the backward case's setup of saved statistics).
  auto norm_forward = [&](void* y, Tensor* mean,
                          Tensor& rstd) -> std::function<void(cudaStream_t)> {
    if (ln) {
      kern::LayerNormArgs a;
      a.dtype = s.dtype;
      a.x = x.ptr();
      a.gamma = gamma.ptr();
      a.beta = beta->ptr();
      a.y = y;
      a.mean = mean->f32();
      a.rstd = rstd.f32();
      a.rows = s.rows;
      a.cols = s.cols;
      a.eps = kLayerNormEps;
      return [a](cudaStream_t st) { kern::launch_layernorm(a, st); };
    }
    kern::RmsNormArgs a;
    a.dtype = s.dtype;
    a.x = x.ptr();
    a.gamma = gamma.ptr();
    a.y = y;
    a.rstd = rstd.f32();
    a.rows = s.rows;
    a.cols = s.cols;
    a.eps = kRmsNormEps;
    return [a](cudaStream_t st) { kern::launch_rmsnorm(a, st); };
  };
  if (!s.backward) {
    Tensor& y = p.output(s.dtype, n);
    Tensor* mean = ln ? &p.output(Dtype::fp32, s.rows) : nullptr;
    Tensor& rstd = p.output(Dtype::fp32, s.rows);
    p.run = norm_forward(y.ptr(), mean, rstd);
    p.check = [&x, &gamma, beta, &y, mean, &rstd, s, rows, nr, ln, eps](cudaStream_t st) {
      const HostTensor hx = fetch(x, st), hg = fetch(gamma, st), hy = fetch(y, st),
                       hr = fetch(rstd, st);
      const Vec xs = gather_rows(hx, s.cols, rows), g = hg.slice(0, s.cols);
      const NormForward ref =
          ln ? layernorm_reference(xs, g, fetch(*beta, st).slice(0, s.cols), nr, s.cols, eps)
             : rmsnorm_reference(xs, g, nr, s.cols, eps);
      CheckResult r;
      r.add(fmt::format("y ({} rows)", nr), gather_rows(hy, s.cols, rows), ref.y, s.dtype,
            hy.count_nonfinite());
      r.add("rstd", gather_rows(hr, 1, rows), ref.rstd, Dtype::fp16, hr.count_nonfinite());
      if (ln) {
        const HostTensor hm = fetch(*mean, st);
        r.add("mean", gather_rows(hm, 1, rows), ref.mean, Dtype::fp16, hm.count_nonfinite());
      }
      return r;
    };
    return;
  }
  // Backward: the saved statistics come from one forward run in setup.
  Tensor& dy = p.input(ctx, s.dtype, n);
  Tensor* mean = ln ? &p.add(Dtype::fp32, s.rows) : nullptr;
  Tensor& rstd = p.add(Dtype::fp32, s.rows);
  Tensor& dx = p.output(s.dtype, n);
  Tensor& dgamma = p.output(Dtype::fp32, s.cols);
  Tensor* dbeta = ln ? &p.output(Dtype::fp32, s.cols) : nullptr;
  {
    Tensor tmp(s.dtype, n);
    norm_forward(tmp.ptr(), mean, rstd)(st0);
    CUDA_CHECK(cudaStreamSynchronize(st0));
  }
  if (ln) {
    kern::LayerNormBackwardArgs a;
    a.dtype = s.dtype;
    a.x = x.ptr();
    a.gamma = gamma.ptr();
    a.dy = dy.ptr();
    a.mean = mean->f32();
    a.rstd = rstd.f32();
    a.dx = dx.ptr();
    a.dgamma = dgamma.f32();
    a.dbeta = dbeta->f32();
    a.rows = s.rows;
    a.cols = s.cols;
    p.run = [a](cudaStream_t st) { kern::launch_layernorm_backward(a, st); };
  } else {
    kern::RmsNormBackwardArgs a;
    a.dtype = s.dtype;
    a.x = x.ptr();
    a.gamma = gamma.ptr();
    a.dy = dy.ptr();
    a.rstd = rstd.f32();
    a.dx = dx.ptr();
    a.dgamma = dgamma.f32();
    a.rows = s.rows;
    a.cols = s.cols;
    p.run = [a](cudaStream_t st) { kern::launch_rmsnorm_backward(a, st); };
  }
  p.check = [&x, &gamma, &dy, &dx, &dgamma, dbeta, s, rows, nr, ln, eps](cudaStream_t st) {
    const HostTensor hx = fetch(x, st), hg = fetch(gamma, st), hdy = fetch(dy, st),
                     hdx = fetch(dx, st), hdg = fetch(dgamma, st);
    const Vec g = hg.slice(0, s.cols);
    CheckResult r;
    const Vec xs = gather_rows(hx, s.cols, rows), dys = gather_rows(hdy, s.cols, rows);
    const NormBackward ref = ln ? layernorm_backward_reference(xs, g, dys, nr, s.cols, eps)
                                : rmsnorm_backward_reference(xs, g, dys, nr, s.cols, eps);
    r.add(fmt::format("dx ({} rows)", nr), gather_rows(hdx, s.cols, rows), ref.dx, s.dtype,
          hdx.count_nonfinite());
    if (nr == s.rows) { // parameter gradients sum over all rows: checked when all rows are
      r.add("dgamma", hdg.slice(0, s.cols), ref.dgamma, Dtype::fp16);
      if (ln)
        r.add("dbeta", fetch(*dbeta, st).slice(0, s.cols), ref.dbeta, Dtype::fp16);
    } else {
      r.add("dgamma (nonfinite scan only)", Vec{1.0}, Vec{1.0}, Dtype::fp32, hdg.count_nonfinite());
    }
    return r;
  };
}

void prepare_attention(const KernelShape& s, Context& ctx, Prepared& p) {
  const std::int64_t bh = s.batch_size * s.num_heads, sd = s.seq_len * s.head_dim;
  const std::int64_t n = bh * sd;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  Tensor& q = p.input(ctx, s.dtype, n, -2.0f, 2.0f);
  Tensor& k = p.input(ctx, s.dtype, n, -2.0f, 2.0f);
  Tensor& v = p.input(ctx, s.dtype, n);
  kern::AttentionArgs fa;
  fa.dtype = s.dtype;
  fa.q = q.ptr();
  fa.k = k.ptr();
  fa.v = v.ptr();
  fa.batch = s.batch_size;
  fa.heads = s.num_heads;
  fa.seq_len = s.seq_len;
  fa.head_dim = s.head_dim;
  fa.causal = s.causal;
  fa.block_m = static_cast<int>(s.block_m);
  fa.cublas = ctx.cublas.get();
  const bool naive = s.impl == AttentionImpl::naive;
  if (!s.backward) {
    Tensor& o = p.output(s.dtype, n);
    Tensor* lse = naive ? nullptr : &p.output(Dtype::fp32, bh * s.seq_len);
    Tensor* scores = naive ? &p.add(s.dtype, bh * s.seq_len * s.seq_len) : nullptr;
    fa.o = o.ptr();
    fa.lse = lse ? lse->f32() : nullptr;
    fa.scores = scores ? scores->ptr() : nullptr;
    p.run = [fa, naive](cudaStream_t st) {
      naive ? kern::launch_naive_attention(fa, st) : kern::launch_flash_attention(fa, st);
    };
    p.check = [&q, &k, &v, &o, lse, s, bh, sd, scale](cudaStream_t st) {
      const HostTensor hq = fetch(q, st), hk = fetch(k, st), hv = fetch(v, st), ho = fetch(o, st);
      HostTensor hl;
      if (lse)
        hl = fetch(*lse, st);
      Vec out, ref, lout, lref;
      for (std::int64_t h : {std::int64_t{0}, bh - 1}) {
        const Vec qh = hq.slice(h * sd, sd), kh = hk.slice(h * sd, sd), vh = hv.slice(h * sd, sd);
        for (std::int64_t i : sample_indices(s.seq_len, 48)) {
          double l = 0;
          const Vec row = attention_row_reference(qh.data(), kh.data(), vh.data(), s.seq_len,
                                                  s.head_dim, s.causal, scale, i, &l);
          for (std::int64_t d = 0; d < s.head_dim; ++d) {
            out.push_back(ho.at(h * sd + i * s.head_dim + d));
            ref.push_back(row[d]);
          }
          if (lse) {
            lout.push_back(hl.at(h * s.seq_len + i));
            lref.push_back(l);
          }
        }
      }
      CheckResult r;
      r.add("O (heads 0 and last, 48 rows each)", out, ref, s.dtype, ho.count_nonfinite());
      if (lse)
        r.add("lse", lout, lref, Dtype::fp16, hl.count_nonfinite());
      return r;
    };
    return;
  }
  if (naive)
    throw ConfigError("attention --impl naive: only the forward pass is implemented");
  Tensor& dout = p.input(ctx, s.dtype, n);
  Tensor& o = p.add(s.dtype, n);
  Tensor& lse = p.add(Dtype::fp32, bh * s.seq_len);
  Tensor& dq_accum = p.add(Dtype::fp32, n);
  Tensor& delta = p.add(Dtype::fp32, bh * s.seq_len);
  Tensor& dq = p.output(s.dtype, n);
  Tensor& dk = p.output(s.dtype, n);
  Tensor& dv = p.output(s.dtype, n);
  fa.o = o.ptr();
  fa.lse = lse.f32();
  kern::launch_flash_attention(fa, ctx.stream.get());
  kern::AttentionBackwardArgs b;
  b.dtype = s.dtype;
  b.q = q.ptr();
  b.k = k.ptr();
  b.v = v.ptr();
  b.o = o.ptr();
  b.dout = dout.ptr();
  b.lse = lse.f32();
  b.dq = dq.ptr();
  b.dk = dk.ptr();
  b.dv = dv.ptr();
  b.dq_accum = dq_accum.f32();
  b.delta = delta.f32();
  b.batch = s.batch_size;
  b.heads = s.num_heads;
  b.seq_len = s.seq_len;
  b.head_dim = s.head_dim;
  b.causal = s.causal;
  p.run = [b](cudaStream_t st) { kern::launch_flash_attention_backward(b, st); };
  p.check = [&q, &k, &v, &dout, &dq, &dk, &dv, s, sd, scale](cudaStream_t st) {
    const HostTensor hq = fetch(q, st), hk = fetch(k, st), hv = fetch(v, st), hd = fetch(dout, st);
    const HostTensor gq = fetch(dq, st), gk = fetch(dk, st), gv = fetch(dv, st);
    const Vec qh = hq.slice(0, sd), kh = hk.slice(0, sd), vh = hv.slice(0, sd),
              dh = hd.slice(0, sd);
    const AttentionBackward ref = attention_backward_head_reference(
        qh.data(), kh.data(), vh.data(), dh.data(), s.seq_len, s.head_dim, s.causal, scale);
    CheckResult r;
    r.add("dQ (head 0)", gq.slice(0, sd), ref.dq, s.dtype, gq.count_nonfinite());
    r.add("dK (head 0)", gk.slice(0, sd), ref.dk, s.dtype, gk.count_nonfinite());
    r.add("dV (head 0)", gv.slice(0, sd), ref.dv, s.dtype, gv.count_nonfinite());
    return r;
  };
}

std::unique_ptr<Prepared> prepare(const KernelShape& s, Context& ctx) {
  auto p = std::make_unique<Prepared>();
  switch (s.op) {
  case BenchOp::gemm: prepare_gemm(s, ctx, *p); break;
  case BenchOp::relu:
  case BenchOp::gelu:
  case BenchOp::add:
  case BenchOp::scale: prepare_elementwise(s, ctx, *p); break;
  case BenchOp::copy: prepare_copy(s, ctx, *p); break;
  case BenchOp::empty: p->run = [](cudaStream_t st) { kern::launch_empty(st); }; break;
  case BenchOp::softmax: prepare_softmax(s, ctx, *p); break;
  case BenchOp::layernorm:
  case BenchOp::rmsnorm: prepare_norm(s, ctx, *p); break;
  case BenchOp::attention: prepare_attention(s, ctx, *p); break;
  }
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream.get()));
  return p;
}

Measurement measure(const KernelShape& shape, Context& ctx, const BenchOptions& opts) {
  Measurement m;
  m.name = case_name(shape);
  m.shape = shape;
  m.work = kernel_work(shape);
  m.cold_l2 = opts.cold_l2;
  m.command_line = opts.command_line;
  const cudaStream_t st = ctx.stream.get();
  auto c = prepare(shape, ctx);
  m.device_bytes = c->device_bytes();

  // Correctness first: poisoned outputs, one run, compare with the float64 reference.
  for (Tensor* t : c->outputs)
    CUDA_CHECK(cudaMemsetAsync(t->ptr(), 0xff, t->buf.bytes(), st));
  CUDA_CHECK(cudaStreamSynchronize(st));
  std::size_t free_before = 0, free_after = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  c->run(st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  m.call_alloc_bytes =
      free_before > free_after ? static_cast<double>(free_before - free_after) : 0.0;
  if (opts.check && c->check) {
    const CheckResult r = c->check(st);
    m.checked = true;
    m.check_passed = r.passed;
    m.rel_err = r.worst.rel_l2_err;
    m.max_abs_err = r.worst.max_abs_err;
    m.check_note = r.note;
  }

  for (int i = 0; i < opts.warmup; ++i)
    c->run(st);
  kern::Event start, stop;
  std::vector<double> samples;
  const auto t0 = std::chrono::steady_clock::now();
  double mean_s = 0, stdev_s = 0;
  while (true) {
    if (opts.cold_l2 && ctx.l2_flush.bytes() > 0)
      CUDA_CHECK(
          cudaMemsetAsync(ctx.l2_flush.get(), samples.size() & 0xff, ctx.l2_flush.bytes(), st));
    CUDA_CHECK(cudaEventRecord(start.get(), st));
    c->run(st);
    CUDA_CHECK(cudaEventRecord(stop.get(), st));
    CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    samples.push_back(static_cast<double>(ms) * 1e-3);
    const auto n = static_cast<int>(samples.size());
    mean_s = mean(samples);
    stdev_s = sample_stdev(samples, mean_s);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (n >= opts.max_samples)
      break;
    if (n >= opts.min_samples &&
        (stdev_s / mean_s * 100.0 < opts.max_noise_pct || wall > opts.timeout_s))
      break;
    if (n >= 3 && wall > opts.timeout_s)
      break; // very slow case: keep what we have
  }
  m.samples = static_cast<std::int64_t>(samples.size());
  m.median_s = median(samples);
  m.min_s = *std::min_element(samples.begin(), samples.end());
  m.mean_s = mean_s;
  m.stdev_s = stdev_s;
  m.noise_pct = mean_s > 0 ? stdev_s / mean_s * 100.0 : 0.0;
  return m;
}

} // namespace

DeviceInfo query_device(int device) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    throw DeviceError(fmt::format("no CUDA device found (cudaGetDeviceCount: {})",
                                  err == cudaSuccess ? "0 devices" : cudaGetErrorString(err)));
  if (device < 0 || device >= count)
    throw ConfigError(fmt::format("--device {}: must be in [0, {})", device, count));
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  DeviceInfo d;
  d.gpu_name = p.name;
  d.device = device;
  d.compute_capability_major = p.major;
  d.compute_capability_minor = p.minor;
  d.num_sms = p.multiProcessorCount;
  d.l2_bytes = p.l2CacheSize;
  d.memory_bytes = static_cast<double>(p.totalGlobalMem);
  CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
  CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  int major = 0, minor = 0, patch = 0;
  CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &major));
  CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &minor));
  CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &patch));
  d.cublas_version = major * 10000 + minor * 100 + patch;
  return d;
}

std::vector<Measurement> run_kernel_benchmarks(const BenchOptions& opts,
                                               const ProgressFn& progress) {
  const DeviceInfo dev = query_device(opts.device);
  CUDA_CHECK(cudaSetDevice(opts.device));
  Context ctx;
  ctx.seed = opts.seed;
  ctx.compute_capability = dev.compute_capability_major * 10 + dev.compute_capability_minor;
  if (opts.cold_l2)
    ctx.l2_flush = DeviceBuffer(static_cast<std::size_t>(2 * dev.l2_bytes));
  std::vector<Measurement> out;
  for (std::size_t i = 0; i < opts.cases.size(); ++i) {
    const std::string name = case_name(opts.cases[i]);
    if (progress)
      progress(i, opts.cases.size(), name);
    out.push_back(measure(opts.cases[i], ctx, opts));
  }
  if (progress)
    progress(opts.cases.size(), opts.cases.size(), "");
  return out;
}

} // namespace trainsim::val
