// Thin RAII helpers over the SQLite C API, and the one place where SQLite
// result codes become a Status.
//
// Mapping: SQLITE_BUSY / SQLITE_LOCKED -> kUnavailable; a UNIQUE or PRIMARY
// KEY constraint -> kAlreadyExists; other constraints (CHECK, NOT NULL,
// FOREIGN KEY) -> kInvalidArgument; SQLITE_FULL -> kResourceExhausted;
// anything else -> kInternal. Messages carry SQLite's own text.
//
// Ownership: Stmt owns its sqlite3_stmt (finalized on destruction) but not
// the connection. Thread safety: a Stmt and its connection are used by one
// thread at a time.
#ifndef TESSERA_DAEMON_STORE_SQLITE_UTIL_H_
#define TESSERA_DAEMON_STORE_SQLITE_UTIL_H_

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tessera::daemon {

// Status for a non-OK result code `rc` on `db` (extended codes enabled).
Status SqliteStatus(sqlite3* db, int rc, std::string_view context);

// Runs one or more statements without results.
Status ExecSql(sqlite3* db, std::string_view sql);

class Stmt {
 public:
  // REQUIRES: db open; sql is one statement.
  static Result<Stmt> Prepare(sqlite3* db, std::string_view sql);
  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  ~Stmt();

  // Parameters are 1-based. Bind errors surface at the next Step/Run.
  Stmt& Bind(int i, int64_t v);
  Stmt& Bind(int i, std::string_view v);  // TEXT
  Stmt& BindBlob(int i, std::string_view v);
  Stmt& BindDouble(int i, double v);  // REAL
  Stmt& BindNull(int i);
  Stmt& Bind(int i, const std::optional<int64_t>& v);
  Stmt& Bind(int i, const std::optional<std::string>& v);  // TEXT or NULL

  // true: a row is ready; false: done.
  Result<bool> Step();
  // Makes the statement ready to run again with new bindings.
  Stmt& Reset();
  // Steps to completion (for statements without result rows).
  Status Run();

  int64_t Int(int col) const;
  double Double(int col) const;
  std::string Text(int col) const;
  std::string Blob(int col) const;
  bool IsNull(int col) const;
  std::optional<int64_t> OptInt(int col) const;

 private:
  Stmt(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  void Note(int rc);

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  int bind_rc_ = SQLITE_OK;
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_SQLITE_UTIL_H_
