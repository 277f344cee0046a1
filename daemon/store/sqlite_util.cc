#include "daemon/store/sqlite_util.h"

#include <utility>

namespace tessera::daemon {

Status SqliteStatus(sqlite3* db, int rc, std::string_view context) {
  std::string msg = std::string(context) + ": " + sqlite3_errstr(rc);
  if (db != nullptr && sqlite3_extended_errcode(db) == rc) {
    msg = std::string(context) + ": " + sqlite3_errmsg(db);
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Unavailable(std::move(msg));
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return AlreadyExists(std::move(msg));
      }
      return InvalidArgument(std::move(msg));
    case SQLITE_FULL:
      return ResourceExhausted(std::move(msg));
    default:
      return Internal(std::move(msg));
  }
}

Status ExecSql(sqlite3* db, std::string_view sql) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, &err);
  if (err != nullptr) sqlite3_free(err);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "exec");
  return Status::Ok();
}

Result<Stmt> Stmt::Prepare(sqlite3* db, std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqliteStatus(db, rc, "prepare");
  }
  return Stmt(db, stmt);
}

Stmt::Stmt(Stmt&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), bind_rc_(other.bind_rc_) {}

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

void Stmt::Note(int rc) {
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
}

Stmt& Stmt::Bind(int i, int64_t v) {
  Note(sqlite3_bind_int64(stmt_, i, v));
  return *this;
}
Stmt& Stmt::Bind(int i, std::string_view v) {
  Note(sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}
Stmt& Stmt::BindBlob(int i, std::string_view v) {
  Note(sqlite3_bind_blob64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT));
  return *this;
}
Stmt& Stmt::BindDouble(int i, double v) {
  Note(sqlite3_bind_double(stmt_, i, v));
  return *this;
}
Stmt& Stmt::BindNull(int i) {
  Note(sqlite3_bind_null(stmt_, i));
  return *this;
}
Stmt& Stmt::Bind(int i, const std::optional<int64_t>& v) { return v ? Bind(i, *v) : BindNull(i); }
Stmt& Stmt::Bind(int i, const std::optional<std::string>& v) {
  return v ? Bind(i, std::string_view(*v)) : BindNull(i);
}

Result<bool> Stmt::Step() {
  if (bind_rc_ != SQLITE_OK) return SqliteStatus(db_, bind_rc_, "bind");
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(db_, rc, "step");
}

Stmt& Stmt::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_rc_ = SQLITE_OK;
  return *this;
}

Status Stmt::Run() {
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

int64_t Stmt::Int(int col) const { return sqlite3_column_int64(stmt_, col); }
double Stmt::Double(int col) const { return sqlite3_column_double(stmt_, col); }

std::string Stmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

std::string Stmt::Blob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  if (p == nullptr) return {};
  return std::string(static_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

bool Stmt::IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

std::optional<int64_t> Stmt::OptInt(int col) const {
  if (IsNull(col)) return std::nullopt;
  return Int(col);
}

}  // namespace tessera::daemon
