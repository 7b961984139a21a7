// NCCL runner for `bench collectives`: one process driving all local GPUs (ncclCommInitAll and
// ncclGroupStart/End over devices) or one rank per MPI process (ncclUniqueId sent by MPI_Bcast).
// Per size: warm-up, timed loop (host clock around `iters` launches and a polled wait, max over
// ranks), then a correctness pass on freshly filled inputs. Follows nccl-tests' common.cu.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "common/stats.hpp"
#include "validate/comm/collectives.hpp"
#include "validate/comm/mpi_context.hpp"
#include "validate/nccl_check.hpp"

namespace trainsim::val {

bool built_with_nccl() { return true; }

namespace {

// ---- RAII wrappers (move-only; destructors never throw) ----

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, std::size_t bytes) : device_(device), bytes_(bytes) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    CUDA_CHECK(cudaMemset(ptr_, 0, bytes));
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : device_(o.device_), bytes_(o.bytes_), ptr_(std::exchange(o.ptr_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(device_, o.device_);
    std::swap(bytes_, o.bytes_);
    std::swap(ptr_, o.ptr_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_) {
      cudaSetDevice(device_);
      cudaFree(ptr_);
    }
  }
  [[nodiscard]] unsigned char* data() const { return static_cast<unsigned char*>(ptr_); }

 private:
  int device_ = 0;
  std::size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

class Stream {
 public:
  Stream() = default;
  explicit Stream(int device) : device_(device) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  Stream(Stream&& o) noexcept : device_(o.device_), stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    std::swap(device_, o.device_);
    std::swap(stream_, o.stream_);
    return *this;
  }
  ~Stream() {
    if (stream_) {
      cudaSetDevice(device_);
      cudaStreamDestroy(stream_);
    }
  }
  [[nodiscard]] cudaStream_t get() const { return stream_; }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
};

// One rank driven by this process: its GPU, communicator, stream and buffers.
struct LocalRank {
  int device = 0;
  std::int64_t rank = 0;
  Stream stream;
  DeviceBuffer send, recv; // each max_bytes
  Communicator comm;
};

// ---- data patterns (exact in fp32, bf16 and fp16: small integers, sums <= 12 * P) ----

double pattern(std::int64_t rank, std::int64_t i) {
  return static_cast<double>((i * 7 + rank * 3 + 1) % 13);
}

// Encodes an integer-valued double (|v| <= 2048) in the dtype; exact for such values.
void encode(double v, Dtype dtype, unsigned char* out) {
  const auto f = static_cast<float>(v);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  if (dtype == Dtype::fp32) {
    std::memcpy(out, &bits, 4);
    return;
  }
  std::uint16_t h = 0;
  if (dtype == Dtype::bf16) {
    h = static_cast<std::uint16_t>(bits >> 16);
  } else { // fp16: sign, 5-bit exponent (bias 15), 10-bit mantissa; no subnormals needed here
    const std::uint32_t sign = (bits >> 16) & 0x8000u;
    if ((bits & 0x7fffffffu) != 0) {
      const std::uint32_t exponent = ((bits >> 23) & 0xffu) - 127u + 15u;
      h = static_cast<std::uint16_t>(sign | (exponent << 10) | ((bits & 0x7fffffu) >> 13));
    } else {
      h = static_cast<std::uint16_t>(sign);
    }
  }
  std::memcpy(out, &h, 2);
}

ncclDataType_t nccl_type(Dtype d) {
  switch (d) {
  case Dtype::bf16: return ncclBfloat16;
  case Dtype::fp16: return ncclFloat16;
  default: return ncclFloat32;
  }
}

// Where one op reads and writes, for one rank, one size, out-of-place or in-place.
struct Layout {
  unsigned char* input = nullptr;  // this rank's input region
  std::int64_t input_count = 0;    // elements in it
  unsigned char* output = nullptr; // this rank's output region
  std::int64_t output_count = 0;
};

Layout layout(CollectiveOp op, const LocalRank& r, std::int64_t nranks, std::int64_t count,
              std::size_t el, bool in_place) {
  unsigned char* send = in_place ? r.recv.data() : r.send.data();
  unsigned char* recv = r.recv.data();
  const std::int64_t part = count / nranks;
  switch (op) {
  case CollectiveOp::all_gather:
    return {in_place ? recv + r.rank * part * el : send, part, recv, count};
  case CollectiveOp::reduce_scatter:
    return {send, count, in_place ? recv + r.rank * part * el : recv, part};
  default: return {send, count, recv, count};
  }
}

// Expected output element j on `rank` (see nccl-tests' verifiable/ for the same idea).
double expected(CollectiveOp op, std::int64_t rank, std::int64_t nranks, std::int64_t count,
                std::int64_t j) {
  const std::int64_t part = count / nranks;
  switch (op) {
  case CollectiveOp::all_reduce: {
    double s = 0;
    for (std::int64_t q = 0; q < nranks; ++q)
      s += pattern(q, j);
    return s;
  }
  case CollectiveOp::all_gather: return pattern(j / part, j % part);
  case CollectiveOp::reduce_scatter: {
    double s = 0;
    for (std::int64_t q = 0; q < nranks; ++q)
      s += pattern(q, rank * part + j);
    return s;
  }
  case CollectiveOp::broadcast: return pattern(0, j);
  case CollectiveOp::all_to_all: return pattern(j / part, rank * part + j % part);
  case CollectiveOp::send_recv: return pattern((rank - 1 + nranks) % nranks, j);
  }
  return 0;
}

void launch(CollectiveOp op, const LocalRank& r, std::int64_t nranks, std::int64_t count,
            Dtype dtype, bool in_place) {
  const std::size_t el = static_cast<std::size_t>(dtype_bytes(dtype));
  const Layout l = layout(op, r, nranks, count, el, in_place);
  const ncclDataType_t t = nccl_type(dtype);
  ncclComm_t c = r.comm.get();
  cudaStream_t s = r.stream.get();
  const auto part = static_cast<std::size_t>(count / nranks);
  const auto n = static_cast<std::size_t>(count);
  switch (op) {
  case CollectiveOp::all_reduce:
    NCCL_CHECK(ncclAllReduce(l.input, l.output, n, t, ncclSum, c, s));
    break;
  case CollectiveOp::all_gather: NCCL_CHECK(ncclAllGather(l.input, l.output, part, t, c, s)); break;
  case CollectiveOp::reduce_scatter:
    NCCL_CHECK(ncclReduceScatter(l.input, l.output, part, t, ncclSum, c, s));
    break;
  case CollectiveOp::broadcast: NCCL_CHECK(ncclBroadcast(l.input, l.output, n, t, 0, c, s)); break;
  case CollectiveOp::all_to_all:
    NCCL_CHECK(ncclGroupStart());
    for (std::int64_t p = 0; p < nranks; ++p) {
      NCCL_CHECK(ncclSend(l.input + p * part * el, part, t, static_cast<int>(p), c, s));
      NCCL_CHECK(ncclRecv(l.output + p * part * el, part, t, static_cast<int>(p), c, s));
    }
    NCCL_CHECK(ncclGroupEnd());
    break;
  case CollectiveOp::send_recv:
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(l.input, n, t, static_cast<int>((r.rank + 1) % nranks), c, s));
    NCCL_CHECK(ncclRecv(l.output, n, t, static_cast<int>((r.rank - 1 + nranks) % nranks), c, s));
    NCCL_CHECK(ncclGroupEnd());
    break;
  }
}

