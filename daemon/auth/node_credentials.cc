#include "daemon/auth/node_credentials.h"

#include <utility>

namespace tessera::daemon::auth {
namespace {

// Compare-and-set rounds before a call gives up on a record that keeps changing.
constexpr int kMaxCasRetries = 5;

Status EnrolmentKeptChanging(std::string_view node) {
  return Unavailable("the enrolment of node " + std::string(node) +
                     " kept changing during the call; try again");
}

}  // namespace

Result<FreshNodeCredential> MakeNodeCredential(std::string_view node, int64_t now_ms) {
  TESSERA_RETURN_IF_ERROR(api::ValidateNodeName(node));
  TESSERA_ASSIGN_OR_RETURN(FreshToken fresh, MakeFreshToken());
  FreshNodeCredential out;
  out.record.enrolment.node = std::string(node);
  out.record.enrolment.credential_id = fresh.parts.id;
  out.record.enrolment.enrolled_ms = now_ms;
  out.record.secret.salt = std::move(fresh.salt);
  out.record.secret.hash = std::move(fresh.hash);
  out.plaintext = "tsn_" + fresh.parts.id + "_" + fresh.parts.secret;
  return out;
}

Result<TokenParts> ParseNodeCredential(std::string_view plaintext) {
  if (!api::LooksLikeNodeCredential(plaintext)) {
    return Unauthenticated(
        "not a node credential (heartbeats need the node's own credential, "
        "which the join token buys once at POST /api/v1/agent/enroll)");
  }
  return TokenParts{std::string(plaintext.substr(4, 16)), std::string(plaintext.substr(21))};
}

Status CheckEnrolmentAllowed(const std::optional<api::NodeEnrolment>& existing) {
  if (!existing) return Status::Ok();
  if (existing->revoked_ms) {
    return PermissionDenied("node " + existing->node +
                            " was revoked; an admin must readmit it before it enrols again");
  }
  if (existing->first_used_ms) {
    return AlreadyExists("node " + existing->node +
                             " is already enrolled and its credential is in use; an admin "
                             "revokes it first (tessera nodes revoke)",
                         "node");
  }
  return Status::Ok();
}

Status CheckNodeSecret(const NodeCredentialRecord& record, std::string_view secret) {
  TESSERA_ASSIGN_OR_RETURN(std::string computed, SaltedSha256(record.secret.salt, secret));
  if (!ConstantTimeEquals(computed, record.secret.hash)) {
    return Unauthenticated("unknown node credential");
  }
  if (record.enrolment.revoked_ms) {
    return Unauthenticated("the credential of node " + record.enrolment.node + " was revoked");
  }
  return Status::Ok();
}

Result<api::IssuedNodeCredential> EnrolNode(Store* store, std::string_view node, int64_t now_ms) {
  TESSERA_ASSIGN_OR_RETURN(FreshNodeCredential fresh, MakeNodeCredential(node, now_ms));
  for (int round = 0; round < kMaxCasRetries; ++round) {
    std::optional<api::NodeEnrolment> current;
    auto existing = store->GetNodeCredential(node);
    if (existing.ok()) {
      current = existing->enrolment;
    } else if (existing.status().code() != StatusCode::kNotFound) {
      return existing.status();
    }
    TESSERA_RETURN_IF_ERROR(CheckEnrolmentAllowed(current));
    Status put = store->PutNodeCredential(fresh.record, current);
    if (put.ok()) return api::IssuedNodeCredential{fresh.record.enrolment, fresh.plaintext};
    if (put.code() != StatusCode::kFailedPrecondition) return put;
  }
  return EnrolmentKeptChanging(node);
}

Result<std::string> AuthenticateNode(Store* store, std::string_view credential, int64_t now_ms) {
  TESSERA_ASSIGN_OR_RETURN(TokenParts parts, ParseNodeCredential(credential));
  for (int round = 0; round < kMaxCasRetries; ++round) {
    auto record = store->FindNodeCredential(parts.id);
    if (!record.ok()) {
      if (record.status().code() == StatusCode::kNotFound) {
        return Unauthenticated("unknown node credential");
      }
      return record.status();
    }
    TESSERA_RETURN_IF_ERROR(CheckNodeSecret(*record, parts.secret));
    if (record->enrolment.first_used_ms) return record->enrolment.node;
    // First use: record it on the very record just checked (a re-enrolment
    // or a revocation may have replaced it meanwhile; then check again).
    NodeCredentialRecord used = *record;
    used.enrolment.first_used_ms = now_ms;
    Status put = store->PutNodeCredential(used, record->enrolment);
    if (put.ok()) return record->enrolment.node;
    if (put.code() != StatusCode::kFailedPrecondition) return put;
  }
  return Unavailable("the node credential kept changing during the check; try again");
}

Status ReadmitNode(Store* store, std::string_view node) {
  TESSERA_ASSIGN_OR_RETURN(NodeCredentialRecord record, store->GetNodeCredential(node));
  if (!record.enrolment.revoked_ms) {
    return FailedPrecondition("node " + std::string(node) + " is not revoked");
  }
  return store->DeleteNodeCredential(record.enrolment);
}

}  // namespace tessera::daemon::auth
