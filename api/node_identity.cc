#include "api/node_identity.h"

#include <algorithm>

#include "api/json_codec.h"
#include "common/hex.h"
#include "common/json_fields.h"

namespace tessera::api {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// ToJson adds "state", derived from the times.
constexpr JsonMember<NodeEnrolment> kNodeEnrolmentMembers[] = {
    {"node", &NodeEnrolment::node, Presence::kRequired},
    {"credential_id", &NodeEnrolment::credential_id},
    {"enrolled_ms", &NodeEnrolment::enrolled_ms},
    {"first_used_ms", &NodeEnrolment::first_used_ms},
    {"revoked_ms", &NodeEnrolment::revoked_ms},
};

}  // namespace

Status ValidateNodeName(std::string_view name, const std::string& field) {
  if (name.empty() || name.size() > 253) return InvalidArgument("must be 1..253 characters", field);
  if (!std::all_of(name.begin(), name.end(), IsNameChar)) {
    return InvalidArgument("may contain only letters, digits, '.', '_' and '-'", field);
  }
  return Status::Ok();
}

Result<std::string> EnrolRequestNodeFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("must be a JSON object", "body");
  for (const auto& [key, value] : j.items()) {
    if (key != "node") return InvalidArgument("unknown field", key);
  }
  std::string node;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(fields.String("node", &node, Presence::kRequired));
  TESSERA_RETURN_IF_ERROR(ValidateNodeName(node));
  return node;
}

Json ToJson(const NodeEnrolment& e) {
  Json j = MembersToJson(kNodeEnrolmentMembers, e);
  j["state"] = e.revoked_ms ? "revoked" : (e.first_used_ms ? "active" : "enrolled");
  return j;
}

Result<NodeEnrolment> NodeEnrolmentFromJson(const Json& j) {
  return MembersFromJson(kNodeEnrolmentMembers, j, "must be a JSON object", "enrolment");
}

Json ToJson(const IssuedNodeCredential& issued) {
  return Json{{"node", issued.enrolment.node},
              {"credential", issued.credential},
              {"enrolment", ToJson(issued.enrolment)}};
}

Result<IssuedNodeCredential> IssuedNodeCredentialFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("must be a JSON object", "body");
  IssuedNodeCredential out;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(fields.String("credential", &out.credential, Presence::kRequired));
  if (!LooksLikeNodeCredential(out.credential)) {
    return InvalidArgument("is not a node credential", "credential");
  }
  if (auto it = j.find("enrolment"); it != j.end() && !it->is_null()) {
    TESSERA_ASSIGN_OR_RETURN(out.enrolment, NodeEnrolmentFromJson(*it));
  } else {
    TESSERA_RETURN_IF_ERROR(fields.String("node", &out.enrolment.node, Presence::kRequired));
  }
  return out;
}

bool LooksLikeNodeCredential(std::string_view text) {
  constexpr size_t kId = 16, kSecret = 64;
  if (text.size() != 4 + kId + 1 + kSecret || !text.starts_with("tsn_") || text[4 + kId] != '_') {
    return false;
  }
  return IsLowerHex(text.substr(4, kId)) && IsLowerHex(text.substr(5 + kId));
}

}  // namespace tessera::api