// Launches the op on every local rank inside one group (required when one thread drives
// several GPUs of one communicator clique).
void launch_all(CollectiveOp op, std::vector<LocalRank>& ranks, std::int64_t nranks,
                std::int64_t count, Dtype dtype, bool in_place) {
  NCCL_CHECK(ncclGroupStart());
  for (const LocalRank& r : ranks)
    launch(op, r, nranks, count, dtype, in_place);
  NCCL_CHECK(ncclGroupEnd());
}

// Waits for every local stream, polling NCCL's async error and the timeout (nccl-tests'
// testStreamSynchronize).
void wait_all(std::vector<LocalRank>& ranks, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  for (LocalRank& r : ranks) {
    while (true) {
      const cudaError_t e = cudaStreamQuery(r.stream.get());
      if (e == cudaSuccess)
        break;
      if (e != cudaErrorNotReady)
        CUDA_CHECK(e);
      ncclResult_t async = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(r.comm.get(), &async));
      if (async != ncclSuccess && async != ncclInProgress)
        throw DeviceError(fmt::format("NCCL asynchronous error on rank {} (GPU {}): {} ({})",
                                      r.rank, r.device, ncclGetErrorString(async),
                                      ncclGetLastError(r.comm.get())));
      const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
      if (waited.count() > timeout_s)
        throw DeviceError(fmt::format(
            "NCCL wait on rank {} (GPU {}) exceeded --timeout-s = {} s; communicator aborted",
            r.rank, r.device, timeout_s));
    }
  }
}

