// Internal: CUDA_CHECK / NCCL_CHECK throw DeviceError with file:line, the call text and the
// library's error name and string (nvbench's habit). Included only by validate/comm sources.
#pragma once

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "common/errors.hpp"

#define CUDA_CHECK(call)                                                                           \
  do {                                                                                             \
    cudaError_t cuda_rc_ = (call);                                                                 \
    if (cuda_rc_ != cudaSuccess)                                                                   \
      throw ::trainsim::DeviceError(fmt::format("{}:{}: {} failed: {}: {}", __FILE__, __LINE__,    \
                                                #call, cudaGetErrorName(cuda_rc_),                 \
                                                cudaGetErrorString(cuda_rc_)));                    \
  } while (0)

#define NCCL_CHECK(call)                                                                           \
  do {                                                                                             \
    ncclResult_t nccl_rc_ = (call);                                                                \
    if (nccl_rc_ != ncclSuccess && nccl_rc_ != ncclInProgress)                                     \
      throw ::trainsim::DeviceError(fmt::format(                                                   \
          "{}:{}: {} failed: NCCL error {}: {} ({})", __FILE__, __LINE__, #call,                   \
          static_cast<int>(nccl_rc_), ncclGetErrorString(nccl_rc_), ncclGetLastError(nullptr)));   \
  } while (0)
