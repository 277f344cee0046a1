// SqliteStore (daemon/store/sqlite_store.h): the rows of API tokens, the agent join
// token and node credentials. Rows only: daemon/auth/ decides whether a
// presented secret is valid.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/store/sqlite_store.h"
#include "daemon/store/sqlite_store_rows.h"
#include "daemon/store/sqlite_util.h"

namespace tessera::daemon {
namespace {

Result<TokenInfo> TokenFromRow(const Stmt& q) {
  TokenInfo t;
  t.id = q.Text(0);
  t.user = q.Text(1);
  auto role = api::ParseRole(q.Text(2));
  if (!role) return Internal("stored token role is unknown");
  t.role = *role;
  t.created_ms = q.Int(3);
  t.revoked_ms = q.OptInt(4);
  return t;
}

}  // namespace

// ---------------------------------------------------------------- tokens

Status SqliteStore::InsertToken(const TokenRecord& record) {
  TESSERA_RETURN_IF_ERROR(ValidateTokenRecord(record));
  const TokenInfo& info = record.info;
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt u, Stmt::Prepare(db, "INSERT OR IGNORE INTO users (name, created_ms) VALUES (?, ?)"));
    u.Bind(1, std::string_view(info.user)).Bind(2, info.created_ms);
    TESSERA_RETURN_IF_ERROR(u.Run());
    TESSERA_ASSIGN_OR_RETURN(
        Stmt ins, Stmt::Prepare(db,
                                "INSERT INTO tokens (id, user, role, salt, hash, created_ms, "
                                "revoked_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"));
    ins.Bind(1, std::string_view(info.id))
        .Bind(2, std::string_view(info.user))
        .Bind(3, api::RoleName(info.role))
        .BindBlob(4, record.secret.salt)
        .BindBlob(5, record.secret.hash)
        .Bind(6, info.created_ms)
        .Bind(7, info.revoked_ms);
    return ins.Run();
  });
}

Result<TokenRecord> SqliteStore::GetToken(std::string_view token_id) {
  TokenRecord record;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db,
                              "SELECT id, user, role, created_ms, revoked_ms, salt, hash "
                              "FROM tokens WHERE id = ?"));
    q.Bind(1, token_id);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("token " + std::string(token_id) + " not found");
    TESSERA_ASSIGN_OR_RETURN(record.info, TokenFromRow(q));
    record.secret = SecretDigest{q.Blob(5), q.Blob(6)};
    return Status::Ok();
  }));
  return record;
}

Status SqliteStore::RevokeToken(std::string_view token_id, int64_t now_ms) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, "SELECT 1 FROM tokens WHERE id = ?"));
    q.Bind(1, token_id);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("token " + std::string(token_id) + " not found");
    TESSERA_ASSIGN_OR_RETURN(Stmt up, Stmt::Prepare(db,
                                                    "UPDATE tokens SET revoked_ms = ? "
                                                    "WHERE id = ? AND revoked_ms IS NULL"));
    up.Bind(1, now_ms).Bind(2, token_id);
    return up.Run();
  });
}

Result<std::vector<TokenInfo>> SqliteStore::ListTokens() {
  std::vector<TokenInfo> out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db,
                              "SELECT id, user, role, created_ms, revoked_ms FROM tokens "
                              "ORDER BY user, id"));
    return q.AppendRows(TokenFromRow, &out);
  }));
  return out;
}

// ---------------------------------------------------------------- join token

Status SqliteStore::PutAgentJoinToken(const SecretDigest& digest) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt up, Stmt::Prepare(db, UpsertSql("agent_join_token", {"id", "salt", "hash"})));
    up.Bind(1, int64_t{1}).BindBlob(2, digest.salt).BindBlob(3, digest.hash);
    return up.Run();
  });
}

Result<SecretDigest> SqliteStore::GetAgentJoinToken() {
  SecretDigest digest;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db, "SELECT salt, hash FROM agent_join_token WHERE id = 1"));
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("no agent join token is set");
    digest = SecretDigest{q.Blob(0), q.Blob(1)};
    return Status::Ok();
  }));
  return digest;
}

// ---------------------------------------------------------------- node credentials

