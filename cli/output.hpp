// Printers shared by every subcommand: --format table|csv|json, --output FILE, and a small
// Table that prints aligned text (units in headers) or CSV (raw base-unit fields).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trainsim::cli {

enum class Format { table, csv, json };

struct OutputOptions {
  Format format = Format::table;
  std::string output; // "" = stdout
  bool quiet = false;
};

/// Internal guard: no printed number is NaN or infinite. Inputs are range-checked at the edge
/// (flags, preset and config files), so a non-finite result is a bug in the model: this throws
/// std::logic_error naming the field ("plans[2].mfu = nan: not finite") rather than print it.
/// Sink::json applies it to every document; printers of tables apply it to their result first.
void check_finite(const nlohmann::json& value, const std::string& path = "");

/// The files one command writes (--output, --out, --plot, --allocator-trace-out). Each is
/// written to a new temporary file beside its target and renamed onto it only when the whole
/// command succeeded (commit), so a failed or interrupted command leaves every file as it was.
/// A target that exists and is not a regular file (/dev/null, /dev/stdout, a FIFO) is written
/// in place. run_cli makes one per call; output_files() is that one.
class OutputFiles {
 public:
  OutputFiles();
  ~OutputFiles(); // removes the temporary files of a command that did not commit
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  /// The path to write `target` through (an empty new file, or the target itself when written in
  /// place). Throws ConfigError "flag target: why" when it cannot be created.
  [[nodiscard]] std::string open(const std::string& target, const std::string& flag);
  /// Renames every temporary file onto its target. Throws ConfigError naming the flag.
  void commit();

 private:
  struct File {
    std::string target, temp, flag; // temp empty: written in place
  };
  std::vector<File> files_;
  OutputFiles* previous_ = nullptr;
};

/// The OutputFiles of the command running now. Throws std::logic_error outside run_cli.
[[nodiscard]] OutputFiles& output_files();

/// Writes `text` to `target` through output_files(); a failed write is a ConfigError naming
/// the flag (a full disk, a read-only file system, /dev/full).
void write_output_file(const std::string& target, const std::string& flag, const std::string& text);

/// Refuses, before the command runs, an output path (--output, --out, --plot,
/// --allocator-trace-out) that names one of the command's input files or another output: the
/// input would be replaced by the result. Throws ConfigError naming both flags.
void check_outputs_differ(const CLI::App& command);

/// Adds --format, --output and --quiet to a subcommand.
void add_output_options(CLI::App& cmd, OutputOptions& out);

/// Where the result goes: stdout or the --output file (opened once, closed at exit).
class Sink {
 public:
  explicit Sink(const OutputOptions& opts);
  ~Sink();
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;
  void write(const std::string& text);
  /// A "# ..." comment line (table mode only; suppressed by --quiet).
  void comment(const std::string& text);
  void json(const nlohmann::json& value);
  [[nodiscard]] Format format() const { return opts_.format; }

 private:
  OutputOptions opts_;
  std::FILE* file_ = nullptr;
};

/// Column-aligned table; in CSV mode the csv_headers are used instead of the text headers.
class Table {
 public:
  Table(std::vector<std::string> headers, std::vector<std::string> csv_headers = {});
  void add_row(std::vector<std::string> cells, std::vector<std::string> csv_cells = {});
  void print(Sink& sink) const;

 private:
  std::vector<std::string> headers_, csv_headers_;
  std::vector<std::vector<std::string>> rows_, csv_rows_;
};

} // namespace trainsim::cli
