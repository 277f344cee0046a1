// Secret files of tesserad: one line each (the agents' join token, the
// first admin token, the lease key, the bound port), readable by their owner
// only (mode 0600, the umask applying), replaced atomically
// (common/atomic_file.h), so a crash leaves the old line or the new one.
//
// Thread safety: functions; concurrent writers of one file race (the last
// rename wins).
#ifndef TESSERA_DAEMON_SECRET_FILE_H_
#define TESSERA_DAEMON_SECRET_FILE_H_

#include <filesystem>
#include <string>

#include "common/file_system.h"
#include "common/status.h"

namespace tessera::daemon {

// The file's first line. kNotFound ("cannot read <path>") when the file is
// missing, unreadable or starts with an empty line.
Result<std::string> ReadSecretLine(FileSystem& files, const std::filesystem::path& path);

// Replaces the file with `text` and a newline. kUnavailable naming the path
// and the failed step when that fails (the file keeps its previous line).
Status WriteSecretLine(FileSystem& files, const std::filesystem::path& path,
                       const std::string& text);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_SECRET_FILE_H_
