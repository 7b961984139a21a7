// gnuplot-iostream implementation of the plots (plot.hpp). Strings never reach gnuplot as
// code: every user-controlled string (titles, names, labels) is a single-quoted gnuplot string
// built by gnuplot_string(), data columns go through data_token(), and gnuplot only ever sees
// an absolute temporary output path of our own making, renamed onto the user's path once the
// plot is written (a path starting with '|' would otherwise be a pipe to a shell command).
#include "cli/plot.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/output.hpp"
#include "common/errors.hpp"
#include "common/text.hpp"

#ifdef TRAINSIM_HAVE_PLOT
#include <gnuplot-iostream.h>
#endif

namespace trainsim::cli {
namespace {

namespace fs = std::filesystem;

std::string terminal_for(const std::string& file, int width = 1000, int height = 650) {
  if (file.ends_with(".png"))
    return fmt::format("pngcairo size {},{} noenhanced font ',10'", width, height);
  if (file.ends_with(".svg"))
    return fmt::format("svg size {},{} noenhanced font ',10'", width, height);
  throw ConfigError(fmt::format("--plot {}: the file must end in .png or .svg", printable(file)));
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = b < 0x80           ? 1
                  : (b >> 5) == 0x6  ? 2
                  : (b >> 4) == 0xe  ? 3
                  : (b >> 3) == 0x1e ? 4
                                     : 0;
  if (n == 0 || i + n > s.size() || (n == 2 && b < 0xc2))
    return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80)
      return 0;
  return n;
}

// Valid UTF-8 with control characters (newlines, tabs, escape...) replaced by `control`.
std::string clean_text(std::string_view s, char control) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      out += '?';
      ++i;
      continue;
    }
    const auto b = static_cast<unsigned char>(s[i]);
    if (n == 1 && (b < 0x20 || b == 0x7f))
      out += control;
    else
      out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

// The line style of a series is a literal of the calling code (e.g. "points pt 7 ps 0.5",
// "lines lc rgb '#d62728'"), never input: anything beyond that alphabet is a programming error.
[[maybe_unused]] const std::string& checked_style(const std::string& style) {
  for (char c : style)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == ' ' || c == '.' || c == '#' ||
          c == '\''))
      throw std::logic_error("plot: series style is not a plain gnuplot style: " +
                             printable(style));
  return style;
}

} // namespace

PlotSpec plot_spec(std::string file, std::string title, std::string xlabel, std::string ylabel) {
  PlotSpec spec;
  spec.file = std::move(file);
  spec.title = std::move(title);
  spec.xlabel = std::move(xlabel);
  spec.ylabel = std::move(ylabel);
  return spec;
}

std::string gnuplot_string(std::string_view s) {
  // Inside single quotes gnuplot substitutes nothing (no backquote commands, no @macros, no
  // backslash escapes); the only way out is a quote, doubled here, or a newline, which ends
  // the command and is replaced by a space.
  std::string out = "'";
  for (char c : clean_text(s, ' ')) {
    if (c == '\'')
      out += "''";
    else
      out += c;
  }
  return out + "'";
}

std::string data_token(std::string_view s) {
  // Inline data rows are whitespace-separated and end at a line holding "e"; '#' starts a
  // comment and quotes group columns: none of them may appear inside one column.
  std::string out = clean_text(s, '_');
  for (char& c : out)
    if (c == ' ' || c == '"' || c == '\'' || c == '#' || c == '`')
      c = '_';
  return out.empty() ? "-" : out;
}

