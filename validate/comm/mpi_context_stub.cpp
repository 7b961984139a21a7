// Stand-in for mpi_context.cpp in builds without MPI: every use throws DeviceError naming the fix.
#include <string>

#include "common/errors.hpp"
#include "validate/comm/collectives.hpp"
#include "validate/comm/mpi_context.hpp"

namespace trainsim::val {

namespace {
[[noreturn]] void no_mpi() {
  throw DeviceError(
      "built without MPI: multi-process collectives need MPI; install libopenmpi-dev (and NCCL) "
      "and rebuild, or run single-process (one process driving all local GPUs)");
}
} // namespace

bool built_with_mpi() { return false; }
BootstrapResult bootstrap_check() { no_mpi(); }

namespace detail {
MpiContext::MpiContext() { no_mpi(); }
MpiContext::~MpiContext() = default;
void MpiContext::broadcast(std::vector<unsigned char>&) const { no_mpi(); }
bool MpiContext::all_equal(const std::vector<unsigned char>&) const { no_mpi(); }
double MpiContext::max(double) const { no_mpi(); }
std::int64_t MpiContext::sum(std::int64_t) const { no_mpi(); }
std::int64_t MpiContext::min(std::int64_t) const { no_mpi(); }
std::vector<std::string> MpiContext::gather(const std::string&) const { no_mpi(); }
void MpiContext::barrier() const { no_mpi(); }
void MpiContext::finalize() {}
} // namespace detail

} // namespace trainsim::val
