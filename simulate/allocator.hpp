// PyTorch's CUDA caching allocator as a model: how many bytes it reserves (cudaMalloc'd
// segments) to serve a sequence of allocations and frees, and the sequence a training step makes.
// The rules are the allocator's (PyTorch c10/cuda/CUDACachingAllocator.cpp, defaults: no
// max_split_size, no expandable segments, no garbage-collection threshold):
//   - a request is rounded up to a multiple of 512 B;
//   - requests of at most 1 MiB come from the small pool, larger ones from the large pool;
//   - a request is served by the smallest free cached block of its pool that holds it and
//     was made for the same stream (best fit; equal sizes by address: the allocator keeps
//     each stream's free blocks apart, so a block freed by one stream never serves another's
//     request, e.g. FSDP2's reduce-scatter stream); on a miss a new segment is cudaMalloc'd: 2 MiB
//     for the small pool, 20 MiB for requests under 10 MiB, else the request rounded up to 2 MiB;
//   - equal free blocks are taken lowest address first, so where the driver puts a new segment
//     matters: traces recorded with each segment's address show it below the ones before (of
//     equal free blocks the newest segment's serves), which replays of recorded traces follow
//     (SegmentPlacement::below); the step generator keeps each new segment above (`above`,
//     the placement its fitted profiles were judged with; docs/frameworks.md, "The caching
//     allocator");
//   - the block is split when what is left is at least 512 B (small pool) or more than 1 MiB
//     (large pool); otherwise the whole block is handed out (and counted as allocated);
//   - a freed block merges with free neighbours of its segment;
//   - under a cap (the device's memory, or torch.cuda.set_per_process_memory_fraction), a miss
//     that would reserve beyond it first returns every cached segment that is wholly free
//     (release_cached_blocks) and retries; if the segment still does not fit, the step is out
//     of memory. Without a cap no segment is ever returned.
// Checked against recorded allocator traces of PyTorch training steps
// (scripts/peer_allocator_trace.py; docs/frameworks.md, "The caching allocator").
#pragma once

#include <array>
#include <cstdint>
#include <memory_resource>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainsim::sim {

class CachingAllocatorModel {
 public:
  using BlockId = std::int64_t;
  static constexpr std::int64_t kMinBlockBytes = 512;
  static constexpr std::int64_t kSmallRequestBytes = 1 << 20;   // 1 MiB
  static constexpr std::int64_t kSmallSegmentBytes = 2 << 20;   // 2 MiB
  static constexpr std::int64_t kLargeSegmentBytes = 20 << 20;  // 20 MiB
  static constexpr std::int64_t kMinLargeAllocBytes = 10 << 20; // 10 MiB
  static constexpr std::int64_t kLargeRoundingBytes = 2 << 20;  // 2 MiB

  /// The request rounded as the allocator rounds it (>= 512 B, a multiple of 512 B).
  [[nodiscard]] static std::int64_t round_request(std::int64_t bytes);
  /// The segment a miss of a rounded request cudaMallocs.
  [[nodiscard]] static std::int64_t segment_bytes(std::int64_t rounded);

  /// Where a new segment's addresses lie: above every earlier segment or below.
  enum class SegmentPlacement { above, below };
  /// cap_bytes: what the allocator may reserve (0: no cap).
  explicit CachingAllocatorModel(std::int64_t cap_bytes = 0,
                                 SegmentPlacement placement = SegmentPlacement::above)
      : cap_(cap_bytes), placement_(placement) {}
  CachingAllocatorModel(const CachingAllocatorModel&) = delete; // its pools hold iterators
  CachingAllocatorModel& operator=(const CachingAllocatorModel&) = delete;

  /// Serves `bytes` (>= 0); returns the block's id for release(). A request the cap cannot
  /// hold even after the cache is released sets out_of_memory() and is served beyond the cap
  /// (the rest of the sequence still runs, its figures then say how far beyond).
  /// `stream` numbers the CUDA stream the request is made on (0: the default stream).
  BlockId allocate(std::int64_t bytes, std::int64_t stream = 0);
  /// Returns a block to the cache. Throws std::logic_error for an unknown or freed id.
  void release(BlockId id);
  /// torch.cuda.empty_cache(): returns every cached segment that is wholly free (what a miss
  /// under the cap does too, before it retries).
  void empty_cache();

