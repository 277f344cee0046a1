// Row helpers shared by SqliteStore's files (daemon/store/sqlite_store*.cc): JSON
// columns, the closed-store status and the job-exists check. Internal to
// SqliteStore; nothing else includes it.
//
// Thread safety: the functions taking a connection use it on the calling
// thread only (as every SqliteStore read or write does).
#ifndef TESSERA_DAEMON_STORE_SQLITE_STORE_ROWS_H_
#define TESSERA_DAEMON_STORE_SQLITE_STORE_ROWS_H_

#include <sqlite3.h>

#include <optional>
#include <string>
#include <string_view>

#include "api/types.h"
#include "common/status.h"
#include "daemon/store/sqlite_util.h"

namespace tessera::daemon {

// JSON text for a column; null becomes SQL NULL. Invalid UTF-8 is replaced
// rather than thrown.
std::optional<std::string> JsonColumn(const api::Json& j);

// Column `col` of the current row parsed as JSON (null for SQL NULL);
// kInternal naming `what` when it is not valid JSON.
Result<api::Json> ParseJsonColumn(const Stmt& q, int col, std::string_view what);

// What every call of a closed store returns (kUnavailable).
Status StoreClosed();

// kNotFound ("job N not found") unless the job exists.
Status CheckJobExists(sqlite3* db, api::JobId job);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_SQLITE_STORE_ROWS_H_
