#include "api/node_identity.h"

#include <algorithm>

#include "common/hex.h"
#include "common/json_fields.h"

namespace tessera::api {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

Json OptInt(const std::optional<int64_t>& v) { return v ? Json(*v) : Json(nullptr); }

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
  return Json{{"node", e.node},
              {"credential_id", e.credential_id},
              {"enrolled_ms", e.enrolled_ms},
              {"first_used_ms", OptInt(e.first_used_ms)},
              {"revoked_ms", OptInt(e.revoked_ms)},
              {"state", e.revoked_ms ? "revoked" : (e.first_used_ms ? "active" : "enrolled")}};
}

Result<NodeEnrolment> NodeEnrolmentFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("must be a JSON object", "enrolment");
  NodeEnrolment e;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(fields.String("node", &e.node, Presence::kRequired));
  TESSERA_RETURN_IF_ERROR(fields.String("credential_id", &e.credential_id));
  TESSERA_RETURN_IF_ERROR(fields.Int("enrolled_ms", &e.enrolled_ms));
  TESSERA_RETURN_IF_ERROR(fields.Int("first_used_ms", &e.first_used_ms));
  TESSERA_RETURN_IF_ERROR(fields.Int("revoked_ms", &e.revoked_ms));
  return e;
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
