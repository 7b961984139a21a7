// Tests of the float64 CPU references (reference.hpp) with hand-computed values; these are the
// specifications the GPU kernels are checked against, so they are tested without a GPU.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>

#include "validate/bench/reference.hpp"

using namespace trainsim;
using namespace trainsim::val;

TEST_CASE("fp16 and bf16 bit conversions") {
  CHECK(half_bits_to_double(0x3c00) == 1.0);
  CHECK(half_bits_to_double(0xc000) == -2.0);
  CHECK(half_bits_to_double(0x0001) == std::ldexp(1.0, -24)); // smallest subnormal
  CHECK(std::isnan(half_bits_to_double(0xffff)));             // the poison pattern
  CHECK(bf16_bits_to_double(0x3f80) == 1.0);
  CHECK(std::isnan(bf16_bits_to_double(0xffff)));
  CHECK(double_to_bf16_bits(1.0) == 0x3f80);
  CHECK(double_to_half_bits(1.0) == 0x3c00);
  CHECK(double_to_half_bits(-2.0) == 0xc000);
  for (double v : {0.1, -3.75, 1000.5, 1e-6})
    CHECK(half_bits_to_double(double_to_half_bits(v)) == doctest::Approx(v).epsilon(1e-3));
  for (double v : {0.1, -3.75, 1e20})
    CHECK(bf16_bits_to_double(double_to_bf16_bits(v)) == doctest::Approx(v).epsilon(8e-3));
}

TEST_CASE("fp8 e4m3 bit decoding") {
  CHECK(fp8_e4m3_bits_to_double(0x38) == 1.0);                     // 0.0111.000 = 2^(7-7)
  CHECK(fp8_e4m3_bits_to_double(0x7e) == 448.0);                   // 0.1111.110 = 1.75 * 2^8
  CHECK(fp8_e4m3_bits_to_double(0xfe) == -448.0);                  // largest finite, negative
  CHECK(fp8_e4m3_bits_to_double(0x01) == std::ldexp(1.0, -9));     // smallest subnormal
  CHECK(fp8_e4m3_bits_to_double(0x07) == 7 * std::ldexp(1.0, -9)); // largest subnormal
  CHECK(fp8_e4m3_bits_to_double(0x08) == std::ldexp(1.0, -6));     // smallest normal
  CHECK(fp8_e4m3_bits_to_double(0x3c) == 1.5);                     // 0.0111.100
  CHECK(fp8_e4m3_bits_to_double(0xc0) == -2.0);                    // 1.1000.000
  CHECK(fp8_e4m3_bits_to_double(0x00) == 0.0);
  CHECK(std::signbit(fp8_e4m3_bits_to_double(0x80))); // -0
  CHECK(fp8_e4m3_bits_to_double(0x78) == 256.0);      // 0.1111.000: finite (no infinity)
  CHECK(std::isnan(fp8_e4m3_bits_to_double(0x7f)));   // the only NaN patterns
  CHECK(std::isnan(fp8_e4m3_bits_to_double(0xff)));   // (0xff is also the poison byte)
  int num_nan = 0;
  for (int bits = 0; bits < 256; ++bits)
    num_nan += std::isnan(fp8_e4m3_bits_to_double(static_cast<std::uint8_t>(bits))) ? 1 : 0;
  CHECK(num_nan == 2);
}

TEST_CASE("element-wise references") {
  const Vec x{-1.0, 0.0, 2.0}, y{1.0, 2.0, 3.0};
  CHECK(elementwise_reference(ElementwiseKind::relu, x, {}, 0) == Vec{0.0, 0.0, 2.0});
  CHECK(elementwise_reference(ElementwiseKind::add, x, y, 0) == Vec{0.0, 2.0, 5.0});
  CHECK(elementwise_reference(ElementwiseKind::scale, x, {}, 0.5) == Vec{-0.5, 0.0, 1.0});
  // gelu_tanh(1) = 0.5 (1 + tanh(0.79788456 * 1.044715)) = 0.8411920
  CHECK(elementwise_reference(ElementwiseKind::gelu, Vec{1.0}, {}, 0)[0] ==
        doctest::Approx(0.8411920).epsilon(1e-6));
}

