// JSON reading helpers: parse with file:line:column errors, and read one object strictly
// (every key known, every type checked, all problems reported together).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/checks.hpp"
#include "common/errors.hpp"

namespace trainsim {

/// Arrays and objects nested deeper than this are refused: the deepest file the project reads
/// nests 6 levels, and a value nested 100,000 deep would overflow the stack of any recursive
/// walk over it (printing it in a message, comparing it, copying it).
inline constexpr int kMaxJsonDepth = 64;

/// Parses JSON text (comments allowed). Throws ConfigError "source:line:column: reason" for
/// malformed text, "source: ..." for nesting deeper than kMaxJsonDepth and for a key given
/// twice in one object (JSON leaves its meaning open; nlohmann keeps the last silently).
/// A line of a JSON-lines file is parsed with its line number as `jsonl_line` (> 0), so that
/// messages read "file:line:column" or "file:line: ..." (0: a whole file).
[[nodiscard]] nlohmann::json parse_json_text(std::string_view text, std::string_view source,
                                             std::int64_t jsonl_line = 0);

/// A value as it may appear in a message: scalars as JSON (strings cut to 80 characters,
/// control characters escaped), arrays and objects by their size only, never recursively.
[[nodiscard]] std::string json_brief(const nlohmann::json& value);
/// Input files (presets, model configs, measurements) above this size are refused before
/// parsing: the largest file the project reads is under 0.1 MiB, and a wrong path to a data
/// file should fail at once, not after seconds and gigabytes of parsing.
inline constexpr std::uintmax_t kMaxInputFileBytes = 16 * 1024 * 1024;

/// Reads a whole input file. Throws ConfigError "path: why": no such file, is a directory,
/// the system's reason it cannot be opened (e.g. permission denied), or larger than
/// kMaxInputFileBytes (also for files whose size is not known in advance, such as pipes).
/// A file the user named on the command line may be a pipe (`<(...)`); one a program finds by
/// itself (a model map beside a runs file) must be a regular file (`regular_only`), so that a
/// FIFO or a device planted there cannot block or feed it. A gzip-compressed file (recorded
/// traces and logs are stored so) is read decompressed, its text under the same limit.
[[nodiscard]] std::string read_input_file(const std::string& path, bool regular_only = false);
/// Reads (read_input_file) and parses a file. Throws ConfigError if it cannot be read or parsed.
[[nodiscard]] nlohmann::json load_json_file(const std::string& path);

/// One optional field of a loosely read object (recorded measurements): its value, `fallback`
/// when `j` is not an object or has no `key`, and ConfigError "where: key: expected a string"
/// (a number) when it is there with another type.
[[nodiscard]] std::string optional_string(const nlohmann::json& j, const std::string& key,
                                          const std::string& fallback, std::string_view where);
[[nodiscard]] double optional_number(const nlohmann::json& j, const std::string& key,
                                     double fallback, std::string_view where);

/// Reads the fields of one JSON object. Each getter records type errors in `problems`;
/// finish() records every key that no getter asked for ("unknown key").
class JsonObjectReader {
 public:
  JsonObjectReader(const nlohmann::json& object, Problems& problems);

  bool get(std::string_view key, std::int64_t& out, bool required = false);
  bool get(std::string_view key, double& out, bool required = false);
  /// A number that must lie in `range` (checks.hpp): out-of-range values are problems too.
  bool get(std::string_view key, double& out, const Interval& range, bool required = false);
  bool get(std::string_view key, bool& out, bool required = false);
  bool get(std::string_view key, std::string& out, bool required = false);
  /// Marks a key as known without reading it (e.g. a nested object read elsewhere).
  [[nodiscard]] const nlohmann::json* take(std::string_view key);
  [[nodiscard]] bool has(std::string_view key) const;
  /// Adds "unknown key" problems for keys never read (with the known keys as a hint).
  void finish();

 private:
  const nlohmann::json* find(std::string_view key, bool required);
  const nlohmann::json& object_;
  Problems& problems_;
  std::set<std::string, std::less<>> seen_;
};

/// Edit distance, for "did you mean" suggestions.
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);
/// Up to `max` candidates closest to `name` (distance <= 3 or sharing a prefix).
[[nodiscard]] std::vector<std::string> nearest_names(std::string_view name,
                                                     const std::vector<std::string>& candidates,
                                                     std::size_t max = 3);

} // namespace trainsim
