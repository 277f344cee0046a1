// ProgressWriter: the worker's progress channel, one JSON object per line.
//
// Purpose: training and inference report progress (step, loss, samples/s,
// time split; images done, images/s) as JSON lines the agent tails from
// TESSERA_PROGRESS_FILE. Without a file the lines go to stdout when
// `stdout_fallback` is set, and nowhere otherwise. Each line is flushed at
// once so a tailing agent sees it.
// Ownership: owns the open file. Thread safety: not thread-safe.
#ifndef TESSERA_WORKER_RUNTIME_PROGRESS_WRITER_H_
#define TESSERA_WORKER_RUNTIME_PROGRESS_WRITER_H_

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace tessera::worker {

class ProgressWriter {
 public:
  // path: the progress file (appended to), or empty.
  explicit ProgressWriter(const std::string& path, bool stdout_fallback = false);
  ~ProgressWriter();
  ProgressWriter(const ProgressWriter&) = delete;
  ProgressWriter& operator=(const ProgressWriter&) = delete;

  // Whether lines go anywhere.
  bool ok() const { return out_ != nullptr; }
  void Write(const nlohmann::json& line);

 private:
  FILE* file_ = nullptr;  // owned
  FILE* out_ = nullptr;   // file_, stdout or null
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_PROGRESS_WRITER_H_
