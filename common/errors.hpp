// Error types shared by every trainsim library. Libraries throw; only main() catches and
// maps them to exit codes (1 config/usage, 2 device/runtime, 3 check failed).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace trainsim {

/// A bad preset, config file or flag value. The message names source, field, value and rule.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A CUDA / cuBLAS / NCCL / MPI failure, or a GPU feature requested in a build without it.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A measured result failed its correctness check.
class CheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Collects every problem found while validating one input, then throws them together.
class Problems {
 public:
  explicit Problems(std::string source) : source_(std::move(source)) {}
  void add(std::string message) { messages_.push_back(std::move(message)); }
  [[nodiscard]] bool empty() const { return messages_.empty(); }
  /// Throws ConfigError listing all problems (one per line, each prefixed by the source).
  void throw_if_any() const;

 private:
  std::string source_;
  std::vector<std::string> messages_;
};

} // namespace trainsim
