// gnuplot plots (through gnuplot-iostream; no Python). The file extension picks the
// terminal: .png (pngcairo) or .svg. Only cli/ plots. Data goes to gnuplot
// as data; every string (titles, names, labels, paths) passes gnuplot_string() or data_token(),
// so no input can run a gnuplot or shell command. A plot that is not written is an error.
#pragma once

#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainsim::cli {

struct Series {
  std::string title;
  std::vector<std::pair<double, double>> points;
  std::string style = "linespoints"; // gnuplot "with" style: lines, points, linespoints
  std::vector<std::string> labels;   // optional point labels (same length as points)
};

/// A dashed vertical line at x with an optional label written along it.
struct Marker {
  double x = 0;
  std::string label;
};

/// An axis range; NaN leaves that end to gnuplot (autoscale).
struct Range {
  double lo = std::numeric_limits<double>::quiet_NaN();
  double hi = std::numeric_limits<double>::quiet_NaN();
};

enum class KeyPlace { outside_right, top_left };

struct PlotSpec {
  std::string file;
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false;
  Range xrange, yrange;
  KeyPlace key = KeyPlace::outside_right;
  std::vector<std::pair<std::string, double>> xtics; // (label, x); empty: gnuplot's own
  std::vector<Marker> markers;                       // dashed vertical lines at x
  std::vector<Marker> hmarkers; // solid red horizontal lines at y = Marker::x (e.g. capacity)
};

/// A spec with the four fields every plot sets; the rest keep their defaults.
[[nodiscard]] PlotSpec plot_spec(std::string file, std::string title, std::string xlabel,
                                 std::string ylabel);

/// `s` as a single-quoted gnuplot string literal: valid UTF-8 (other bytes become '?'), control
/// characters (newlines) as spaces, quotes doubled. Inside single quotes gnuplot expands
/// nothing, so the result is inert text whatever `s` holds.
[[nodiscard]] std::string gnuplot_string(std::string_view s);

/// `s` as one column of gnuplot inline data: no whitespace, quotes, '#' or control characters
/// (they would split the row, start a comment, or end the data block early).
[[nodiscard]] std::string data_token(std::string_view s);

/// One small plot of a multi-panel figure: its own title, series and vertical marker lines.
struct Panel {
  std::string title;
  std::vector<Series> series;
  std::vector<double> vlines; // x positions of dashed vertical lines (e.g. regime boundaries)
};

/// Throws ConfigError unless `file` ends in .png or .svg, is a plain path (no control
/// characters) and its directory exists and is writable (call before any work is done).
void check_plot_file(const std::string& file);

/// Line/point plot of several series.
void plot_xy(const PlotSpec& spec, const std::vector<Series>& series);

/// Several panels on one page (gnuplot multiplot, `columns` per row); `spec` gives the file, the
/// page title, the axis labels and log scales shared by every panel.
void plot_panels(const PlotSpec& spec, const std::vector<Panel>& panels, int columns);

/// Bar chart: one bar per label; `groups` names several values per label (clustered bars).
void plot_bars(const PlotSpec& spec, const std::vector<std::string>& labels,
               const std::vector<std::string>& groups,
               const std::vector<std::vector<double>>& values);

} // namespace trainsim::cli
