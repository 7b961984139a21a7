// cuBLASLt and cublasGemmEx GEMM launchers (gemm.cuh). Row-major C[m,n] = A[m,k] B[k,n] is the
// column-major C'[n,m] = B'[n,k] A'[k,m] over the same memory. fp8 follows cuBLASLt's fp8 rules
// (cublasLtMatmul docs, Hopper): e4m3 A and B, fp32 compute and scale, bf16 C/D, A transposed
// and B not ("TN"), 16-byte aligned leading dimensions; scale pointers unset (= 1), fast
// accumulation off (the default: partial sums promoted to full fp32).
#include "kernels/gemm.cuh"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "common/errors.hpp"
#include "kernels/check.hpp"

namespace trainsim::kern {
namespace {

struct TypeInfo {
  cudaDataType_t data;   // A and B
  cudaDataType_t output; // C and D
  cublasComputeType_t compute;
};

TypeInfo type_info(Dtype d) {
  switch (d) {
  case Dtype::fp32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  case Dtype::tf32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
  case Dtype::fp16: return {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F};
  case Dtype::bf16: return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F};
  case Dtype::fp8: return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F};
  }
  throw ConfigError(
      fmt::format("gemm: dtype {} is not supported (fp32, tf32, fp16, bf16, fp8)", dtype_name(d)));
}

/// cuBLASLt's fp8 kernels need 16-byte aligned leading dimensions: m, n, k multiples of 16.
void check_fp8_shape(const GemmArgs& g) {
  if (g.dtype == Dtype::fp8 && (g.m % 16 != 0 || g.n % 16 != 0 || g.k % 16 != 0))
    throw ConfigError(fmt::format("gemm fp8: m = {}, n = {}, k = {}: must all be multiples of 16 "
                                  "(cuBLASLt fp8 alignment)",
                                  g.m, g.n, g.k));
}

/// The cuBLASLt descriptors and chosen algorithm for one problem; destroyed with the plan.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (a)
      static_cast<void>(cublasLtMatrixLayoutDestroy(a));
    if (b)
      static_cast<void>(cublasLtMatrixLayoutDestroy(b));
    if (c)
      static_cast<void>(cublasLtMatrixLayoutDestroy(c));
    if (desc)
      static_cast<void>(cublasLtMatmulDescDestroy(desc));
  }
};

using PlanKey =
    std::tuple<cublasLtHandle_t, int, std::int64_t, std::int64_t, std::int64_t, std::size_t>;

const LtPlan& get_plan(const GemmArgs& g) {
  static std::mutex mutex;
  static std::map<PlanKey, std::unique_ptr<LtPlan>> plans;
  const PlanKey key{g.lt, static_cast<int>(g.dtype), g.m, g.n, g.k, g.workspace_bytes};
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = plans.find(key); it != plans.end())
    return *it->second;
  auto plan = std::make_unique<LtPlan>();
  const TypeInfo t = type_info(g.dtype);
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, t.compute, CUDA_R_32F));
  if (g.dtype == Dtype::fp8) {
    // "TN": A' = B memory [n, k] row-major = column-major [k x n, ld k], used transposed;
    // B' = A memory [k x m, ld k]; C' [n x m, ld n] in bf16.
    const cublasOperation_t transa = CUBLAS_OP_T;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                                sizeof(transa)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, t.data, g.k, g.n, g.k));
  } else {
    // Column-major view: A' = B memory [n x k, ld n], B' = A memory [k x m, ld k], C' [n x m].
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, t.data, g.n, g.k, g.n));
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, t.data, g.k, g.m, g.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, t.output, g.n, g.m, g.n));
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::size_t ws = g.workspace_bytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(g.lt, plan->desc, plan->a, plan->b, plan->c, plan->c, pref,
                                        1, &result, &found);
  static_cast<void>(cublasLtMatmulPreferenceDestroy(pref));
  CUBLAS_CHECK(st);
  if (found == 0)
    throw DeviceError(fmt::format("cuBLASLt found no algorithm for {} gemm m={} n={} k={}",
                                  dtype_name(g.dtype), g.m, g.n, g.k));
  plan->algo = result.algo;
  return *plans.emplace(key, std::move(plan)).first->second;
}

} // namespace

void launch_gemm(const GemmArgs& g, cudaStream_t stream) {
  check_fp8_shape(g);
  if (g.m <= 0 || g.n <= 0 || g.k <= 0)
    return;
  const LtPlan& p = get_plan(g);
  CUBLAS_CHECK(cublasLtMatmul(g.lt, p.desc, &g.alpha, g.b, p.a, g.a, p.b, &g.beta, g.c, p.c, g.c,
                              p.c, &p.algo, g.workspace, g.workspace_bytes, stream));
}

void launch_gemm_cublas(const GemmArgs& g, cudaStream_t stream) {
  if (g.dtype == Dtype::fp8)
    throw ConfigError("gemm: fp8 GEMM runs only through cuBLASLt (cublasGemmEx has no fp8 path); "
                      "use the cublaslt implementation");
  if (g.m <= 0 || g.n <= 0 || g.k <= 0)
    return;
  const TypeInfo t = type_info(g.dtype);
  CUBLAS_CHECK(cublasSetStream(g.cublas, stream));
  CUBLAS_CHECK(cublasGemmEx(g.cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(g.n),
                            static_cast<int>(g.m), static_cast<int>(g.k), &g.alpha, g.b, t.data,
                            static_cast<int>(g.n), g.a, t.data, static_cast<int>(g.k), &g.beta, g.c,
                            t.data, static_cast<int>(g.n), t.compute, CUBLAS_GEMM_DEFAULT));
}

} // namespace trainsim::kern
