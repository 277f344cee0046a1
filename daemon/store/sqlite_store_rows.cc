#include "daemon/store/sqlite_store_rows.h"

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

}  // namespace tessera::daemon
