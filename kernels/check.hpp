// CUDA_CHECK / CUBLAS_CHECK: turn a failed CUDA runtime or cuBLAS call into trainsim::DeviceError
// naming file:line, the call text, the library's error name and its description (as nvbench
// does). CUDA_CHECK_LAUNCH() checks cudaGetLastError() after a kernel launch.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace trainsim::kern {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

} // namespace trainsim::kern

#define CUDA_CHECK(call)                                                                           \
  do {                                                                                             \
    cudaError_t trainsim_err_ = (call);                                                            \
    if (trainsim_err_ != cudaSuccess)                                                              \
      ::trainsim::kern::throw_cuda_error(trainsim_err_, #call, __FILE__, __LINE__);                \
  } while (0)

#define CUBLAS_CHECK(call)                                                                         \
  do {                                                                                             \
    cublasStatus_t trainsim_st_ = (call);                                                          \
    if (trainsim_st_ != CUBLAS_STATUS_SUCCESS)                                                     \
      ::trainsim::kern::throw_cublas_error(trainsim_st_, #call, __FILE__, __LINE__);               \
  } while (0)

/// Non-throwing variant for destructors: the error is dropped (cleanup must not throw).
#define CUDA_CHECK_NOTHROW(call) static_cast<void>(call)

#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
