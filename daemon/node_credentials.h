// Node credentials: the per-node secrets agents heartbeat with
// (api/node_identity.h has the protocol and the enrolment rules).
//
// Purpose: what every Store backend shares about them: a fresh credential
// (random id and secret from OpenSSL's CSPRNG, a salt and
// SHA-256(salt || secret); the plaintext "tsn_<id>_<secret>" is returned once
// and never stored), parsing a presented credential, and the enrolment rule
// deciding what an enrol call may do with the name's current record.
//
// Ownership: values only. Thread safety: safe from any thread.
#ifndef TESSERA_DAEMON_NODE_CREDENTIALS_H_
#define TESSERA_DAEMON_NODE_CREDENTIALS_H_

#include <optional>
#include <string>
#include <string_view>

#include "api/node_identity.h"
#include "common/status.h"
#include "daemon/token_crypto.h"

namespace tessera::daemon {

// A stored enrolment with its hashed secret.
struct NodeCredentialRecord {
  api::NodeEnrolment enrolment;
  std::string salt;
  std::string hash;  // SaltedSha256(salt, secret)
};

struct FreshNodeCredential {
  NodeCredentialRecord record;
  std::string plaintext;  // "tsn_<id>_<secret>"
};

// A new credential for `node`, enrolled at now_ms.
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

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_NODE_CREDENTIALS_H_
