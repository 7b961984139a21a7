// `trainsim bench`: parent of `bench kernels` (validate/bench) and `bench collectives`
// (validate/comm). Both run on local GPUs; without CUDA they fail with a clear message.
#include "cli/commands.hpp"

namespace trainsim::cli {

void add_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Measure kernels or NCCL collectives on local GPUs");
  bench->require_subcommand(1);
  bench->footer("Examples (GPU):\n  trainsim bench kernels --op gemm --dtype bf16\n"
                "  trainsim bench collectives --ops all-reduce --max-bytes 1G");
  add_bench_kernels(*bench);
  add_bench_collectives(*bench);
}

} // namespace trainsim::cli
