// gnuplot-iostream implementation of the plots (plot.hpp).
#include "cli/plot.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "common/errors.hpp"

#ifdef TRAINSIM_HAVE_PLOT
#include <gnuplot-iostream.h>
#endif

namespace trainsim::cli {
namespace {

std::string terminal_for(const std::string& file, int width = 1000, int height = 650) {
  if (file.ends_with(".png"))
    return fmt::format("pngcairo size {},{} noenhanced font ',10'", width, height);
  if (file.ends_with(".svg"))
    return fmt::format("svg size {},{} noenhanced font ',10'", width, height);
  throw ConfigError(fmt::format("--plot {}: the file must end in .png or .svg", file));
}

[[maybe_unused]] std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Data rows are whitespace-separated: keep labels one token.
[[maybe_unused]] std::string token(std::string s) {
  for (char& c : s)
    if (c == ' ' || c == '\t' || c == '"')
      c = '_';
  return s.empty() ? "-" : s;
}

} // namespace

void check_plot_file(const std::string& file) { (void)terminal_for(file); }

#ifdef TRAINSIM_HAVE_PLOT

namespace {
// Terminal, output, labels, grid, key, log axes and the spec's extra commands. A multiplot
// (plot_panels) passes its own terminal size and key, and puts the title on the layout.
void header(Gnuplot& gp, const PlotSpec& spec, const std::string& terminal,
            const char* key = "outside right top", bool title = true) {
  gp << "set terminal " << terminal << "\n";
  gp << "set output " << quote(spec.file) << "\n";
  if (title)
    gp << "set title " << quote(spec.title) << "\n";
  gp << "set xlabel " << quote(spec.xlabel) << "\n";
  gp << "set ylabel " << quote(spec.ylabel) << "\n";
  gp << "set grid\nset key " << key << "\n";
  if (spec.logx)
    gp << "set logscale x 2\n";
  if (spec.logy)
    gp << "set logscale y 10\n";
  for (const auto& e : spec.extra)
    gp << e << "\n";
}

Gnuplot open_gnuplot(const std::string& file) {
  terminal_for(file); // validate the name before starting gnuplot
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0)
    throw ConfigError("--plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox)");
  return Gnuplot("gnuplot");
}
} // namespace

void plot_xy(const PlotSpec& spec, const std::vector<Series>& series) {
  Gnuplot gp = open_gnuplot(spec.file);
  header(gp, spec, terminal_for(spec.file));
  gp << "plot ";
  for (std::size_t i = 0; i < series.size(); ++i) {
    if (i)
      gp << ", ";
    gp << "'-' using 1:2 with " << series[i].style << " title " << quote(series[i].title);
    if (!series[i].labels.empty())
      gp << ", '-' using 1:2:3 with labels offset 0.5,0.5 left font ',8' notitle";
  }
  gp << "\n";
  for (const auto& s : series) {
    gp.send1d(s.points);
    if (!s.labels.empty()) {
      std::vector<std::tuple<double, double, std::string>> rows;
      for (std::size_t i = 0; i < s.points.size(); ++i)
        rows.emplace_back(s.points[i].first, s.points[i].second, token(s.labels[i]));
      gp.send1d(rows);
    }
  }
}

void plot_panels(const PlotSpec& spec, const std::vector<Panel>& panels, int columns) {
  Gnuplot gp = open_gnuplot(spec.file);
  const int cols = std::max(columns, 1);
  const int rows = static_cast<int>((panels.size() + static_cast<std::size_t>(cols) - 1) /
                                    static_cast<std::size_t>(cols));
  header(gp, spec, terminal_for(spec.file, 480 * cols, 40 + 360 * std::max(rows, 1)),
         "top left font ',8'", false);
  gp << "set multiplot layout " << rows << "," << cols << " title " << quote(spec.title) << "\n";
  for (const Panel& panel : panels) {
    gp << "set title " << quote(panel.title) << "\nunset arrow\n";
    for (double x : panel.vlines)
      gp << "set arrow from " << x << ", graph 0 to " << x
         << ", graph 1 nohead dashtype 2 lc rgb 'gray40'\n";
    gp << "plot ";
    for (std::size_t i = 0; i < panel.series.size(); ++i)
      gp << (i ? ", " : "") << "'-' using 1:2 with " << panel.series[i].style << " title "
         << quote(panel.series[i].title);
    gp << "\n";
    for (const Series& s : panel.series)
      gp.send1d(s.points);
  }
  gp << "unset multiplot\n";
}

void plot_bars(const PlotSpec& spec, const std::vector<std::string>& labels,
               const std::vector<std::string>& groups,
               const std::vector<std::vector<double>>& values) {
  Gnuplot gp = open_gnuplot(spec.file);
  header(gp, spec, terminal_for(spec.file));
  gp << "set style data histogram\nset style histogram rowstacked\n"
        "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset xtics rotate by -30\n";
  gp << "plot ";
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (g)
      gp << ", ";
    static const char* colors[] = {"#4e79a7", "#f28e2b", "#76b7b2", "#e15759", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
    gp << "'-' using 2:xtic(1) lc rgb '" << colors[g % 10] << "' title " << quote(groups[g]);
  }
  gp << "\n";
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::pair<std::string, double>> rows;
    for (std::size_t i = 0; i < labels.size(); ++i)
      rows.emplace_back(token(labels[i]), values[g][i]);
    gp.send1d(rows);
  }
}

#else

void plot_xy(const PlotSpec& spec, const std::vector<Series>&) {
  terminal_for(spec.file);
  throw ConfigError("--plot: built without gnuplot-iostream (Debian: libgnuplot-iostream-dev); "
                    "run scripts/install-deps.sh and rebuild");
}

void plot_panels(const PlotSpec& spec, const std::vector<Panel>&, int) {
  terminal_for(spec.file);
  throw ConfigError("--plot: built without gnuplot-iostream (Debian: libgnuplot-iostream-dev); "
                    "run scripts/install-deps.sh and rebuild");
}

void plot_bars(const PlotSpec& spec, const std::vector<std::string>&,
               const std::vector<std::string>&, const std::vector<std::vector<double>>&) {
  terminal_for(spec.file);
  throw ConfigError("--plot: built without gnuplot-iostream (Debian: libgnuplot-iostream-dev); "
                    "run scripts/install-deps.sh and rebuild");
}

#endif

} // namespace trainsim::cli
