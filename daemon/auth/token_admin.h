// `tesserad token`: API token administration on the controller's own
// SQLite store, run on the controller's machine by a user who may read and
// write its state folder. Tokens are stored only as salted hashes; `create`
// prints the plaintext once.
//
//   tesserad token [--db PATH | --state-dir DIR] create USER [--admin] [--json]
//   tesserad token [--db PATH | --state-dir DIR] list [--json]
//   tesserad token [--db PATH | --state-dir DIR] revoke ID
//
// The store: --db PATH; else <DIR>/tessera.db with --state-dir DIR; else
// $TESSERA_DB; else var/tesserad/tessera.db (relative to the working
// folder). --db and --state-dir may also follow the action. A store that
// does not exist yet is created, as tesserad would at its first start.
//
// Output: `create` prints the token (--json: {"id","user","role","token"});
// `list` a table of id, user, role, created and revoked times in Unix
// seconds, never a secret (--json: [{"id","user","role","created_ms",
// "revoked_ms"}], revoked_ms null while valid); `revoke` "revoked ID".
// Errors go to `err` as "error: ...".
//
// Ownership: borrows the streams for the call. Thread safety: reentrant;
// opens its own store connection per call (concurrent with a running
// tesserad, as SQLite's WAL mode allows).
#ifndef TESSERA_DAEMON_AUTH_TOKEN_ADMIN_H_
#define TESSERA_DAEMON_AUTH_TOKEN_ADMIN_H_

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace tessera::daemon {

// Exit codes of RunTokenAdmin (those `tessera` uses for the same outcomes).
inline constexpr int kTokenAdminOk = 0;
inline constexpr int kTokenAdminRefused = 1;  // the store refused (e.g. unknown token id)
inline constexpr int kTokenAdminUsage = 2;    // bad arguments
inline constexpr int kTokenAdminNoStore = 3;  // the store could not be opened

// The value of an environment variable, or nullopt when it is unset.
using EnvGetter = std::function<std::optional<std::string>(const std::string& name)>;

// The process's environment (std::getenv).
std::optional<std::string> ProcessEnvironment(const std::string& name);

// Runs one token command. `args` are the words after `tesserad token`
// (the action, its operands and the options). Returns the exit code.
// REQUIRES: env is callable.
int RunTokenAdmin(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                  const EnvGetter& env);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_AUTH_TOKEN_ADMIN_H_
