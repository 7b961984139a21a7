// NCCL collective benchmarks, nccl-tests style: the pure interface (no CUDA or NCCL headers).
// Ops, busbw factors, sizes, options and result structs are plain C++ and always built; the
// runner (run_collectives) is implemented with CUDA + NCCL (+ MPI) when those were found, and
// by a stub that throws DeviceError otherwise. Reporting follows nccl-tests' PERFORMANCE.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/dtype.hpp"
#include "common/errors.hpp"
#include "simulate/collectives.hpp"

namespace trainsim::val {

/// The collectives: the simulator's own enum (simulate/collectives.hpp), one definition for the
/// model, the fit and the benchmark.
using CollectiveOp = sim::Collective;

inline constexpr CollectiveOp kAllCollectiveOps[] = {
    CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
    CollectiveOp::broadcast,  CollectiveOp::all_to_all, CollectiveOp::send_recv};

/// "all-reduce", "all-gather", "reduce-scatter", "broadcast", "all-to-all", "send-recv".
[[nodiscard]] std::string_view collective_name(CollectiveOp op);
/// Inverse of collective_name; std::nullopt for an unknown name.
[[nodiscard]] std::optional<CollectiveOp> parse_collective(std::string_view name);
/// Parses a comma-separated list ("all" = every op). Throws ConfigError naming `field`.
[[nodiscard]] std::vector<CollectiveOp> parse_collective_list(std::string_view text,
                                                              std::string_view field);

using sim::busbw_factor;

/// Element count for a requested size: bytes / element size, rounded down to a multiple of
/// num_ranks for ops that split the buffer per rank (as nccl-tests does). May return 0.
[[nodiscard]] std::int64_t collective_count(CollectiveOp op, double bytes, Dtype dtype,
                                            std::int64_t num_ranks);

/// Sizes min, min*factor, ... <= max (bytes). Throws ConfigError on min <= 0, max < min or
/// factor <= 1.
[[nodiscard]] std::vector<double> size_sweep(double min_bytes, double max_bytes, double factor);

struct CollectiveBenchOptions {
  std::vector<CollectiveOp> ops{std::begin(kAllCollectiveOps), std::end(kAllCollectiveOps)};
  double min_bytes = 8;
  double max_bytes = 128.0 * 1024 * 1024;
  double factor = 2;
  Dtype dtype = Dtype::fp32;
  std::int64_t num_gpus = 0;   // single-process: GPUs to drive (0 = all visible)
  std::int64_t iters = 20;     // timed iterations per size
  std::int64_t repeats = 1;    // batches of iters per size; the reported time is their median
  std::int64_t warmup = 5;     // untimed iterations per size
  double timeout_s = 300;      // a wait on NCCL longer than this aborts the communicator
  bool check = true;           // verify results after timing
  bool mpi = false;            // force the MPI path (otherwise detected from the environment)
  bool bootstrap_only = false; // test aid: MPI init + id broadcast, no GPU work
  std::string command_line;    // recorded in the report
};

/// Throws ConfigError listing every bad field (iters >= 1, warmup >= 0, dtype fp32/bf16/fp16...).
void validate(const CollectiveBenchOptions& options);

/// One size of one op: nccl-tests' columns. Times are the max over ranks of the mean per
/// iteration; NaN in-place values mean "not applicable" (all-to-all, send-recv).
struct CollectiveRow {
  std::string op;
  double bytes = 0;       // nccl-tests "size": total bytes per rank of the larger buffer
  std::int64_t count = 0; // elements (nccl-tests "count")
  std::string dtype;
  std::string redop;      // "sum" or "none"
  std::int64_t root = -1; // broadcast root, -1 = none
  std::int64_t num_ranks = 0;
  double time_s = 0; // out-of-place
  double algbw_bytes_per_s = 0;
  double busbw_bytes_per_s = 0;
  std::int64_t wrong = 0; // mismatching elements summed over ranks (-1 = not checked)
  double in_place_time_s = 0;
  double in_place_algbw_bytes_per_s = 0;
  double in_place_busbw_bytes_per_s = 0;
  std::int64_t in_place_wrong = 0;
};

/// What ran where: recorded with every measurement.
struct CollectiveDeviceInfo {
  std::string launcher; // "single-process" or "mpi"
  std::int64_t num_ranks = 0;
  std::vector<std::string> gpu_names; // one per rank, in rank order
  std::string hostname;
  std::string nccl_version; // "2.28.9"
  std::string cuda_runtime_version;
  std::string cuda_driver_version; // what cudaDriverGetVersion reports, e.g. "13.0"
  std::string nccl_algo;           // NCCL_ALGO as set in the environment ("" = NCCL's choice)
  std::string nccl_proto;          // NCCL_PROTO
  std::string nccl_nvls_enable;    // NCCL_NVLS_ENABLE as seen at init
  std::string command_line;
};

struct CollectiveReport {
  CollectiveDeviceInfo device;
  std::vector<CollectiveRow> rows;
  std::vector<std::string> notes; // printed as "# note" lines ("P=1: no communication ...")
  bool is_root = true;            // false on MPI ranks other than 0 (they print nothing)
};

/// The JSON document: {"device": {...}, "notes": [...], "results": [rows with raw base units]}.
/// In-place fields are null where not applicable.
[[nodiscard]] nlohmann::json to_json(const CollectiveReport& report);

/// "# key: value" lines for the device block and notes (no trailing table).
[[nodiscard]] std::string format_collective_header(const CollectiveReport& report);
/// nccl-tests' text table, one block per op: size (B), count (elements), type, redop, root,
/// out-of-place time (us), algbw (GB/s), busbw (GB/s), #wrong, then the same in-place.
[[nodiscard]] std::string format_collective_table(const CollectiveReport& report);

/// This process's command line from /proc/self/cmdline ("" where unavailable).
[[nodiscard]] std::string current_command_line();

/// Environment says we were started by mpirun/srun (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
/// PMIX_RANK, MV2_COMM_WORLD_SIZE, SLURM_PROCID with PMI). Pure: reads getenv only.
[[nodiscard]] bool launched_under_mpi();

/// Result of bootstrap_check(): MPI rank/size and whether every rank received rank 0's id.
struct BootstrapResult {
  std::int64_t rank = 0, num_ranks = 0, local_rank = 0;
  std::int64_t id_bytes = 0;
  bool ids_match = false;
};

/// True when this build has the MPI path; false builds throw DeviceError on --mpi.
[[nodiscard]] bool built_with_mpi();
/// True when this build has the NCCL runner.
[[nodiscard]] bool built_with_nccl();

/// MPI init, rank/size/local rank, broadcast of a 128-byte id (ncclUniqueId's size) from rank
/// 0, and an all-gather that checks every rank holds the same bytes. Needs no GPU.
/// Throws DeviceError when built without MPI or on an MPI failure.
[[nodiscard]] BootstrapResult bootstrap_check();

/// Thrown when the build has CUDA/NCCL but the machine has no usable GPU (tests skip on it).
class NoDeviceError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

/// Runs every op over the size sweep (single process over local GPUs, or one rank per MPI
/// process) and verifies results. Throws ConfigError, DeviceError, NoDeviceError.
/// Under MPI only rank 0's report has is_root = true.
[[nodiscard]] CollectiveReport run_collectives(const CollectiveBenchOptions& options);

} // namespace trainsim::val
