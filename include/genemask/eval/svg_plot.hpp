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

/// The plot area of an SVG: size W x H, margins left/right/top/bottom (legend on the right).
struct SvgFrame {
  double W, H, L, R, T, B;
};

/// Shared pieces of the SVG plots (this file's line plots, the report's error-bar plots).
std::string xml_escape(const std::string& s);
/// <svg> header, white background, title, the two axes and their labels (escaped).
std::string svg_open(const SvgFrame& f, const std::string& title, const std::string& x_label,
                     const std::string& y_label);
/// Colour of series i (a fixed palette of 8, repeating).
const char* plot_colour(size_t i);
/// The legend entry of series i: a colour square and the (escaped) label.
std::string svg_legend_entry(const SvgFrame& f, size_t i, const std::string& label);
/// Appends </svg> and writes the file atomically.
void write_svg(const std::string& path, std::string svg);

/// Writes an SVG with axes, ticks, one polyline (and dots) per series and a legend.
/// log_y: logarithmic y axis. Written atomically.
void write_line_plot(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<PlotSeries>& series, bool log_y = false);

}  // namespace genemask
