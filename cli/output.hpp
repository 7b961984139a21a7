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
