// Implementation of the shared printers (output.hpp).
#include "cli/output.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

#include "common/errors.hpp"

namespace trainsim::cli {

void add_output_options(CLI::App& cmd, OutputOptions& out) {
  const std::map<std::string, Format> formats{
      {"table", Format::table}, {"csv", Format::csv}, {"json", Format::json}};
  cmd.add_option("--format", out.format,
                 "Output format: table (units in headers), csv or json "
                 "(raw base units: bytes, flops, seconds)")
      ->transform(CLI::CheckedTransformer(formats, CLI::ignore_case))
      ->capture_default_str();
  cmd.add_option("--output,-o", out.output, "Write the result to this file instead of stdout");
  cmd.add_flag("--quiet,-q", out.quiet, "Print only the result (no '#' input lines)");
}

Sink::Sink(const OutputOptions& opts) : opts_(opts) {
  if (!opts_.output.empty()) {
    file_ = std::fopen(opts_.output.c_str(), "w");
    if (!file_)
      throw ConfigError(fmt::format("--output {}: cannot open for writing: {}", opts_.output,
                                    std::strerror(errno)));
  }
}

Sink::~Sink() {
  if (file_)
    std::fclose(file_);
}

void Sink::write(const std::string& text) {
  std::FILE* f = file_ ? file_ : stdout;
  // Flushed at once so that a full disk or a closed pipe is an error here, not a silent loss
  // at exit (results are small; the cost is one write call per printed block).
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fflush(f) != 0)
    throw ConfigError(fmt::format("{}: write failed: {}",
                                  file_ ? "--output " + opts_.output : std::string("stdout"),
                                  std::strerror(errno)));
}

void Sink::comment(const std::string& text) {
  if (opts_.quiet || opts_.format != Format::table)
    return;
  write("# " + text + "\n");
}

void check_finite(const nlohmann::json& value, const std::string& path) {
  if (value.is_number_float()) {
    const double v = value.get<double>();
    if (!std::isfinite(v))
      throw std::logic_error(
          fmt::format("{} = {}: not finite (a bug: inputs are range-checked)", path, v));
  } else if (value.is_object()) {
    for (const auto& [key, item] : value.items())
      check_finite(item, path.empty() ? key : path + "." + key);
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i)
      check_finite(value[i], fmt::format("{}[{}]", path, i));
  }
}

void Sink::json(const nlohmann::json& value) {
  check_finite(value);
  write(value.dump(2) + "\n");
}

Table::Table(std::vector<std::string> headers, std::vector<std::string> csv_headers)
    : headers_(std::move(headers)), csv_headers_(std::move(csv_headers)) {
  if (csv_headers_.empty())
    csv_headers_ = headers_;
}

void Table::add_row(std::vector<std::string> cells, std::vector<std::string> csv_cells) {
  if (csv_cells.empty())
    csv_cells = cells;
  rows_.push_back(std::move(cells));
  csv_rows_.push_back(std::move(csv_cells));
}

void Table::print(Sink& sink) const {
  if (sink.format() == Format::csv) {
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (i)
          s += ",";
        bool quote = v[i].find_first_of(",\"") != std::string::npos;
        s += quote ? "\"" + v[i] + "\"" : v[i];
      }
      return s + "\n";
    };
    sink.write(join(csv_headers_));
    for (const auto& r : csv_rows_)
      sink.write(join(r));
    return;
  }
  std::vector<std::size_t> width(headers_.size());
  for (std::size_t c = 0; c < headers_.size(); ++c) {
    width[c] = headers_[c].size();
    for (const auto& r : rows_)
      if (c < r.size())
        width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t c = 0; c < headers_.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      // First column left-aligned (names), the rest right-aligned (numbers).
      s += c == 0 ? fmt::format("{:<{}}", cell, width[c]) : fmt::format("  {:>{}}", cell, width[c]);
    }
    while (!s.empty() && s.back() == ' ')
      s.pop_back();
    return s + "\n";
  };
  sink.write(line(headers_));
  std::size_t total = 0;
  for (auto w : width)
    total += w + 2;
  sink.write(std::string(total > 2 ? total - 2 : 0, '-') + "\n");
  for (const auto& r : rows_)
    sink.write(line(r));
}

} // namespace trainsim::cli
