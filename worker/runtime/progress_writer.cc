#include "worker/runtime/progress_writer.h"

namespace tessera::worker {

ProgressWriter::ProgressWriter(const std::string& path, bool stdout_fallback) {
  if (!path.empty()) file_ = std::fopen(path.c_str(), "a");
  out_ = file_ != nullptr ? file_ : (stdout_fallback ? stdout : nullptr);
}

ProgressWriter::~ProgressWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void ProgressWriter::Write(const nlohmann::json& line) {
  if (out_ == nullptr) return;
  const std::string s = line.dump() + "\n";
  std::fwrite(s.data(), 1, s.size(), out_);
  std::fflush(out_);
}

}  // namespace tessera::worker