  [[nodiscard]] std::int64_t allocated_bytes() const { return allocated_; }
  [[nodiscard]] std::int64_t reserved_bytes() const { return reserved_; }
  [[nodiscard]] std::int64_t peak_allocated_bytes() const { return peak_allocated_; }
  [[nodiscard]] std::int64_t peak_reserved_bytes() const { return peak_reserved_; }
  [[nodiscard]] bool out_of_memory() const { return oom_; }
  /// Appends every request ("a BYTES ID STREAM") and release ("f ID") from now on to `trace`,
  /// in the allocator-trace format (replay_allocator_trace); nullptr stops recording.
  void record_to(std::string* trace) { trace_ = trace; }
  /// Thrown by allocate() at the first request the cap cannot hold (once it is served beyond
  /// the cap, so the peaks say it did not fit), when asked to stop there.
  struct OutOfMemoryStop {};
  void stop_at_out_of_memory(bool stop) { stop_at_oom_ = stop; }

 private:
  using Key = std::array<std::int64_t, 4>; // stream, size, address, id
  // Free blocks of each pool, sorted. A tree: a step with many micro-batches in flight leaves
  // tens of thousands of free blocks in a pool, where a sorted vector's inserts and erases
  // (moving the tail each time) took 2/3 of a plan search's time. Its nodes come from
  // NodeRecycler (no malloc per free block).
  using Pool = std::pmr::set<Key>;
  // Memory for tree nodes, all of one size: freed nodes are kept on a list and handed out
  // again; the rest comes from a growing buffer released with the model.
  class NodeRecycler : public std::pmr::memory_resource {
   private:
    void* do_allocate(std::size_t bytes, std::size_t alignment) override;
    void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
    [[nodiscard]] bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
      return this == &other;
    }
    std::pmr::monotonic_buffer_resource buffer_;
    std::size_t node_bytes_ = 0; // the one size handed out (set by the first request)
    std::vector<void*> free_;
  };
  struct Block {
    std::int64_t addr = 0, size = 0;
    BlockId prev = -1, next = -1; // neighbours in the segment
    bool small = false, free = false;
    std::int64_t stream = 0;
    bool pooled = false; // in its pool, at `at`
    Pool::iterator at{};
  };
  Pool& pool(bool small) { return small ? small_pool_ : large_pool_; }
  void insert(Pool& p, const Key& k);
  void erase(BlockId id); // from its pool
  std::vector<Block> blocks_;
  NodeRecycler nodes_;
  Pool small_pool_{&nodes_}, large_pool_{&nodes_};
  // Blocks that entered a pool as whole segments since the last empty_cache (what it returns;
  // some may have been taken again), so that a step playing above its cap, which empties the
  // cache at every miss, does not walk the pools each time.
  std::vector<BlockId> whole_free_;
  std::int64_t cap_ = 0;
  bool oom_ = false, stop_at_oom_ = false;
  SegmentPlacement placement_ = SegmentPlacement::above;
  std::string* trace_ = nullptr;
  std::int64_t above_addr_ = 0;                     // the next segment above
  std::int64_t below_addr_ = std::int64_t{1} << 62; // the lowest segment so far
  std::int64_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
};

/// What a recorded trace gives and what the model makes of it.
struct TraceReplay {
  std::int64_t events = 0;
  double model_peak_allocated_bytes = 0, model_peak_reserved_bytes = 0;
  double measured_peak_allocated_bytes = 0, measured_peak_reserved_bytes = 0; // NaN: not given
  bool streams_recorded = false; // its blocks say which stream made them ("a SIZE ID STREAM")
  bool out_of_memory = false;    // replayed under a cap: a request the cap could not hold
  std::string id;
  // Recorded under a cap (header "memory_cap_bytes", scripts/peer_allocator_trace.py
  // --memory-cap-gb): the cap, and whether PyTorch ran out of memory under it (header
  // "out_of_memory": null when every step ran). 0 and -1 when the header does not say.
  double recorded_cap_bytes = 0;
  int measured_out_of_memory = -1;
  // Replayed with empty_cache_at_start: whether the trace had the first step's "m 0 start"
  // marker where the cache was emptied.
  bool cache_emptied = false;
};
/// Replays a trace written by scripts/peer_allocator_trace.py ("a SIZE ID [STREAM]", "f ID", "m
/// ...", "s SIZE", "x SIZE" lines; its "# {json}" header gives the measured peaks at each phase).
/// Throws ConfigError naming file:line for a malformed line (a block above 1 PiB, a free of a
/// block not held, ...) and for a file the input rules refuse (common/json_io.hpp).
/// cap_bytes > 0 replays it under that cap (what torch.cuda.set_per_process_memory_fraction
/// allows the allocator to reserve) and says whether the step would have run out of memory.
/// empty_cache_at_start empties the modelled cache at the first step's start (the "m 0 start"
/// marker), as the OOM probes do after building the model (scripts/peer_framework_runs.py
/// probe_under_cap) and the traced process did not.
[[nodiscard]] TraceReplay replay_allocator_trace(const std::string& path,
                                                 std::int64_t cap_bytes = 0,
                                                 bool empty_cache_at_start = false);
