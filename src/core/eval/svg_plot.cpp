#include "genemask/eval/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "io/atomic_file.hpp"

namespace genemask {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string svg_open(const SvgFrame& f, const std::string& title, const std::string& x_label,
                     const std::string& y_label) {
  const double W = f.W, H = f.H, L = f.L, R = f.R, T = f.T, B = f.B;
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"15\">{}</text>\n"
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n"
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
      "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">{}</text>\n",
      W, H, L, xml_escape(title), L, H - B, W - R, H - B, L, T, L, H - B, (L + W - R) / 2, H - 12, xml_escape(x_label),
      (T + H - B) / 2, (T + H - B) / 2, xml_escape(y_label));
}

const char* plot_colour(size_t i) {
  static const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  return kColours[i % 8];
}

std::string svg_legend_entry(const SvgFrame& f, size_t i, const std::string& label) {
  const double y = f.T + 20.0 * static_cast<double>(i);
  return fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
                     f.W - f.R + 12, y, plot_colour(i), f.W - f.R + 30, y + 11, xml_escape(label));
}

void write_svg(const std::string& path, std::string svg) {
  svg += "</svg>\n";
  io::AtomicFile f(path);
  f.stream() << svg;
  f.commit();
}

void write_line_plot(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<PlotSeries>& series, bool log_y) {
  const double W = 720, H = 440, L = 70, R = 170, T = 40, B = 50;
  double x0 = std::numeric_limits<double>::max(), x1 = -x0, y0 = x0, y1 = -x0;
  auto fy = [&](double y) { return log_y ? std::log10(std::max(y, 1e-300)) : y; };
  for (const auto& s : series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, fy(y));
      y1 = std::max(y1, fy(y));
    }
  if (x0 > x1) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (fy(y) - y0) / (y1 - y0) * (H - T - B); };
  const SvgFrame frame{W, H, L, R, T, B};
  std::string svg = svg_open(frame, title, x_label, y_label + (log_y ? " (log scale)" : ""));
  for (int i = 0; i <= 5; ++i) {
    const double xv = x0 + (x1 - x0) * i / 5, yv = y0 + (y1 - y0) * i / 5;
    const double ylab = log_y ? std::pow(10.0, yv) : yv;
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{:.4g}</text>\n", px(xv), H - B + 16, xv);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.4g}</text>\n", L - 6,
                       H - B - (yv - y0) / (y1 - y0) * (H - T - B) + 4, ylab);
  }
  for (size_t s = 0; s < series.size(); ++s) {
    const char* col = plot_colour(s);
    std::string pts;
    for (auto [x, y] : series[s].points)
      if (std::isfinite(y)) pts += fmt::format("{:.2f},{:.2f} ", px(x), py(y));
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n", col, pts);
    for (auto [x, y] : series[s].points)
      if (std::isfinite(y)) svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"2.5\" fill=\"{}\"/>\n", px(x), py(y), col);
    svg += svg_legend_entry(frame, s, series[s].label);
  }
  write_svg(path, std::move(svg));
}

}  // namespace genemask
