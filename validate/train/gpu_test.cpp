// GPU tests of the training step (ctest label "gpu"): (a) gradients of a tiny model match the
// float64 CPU reference (fp32 naive exactly to rounding, every recompute policy; bf16 flash and
// naive to bf16 tolerance); (b) the loss falls on the synthetic repeating-sequence task;
// (c) every DDP variant, accumulation and ZeRO-1 give the parameters of plain training, on one
// GPU and, when two are visible, across two. Exits 77 (ctest SKIP) without a CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "validate/train/train.hpp"

using namespace trainsim;
using namespace trainsim::val::train;

namespace {

model::ModelSpec tiny(std::int64_t hidden, std::int64_t heads) {
  model::ModelSpec m;
  m.name = "tiny";
  m.num_layers = 2;
  m.hidden_size = hidden;
  m.num_heads = heads;
  m.num_kv_heads = heads;
  m.head_dim = hidden / heads;
  m.ffn_hidden_size = hidden * 8 / 3 / 16 * 16;
  m.vocab_size = 97;
  m.max_seq_len = 1024;
  return m;
}

TrainOptions base(model::ModelSpec m, model::Precision p, model::AttentionImpl a,
                  std::int64_t seq) {
  TrainOptions o;
  o.model = std::move(m);
  o.batch_size = 2;
  o.seq_len = seq;
  o.precision = p;
  o.attention = a;
  o.steps = 1;
  o.warmup = 0;
  o.capture_params = true;
  return o;
}

/// Worst per-tensor ||gpu - ref|| / ||ref|| of the first gradient, after checking the loss.
double grad_error(const TrainOptions& o) {
  const TrainResult r = run_train_step(o);
  const ParamLayout l = make_layout(o.model, "tiny");
  std::vector<double> p(r.initial_params.begin(),
                        r.initial_params.begin() +
                            static_cast<std::ptrdiff_t>(l.num_padded_params));
  const TokenBatch b =
      synthetic_batch(o.batch_size, o.seq_len, o.model.vocab_size, o.seed, 0, o.data_period);
  std::vector<double> g;
  const double loss = reference_loss(l, p, b, &g);
  INFO("loss gpu " << r.losses.at(0) << " reference " << loss);
  CHECK(r.losses.at(0) ==
        doctest::Approx(loss).epsilon(o.precision == model::Precision::fp32 ? 1e-5 : 2e-2));
  double worst = 0;
  for (const ParamTensor& t : l.tensors) {
    double num = 0, den = 0;
    for (std::int64_t i = 0; i < t.num_elements(); ++i) {
      const auto k = static_cast<std::size_t>(t.offset + i);
      const double d = static_cast<double>(r.first_grads[k]) - g[k];
      num += d * d;
      den += g[k] * g[k];
    }
    const double rel = std::sqrt(num / std::max(den, 1e-300));
    if (rel > worst)
      MESSAGE(t.name << ": relative gradient error " << rel);
    worst = std::max(worst, rel);
  }
  return worst;
}

// Over the common prefix: the flat buffers are padded to a multiple of 16 x ranks.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(!a.empty());
  REQUIRE(!b.empty());
  double m = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

/// Root-mean-square difference: robust to the few elements whose tiny gradient, a sum with
/// cancellation, changes sign with the summation order (Adam then moves them by -lr, not lr).
double rms_diff(const std::vector<float>& a, const std::vector<float>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  REQUIRE(n > 0);
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    s += d * d;
  }
  return std::sqrt(s / static_cast<double>(n));
}

int visible_gpus() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

} // namespace

TEST_CASE("gradients: fp32 naive attention matches the float64 reference, every recompute") {
  for (model::Recompute rc :
       {model::Recompute::none, model::Recompute::selective, model::Recompute::full}) {
    TrainOptions o = base(tiny(64, 4), model::Precision::fp32, model::AttentionImpl::naive, 16);
    o.recompute = rc;
    const double err = grad_error(o);
    MESSAGE("fp32 naive recompute " << model::to_string(rc) << ": worst relative error " << err);
    CHECK(err < 1e-4);
  }
}

TEST_CASE("gradients: bf16-mixed flash and naive attention match the reference to bf16 tolerance") {
  for (model::AttentionImpl a : {model::AttentionImpl::flash, model::AttentionImpl::naive})
    for (model::Recompute rc : {model::Recompute::none, model::Recompute::full}) {
      TrainOptions o = base(tiny(128, 2), model::Precision::bf16_mixed, a, 64);
      o.recompute = rc;
      const double err = grad_error(o);
      MESSAGE("bf16 " << model::to_string(a) << " recompute " << model::to_string(rc)
                      << ": worst relative error " << err);
      CHECK(err < 0.1);
    }
}

