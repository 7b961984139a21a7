// Internal: the MPI side of the collective benchmarks behind a pure interface (no <mpi.h> here),
// so the NCCL runner compiles with or without MPI. mpi_context.cpp implements it with MPI;
// mpi_context_stub.cpp throws DeviceError("built without MPI ...").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::val::detail {

/// MPI_Init on construction (unless already initialised), MPI_Finalize on destruction unless
/// an exception is unwinding (a finalize then could wait forever on ranks that failed; mpirun
/// ends the job when a rank exits without finalizing). Move-less: one per process.
class MpiContext {
 public:
  MpiContext();
  ~MpiContext();
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

  [[nodiscard]] std::int64_t rank() const { return rank_; }
  [[nodiscard]] std::int64_t size() const { return size_; }
  /// Rank among the processes on this host (MPI_Comm_split_type SHARED).
  [[nodiscard]] std::int64_t local_rank() const { return local_rank_; }
  /// Processes on this host.
  [[nodiscard]] std::int64_t local_size() const { return local_size_; }

  /// Broadcasts `bytes` from rank 0 (MPI_Bcast of MPI_BYTE).
  void broadcast(std::vector<unsigned char>& bytes) const;
  /// True on every rank iff every rank holds the same bytes as rank 0 (MPI_Allgather).
  [[nodiscard]] bool all_equal(const std::vector<unsigned char>& bytes) const;
  [[nodiscard]] double max(double value) const;
  [[nodiscard]] std::int64_t sum(std::int64_t value) const;
  [[nodiscard]] std::int64_t min(std::int64_t value) const;
  /// Each rank's string, in rank order, on rank 0 (other ranks get an empty list).
  [[nodiscard]] std::vector<std::string> gather(const std::string& value) const;
  void barrier() const;
  /// Finalizes now (idempotent); used before throwing an error every rank agreed on.
  void finalize();

 private:
  std::int64_t rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  // Read by the MPI build (mpi_context.cpp), not by the stub: clang's -Wunused-private-field.
  [[maybe_unused]] bool finalize_ = false;
  [[maybe_unused]] int uncaught_at_start_ = 0;
};

} // namespace trainsim::val::detail
