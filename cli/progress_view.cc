#include "cli/progress_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessera::cli {
namespace {

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string Percent(int64_t done, int64_t total) {
  if (total <= 0) return "0.0%";
  return Fixed(100.0 * static_cast<double>(done) / static_cast<double>(total), 1) + "%";
}

}  // namespace

std::string ProgressBar(int64_t done, int64_t total, int width) {
  width = std::max(width, 1);
  int filled = 0;
  if (total > 0) {
    double fraction = std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
    filled = static_cast<int>(std::floor(fraction * width));
  }
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(width - filled), '-') + "]";
}

std::string FormatDuration(double seconds) {
  if (seconds < 0 || !std::isfinite(seconds)) return "unknown";
  if (seconds < 60) return Fixed(seconds, 1) + " s";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total < 3600) return std::to_string(total / 60) + " min " + std::to_string(total % 60) + " s";
  return std::to_string(total / 3600) + " h " + std::to_string(total % 3600 / 60) + " min";
}

std::string InferenceProgressLine(const api::InferenceProgress& p, bool terminal) {
  std::string line = "images " + std::to_string(p.images_done) + " / " +
                     std::to_string(p.images_total) + "  " + Percent(p.images_done, p.images_total);
  if (terminal) line += "  " + ProgressBar(p.images_done, p.images_total, 30);
  line += "  " + Fixed(p.images_per_s, 1) + " images/s  eta " + FormatDuration(p.eta_s);
  return line;
}

std::string FormatInferenceProgress(const api::InferenceProgress& p, bool terminal) {
  std::string out = "images   " + std::to_string(p.images_done) + " / " +
                    std::to_string(p.images_total) + "  " + Percent(p.images_done, p.images_total);
  if (terminal) out += "  " + ProgressBar(p.images_done, p.images_total, 30);
  out += "\nchunks   " + std::to_string(p.chunks_done) + " done, " +
         std::to_string(p.chunks_leased) + " leased, " + std::to_string(p.chunks_total) +
         " in all\n";
  out +=
      "speed    " + Fixed(p.images_per_s, 1) + " images/s  eta " + FormatDuration(p.eta_s) + "\n";
  for (const api::DeviceThroughput& d : p.devices) {
    out += "rank " + std::to_string(d.rank) + "   " + (d.device.empty() ? "-" : d.device) + "   " +
           std::to_string(d.images) + " images   " + Fixed(d.images_per_s, 1) + " images/s\n";
  }
  return out;
}

}  // namespace tessera::cli
