// Implementation of the shared printers (output.hpp).
#include "cli/output.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errors.hpp"
#include "common/text.hpp"

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

namespace {

namespace fs = std::filesystem;

OutputFiles* g_current_outputs = nullptr;

// Paths of the temporary files not yet renamed, for the signal handler (which may only unlink):
// fixed buffers, a slot is used once its path is written.
constexpr int kMaxPendingFiles = 16;
char g_pending[kMaxPendingFiles][4096];
volatile std::sig_atomic_t g_pending_used[kMaxPendingFiles] = {};

extern "C" void remove_pending_and_reraise(int sig) {
  for (int i = 0; i < kMaxPendingFiles; ++i)
    if (g_pending_used[i])
      ::unlink(g_pending[i]);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

int claim_pending_slot(const std::string& path) {
  if (path.size() >= sizeof g_pending[0])
    return -1;
  for (int i = 0; i < kMaxPendingFiles; ++i)
    if (!g_pending_used[i]) {
      std::memcpy(g_pending[i], path.c_str(), path.size() + 1);
      g_pending_used[i] = 1;
      return i;
    }
  return -1;
}

void release_pending_slot(const std::string& path) {
  for (int i = 0; i < kMaxPendingFiles; ++i)
    if (g_pending_used[i] && path == g_pending[i])
      g_pending_used[i] = 0;
}

} // namespace

OutputFiles::OutputFiles() : previous_(g_current_outputs) {
  g_current_outputs = this;
  static const bool handlers = [] {
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE})
      std::signal(sig, remove_pending_and_reraise);
    return true;
  }();
  (void)handlers;
}

OutputFiles::~OutputFiles() {
  for (const File& f : files_)
    if (!f.temp.empty()) {
      ::unlink(f.temp.c_str());
      release_pending_slot(f.temp);
    }
  g_current_outputs = previous_;
}

std::string OutputFiles::open(const std::string& target, const std::string& flag) {
  if (target.empty())
    throw ConfigError(fmt::format("{}: empty path", flag));
  std::error_code ec;
  const fs::file_status st = fs::status(target, ec);
  if (st.type() == fs::file_type::directory)
    throw ConfigError(fmt::format("{} {}: is a directory", flag, printable(target)));
  if (fs::exists(st) && st.type() != fs::file_type::regular) {
    files_.push_back({target, "", flag}); // a device or a pipe: written in place
    return target;
  }
  const fs::path full = fs::absolute(fs::path(target), ec);
  const fs::path dir = full.parent_path();
  const std::string ext = full.extension().string(); // gnuplot and readers see the same suffix
  std::string temp = (dir / ("." + full.stem().string() + ".trainsim-XXXXXX")).string() + ext;
  const int fd = ::mkstemps(temp.data(), static_cast<int>(ext.size()));
  if (fd < 0)
    throw ConfigError(fmt::format("{} {}: cannot create a file in {}: {}", flag, printable(target),
                                  printable(dir.string()), std::strerror(errno)));
  // mkstemp makes the file private (0600); the result gets the permissions of any new file.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  (void)::fchmod(fd, 0666 & ~mask);
  ::close(fd);
  (void)claim_pending_slot(temp);
  files_.push_back({target, temp, flag});
  return temp;
}

void OutputFiles::commit() {
  for (File& f : files_) {
    if (f.temp.empty())
      continue;
    std::error_code ec;
    fs::rename(f.temp, f.target, ec);
    if (ec)
      throw ConfigError(
          fmt::format("{} {}: cannot write: {}", f.flag, printable(f.target), ec.message()));
    release_pending_slot(f.temp);
    f.temp.clear();
  }
}

OutputFiles& output_files() {
  if (g_current_outputs == nullptr)
    throw std::logic_error("output_files(): no command is running (run_cli makes one)");
  return *g_current_outputs;
}

void write_output_file(const std::string& target, const std::string& flag,
                       const std::string& text) {
  const std::string path = output_files().open(target, flag);
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f)
    throw ConfigError(fmt::format("{} {}: cannot open for writing: {}", flag, printable(target),
                                  std::strerror(errno)));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() &&
                  std::fflush(f) == 0 && std::ferror(f) == 0;
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed)
    throw ConfigError(fmt::format("{} {}: write failed: {}", flag, printable(target),
                                  std::strerror(ok ? errno : err)));
}

