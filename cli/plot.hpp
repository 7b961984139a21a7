// gnuplot plots (through gnuplot-iostream; no Python). The file extension picks the
// terminal: .png (pngcairo) or .svg. Only cli/ plots (STYLE.md section 8).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace trainsim::cli {

struct Series {
  std::string title;
  std::vector<std::pair<double, double>> points;
  std::string style = "linespoints"; // gnuplot "with" style: lines, points, linespoints
  std::vector<std::string> labels;   // optional point labels (same length as points)
};

struct PlotSpec {
  std::string file;
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false;
  std::vector<std::string> extra; // raw gnuplot commands (e.g. arrows, ranges)
};

/// One small plot of a multi-panel figure: its own title, series and vertical marker lines.
struct Panel {
  std::string title;
  std::vector<Series> series;
  std::vector<double> vlines; // x positions of dashed vertical lines (e.g. regime boundaries)
};

/// Throws ConfigError unless `file` ends in .png or .svg (call before any work is done).
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