void fill(const Layout& l, std::int64_t rank, Dtype dtype) {
  const auto el = static_cast<std::size_t>(dtype_bytes(dtype));
  std::vector<unsigned char> host(static_cast<std::size_t>(l.input_count) * el);
  for (std::int64_t i = 0; i < l.input_count; ++i)
    encode(pattern(rank, i), dtype, host.data() + i * el);
  CUDA_CHECK(cudaMemcpy(l.input, host.data(), host.size(), cudaMemcpyHostToDevice));
}

// Runs the op once on fresh inputs and counts output elements that differ bit-for-bit from the
// expected value (all values are small integers, so every dtype and reduction order is exact).
std::int64_t check(CollectiveOp op, std::vector<LocalRank>& ranks, std::int64_t nranks,
                   std::int64_t count, Dtype dtype, bool in_place, double timeout_s) {
  const auto el = static_cast<std::size_t>(dtype_bytes(dtype));
  for (LocalRank& r : ranks) {
    CUDA_CHECK(cudaSetDevice(r.device));
    const Layout l = layout(op, r, nranks, count, el, in_place);
    // Poison the output (0xff: NaN in every float format) so a no-op cannot pass.
    CUDA_CHECK(cudaMemset(r.recv.data(), 0xff, static_cast<std::size_t>(count) * el));
    fill(l, r.rank, dtype);
  }
  for (LocalRank& r : ranks) {
    CUDA_CHECK(cudaSetDevice(r.device));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  launch_all(op, ranks, nranks, count, dtype, in_place);
  wait_all(ranks, timeout_s);
  std::int64_t wrong = 0;
  std::vector<unsigned char> got, want(el);
  for (LocalRank& r : ranks) {
    CUDA_CHECK(cudaSetDevice(r.device));
    const Layout l = layout(op, r, nranks, count, el, in_place);
    got.resize(static_cast<std::size_t>(l.output_count) * el);
    CUDA_CHECK(cudaMemcpy(got.data(), l.output, got.size(), cudaMemcpyDeviceToHost));
    for (std::int64_t j = 0; j < l.output_count; ++j) {
      encode(expected(op, r.rank, nranks, count, j), dtype, want.data());
      if (std::memcmp(got.data() + j * el, want.data(), el) != 0)
        ++wrong;
    }
  }
  return wrong;
}

// Mean seconds per call over `iters` back-to-back launches (nccl-tests: one wait at the end),
// max over ranks; with repeats > 1 the median of that many such batches.
double time_op(CollectiveOp op, std::vector<LocalRank>& ranks, std::int64_t nranks,
               std::int64_t count, const CollectiveBenchOptions& o, bool in_place,
               const detail::MpiContext* mpi) {
  for (std::int64_t i = 0; i < o.warmup; ++i)
    launch_all(op, ranks, nranks, count, o.dtype, in_place);
  wait_all(ranks, o.timeout_s);
  std::vector<double> batches;
  for (std::int64_t r = 0; r < std::max<std::int64_t>(o.repeats, 1); ++r) {
    if (mpi)
      mpi->barrier();
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < o.iters; ++i)
      launch_all(op, ranks, nranks, count, o.dtype, in_place);
    wait_all(ranks, o.timeout_s);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    const double time_s = elapsed.count() / static_cast<double>(o.iters);
    batches.push_back(mpi ? mpi->max(time_s) : time_s);
  }
  return median(batches);
}

std::string version_string(int v) { // CUDA style: 13000 -> "13.0"
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string getenv_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0)
    return "";
  return name;
}

int visible_device_count() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError(); // clear the sticky error of the failed query
    return 0;
  }
  return count;
}

} // namespace