/// The same for trace text already read; `path` names it in errors.
[[nodiscard]] TraceReplay replay_allocator_trace_text(std::string_view text,
                                                      const std::string& path,
                                                      std::int64_t cap_bytes = 0,
                                                      bool empty_cache_at_start = false);
inline constexpr std::int64_t kMaxTraceBlockBytes = std::int64_t{1} << 50;

/// The tensors of a training step on one GPU, as a PyTorch training loop allocates them
/// (docs/frameworks.md, "The caching allocator"): parameters at start; per step the forward's
/// saved tensors layer by layer (for each micro-batch in flight), the head's tensors at the
/// loss, the backward freeing each layer's tensors as it allocates that layer's gradients, the
/// optimizer step (states created at the first step, temporaries per parameter tensor alive
/// together), gradients freed by zero_grad(set_to_none=True). Bytes.
struct StepTensors {
  std::vector<double> emb_params, head_params; // parameters of each tensor
  std::vector<double> layer_params;            // one layer's parameter tensors
  std::int64_t num_layers = 0;
  double weight_bytes_per_param = 0, grad_bytes_per_param = 0;
  double state_bytes_per_param = 0; // each optimizer state tensor
  std::int64_t num_states = 0;      // optimizer state tensors per parameter tensor
  double transient_bytes_per_param = 0;
  std::vector<double> emb_saved, layer_saved, head_saved; // kept from forward to backward
  std::vector<double> layer_recomputed; // full recompute: re-made before the layer's backward
  // Full recompute of the first `recomputed_layers` layers only (TrainingSetup::
  // recompute_layers; < 0: every layer runs the policy): the others keep `layer_saved_plain`
  // and re-make nothing.
  std::int64_t recomputed_layers = -1;
  std::vector<double> layer_saved_plain;
  double activation_grad_bytes = 0;     // the gradient flowing from layer to layer
  double layer_bwd_transient = 0;       // alive only inside one layer's backward
  double layer_bwd_transient_block = 0; // ... made of blocks of this size (0: one block)
  std::int64_t micro_batches_in_flight = 1;
  std::vector<double> persistent; // buffers allocated once (buckets, gather buffers)
  double cap_bytes = 0;           // what the allocator may reserve (0: no cap)
  // torch.cuda.empty_cache() between the initialisation (parameters, buffers, FSDP2's sharding)
  // and the first step, as the OOM probes of scripts/peer_framework_runs.py do
  // (probe_under_cap); a training loop that never calls it keeps what the initialisation left
  // cached for the first step to reuse.
  bool empty_cache_before_steps = false;
  // FSDP2 (fully_shard per layer and the root; recorded traces with streams,
  // validate/results/fixtures/allocator-traces/): before each layer's forward and again before
  // its backward the layer's parameters are gathered into unsharded tensors of
  // `unsharded_bytes_per_param` each (under a mixed-precision policy each first cast into a
  // transient of that size), freed after that layer's pass; backward makes unsharded gradients
  // of that size, copies them into one reduce-scatter input of `reduce_bytes_per_param` per
  // parameter of the layer (alive until the next layer's) and the reduce-scatter's output, the
  // layer's sharded gradient, is one block made on the reduce-scatter stream (stream 1). The
  // root unit (embedding, head) is gathered at the forward's start and reduced at the end.
  bool fsdp2 = false;
  double unsharded_bytes_per_param = 0, reduce_bytes_per_param = 0;
  bool cast_on_gather = false;
  // Steps simulated: the first creates the optimizer states. Uncapped, the third step adds
  // under 0.2% to the reserved bytes of the recorded traces; under a cap PyTorch's need can
  // grow to the third or fourth step and then holds (MemoryOptions::allocator_steps).
  std::int64_t steps = 2;
  // Only the verdict is wanted: the step stops at its first request the cap cannot hold (the
  // peaks are then those reached so far; out_of_memory is set either way).
  bool stop_at_out_of_memory = false;
};
struct AllocatorPeaks {
  double allocated_bytes = 0, reserved_bytes = 0;
  bool out_of_memory = false; // the cap could not hold the step, even with the cache released
};
[[nodiscard]] AllocatorPeaks simulate_step_allocator(const StepTensors& t);
/// Forgets the peaks this thread has cached (simulate_step_allocator remembers each step it
/// played): for timing a cold search.
void clear_allocator_cache();
/// The same step's requests and releases as an allocator trace's lines ("a BYTES ID STREAM",
/// "f ID"; no header), in the order the model makes them: the generated step, to set beside a
/// recorded PyTorch trace (`trainsim memory --allocator-trace-out`).
[[nodiscard]] std::string step_allocator_trace(const StepTensors& t);

} // namespace trainsim::sim
