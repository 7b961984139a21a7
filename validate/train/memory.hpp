// Device-memory accounting for the training step: every allocation is tagged with a category;
// current and peak bytes are tracked per category and in total, and a timeline (one point per
// allocation or free, with phase marks) records how memory climbs through forward, falls
// through backward and is touched by the optimizer. Pure C++: the CUDA caching allocator
// (allocator.cuh) calls it, and CPU tests check the bookkeeping.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::val::train {

enum class MemCategory { weights = 0, gradients, optimizer, activations, workspace };
inline constexpr std::size_t kNumMemCategories = 5;
[[nodiscard]] std::string_view to_string(MemCategory c);

using CategoryBytes = std::array<double, kNumMemCategories>;

struct MemoryPoint {
  std::int64_t event = 0; // allocation/free index since the timeline started
  std::string phase;      // "forward", "backward", "optimizer", ... (the latest mark)
  CategoryBytes bytes{};  // bytes in use per category after this event
  [[nodiscard]] double total() const;
};

class MemoryTracker {
 public:
  /// Records `bytes` more (alloc) or fewer (free) in use for `c`; throws std::logic_error when a
  /// category would go negative.
  void on_alloc(MemCategory c, double bytes);
  void on_free(MemCategory c, double bytes);
  /// Starts recording (clears the timeline and resets peaks to the current use).
  void start_timeline();
  void stop_timeline() { recording_ = false; }
  /// Names the phase of the points that follow and records a point.
  void mark(const std::string& phase);
  void reset_peaks();

  [[nodiscard]] const CategoryBytes& current() const { return current_; }
  [[nodiscard]] const CategoryBytes& peak() const { return peak_; } // per-category maxima
  [[nodiscard]] double peak_total() const { return peak_total_; }   // max of the sum
  [[nodiscard]] double current_total() const;
  /// Per-category bytes at the moment the total peaked.
  [[nodiscard]] const CategoryBytes& at_peak_total() const { return at_peak_total_; }
  [[nodiscard]] const std::vector<MemoryPoint>& timeline() const { return timeline_; }

 private:
  void record();
  CategoryBytes current_{}, peak_{}, at_peak_total_{};
  double peak_total_ = 0;
  bool recording_ = false;
  std::int64_t events_ = 0;
  std::string phase_ = "setup";
  std::vector<MemoryPoint> timeline_;
};

} // namespace trainsim::val::train
