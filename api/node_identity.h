// Node identity: how an agent proves which node it is.
//
// A node enrols once with the cluster's join token (POST /api/v1/agent/enroll,
// body {"node": NAME}) and gets back its own credential,
// "tsn_<16 hex id>_<64 hex secret>". The agent keeps it in a 0600 file in its
// state folder; tesserad keeps only a salt and SHA-256(salt || secret).
// Every heartbeat carries "Authorization: Bearer <node credential>", and a
// heartbeat naming another node than the credential's is refused (403).
//
// Enrolment rules (tesserad, daemon/auth/node_credentials.h):
//   - a name never enrolled: enrolled, a fresh credential is returned (201);
//   - a name enrolled whose credential has not yet authenticated a heartbeat
//     (the agent may have lost the answer): a fresh credential replaces it;
//   - a name whose credential is in use: kAlreadyExists (409) -- an admin
//     revokes it first;
//   - a revoked name: kPermissionDenied (403) until an admin readmits it.
//
// Thread safety: plain values and pure functions.
#ifndef TESSERA_API_NODE_IDENTITY_H_
#define TESSERA_API_NODE_IDENTITY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/types.h"
#include "common/status.h"

namespace tessera::api {

// One node's enrolment, as admins list it (no secret).
struct NodeEnrolment {
  std::string node;
  std::string credential_id;  // the public part of the credential
  int64_t enrolled_ms = 0;
  std::optional<int64_t> first_used_ms;  // first heartbeat it authenticated
  std::optional<int64_t> revoked_ms;
  friend bool operator==(const NodeEnrolment&, const NodeEnrolment&) = default;
};

// What enrolment answers: the only time the credential's plaintext exists.
struct IssuedNodeCredential {
  NodeEnrolment enrolment;
  std::string credential;  // "tsn_<id>_<secret>"
};

// A node name as heartbeats and enrolment carry it: 1..253 bytes of
// [A-Za-z0-9._-] (a host name). kInvalidArgument naming `field`.
Status ValidateNodeName(std::string_view name, const std::string& field = "node");

// The enrolment request body {"node": NAME}: shape and name checks, errors
// naming the field ("body" for a non-object, "node", or the unknown key).
Result<std::string> EnrolRequestNodeFromJson(const Json& j);

Json ToJson(const NodeEnrolment& enrolment);
Result<NodeEnrolment> NodeEnrolmentFromJson(const Json& j);
// {"node", "credential", "enrolment": {...}}.
Json ToJson(const IssuedNodeCredential& issued);
Result<IssuedNodeCredential> IssuedNodeCredentialFromJson(const Json& j);

// Whether `text` has the shape of a node credential ("tsn_" + 16 + "_" + 64
// lower-case hex digits). Says nothing of whether it is valid.
bool LooksLikeNodeCredential(std::string_view text);

}  // namespace tessera::api

#endif  // TESSERA_API_NODE_IDENTITY_H_