TEST_CASE("gemm reference: 2x2 by hand") {
  // [1 2; 3 4] x [5 6; 7 8] = [19 22; 43 50]
  const Vec a{1, 2, 3, 4}, b{5, 6, 7, 8};
  CHECK(gemm_reference(a, b, 2, 2, 2) == Vec{19, 22, 43, 50});
  CHECK(gemm_reference_entry(a, b, 2, 2, 1, 0) == 43);
  // Non-square: [1 2 3] x [1; 1; 1] = [6]
  CHECK(gemm_reference(Vec{1, 2, 3}, Vec{1, 1, 1}, 1, 1, 3) == Vec{6});
  // B stored transposed, [n, k]: B^T of [5 6; 7 8] is [5 7; 6 8]; every entry agrees.
  const Vec bt{5, 7, 6, 8};
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 2; ++j)
      CHECK(gemm_bt_reference_entry(a, bt, 2, i, j) == gemm_reference_entry(a, b, 2, 2, i, j));
  // [1 x 3] x ([2 x 3])^T: [1 2 3] . [1 0 1] = 4, [1 2 3] . [0 1 0] = 2
  CHECK(gemm_bt_reference_entry(Vec{1, 2, 3}, Vec{1, 0, 1, 0, 1, 0}, 3, 0, 0) == 4);
  CHECK(gemm_bt_reference_entry(Vec{1, 2, 3}, Vec{1, 0, 1, 0, 1, 0}, 3, 0, 1) == 2);
}

TEST_CASE("softmax forward, causal mask and backward") {
  // softmax([0, ln 3]) = [1/4, 3/4]
  const Vec y = softmax_reference(Vec{0.0, std::log(3.0)}, 1, 2, 1.0, false);
  CHECK(y[0] == doctest::Approx(0.25));
  CHECK(y[1] == doctest::Approx(0.75));
  // causal over a [2, 2] block: row 0 sees only column 0.
  const Vec yc = softmax_reference(Vec{5.0, 7.0, 0.0, 0.0}, 2, 2, 1.0, true);
  CHECK(yc == Vec{1.0, 0.0, 0.5, 0.5});
  // dx = y (dy - y.dy): y = [1/4, 3/4], dy = [1, 0] -> y.dy = 1/4 -> [3/16, -3/16]
  const Vec dx = softmax_backward_reference(y, Vec{1.0, 0.0}, 1, 2);
  CHECK(dx[0] == doctest::Approx(3.0 / 16));
  CHECK(dx[1] == doctest::Approx(-3.0 / 16));
}

TEST_CASE("layernorm and rmsnorm by hand") {
  // x = [1, 3]: mean 2, var 1, rstd = 1/sqrt(1 + eps) ~ 1 -> y = [-1, 1] * gamma + beta
  const NormForward f = layernorm_reference(Vec{1, 3}, Vec{2, 2}, Vec{1, 1}, 1, 2, 0.0);
  CHECK(f.y[0] == doctest::Approx(-1.0));
  CHECK(f.y[1] == doctest::Approx(3.0));
  CHECK(f.mean[0] == 2.0);
  // rms([3, 4]) = sqrt(12.5): y = x / sqrt(12.5)
  const NormForward r = rmsnorm_reference(Vec{3, 4}, Vec{1, 1}, 1, 2, 0.0);
  CHECK(r.y[1] == doctest::Approx(4.0 / std::sqrt(12.5)));
}

namespace {
/// Finite-difference check of a norm's backward: d/dx_i sum(y * dy).
template <class Fwd, class Bwd> void check_norm_gradient(Fwd fwd, Bwd bwd) {
  const Vec x{0.3, -1.2, 2.0, 0.7, -0.1, 1.5}, g{1.1, 0.9, 1.3, 0.8, 1.0, 1.2};
  const Vec dy{0.5, -0.25, 1.0, 0.3, -0.7, 0.2};
  const NormBackward b = bwd(x, g, dy);
  const double h = 1e-6;
  for (std::size_t i = 0; i < x.size(); ++i) {
    Vec xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    const Vec yp = fwd(xp, g), ym = fwd(xm, g);
    double num = 0;
    for (std::size_t j = 0; j < x.size(); ++j)
      num += (yp[j] - ym[j]) * dy[j] / (2 * h);
    CHECK(b.dx[i] == doctest::Approx(num).epsilon(1e-6));
  }
}
} // namespace

