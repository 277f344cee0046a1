// The SQLite schema of tesserad as an ordered list of migrations.
//
// Migration i (1-based) is a SQL script applied in its own transaction
// together with the row (version = i) in `schema_version`. A released
// migration is never edited; a schema change is a new script at the end.
// Opening a database whose highest version is above the newest known one is
// refused (kFailedPrecondition), so an older tesserad never writes into a
// newer schema.
//
// Thread safety: MigrateSqliteSchema uses the given connection only;
// REQUIRES: no other connection writes the database meanwhile.
#ifndef TESSERA_DAEMON_STORE_SQLITE_SCHEMA_H_
#define TESSERA_DAEMON_STORE_SQLITE_SCHEMA_H_

#include <sqlite3.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tessera::daemon {

// Migration scripts, oldest first. Version of script i is i + 1.
const std::vector<std::string_view>& SqliteMigrations();

// The version a fully migrated database has.
int64_t LatestSqliteSchemaVersion();

// Creates `schema_version` if missing, refuses a newer database, applies the
// missing migrations. Returns the version now in the database.
Result<int64_t> MigrateSqliteSchema(
    sqlite3* db, int64_t now_ms,
    const std::vector<std::string_view>& migrations = SqliteMigrations());

// The highest version recorded in `schema_version` (0 when none).
Result<int64_t> ReadSqliteSchemaVersion(sqlite3* db);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_SQLITE_SCHEMA_H_