CollectiveReport run_collectives(const CollectiveBenchOptions& options) {
  validate(options);
  // The lent machines require NVLink multicast (NVLS) off; an explicit user setting wins.
  setenv("NCCL_NVLS_ENABLE", "0", 0);

  const bool use_mpi = options.mpi || launched_under_mpi();
  if (use_mpi && options.num_gpus > 1)
    throw ConfigError(
        fmt::format("gpus = {}: under MPI each rank drives one GPU; start more ranks instead",
                    options.num_gpus));

  std::optional<detail::MpiContext> mpi;
  std::vector<LocalRank> ranks;
  std::int64_t nranks = 0;
  const double max_bytes = options.max_bytes;
  const auto alloc_bytes =
      static_cast<std::size_t>(std::ceil(max_bytes / dtype_bytes(options.dtype))) *
      static_cast<std::size_t>(dtype_bytes(options.dtype));

  CollectiveReport report;
  CollectiveDeviceInfo& info = report.device;

  if (use_mpi) {
    mpi.emplace();
    nranks = mpi->size();
    // Rank 0 creates the id; one broadcast carries a status byte and the 128-byte id, so every
    // rank learns together whether to go on (no rank may be left waiting in a collective).
    std::vector<unsigned char> message(1 + sizeof(ncclUniqueId), 0);
    if (mpi->rank() == 0) {
      ncclUniqueId id;
      const ncclResult_t rc = ncclGetUniqueId(&id);
      message[0] = rc == ncclSuccess ? 1 : 0;
      std::memcpy(message.data() + 1, &id, sizeof(id));
    }
    mpi->broadcast(message);
    if (message[0] != 1) {
      mpi->finalize();
      throw DeviceError("ncclGetUniqueId failed on rank 0 (NCCL bootstrap network)");
    }
    const int count = visible_device_count();
    if (mpi->min(count) == 0) {
      mpi->finalize();
      throw NoDeviceError(fmt::format(
          "no CUDA device visible on at least one of {} MPI ranks (this rank sees {}): MPI "
          "bootstrap and id broadcast done; nothing to measure",
          nranks, count));
    }
    // NCCL rejects two ranks of one communicator on one GPU ("duplicate GPU").
    if (mpi->min(count >= mpi->local_size() ? 1 : 0) == 0) {
      mpi->finalize();
      throw NoDeviceError(fmt::format(
          "{} MPI ranks on this host but {} CUDA device(s): NCCL needs one GPU per rank; start "
          "at most {} ranks per host",
          mpi->local_size(), count, count));
    }
    LocalRank& r = ranks.emplace_back();
    r.device = static_cast<int>(mpi->local_rank() % count);
    r.rank = mpi->rank();
    CUDA_CHECK(cudaSetDevice(r.device));
    ncclUniqueId id;
    std::memcpy(&id, message.data() + 1, sizeof(id));
    ncclComm_t comm = nullptr;
    NCCL_CHECK(ncclCommInitRank(&comm, static_cast<int>(nranks), id, static_cast<int>(r.rank)));
    r.comm = Communicator(comm);
    info.launcher = "mpi";
  } else {
    const int count = visible_device_count();
    if (count == 0)
      throw NoDeviceError("no CUDA device visible (cudaGetDeviceCount)");
    if (options.num_gpus > count)
      throw ConfigError(
          fmt::format("gpus = {}: only {} CUDA device(s) visible", options.num_gpus, count));
    nranks = options.num_gpus > 0 ? options.num_gpus : count;
    std::vector<int> devices(static_cast<std::size_t>(nranks));
    for (int d = 0; d < nranks; ++d)
      devices[static_cast<std::size_t>(d)] = d;
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(nranks), nullptr);
    NCCL_CHECK(ncclCommInitAll(comms.data(), static_cast<int>(nranks), devices.data()));
    ranks.resize(static_cast<std::size_t>(nranks));
    for (std::int64_t i = 0; i < nranks; ++i) {
      auto& r = ranks[static_cast<std::size_t>(i)];
      r.comm = Communicator(comms[static_cast<std::size_t>(i)]);
      r.device = devices[static_cast<std::size_t>(i)];
      r.rank = i;
    }
    info.launcher = "single-process";
  }
  for (LocalRank& r : ranks) {
    r.stream = Stream(r.device);
    r.send = DeviceBuffer(r.device, alloc_bytes);
    r.recv = DeviceBuffer(r.device, alloc_bytes);
  }

  // ---- what ran where ----
  info.num_ranks = nranks;
  std::vector<std::string> names;
  for (const LocalRank& r : ranks) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, r.device));
    names.emplace_back(prop.name);
  }
  info.gpu_names = mpi ? mpi->gather(names.front()) : names;
  report.is_root = !mpi || mpi->rank() == 0;
  info.hostname = hostname();
  int nccl_version = 0, runtime_version = 0, driver_version = 0;
  NCCL_CHECK(ncclGetVersion(&nccl_version));
  info.nccl_version = fmt::format("{}.{}.{}", nccl_version / 10000, (nccl_version % 10000) / 100,
                                  nccl_version % 100);
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime_version));
  CUDA_CHECK(cudaDriverGetVersion(&driver_version));
  info.cuda_runtime_version = version_string(runtime_version);
  info.cuda_driver_version = version_string(driver_version);
  info.nccl_algo = getenv_or_empty("NCCL_ALGO");
  info.nccl_proto = getenv_or_empty("NCCL_PROTO");
  info.nccl_nvls_enable = getenv_or_empty("NCCL_NVLS_ENABLE");
  info.command_line = options.command_line;

  if (nranks == 1)
    report.notes.push_back(
        "P=1: no communication, times are launch + local copy (in-place calls have nothing "
        "to copy; busbw factor is 0 for all-reduce, all-gather, reduce-scatter and all-to-all, "
        "so their busbw prints 0)");
  report.notes.push_back(fmt::format(
      "NCCL_ALGO={} NCCL_PROTO={}: {}", info.nccl_algo.empty() ? "(unset)" : info.nccl_algo,
      info.nccl_proto.empty() ? "(unset)" : info.nccl_proto,
      info.nccl_algo.empty() && info.nccl_proto.empty()
          ? "NCCL picks algorithm and protocol per call; NCCL_DEBUG=INFO "
            "NCCL_DEBUG_SUBSYS=INIT,TUNING makes NCCL log its choices on stdout"
          : "as set in the environment; NCCL_DEBUG=INFO shows whether NCCL honoured them"));
  report.notes.push_back("time = max over ranks of the mean over --iters back-to-back calls "
                         "(host clock, one wait at the end, as nccl-tests)");

  // ---- measure ----
  const detail::MpiContext* mpi_ptr = mpi ? &*mpi : nullptr;
  for (CollectiveOp op : options.ops) {
    const bool has_in_place = op != CollectiveOp::all_to_all && op != CollectiveOp::send_recv;
    const bool reduces = op == CollectiveOp::all_reduce || op == CollectiveOp::reduce_scatter;
    for (double size : size_sweep(options.min_bytes, options.max_bytes, options.factor)) {
      const std::int64_t count = collective_count(op, size, options.dtype, nranks);
      if (count == 0)
        continue;
      CollectiveRow row;
      row.op = std::string(collective_name(op));
      row.bytes = static_cast<double>(count) * dtype_bytes(options.dtype);
      row.count = count;
      row.dtype = std::string(dtype_name(options.dtype));
      row.redop = reduces ? "sum" : "none";
      row.root = op == CollectiveOp::broadcast ? 0 : -1;
      row.num_ranks = nranks;
      const double factor = busbw_factor(op, nranks);

      row.time_s = time_op(op, ranks, nranks, count, options, false, mpi_ptr);
      row.algbw_bytes_per_s = row.bytes / row.time_s;
      row.busbw_bytes_per_s = row.algbw_bytes_per_s * factor;
      const double nan = std::numeric_limits<double>::quiet_NaN();
      row.in_place_time_s = row.in_place_algbw_bytes_per_s = row.in_place_busbw_bytes_per_s = nan;
      if (has_in_place) {
        row.in_place_time_s = time_op(op, ranks, nranks, count, options, true, mpi_ptr);
        row.in_place_algbw_bytes_per_s = row.bytes / row.in_place_time_s;
        row.in_place_busbw_bytes_per_s = row.in_place_algbw_bytes_per_s * factor;
      }
      row.wrong = row.in_place_wrong = -1;
      if (options.check) {
        std::int64_t wrong =
            check(op, ranks, nranks, count, options.dtype, false, options.timeout_s);
        row.wrong = mpi ? mpi->sum(wrong) : wrong;
        if (has_in_place) {
          wrong = check(op, ranks, nranks, count, options.dtype, true, options.timeout_s);
          row.in_place_wrong = mpi ? mpi->sum(wrong) : wrong;
        } else {
          row.in_place_wrong = 0;
        }
      }
      report.rows.push_back(std::move(row));
    }
  }
  return report;
}

} // namespace trainsim::val