namespace {

bool is_output_flag(const std::string& name) {
  return name == "--output" || name == "--out" || name == "--plot" ||
         name == "--allocator-trace-out";
}

// The options given to a command, its option groups' included (CLI11 keeps those as unnamed
// subcommands).
void given_options(const CLI::App& app, std::vector<const CLI::Option*>& out) {
  for (const CLI::Option* opt : app.get_options())
    if (opt->count() > 0)
      out.push_back(opt);
  for (const CLI::App* group : const_cast<CLI::App&>(app).get_subcommands(
           [](CLI::App* s) { return s->get_name().empty(); }))
    given_options(*group, out);
}

} // namespace

void check_outputs_differ(const CLI::App& command) {
  std::vector<const CLI::Option*> given;
  given_options(command, given);
  struct Named {
    std::string flag, path;
  };
  std::vector<Named> outputs, inputs;
  for (const CLI::Option* opt : given)
    for (const std::string& value : opt->results())
      (is_output_flag(opt->get_name()) ? outputs : inputs).push_back({opt->get_name(), value});
  std::error_code ec;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Named& out = outputs[i];
    for (const Named& in : inputs)
      if (fs::equivalent(out.path, in.path, ec))
        throw ConfigError(fmt::format("{} {}: is also this command's input ({} {}): refused, "
                                      "it would be replaced by the result; write elsewhere",
                                      out.flag, printable(out.path), in.flag, printable(in.path)));
    for (std::size_t k = i + 1; k < outputs.size(); ++k)
      if (fs::weakly_canonical(out.path, ec) == fs::weakly_canonical(outputs[k].path, ec) &&
          fs::status(out.path, ec).type() != fs::file_type::character)
        throw ConfigError(fmt::format("{} and {}: both write {}: give each its own file", out.flag,
                                      outputs[k].flag, printable(out.path)));
  }
}

Sink::Sink(const OutputOptions& opts) : opts_(opts) {
  if (!opts_.output.empty()) {
    const std::string path = output_files().open(opts_.output, "--output");
    file_ = std::fopen(path.c_str(), "w");
    if (!file_)
      throw ConfigError(fmt::format("--output {}: cannot open for writing: {}",
                                    printable(opts_.output), std::strerror(errno)));
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
    throw ConfigError(
        fmt::format("{}: write failed: {}",
                    file_ ? "--output " + printable(opts_.output) : std::string("stdout"),
                    std::strerror(errno)));
}

void Sink::comment(const std::string& text) {
  if (opts_.quiet || opts_.format != Format::table)
    return;
  write("# " + printable(text) + "\n");
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
      for (std::size_t i = 0; i < v.size(); ++i)
        s += (i ? "," : "") + csv_field(v[i]);
      return s + "\n";
    };
    sink.write(join(csv_headers_));
    for (const auto& r : csv_rows_)
      sink.write(join(r));
    return;
  }
  // Cells come from names in input files too: a control character is shown, never sent.
  auto visible = [](const std::vector<std::string>& cells) {
    std::vector<std::string> out;
    for (const auto& c : cells)
      out.push_back(printable(c));
    return out;
  };
  const std::vector<std::string> headers = visible(headers_);
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : rows_)
    rows.push_back(visible(r));
  std::vector<std::size_t> width(headers.size());
  for (std::size_t c = 0; c < headers.size(); ++c) {
    width[c] = headers[c].size();
    for (const auto& r : rows)
      if (c < r.size())
        width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t c = 0; c < headers.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      // First column left-aligned (names), the rest right-aligned (numbers).
      s += c == 0 ? fmt::format("{:<{}}", cell, width[c]) : fmt::format("  {:>{}}", cell, width[c]);
    }
    while (!s.empty() && s.back() == ' ')
      s.pop_back();
    return s + "\n";
  };
  sink.write(line(headers));
  std::size_t total = 0;
  for (auto w : width)
    total += w + 2;
  sink.write(std::string(total > 2 ? total - 2 : 0, '-') + "\n");
  for (const auto& r : rows)
    sink.write(line(r));
}

} // namespace trainsim::cli