TEST_CASE("training: the loss falls on the repeating-sequence task") {
  for (model::Precision p : {model::Precision::fp32, model::Precision::bf16_mixed}) {
    TrainOptions o = base(tiny(128, 2), p,
                          p == model::Precision::fp32 ? model::AttentionImpl::naive
                                                      : model::AttentionImpl::flash,
                          64);
    o.batch_size = 8;
    o.steps = 40; // the float64 reference, same task and lr: 4.61 -> 0.004 nats in 40 steps
    o.capture_params = false;
    o.adamw.lr = 3e-3;
    o.adamw.weight_decay = 0.0;
    const TrainResult r = run_train_step(o);
    MESSAGE(model::to_string(p) << ": loss " << r.losses.front() << " -> " << r.losses.back());
    CHECK(r.losses.front() == doctest::Approx(std::log(97.0)).epsilon(0.1));
    CHECK(r.losses.back() < 0.25 * r.losses.front());
  }
}

TEST_CASE("data parallel: every gradient sync, accumulation and ZeRO-1 match plain training") {
  for (model::Precision p : {model::Precision::fp32, model::Precision::bf16_mixed}) {
    const auto attn =
        p == model::Precision::fp32 ? model::AttentionImpl::naive : model::AttentionImpl::flash;
    const double tol = p == model::Precision::fp32 ? 0.02 : 0.1;
    TrainOptions ref = base(tiny(128, 2), p, attn, 32);
    ref.steps = 3;
    ref.batch_size = 4;
    const TrainResult plain = run_train_step(ref);
    const int gpus = std::min(visible_gpus(), 2);
    for (int n = 1; n <= gpus; ++n)
      for (DdpMode m :
           {DdpMode::naive, DdpMode::flat, DdpMode::overlapped, DdpMode::bucketed, DdpMode::none}) {
        TrainOptions o = ref;
        o.num_gpus = n;
        o.batch_size = ref.batch_size / n;
        o.ddp = m;
        o.bucket_bytes = 0.01 * 1024 * 1024; // several buckets even on the tiny model
        if (m == DdpMode::none)
          o.zero_stage = 1;
        const TrainResult r = run_train_step(o);
        const double diff = max_abs_diff(r.final_params, plain.final_params);
        const double rms = rms_diff(r.final_params, plain.final_params);
        MESSAGE(model::to_string(p)
                << " dp " << n << " ddp " << to_string(m) << " ZeRO-" << o.zero_stage
                << ": max |param - plain| " << diff << ", rms " << rms);
        // Not bitwise even on one rank: the embedding, RMSNorm-gain and flash dQ gradients
        // use atomics, so summation order varies run to run. Adam normalises, so compare the
        // RMS parameter difference with a fraction of lr (bf16 gradients round more).
        CHECK(rms <= tol * o.adamw.lr);
      }
    TrainOptions acc = ref;
    acc.batch_size = ref.batch_size / 2;
    acc.grad_accumulation = 2;
    const TrainResult ra = run_train_step(acc);
    const double rms = rms_diff(ra.final_params, plain.final_params);
    MESSAGE(model::to_string(p) << " accumulation 2: max |param - plain| "
                                << max_abs_diff(ra.final_params, plain.final_params) << ", rms "
                                << rms);
    CHECK(rms <= tol * acc.adamw.lr);
  }
}

TEST_CASE("memory: states are counted exactly, activations climb, recompute full keeps less") {
  TrainOptions o =
      base(tiny(128, 2), model::Precision::bf16_mixed, model::AttentionImpl::flash, 64);
  o.capture_params = false;
  o.steps = 2;
  const TrainResult none = run_train_step(o);
  const double p = static_cast<double>(none.num_padded_params);
  const auto at = [](const TrainResult& r, MemCategory c) {
    return r.peak_bytes[static_cast<std::size_t>(c)];
  };
  // bf16 weights 2 B, bf16 gradients 2 B, fp32 master + m + v 12 B per parameter (256 B rounding).
  CHECK(at(none, MemCategory::weights) == doctest::Approx(2 * p).epsilon(0.01));
  CHECK(at(none, MemCategory::gradients) == doctest::Approx(2 * p).epsilon(0.01));
  CHECK(at(none, MemCategory::optimizer) == doctest::Approx(12 * p).epsilon(0.01));
  CHECK(at(none, MemCategory::activations) > 0);
  CHECK(!none.timeline.empty());
  o.recompute = model::Recompute::full;
  const TrainResult full = run_train_step(o);
  CHECK(at(full, MemCategory::activations) < at(none, MemCategory::activations));
}

int main(int argc, char** argv) {
  if (visible_gpus() == 0) {
    std::printf("SKIP: no CUDA device visible\n");
    return 77;
  }
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  return ctx.run();
}
