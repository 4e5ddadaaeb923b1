// Error-bar plots of the report (metric vs shots, ±std over seeds) and their PNG copies
// through rsvg-convert. svg_plot.hpp draws plain lines; these need bars and a log x axis.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <spawn.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

#include "genemask/eval/report.hpp"
#include "genemask/eval/svg_plot.hpp"
#include "io/atomic_file.hpp"

extern char** environ;

namespace genemask::report {
namespace {

/// About 5 round tick values covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi) {
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double f : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (f * mag >= raw) {
      step = f * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

}  // namespace

void write_errorbar_plot(const std::string& path, const std::string& title, const std::string& x_label,
                         const std::string& y_label, const std::vector<ErrorSeries>& series, bool log_x) {
  const double W = 760, H = 460, L = 70, R = 200, T = 40, B = 50;
  double x0 = std::numeric_limits<double>::max(), x1 = -x0, y0 = x0, y1 = -x0;
  auto fx = [&](double x) { return log_x ? std::log10(x) : x; };
  std::vector<double> xs;
  for (const auto& s : series)
    for (const auto& [x, ms] : s.points) {
      const double sd = std::isfinite(ms.second) ? ms.second : 0;
      x0 = std::min(x0, fx(x));
      x1 = std::max(x1, fx(x));
      y0 = std::min(y0, ms.first - sd);
      y1 = std::max(y1, ms.first + sd);
      xs.push_back(x);
    }
  if (x0 > x1) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x0 -= 0.5, x1 += 0.5;
  if (y1 == y0) y0 -= 0.05, y1 += 0.05;
  const double xpad = (x1 - x0) * 0.06, ypad = (y1 - y0) * 0.08;
  x0 -= xpad, x1 += xpad, y0 -= ypad, y1 += ypad;
  auto px = [&](double x) { return L + (fx(x) - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  const SvgFrame frame{W, H, L, R, T, B};
  std::string svg = svg_open(frame, title, x_label + (log_x ? " (log scale)" : ""), y_label);
  // x ticks at the shots values themselves (10, 50, 100, ...), y ticks at round values.
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  for (double x : xs)
    svg += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"black\"/>"
                       "<text x=\"{0:.2f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
                       px(x), H - B, H - B + 4, H - B + 17, x);
  for (double y : nice_ticks(y0, y1))
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.2f}\" x2=\"{2}\" y2=\"{1:.2f}\" stroke=\"#e0e0e0\"/>"
                       "<text x=\"{3}\" y=\"{4:.2f}\" text-anchor=\"end\">{5:g}</text>\n",
                       L + 1, py(y), W - R, L - 6, py(y) + 4, y);
  for (size_t s = 0; s < series.size(); ++s) {
    const char* col = plot_colour(s);
    // A small horizontal offset per series keeps overlapping error bars apart.
    const double dx = (static_cast<double>(s) - static_cast<double>(series.size() - 1) / 2) * 4;
    svg += fmt::format("<g class=\"series\" data-label=\"{}\">\n", xml_escape(series[s].label));
    std::string pts;
    for (const auto& [x, ms] : series[s].points) pts += fmt::format("{:.2f},{:.2f} ", px(x) + dx, py(ms.first));
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n", col, pts);
    for (const auto& [x, ms] : series[s].points) {
      const double cx = px(x) + dx;
      if (std::isfinite(ms.second) && ms.second > 0)
        svg += fmt::format("<path class=\"errorbar\" d=\"M{0:.2f},{1:.2f}V{2:.2f}M{3:.2f},{1:.2f}H{4:.2f}M{3:.2f},{2:.2f}"
                           "H{4:.2f}\" stroke=\"{5}\" fill=\"none\"/>\n",
                           cx, py(ms.first - ms.second), py(ms.first + ms.second), cx - 3, cx + 3, col);
      svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"2.5\" fill=\"{}\"/>\n", cx, py(ms.first), col);
    }
    svg += svg_legend_entry(frame, s, series[s].label) + "</g>\n";
  }
  write_svg(path, std::move(svg));
}

std::string find_rsvg_convert() {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::string p(path);
  for (size_t pos = 0; pos <= p.size();) {
    size_t end = p.find(':', pos);
    if (end == std::string::npos) end = p.size();
    const std::string cand = (end > pos ? p.substr(pos, end - pos) : std::string(".")) + "/rsvg-convert";
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    pos = end + 1;
  }
  return "";
}

void svg_to_png(const std::string& rsvg, const std::string& svg, const std::string& png) {
  io::TempOutput tmp(png);
  std::vector<std::string> args{rsvg, "--format=png", "-o", tmp.path(), svg};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int rc = posix_spawn(&pid, rsvg.c_str(), nullptr, nullptr, argv.data(), environ); rc != 0)
    throw std::runtime_error(fmt::format("cannot run {}: {}", rsvg, std::strerror(rc)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(fmt::format("waiting for {}: {}", rsvg, std::strerror(errno)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(fmt::format("{} could not convert {} to PNG (exit status {}); rerun with --no-png to skip "
                                         "PNGs", rsvg, svg, WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  tmp.commit();
}

}  // namespace genemask::report
