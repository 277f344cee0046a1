#include "daemon/node_credentials.h"

namespace tessera::daemon {

Result<FreshNodeCredential> MakeNodeCredential(std::string_view node, int64_t now_ms) {
  TESSERA_RETURN_IF_ERROR(api::ValidateNodeName(node));
  TESSERA_ASSIGN_OR_RETURN(FreshToken fresh, MakeFreshToken());
  FreshNodeCredential out;
  out.record.enrolment.node = std::string(node);
  out.record.enrolment.credential_id = fresh.parts.id;
  out.record.enrolment.enrolled_ms = now_ms;
  out.record.salt = std::move(fresh.salt);
  out.record.hash = std::move(fresh.hash);
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
  TESSERA_ASSIGN_OR_RETURN(std::string computed, SaltedSha256(record.salt, secret));
  if (!ConstantTimeEquals(computed, record.hash)) return Unauthenticated("unknown node credential");
  if (record.enrolment.revoked_ms) {
    return Unauthenticated("the credential of node " + record.enrolment.node + " was revoked");
  }
  return Status::Ok();
}

}  // namespace tessera::daemon
