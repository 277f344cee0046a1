// NodeCredentialFile: where tessera-agent keeps its node credential
// (api/node_identity.h), normally <state_dir>/node-credential.
//
// The file holds two lines: the credential and the node name it was issued
// for. It is written with mode 0600 (WriteFileAtomically of
// common/atomic_file.h: a temp file beside it, fsync, rename, fsync of the
// folder), so a crash leaves the old or the new credential, never a mix. A
// credential kept for another node name is not used (the agent enrols again
// under its new name). Reads and writes go through `fs` (not owned).
//
// Thread safety: functions; one agent owns the file.
#ifndef TESSERA_AGENT_NODE_CREDENTIAL_FILE_H_
#define TESSERA_AGENT_NODE_CREDENTIAL_FILE_H_

#include <optional>
#include <string>

#include "common/file_system.h"
#include "common/status.h"

namespace tessera::agent {

// The credential kept for `node`, nullopt when the file is missing or holds
// one for another node. kInvalidArgument naming "credential_file" when the
// file cannot be read or is malformed. Tightens a looser mode to 0600.
Result<std::optional<std::string>> LoadNodeCredential(const std::string& path,
                                                      const std::string& node,
                                                      FileSystem* fs = FileSystem::Default());

// Replaces the file with (credential, node), mode 0600. kInvalidArgument
// naming "credential_file", its message naming the path and the failed step,
// when that fails (the file keeps its previous content).
Status StoreNodeCredential(const std::string& path, const std::string& credential,
                           const std::string& node, FileSystem* fs = FileSystem::Default());

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_NODE_CREDENTIAL_FILE_H_
