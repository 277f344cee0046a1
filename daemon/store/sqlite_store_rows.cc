#include "daemon/store/sqlite_store_rows.h"

#include <string>

namespace tessera::daemon {

std::optional<std::string> JsonColumn(const api::Json& j) {
  if (j.is_null()) return std::nullopt;
  return j.dump(-1, ' ', false, api::Json::error_handler_t::replace);
}

Result<api::Json> ParseJsonColumn(const Stmt& q, int col, std::string_view what) {
  if (q.IsNull(col)) return api::Json();
  api::Json j = api::Json::parse(q.Text(col), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal("stored " + std::string(what) + " is not valid JSON");
  return j;
}

Status StoreClosed() { return Unavailable("store is closed"); }

Status CheckJobExists(sqlite3* db, api::JobId job) {
  TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, "SELECT 1 FROM jobs WHERE id = ?"));
  q.Bind(1, job);
  TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return NotFound("job " + std::to_string(job) + " not found");
  return Status::Ok();
}

std::string UpsertSql(std::string_view table, std::initializer_list<std::string_view> columns) {
  const std::string key(*columns.begin());
  std::string names = key, params = "?", updates;
  for (auto c = columns.begin() + 1; c != columns.end(); ++c) {
    const std::string column(*c);
    names += ", " + column;
    params += ", ?";
    updates += (updates.empty() ? "" : ", ") + column + " = excluded." + column;
  }
  return "INSERT INTO " + std::string(table) + " (" + names + ") VALUES (" + params +
         ") ON CONFLICT (" + key + ") DO UPDATE SET " + updates;
}

Status RunOnExistingRow(sqlite3* db, Stmt& q, std::string_view not_found) {
  TESSERA_RETURN_IF_ERROR(q.Run());
  if (sqlite3_changes(db) == 0) return NotFound(std::string(not_found));
  return Status::Ok();
}

}  // namespace tessera::daemon
