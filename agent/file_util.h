// Small file helpers of the agent: atomic writes, whole-file and tail reads.
// Thread safety: functions; concurrent writers to one path race by design of
// the filesystem (the last rename wins).
#ifndef TESSERA_AGENT_FILE_UTIL_H_
#define TESSERA_AGENT_FILE_UTIL_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "common/status.h"

namespace tessera::agent {

// Writes `content` to a temp file beside `path`, fsyncs it and renames it
// over `path`, so readers see the old or the new content, never a mix.
Status WriteFileAtomically(const std::filesystem::path& path, const std::string& content);

// The whole file, or nullopt when it cannot be read.
std::optional<std::string> ReadWholeFile(const std::filesystem::path& path);

// The last `max_bytes` of the file (all of it when shorter); empty when it
// cannot be read.
std::string ReadFileTail(const std::filesystem::path& path, int64_t max_bytes);

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_FILE_UTIL_H_
