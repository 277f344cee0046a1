#include "scheduler/planner_text.h"

#include <cstdio>

#include "scheduler/byte_size.h"

namespace tessera::scheduler {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string Gb(double bytes) { return FormatBytes(bytes); }
std::string Ms(double s) { return Fmt("%.2f ms", s * 1e3); }

}  // namespace tessera::scheduler
