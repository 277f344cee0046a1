#include "cli/output_format.h"

#include <cstdio>
#include <sstream>

#include "cli/text_table.h"

namespace tessera::cli {

using api::Json;

std::string Str(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

int64_t Int(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  return it->get<int64_t>();
}

std::string FormatBytes(int64_t bytes) {
  double gib = static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << gib << " GiB";
  return os.str();
}

std::string FormatFlops(double tflops) {
  if (!(tflops > 0)) return "-";
  char buf[64];
  if (tflops >= 1) {
    std::snprintf(buf, sizeof(buf), "%.1f TFLOPS", tflops);
  } else if (tflops >= 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.1f GFLOPS", tflops * 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MFLOPS", tflops * 1e6);
  }
  return buf;
}

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  out << FormatTable(rows);
}

}  // namespace tessera::cli
