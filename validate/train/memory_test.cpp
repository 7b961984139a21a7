// MemoryTracker: per-category current/peak bytes, the peak of the total, the timeline.
#include <doctest/doctest.h>

#include <stdexcept>

#include "validate/train/memory.hpp"

using namespace trainsim::val::train;

TEST_CASE("memory tracker: peaks per category and of the total, timeline with phases") {
  MemoryTracker t;
  t.on_alloc(MemCategory::weights, 100);
  t.start_timeline();
  t.mark("forward");
  t.on_alloc(MemCategory::activations, 50);
  t.on_alloc(MemCategory::activations, 30); // total 180: the peak
  t.mark("backward");
  t.on_free(MemCategory::activations, 30);
  t.on_alloc(MemCategory::workspace, 20); // total 170
  t.on_free(MemCategory::activations, 50);
  t.on_free(MemCategory::workspace, 20);
  t.stop_timeline();
  t.on_alloc(MemCategory::workspace, 1000); // not recorded, but counted
  CHECK(t.peak()[static_cast<std::size_t>(MemCategory::activations)] == 80);
  CHECK(t.peak()[static_cast<std::size_t>(MemCategory::workspace)] == 1000);
  CHECK(t.peak_total() == 1100);
  CHECK(t.current_total() == 1100);
  const auto& tl = t.timeline();
  REQUIRE(tl.size() == 9); // start, mark, 2 allocs, mark, free, alloc, 2 frees
  CHECK(tl.front().total() == 100);
  CHECK(tl[3].total() == 180);
  CHECK(tl[3].phase == "forward");
  CHECK(tl.back().total() == 100);
  CHECK(tl.back().phase == "backward");
  CHECK_THROWS_AS(t.on_free(MemCategory::gradients, 1), std::logic_error);
}

TEST_CASE("memory tracker: at_peak_total is the split when the sum peaked") {
  MemoryTracker t;
  t.on_alloc(MemCategory::activations, 10);
  t.on_alloc(MemCategory::workspace, 5);
  t.on_free(MemCategory::activations, 10);
  t.on_alloc(MemCategory::optimizer, 7);
  CHECK(t.peak_total() == 15);
  CHECK(t.at_peak_total()[static_cast<std::size_t>(MemCategory::activations)] == 10);
  CHECK(t.at_peak_total()[static_cast<std::size_t>(MemCategory::optimizer)] == 0);
}
