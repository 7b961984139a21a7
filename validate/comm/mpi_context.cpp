// MPI implementation of MpiContext (OpenMPI or any MPI-3 library) and of the bootstrap check
// used by the CPU-only mpirun test: MPI init, rank/size, broadcast of a 128-byte id, compare.
#include "validate/comm/mpi_context.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <exception>
#include <random>

#include "common/errors.hpp"
#include "validate/comm/collectives.hpp"

#define MPI_CHECK(call)                                                                            \
  do {                                                                                             \
    int mpi_rc_ = (call);                                                                          \
    if (mpi_rc_ != MPI_SUCCESS) {                                                                  \
      char mpi_msg_[MPI_MAX_ERROR_STRING];                                                         \
      int mpi_len_ = 0;                                                                            \
      MPI_Error_string(mpi_rc_, mpi_msg_, &mpi_len_);                                              \
      throw ::trainsim::DeviceError(fmt::format("{}:{}: {} failed: {}", __FILE__, __LINE__, #call, \
                                                std::string(mpi_msg_, mpi_len_)));                 \
    }                                                                                              \
  } while (0)

namespace trainsim::val {

bool built_with_mpi() { return true; }

namespace detail {

MpiContext::MpiContext() : uncaught_at_start_(std::uncaught_exceptions()) {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    MPI_CHECK(MPI_Init(nullptr, nullptr));
    finalize_ = true;
  }
  int rank = 0, size = 1, local = 0, local_size = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  MPI_Comm node;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  MPI_CHECK(MPI_Comm_rank(node, &local));
  MPI_CHECK(MPI_Comm_size(node, &local_size));
  MPI_Comm_free(&node);
  rank_ = rank;
  size_ = size;
  local_rank_ = local;
  local_size_ = local_size;
}

MpiContext::~MpiContext() {
  if (std::uncaught_exceptions() > uncaught_at_start_)
    return; // see header
  finalize();
}

void MpiContext::finalize() {
  if (!finalize_)
    return;
  finalize_ = false;
  MPI_Finalize();
}

void MpiContext::broadcast(std::vector<unsigned char>& bytes) const {
  MPI_CHECK(MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, MPI_COMM_WORLD));
}

bool MpiContext::all_equal(const std::vector<unsigned char>& bytes) const {
  const auto n = static_cast<int>(bytes.size());
  std::vector<unsigned char> all(bytes.size() * static_cast<std::size_t>(size_));
  MPI_CHECK(MPI_Allgather(bytes.data(), n, MPI_BYTE, all.data(), n, MPI_BYTE, MPI_COMM_WORLD));
  for (std::int64_t r = 1; r < size_; ++r)
    if (!std::equal(all.begin(), all.begin() + n, all.begin() + r * n))
      return false;
  return true;
}

double MpiContext::max(double value) const {
  double out = 0;
  MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

std::int64_t MpiContext::sum(std::int64_t value) const {
  long long in = value, out = 0;
  MPI_CHECK(MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
  return out;
}

std::int64_t MpiContext::min(std::int64_t value) const {
  long long in = value, out = 0;
  MPI_CHECK(MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD));
  return out;
}

std::vector<std::string> MpiContext::gather(const std::string& value) const {
  constexpr int kWidth = 256;
  std::vector<char> mine(kWidth, '\0');
  std::copy_n(value.begin(), std::min<std::size_t>(value.size(), kWidth - 1), mine.begin());
  std::vector<char> all(rank_ == 0 ? static_cast<std::size_t>(kWidth * size_) : 0);
  MPI_CHECK(
      MPI_Gather(mine.data(), kWidth, MPI_CHAR, all.data(), kWidth, MPI_CHAR, 0, MPI_COMM_WORLD));
  std::vector<std::string> out;
  if (rank_ == 0)
    for (std::int64_t r = 0; r < size_; ++r)
      out.emplace_back(all.data() + r * kWidth);
  return out;
}

void MpiContext::barrier() const { MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }

} // namespace detail

BootstrapResult bootstrap_check() {
  detail::MpiContext mpi;
  // 128 bytes = sizeof(ncclUniqueId) (NCCL_UNIQUE_ID_BYTES); random on rank 0 so a rank that
  // kept its own buffer would not match by accident.
  std::vector<unsigned char> id(128, 0);
  if (mpi.rank() == 0) {
    std::random_device rd;
    for (auto& b : id)
      b = static_cast<unsigned char>(rd());
  }
  mpi.broadcast(id);
  BootstrapResult result;
  result.rank = mpi.rank();
  result.num_ranks = mpi.size();
  result.local_rank = mpi.local_rank();
  result.id_bytes = static_cast<std::int64_t>(id.size());
  result.ids_match = mpi.all_equal(id);
  return result;
}

} // namespace trainsim::val
