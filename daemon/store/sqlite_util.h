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
#include <type_traits>
#include <utility>
#include <vector>

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
  // Steps through every result row, calling `each(row)` (a Status, `row`
  // being this statement at that row) on each; stops at the first error,
  // SQLite's or `each`'s.
  template <typename Each>
  Status ForEachRow(Each&& each);
  // Reads every result row with `from_row(row)` (a T or a Result<T>) and
  // appends it to `out`; stops at the first error. REQUIRES: out != nullptr.
  template <typename FromRow, typename T>
  Status AppendRows(FromRow&& from_row, std::vector<T>* out);

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

template <typename Each>
Status Stmt::ForEachRow(Each&& each) {
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
    TESSERA_RETURN_IF_ERROR(each(static_cast<const Stmt&>(*this)));
  }
}

template <typename FromRow, typename T>
Status Stmt::AppendRows(FromRow&& from_row, std::vector<T>* out) {
  return ForEachRow([&](const Stmt& row) -> Status {
    if constexpr (std::is_same_v<std::decay_t<decltype(from_row(row))>, T>) {
      out->push_back(from_row(row));
    } else {
      TESSERA_ASSIGN_OR_RETURN(T item, from_row(row));
      out->push_back(std::move(item));
    }
    return Status::Ok();
  });
}

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_SQLITE_UTIL_H_
