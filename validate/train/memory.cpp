// MemoryTracker: per-category current/peak bytes and the allocation timeline.
#include "validate/train/memory.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace trainsim::val::train {

std::string_view to_string(MemCategory c) {
  switch (c) {
  case MemCategory::weights: return "weights";
  case MemCategory::gradients: return "gradients";
  case MemCategory::optimizer: return "optimizer";
  case MemCategory::activations: return "activations";
  case MemCategory::workspace: return "workspace";
  }
  return "?";
}

double MemoryPoint::total() const { return std::accumulate(bytes.begin(), bytes.end(), 0.0); }

double MemoryTracker::current_total() const {
  return std::accumulate(current_.begin(), current_.end(), 0.0);
}

void MemoryTracker::on_alloc(MemCategory c, double bytes) {
  const auto i = static_cast<std::size_t>(c);
  current_[i] += bytes;
  peak_[i] = std::max(peak_[i], current_[i]);
  const double total = current_total();
  if (total > peak_total_) {
    peak_total_ = total;
    at_peak_total_ = current_;
  }
  record();
}

void MemoryTracker::on_free(MemCategory c, double bytes) {
  const auto i = static_cast<std::size_t>(c);
  if (bytes > current_[i])
    throw std::logic_error("MemoryTracker: freeing more " + std::string(to_string(c)) +
                           " bytes than are in use");
  current_[i] -= bytes;
  record();
}

void MemoryTracker::start_timeline() {
  timeline_.clear();
  events_ = 0;
  recording_ = true;
  reset_peaks();
  record();
}

void MemoryTracker::reset_peaks() {
  peak_ = current_;
  peak_total_ = current_total();
  at_peak_total_ = current_;
}

void MemoryTracker::mark(const std::string& phase) {
  phase_ = phase;
  record();
}

void MemoryTracker::record() {
  if (!recording_)
    return;
  timeline_.push_back({events_++, phase_, current_});
}

} // namespace trainsim::val::train
