// Row helpers shared by SqliteStore's files (daemon/store/sqlite_store*.cc): JSON
// columns, the closed-store status, the job-exists check, the upsert of a whole
// row and the run of a statement that must change a row. Internal to
// SqliteStore; nothing else includes it.
//
// Thread safety: the functions taking a connection use it on the calling
// thread only (as every SqliteStore read or write does).
#ifndef TESSERA_DAEMON_STORE_SQLITE_STORE_ROWS_H_
#define TESSERA_DAEMON_STORE_SQLITE_STORE_ROWS_H_

#include <sqlite3.h>

#include <initializer_list>
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

// The SQL that writes a whole row of `table` keyed by its first column:
// "INSERT INTO table (a, b, c) VALUES (?, ?, ?) ON CONFLICT (a) DO UPDATE SET
// b = excluded.b, c = excluded.c". Parameters are the columns, in order.
// REQUIRES: columns has at least two names.
std::string UpsertSql(std::string_view table, std::initializer_list<std::string_view> columns);

// Runs `q` (an UPDATE or DELETE on connection `db`); kNotFound with
// `not_found` as its message when it changed no row.
Status RunOnExistingRow(sqlite3* db, Stmt& q, std::string_view not_found);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_SQLITE_STORE_ROWS_H_
