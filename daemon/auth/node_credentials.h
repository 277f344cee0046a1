// Node credentials: the per-node secrets agents heartbeat with
// (api/node_identity.h has the protocol and the enrolment rules).
//
// Purpose: the one place that decides about node credentials, above every
// Store backend (which only stores and returns NodeCredentialRecord rows): a
// fresh credential (random id and secret from OpenSSL's CSPRNG, a salt and
// SHA-256(salt || secret); the plaintext "tsn_<id>_<secret>" is returned once
// and never stored), parsing and checking a presented credential (constant-
// time compare, revocation), and the enrolment rules (what an enrol call may
// do with the name's current record, who may be readmitted). The Store calls
// below use the store's compare-and-set writes, so a decision never acts on a
// record that changed after it was read.
//
// Ownership: values only; the Store is borrowed for the call.
// Thread safety: safe from any thread (as safe as the Store, which is).
#ifndef TESSERA_DAEMON_AUTH_NODE_CREDENTIALS_H_
#define TESSERA_DAEMON_AUTH_NODE_CREDENTIALS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/node_identity.h"
#include "common/status.h"
#include "daemon/auth/token_crypto.h"
#include "daemon/store/store.h"

namespace tessera::daemon::auth {

struct FreshNodeCredential {
  NodeCredentialRecord record;
  std::string plaintext;  // "tsn_<id>_<secret>"
};

// A new credential for `node`, enrolled at now_ms. kInvalidArgument (field
// "node") for a bad node name.
Result<FreshNodeCredential> MakeNodeCredential(std::string_view node, int64_t now_ms);

// kUnauthenticated unless "tsn_<16 hex>_<64 hex>".
Result<TokenParts> ParseNodeCredential(std::string_view plaintext);

// Whether an enrol call for a name whose record is `existing` may issue a
// new credential (replacing an unused one): OK, or kAlreadyExists (in use),
// kPermissionDenied (revoked). See api/node_identity.h.
Status CheckEnrolmentAllowed(const std::optional<api::NodeEnrolment>& existing);

// Checks a presented secret against a record: kUnauthenticated when it does
// not match (constant-time) or the node was revoked.
Status CheckNodeSecret(const NodeCredentialRecord& record, std::string_view secret);

// Enrols `node` at now_ms: CheckEnrolmentAllowed decides against the name's
// current record, and the fresh credential replaces that very record (or is
// the first) by compare-and-set. Returns the plaintext, once. kUnavailable
// when the record kept changing under the call (retry).
// REQUIRES: store != nullptr.
Result<api::IssuedNodeCredential> EnrolNode(Store* store, std::string_view node, int64_t now_ms);

// The node a presented credential belongs to. kUnauthenticated when it is
// malformed, unknown, has the wrong secret or was revoked. The first
// successful check records first_used_ms = now_ms (then the name cannot
// enrol again until revoked and readmitted). Store errors pass through;
// kUnavailable when the record kept changing under the call (retry).
// REQUIRES: store != nullptr.
Result<std::string> AuthenticateNode(Store* store, std::string_view credential, int64_t now_ms);

// Forgets a revoked node's record so the name may enrol again. kNotFound
// when not enrolled, kFailedPrecondition when not revoked.
// REQUIRES: store != nullptr.
Status ReadmitNode(Store* store, std::string_view node);

}  // namespace tessera::daemon::auth

#endif  // TESSERA_DAEMON_AUTH_NODE_CREDENTIALS_H_
