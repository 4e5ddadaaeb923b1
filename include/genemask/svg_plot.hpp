#pragma once
// Minimal SVG line plots (no dependencies): perplexity curves, accuracy vs shots.
#include <string>
#include <utility>
#include <vector>

namespace genemask {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y)
};

/// Writes an SVG with axes, ticks, one polyline (and dots) per series and a legend.
/// log_y: logarithmic y axis. Written atomically.
void write_line_plot(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<PlotSeries>& series, bool log_y = false);

}  // namespace genemask
