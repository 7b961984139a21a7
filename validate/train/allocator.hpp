// The training step's one device allocator: a caching allocator over cudaMalloc. Blocks are
// reused by exact (256-byte rounded) size, so steady-state steps make no cudaMalloc calls;
// every allocation carries a MemCategory and the MemoryTracker sees each alloc and free, so
// peak memory per category is measured. Memory outside it (cuBLAS, NCCL, CUDA context) is not
// counted: it is what the simulator calls overhead.
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>

#include "kernels/check.hpp"
#include "validate/train/memory.hpp"

namespace trainsim::val::train {

class CachingAllocator {
 public:
  CachingAllocator() = default;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() {
    for (auto& [p, b] : blocks_)
      CUDA_CHECK_NOTHROW(cudaFree(p));
  }

  /// A block of at least `bytes` (256-byte aligned), tagged `c`. Never null for bytes > 0.
  void* alloc(std::size_t bytes, MemCategory c) {
    const std::size_t size = (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256;
    void* p = nullptr;
    auto it = free_.find(size);
    if (it != free_.end()) {
      p = it->second;
      free_.erase(it);
    } else {
      CUDA_CHECK(cudaMalloc(&p, size));
      reserved_bytes_ += static_cast<double>(size);
    }
    blocks_[p] = {size, c, true};
    tracker_.on_alloc(c, static_cast<double>(size));
    return p;
  }
  template <class T> T* alloc_as(std::size_t count, MemCategory c) {
    return static_cast<T*>(alloc(count * sizeof(T), c));
  }

  /// Returns the block to the cache (the caller has ordered its last use on the one stream
  /// that uses it: the step's compute stream).
  void free(void* p) {
    if (p == nullptr)
      return;
    Block& b = blocks_.at(p);
    if (!b.in_use)
      throw std::logic_error("CachingAllocator: double free");
    b.in_use = false;
    tracker_.on_free(b.category, static_cast<double>(b.size));
    free_.emplace(b.size, p);
  }

  [[nodiscard]] MemoryTracker& tracker() { return tracker_; }
  [[nodiscard]] double reserved_bytes() const { return reserved_bytes_; }

 private:
  struct Block {
    std::size_t size = 0;
    MemCategory category = MemCategory::workspace;
    bool in_use = false;
  };
  std::unordered_map<void*, Block> blocks_;
  std::multimap<std::size_t, void*> free_;
  MemoryTracker tracker_;
  double reserved_bytes_ = 0;
};

} // namespace trainsim::val::train
