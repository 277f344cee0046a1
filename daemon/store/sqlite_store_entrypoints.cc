// SqliteStore (daemon/store/sqlite_store.h): the entrypoint allow-list.

#include <string>
#include <vector>

#include "daemon/store/sqlite_store.h"
#include "daemon/store/sqlite_store_rows.h"
#include "daemon/store/sqlite_util.h"

namespace tessera::daemon {

// ---------------------------------------------------------------- entrypoints

Result<std::vector<api::Entrypoint>> SqliteStore::ListEntrypoints() {
  std::vector<api::Entrypoint> out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q,
                             Stmt::Prepare(db,
                                           "SELECT name, command, description FROM entrypoints "
                                           "ORDER BY name"));
    return q.AppendRows(
        [](const Stmt& row) {
          return api::Entrypoint{row.Text(0), row.Text(1), row.Text(2)};
        },
        &out);
  }));
  return out;
}

Result<api::Entrypoint> SqliteStore::GetEntrypoint(std::string_view name) {
  api::Entrypoint out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q,
                             Stmt::Prepare(db,
                                           "SELECT name, command, description FROM entrypoints "
                                           "WHERE name = ?"));
    q.Bind(1, name);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("entrypoint " + std::string(name) + " is not allowed");
    out = api::Entrypoint{q.Text(0), q.Text(1), q.Text(2)};
    return Status::Ok();
  }));
  return out;
}

Status SqliteStore::PutEntrypoint(const api::Entrypoint& e) {
  TESSERA_RETURN_IF_ERROR(ValidateEntrypoint(e));
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt up, Stmt::Prepare(db, UpsertSql("entrypoints", {"name", "command", "description"})));
    up.Bind(1, std::string_view(e.name))
        .Bind(2, std::string_view(e.command))
        .Bind(3, std::string_view(e.description));
    return up.Run();
  });
}

Status SqliteStore::DeleteEntrypoint(std::string_view name) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt del, Stmt::Prepare(db, "DELETE FROM entrypoints WHERE name = ?"));
    del.Bind(1, name);
    return RunOnExistingRow(db, del, "entrypoint " + std::string(name) + " not found");
  });
}

}  // namespace tessera::daemon
