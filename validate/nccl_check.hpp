// NCCL plumbing shared by every NCCL runner (validate/comm's benchmark and overlap probe,
// validate/train's data-parallel step): NCCL_CHECK throws DeviceError with file:line, the call
// text and NCCL's error string (nvbench's habit; CUDA_CHECK comes from kernels/check.hpp), and
// communicator cleanup that never throws and aborts instead of waiting on a failed peer
// (nccl-tests' habit). Include only where NCCL was found (TRAINSIM_HAVE_NCCL).
#pragma once

#include <exception>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nccl.h>

#include "common/errors.hpp"
#include "kernels/check.hpp"

/// ncclInProgress is not an error: a non-blocking communicator's call was queued.
#define NCCL_CHECK(call)                                                                           \
  do {                                                                                             \
    ncclResult_t nccl_rc_ = (call);                                                                \
    if (nccl_rc_ != ncclSuccess && nccl_rc_ != ncclInProgress)                                     \
      throw ::trainsim::DeviceError(fmt::format(                                                   \
          "{}:{}: {} failed: NCCL error {}: {} ({})", __FILE__, __LINE__, #call,                   \
          static_cast<int>(nccl_rc_), ncclGetErrorString(nccl_rc_), ncclGetLastError(nullptr)));   \
  } while (0)

namespace trainsim::val {

/// Releases a communicator (null: nothing): ncclCommAbort when `abort` (a peer failed, so a
/// destroy could wait forever), else ncclCommDestroy. Errors are dropped (cleanup must not throw).
inline void release_communicator(ncclComm_t comm, bool abort) noexcept {
  if (comm)
    static_cast<void>(abort ? ncclCommAbort(comm) : ncclCommDestroy(comm));
}

/// release_communicator for each of `comms`.
inline void release_communicators(const std::vector<ncclComm_t>& comms, bool abort) noexcept {
  for (ncclComm_t c : comms)
    release_communicator(c, abort);
}

/// Owns one communicator: destroys it, or aborts it when destroyed during exception unwinding
/// (a destroy could then wait forever on a peer that failed).
class Communicator {
 public:
  Communicator() = default;
  explicit Communicator(ncclComm_t comm) : comm_(comm), uncaught_(std::uncaught_exceptions()) {}
  Communicator(Communicator&& o) noexcept
      : comm_(std::exchange(o.comm_, nullptr)), uncaught_(o.uncaught_) {}
  Communicator& operator=(Communicator&& o) noexcept {
    std::swap(comm_, o.comm_);
    std::swap(uncaught_, o.uncaught_);
    return *this;
  }
  ~Communicator() { release_communicator(comm_, std::uncaught_exceptions() > uncaught_); }
  [[nodiscard]] ncclComm_t get() const { return comm_; }

 private:
  ncclComm_t comm_ = nullptr;
  int uncaught_ = 0;
};

} // namespace trainsim::val