namespace {

constexpr char kNodeCredentialColumns[] =
    "node, id, enrolled_ms, first_used_ms, revoked_ms, salt, hash FROM node_credentials";

NodeCredentialRecord NodeCredentialFromRow(const Stmt& q) {
  NodeCredentialRecord r;
  r.enrolment.node = q.Text(0);
  r.enrolment.credential_id = q.Text(1);
  r.enrolment.enrolled_ms = q.Int(2);
  r.enrolment.first_used_ms = q.OptInt(3);
  r.enrolment.revoked_ms = q.OptInt(4);
  r.secret = SecretDigest{q.Blob(5), q.Blob(6)};
  return r;
}

Status NotEnrolled(std::string_view node) {
  return NotFound("node " + std::string(node) + " is not enrolled");
}

// The record whose `column` (node or id) is `key`, or nullopt.
Result<std::optional<NodeCredentialRecord>> SelectNodeCredential(sqlite3* db,
                                                                 std::string_view column,
                                                                 std::string_view key) {
  TESSERA_ASSIGN_OR_RETURN(
      Stmt q, Stmt::Prepare(db, std::string("SELECT ") + kNodeCredentialColumns + " WHERE " +
                                    std::string(column) + " = ?"));
  q.Bind(1, key);
  TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<NodeCredentialRecord>();
  return std::optional<NodeCredentialRecord>(NodeCredentialFromRow(q));
}

// The enrolment of `node` now, or nullopt.
Result<std::optional<api::NodeEnrolment>> CurrentEnrolment(sqlite3* db, std::string_view node) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<NodeCredentialRecord> record,
                           SelectNodeCredential(db, "node", node));
  if (!record) return std::optional<api::NodeEnrolment>();
  return std::optional<api::NodeEnrolment>(std::move(record->enrolment));
}

Status EnrolmentChanged(std::string_view node) {
  return FailedPrecondition("the enrolment of node " + std::string(node) + " changed meanwhile");
}

}  // namespace

Result<NodeCredentialRecord> SqliteStore::GetNodeCredential(std::string_view node) {
  std::optional<NodeCredentialRecord> record;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(record, SelectNodeCredential(db, "node", node));
    return Status::Ok();
  }));
  if (!record) return NotEnrolled(node);
  return *std::move(record);
}

Result<NodeCredentialRecord> SqliteStore::FindNodeCredential(std::string_view credential_id) {
  std::optional<NodeCredentialRecord> record;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(record, SelectNodeCredential(db, "id", credential_id));
    return Status::Ok();
  }));
  if (!record) return NotFound("no node credential " + std::string(credential_id));
  return *std::move(record);
}

Status SqliteStore::PutNodeCredential(const NodeCredentialRecord& record,
                                      const std::optional<api::NodeEnrolment>& expected) {
  TESSERA_RETURN_IF_ERROR(ValidateNodeCredentialRecord(record));
  const api::NodeEnrolment& e = record.enrolment;
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(std::optional<api::NodeEnrolment> current,
                             CurrentEnrolment(db, e.node));
    if (current != expected) return EnrolmentChanged(e.node);
    TESSERA_ASSIGN_OR_RETURN(
        Stmt up, Stmt::Prepare(
                     db, UpsertSql("node_credentials", {"node", "id", "salt", "hash", "enrolled_ms",
                                                        "first_used_ms", "revoked_ms"})));
    up.Bind(1, std::string_view(e.node))
        .Bind(2, std::string_view(e.credential_id))
        .BindBlob(3, record.secret.salt)
        .BindBlob(4, record.secret.hash)
        .Bind(5, e.enrolled_ms)
        .Bind(6, e.first_used_ms)
        .Bind(7, e.revoked_ms);
    return up.Run();
  });
}

Status SqliteStore::DeleteNodeCredential(const api::NodeEnrolment& expected) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(std::optional<api::NodeEnrolment> current,
                             CurrentEnrolment(db, expected.node));
    if (!current) return NotEnrolled(expected.node);
    if (*current != expected) return EnrolmentChanged(expected.node);
    TESSERA_ASSIGN_OR_RETURN(Stmt del,
                             Stmt::Prepare(db, "DELETE FROM node_credentials WHERE node = ?"));
    del.Bind(1, std::string_view(expected.node));
    return del.Run();
  });
}

Result<std::vector<api::NodeEnrolment>> SqliteStore::ListNodeEnrolments() {
  std::vector<api::NodeEnrolment> out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q,
        Stmt::Prepare(db, std::string("SELECT ") + kNodeCredentialColumns + " ORDER BY node"));
    return q.AppendRows([](const Stmt& row) { return NodeCredentialFromRow(row).enrolment; }, &out);
  }));
  return out;
}

Status SqliteStore::RevokeNode(std::string_view node, int64_t now_ms) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(std::optional<api::NodeEnrolment> current, CurrentEnrolment(db, node));
    if (!current) return NotEnrolled(node);
    TESSERA_ASSIGN_OR_RETURN(Stmt up, Stmt::Prepare(db,
                                                    "UPDATE node_credentials SET revoked_ms = ? "
                                                    "WHERE node = ? AND revoked_ms IS NULL"));
    up.Bind(1, now_ms).Bind(2, node);
    return up.Run();
  });
}

}  // namespace tessera::daemon