void check_plot_file(const std::string& file) {
  (void)terminal_for(file);
  if (clean_text(file, '?') != file)
    throw ConfigError(fmt::format(
        "--plot {}: the path holds control characters or invalid UTF-8; choose a plain name",
        printable(file)));
  std::error_code ec;
  const fs::path target = fs::absolute(fs::path(file), ec);
  if (ec)
    throw ConfigError(fmt::format("--plot {}: {}", file, ec.message()));
  const fs::path dir = target.parent_path();
  if (!fs::is_directory(dir, ec))
    throw ConfigError(fmt::format("--plot {}: directory {} does not exist", file, dir.string()));
  if (fs::is_directory(target, ec))
    throw ConfigError(fmt::format("--plot {}: is a directory", file));
  // Writable? Create and remove a scratch file there (access() says yes to root even on
  // read-only file systems such as /proc).
  std::string probe = (dir / ".trainsim-plot-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw ConfigError(
        fmt::format("--plot {}: cannot write in {}: {}", file, dir.string(), std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

#ifdef TRAINSIM_HAVE_PLOT

namespace {

// One gnuplot process writing one plot. gnuplot writes to the temporary file output_files()
// makes beside the target (absolute path, letters and digits only past the user's directory),
// and its error output goes to a scratch file there too; finish() checks that a non-empty plot
// was written (the rename onto the target comes when the whole command succeeded), else throws
// with gnuplot's own error output.
class PlotSession {
 public:
  explicit PlotSession(const std::string& file) : file_(file) {
    check_plot_file(file);
    if (std::system("command -v gnuplot > /dev/null 2>&1") != 0)
      throw ConfigError("--plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox)");
    tmp_ = fs::absolute(fs::path(output_files().open(file, "--plot"))).string();
    err_ = (fs::path(tmp_).parent_path() / ".trainsim-gnuplot-XXXXXX").string();
    const int fd = ::mkstemp(err_.data());
    if (fd < 0)
      throw ConfigError(fmt::format("--plot {}: cannot create a scratch file beside it: {}",
                                    printable(file), std::strerror(errno)));
    ::close(fd);
    // err_ is made of the target's directory and letters/digits; quote it for the shell anyway.
    gp_ = std::make_unique<Gnuplot>("gnuplot > /dev/null 2> " + shell_quote(err_));
  }
  PlotSession(const PlotSession&) = delete;
  PlotSession& operator=(const PlotSession&) = delete;
  ~PlotSession() {
    gp_.reset();
    ::unlink(err_.c_str());
  }

  Gnuplot& gp() { return *gp_; }
  /// The path gnuplot writes to (`set output`), already quoted for gnuplot.
  [[nodiscard]] std::string output() const { return gnuplot_string(tmp_); }

  void finish() {
    *gp_ << "unset output\n";
    gp_.reset(); // waits for gnuplot to exit
    std::error_code ec;
    const auto size = fs::file_size(tmp_, ec);
    if (ec || size == 0) {
      std::ifstream in(err_);
      std::stringstream text;
      text << in.rdbuf();
      std::string msg = printable(text.str().substr(0, 600), /*keep_newlines=*/true);
      throw ConfigError(fmt::format("--plot {}: gnuplot wrote no plot{}{}", printable(file_),
                                    msg.empty() ? "" : ": ", msg));
    }
  }

 private:
  static std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s)
      out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  }
  std::string file_, tmp_, err_;
  std::unique_ptr<Gnuplot> gp_;
};

// Terminal, output, labels, grid, key, log axes and the spec's extra commands. A multiplot
// (plot_panels) passes its own terminal size and key, and puts the title on the layout.
std::string range(const Range& r) {
  auto end = [](double v) { return std::isfinite(v) ? fmt::format("{:.17g}", v) : "*"; };
  return "[" + end(r.lo) + ":" + end(r.hi) + "]";
}

void header(PlotSession& s, const PlotSpec& spec, const std::string& terminal,
            const char* key = nullptr, bool title = true) {
  if (key == nullptr)
    key = spec.key == KeyPlace::top_left ? "top left" : "outside right top";
  Gnuplot& gp = s.gp();
  gp << "set terminal " << terminal << "\n";
  gp << "set output " << s.output() << "\n";
  if (title)
    gp << "set title " << gnuplot_string(spec.title) << "\n";
  gp << "set xlabel " << gnuplot_string(spec.xlabel) << "\n";
  gp << "set ylabel " << gnuplot_string(spec.ylabel) << "\n";
  gp << "set grid\nset key " << key << "\n";
  if (spec.logx)
    gp << "set logscale x 2\n";
  if (spec.logy)
    gp << "set logscale y 10\n";
  gp << "set xrange " << range(spec.xrange) << "\nset yrange " << range(spec.yrange) << "\n";
  if (!spec.xtics.empty()) {
    gp << "set xtics (";
    for (std::size_t i = 0; i < spec.xtics.size(); ++i)
      gp << (i ? ", " : "") << gnuplot_string(spec.xtics[i].first) << " "
         << fmt::format("{:.17g}", spec.xtics[i].second);
    gp << ")\n";
  }
  for (const auto& m : spec.hmarkers) {
    const std::string y = fmt::format("{:.17g}", m.x);
    gp << "set arrow from graph 0, first " << y << " to graph 1, first " << y
       << " nohead lc rgb 'red' lw 2\n";
    if (!m.label.empty())
      gp << "set label " << gnuplot_string(m.label) << " at graph 0.02, first " << y
         << " tc rgb 'red' offset 0,0.7\n";
  }
  for (const auto& m : spec.markers) {
    gp << "set arrow from " << m.x << ",graph 0 to " << m.x << ",graph 1 nohead dt 2\n";
    if (!m.label.empty())
      gp << "set label " << gnuplot_string(m.label) << " at " << m.x
         << ",graph 0.97 rotate left font ',8'\n";
  }
}

} // namespace

void plot_xy(const PlotSpec& spec, const std::vector<Series>& series) {
  PlotSession session(spec.file);
  Gnuplot& gp = session.gp();
  header(session, spec, terminal_for(spec.file));
  gp << "plot ";
  for (std::size_t i = 0; i < series.size(); ++i) {
    if (i)
      gp << ", ";
    gp << "'-' using 1:2 with " << checked_style(series[i].style) << " title "
       << gnuplot_string(series[i].title);
    if (!series[i].labels.empty())
      gp << ", '-' using 1:2:3 with labels offset 0.5,0.5 left font ',8' notitle";
  }
  gp << "\n";
  for (const auto& s : series) {
    gp.send1d(s.points);
    if (!s.labels.empty()) {
      std::vector<std::tuple<double, double, std::string>> rows;
      for (std::size_t i = 0; i < s.points.size(); ++i)
        rows.emplace_back(s.points[i].first, s.points[i].second,
                          data_token(i < s.labels.size() ? s.labels[i] : ""));
      gp.send1d(rows);
    }
  }
  session.finish();
}

void plot_panels(const PlotSpec& spec, const std::vector<Panel>& panels, int columns) {
  PlotSession session(spec.file);
  Gnuplot& gp = session.gp();
  const int cols = std::max(columns, 1);
  const int rows = static_cast<int>((panels.size() + static_cast<std::size_t>(cols) - 1) /
                                    static_cast<std::size_t>(cols));
  header(session, spec, terminal_for(spec.file, 480 * cols, 40 + 360 * std::max(rows, 1)),
         "top left font ',8'", false);
  gp << "set multiplot layout " << rows << "," << cols << " title " << gnuplot_string(spec.title)
     << "\n";
  for (const Panel& panel : panels) {
    gp << "set title " << gnuplot_string(panel.title) << "\nunset arrow\n";
    for (double x : panel.vlines)
      gp << "set arrow from " << x << ", graph 0 to " << x
         << ", graph 1 nohead dashtype 2 lc rgb 'gray40'\n";
    gp << "plot ";
    for (std::size_t i = 0; i < panel.series.size(); ++i)
      gp << (i ? ", " : "") << "'-' using 1:2 with " << checked_style(panel.series[i].style)
         << " title " << gnuplot_string(panel.series[i].title);
    gp << "\n";
    for (const Series& s : panel.series)
      gp.send1d(s.points);
  }
  gp << "unset multiplot\n";
  session.finish();
}

void plot_bars(const PlotSpec& spec, const std::vector<std::string>& labels,
               const std::vector<std::string>& groups,
               const std::vector<std::vector<double>>& values) {
  PlotSession session(spec.file);
  Gnuplot& gp = session.gp();
  header(session, spec, terminal_for(spec.file));
  gp << "set style data histogram\nset style histogram rowstacked\n"
        "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset xtics rotate by -30\n";
  gp << "plot ";
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (g)
      gp << ", ";
    static const char* colors[] = {"#4e79a7", "#f28e2b", "#76b7b2", "#e15759", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
    gp << "'-' using 2:xtic(1) lc rgb '" << colors[g % 10] << "' title "
       << gnuplot_string(groups[g]);
  }
  gp << "\n";
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::pair<std::string, double>> rows;
    for (std::size_t i = 0; i < labels.size(); ++i)
      rows.emplace_back(data_token(labels[i]), values[g][i]);
    gp.send1d(rows);
  }
  session.finish();
}

#else

namespace {
[[noreturn]] void no_plot(const std::string& file) {
  check_plot_file(file);
  throw ConfigError("--plot: built without gnuplot-iostream (Debian: libgnuplot-iostream-dev); "
                    "run scripts/install-deps.sh and rebuild");
}
} // namespace

void plot_xy(const PlotSpec& spec, const std::vector<Series>&) { no_plot(spec.file); }
void plot_panels(const PlotSpec& spec, const std::vector<Panel>&, int) { no_plot(spec.file); }
void plot_bars(const PlotSpec& spec, const std::vector<std::string>&,
               const std::vector<std::string>&, const std::vector<std::vector<double>>&) {
  no_plot(spec.file);
}

#endif

} // namespace trainsim::cli
