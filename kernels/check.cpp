// Builds the DeviceError messages behind CUDA_CHECK and CUBLAS_CHECK (check.hpp).
#include "kernels/check.hpp"

#include <fmt/format.h>

#include "common/errors.hpp"

namespace trainsim::kern {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw DeviceError(fmt::format("{}:{}: {} failed: {} ({})", file, line, call,
                                cudaGetErrorName(err), cudaGetErrorString(err)));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw DeviceError(fmt::format("{}:{}: {} failed: {} ({})", file, line, call,
                                cublasGetStatusName(status), cublasGetStatusString(status)));
}

} // namespace trainsim::kern