TEST_CASE("norm backward matches finite differences (2 rows of 3)") {
  check_norm_gradient(
      [](const Vec& x, const Vec& g) {
        Vec gg(g.begin(), g.begin() + 3);
        return layernorm_reference(x, gg, Vec(3, 0.0), 2, 3, 1e-5).y;
      },
      [](const Vec& x, const Vec& g, const Vec& dy) {
        return layernorm_backward_reference(x, Vec(g.begin(), g.begin() + 3), dy, 2, 3, 1e-5);
      });
  check_norm_gradient(
      [](const Vec& x, const Vec& g) {
        return rmsnorm_reference(x, Vec(g.begin(), g.begin() + 3), 2, 3, 1e-6).y;
      },
      [](const Vec& x, const Vec& g, const Vec& dy) {
        return rmsnorm_backward_reference(x, Vec(g.begin(), g.begin() + 3), dy, 2, 3, 1e-6);
      });
}

TEST_CASE("attention reference: uniform scores average V; causal first row copies V[0]") {
  // q = 0 -> all scores 0 -> O = mean of V rows; lse = ln(seq).
  const Vec q(4, 0.0), k{1, 2, 3, 4}, v{1, 10, 3, 30}; // seq 2, head_dim 2
  const AttentionForward f = attention_reference(q, k, v, 1, 2, 2, false, 1.0);
  CHECK(f.o[0] == doctest::Approx(2.0));
  CHECK(f.o[1] == doctest::Approx(20.0));
  CHECK(f.lse[0] == doctest::Approx(std::log(2.0)));
  const AttentionForward c = attention_reference(q, k, v, 1, 2, 2, true, 1.0);
  CHECK(c.o[0] == doctest::Approx(1.0));
  CHECK(c.o[1] == doctest::Approx(10.0));
  CHECK(c.lse[0] == doctest::Approx(0.0));
}

TEST_CASE("attention backward matches finite differences") {
  const std::int64_t s = 3, d = 2;
  const Vec q{0.1, -0.4, 0.8, 0.3, -0.6, 0.2}, k{0.5, 0.1, -0.3, 0.9, 0.2, -0.7};
  const Vec v{1.0, -1.0, 0.5, 2.0, -0.5, 0.3}, dout{0.3, -0.2, 0.7, 0.1, -0.4, 0.6};
  for (bool causal : {false, true}) {
    const AttentionBackward g = attention_backward_head_reference(q.data(), k.data(), v.data(),
                                                                  dout.data(), s, d, causal, 0.7);
    auto loss = [&](const Vec& qq, const Vec& kk, const Vec& vv) {
      const Vec o = attention_reference(qq, kk, vv, 1, s, d, causal, 0.7).o;
      double l = 0;
      for (std::size_t i = 0; i < o.size(); ++i)
        l += o[i] * dout[i];
      return l;
    };
    const double h = 1e-6;
    for (std::size_t i = 0; i < q.size(); ++i) {
      Vec p = q, m = q;
      p[i] += h;
      m[i] -= h;
      CHECK(g.dq[i] == doctest::Approx((loss(p, k, v) - loss(m, k, v)) / (2 * h)).epsilon(1e-6));
      p = k;
      m = k;
      p[i] += h;
      m[i] -= h;
      CHECK(g.dk[i] == doctest::Approx((loss(q, p, v) - loss(q, m, v)) / (2 * h)).epsilon(1e-6));
      p = v;
      m = v;
      p[i] += h;
      m[i] -= h;
      CHECK(g.dv[i] == doctest::Approx((loss(q, k, p) - loss(q, k, m)) / (2 * h)).epsilon(1e-6));
    }
  }
}

TEST_CASE("comparison: NaN never passes; limits per dtype") {
  const Vec ref{1.0, 2.0};
  CHECK(passes(compare_to_reference(Vec{1.0, 2.0}, ref), Dtype::fp32));
  CHECK_FALSE(passes(compare_to_reference(Vec{1.0, NAN}, ref), Dtype::bf16));
  // error 0.01 on norm sqrt(5): rel = 0.01 / 2.236 = 4.5e-3: passes bf16 (2e-2), fails fp32.
  const ErrorStats e = compare_to_reference(Vec{1.01, 2.0}, ref);
  CHECK(e.rel_l2_err == doctest::Approx(0.01 / std::sqrt(5.0)));
  CHECK(passes(e, Dtype::bf16));
  CHECK_FALSE(passes(e, Dtype::fp32));
  CHECK(relative_error_limit(Dtype::tf32) == 2e-3);
}
