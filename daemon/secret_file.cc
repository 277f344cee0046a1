#include "daemon/secret_file.h"

#include "common/atomic_file.h"

namespace tessera::daemon {

Result<std::string> ReadSecretLine(FileSystem& files, const std::filesystem::path& path) {
  Result<std::string> text = files.ReadFile(path);
  const std::string line = text.ok() ? text->substr(0, text->find('\n')) : std::string();
  if (line.empty()) return NotFound("cannot read " + path.string());
  return line;
}

Status WriteSecretLine(FileSystem& files, const std::filesystem::path& path,
                       const std::string& text) {
  AtomicWriteOptions options;
  options.mode = 0600;
  Status written = WriteFileAtomically(files, path, text + "\n", options);
  if (!written.ok()) return Unavailable(written.message());
  return Status::Ok();
}

}  // namespace tessera::daemon
