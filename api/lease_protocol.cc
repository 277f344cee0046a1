#include "api/lease_protocol.h"

#include "api/json_codec.h"
#include "common/json_fields.h"

namespace tessera::api {

Status CheckCompletedChunk(const CompletedChunk& c) {
  if (c.chunk < 0) return InvalidArgument("must be a chunk number >= 0", "chunk");
  if (c.images < 0) return InvalidArgument("must be >= 0", "images");
  if (!(c.seconds >= 0)) return InvalidArgument("must be >= 0", "seconds");
  return Status::Ok();
}

namespace {

// The optional array member `key` (an empty one when absent or null).
Result<const Json*> ArrayOrEmpty(JsonFields& fields, const char* key) {
  static const Json kEmpty = Json::array();
  TESSERA_ASSIGN_OR_RETURN(const Json* items, fields.Array(key));
  return items != nullptr ? items : &kEmpty;
}

constexpr JsonMember<LeaseRequest> kLeaseRequestMembers[] = {
    {"attempt", &LeaseRequest::attempt},
    {"rank", &LeaseRequest::rank},
    {"max_chunks", &LeaseRequest::max_chunks},
};

constexpr JsonMember<CompletedChunk> kCompletedChunkMembers[] = {
    {"chunk", &CompletedChunk::chunk},
    {"images", &CompletedChunk::images},
    {"seconds", &CompletedChunk::seconds},
};

constexpr JsonMember<LeaseResponse> kLeaseResponseMembers[] = {
    {"lease_ms", &LeaseResponse::lease_ms},
    {"finished", &LeaseResponse::finished},
    {"retry_after_ms", &LeaseResponse::retry_after_ms},
};

// Then eta_s (null when unknown) and the devices.
constexpr JsonMember<InferenceProgress> kInferenceProgressMembers[] = {
    {"images_total", &InferenceProgress::images_total},
    {"images_done", &InferenceProgress::images_done},
    {"chunks_total", &InferenceProgress::chunks_total},
    {"chunks_done", &InferenceProgress::chunks_done},
    {"chunks_leased", &InferenceProgress::chunks_leased},
    {"images_per_s", &InferenceProgress::images_per_s},
};

constexpr JsonMember<DeviceThroughput> kDeviceThroughputMembers[] = {
    {"rank", &DeviceThroughput::rank},
    {"device", &DeviceThroughput::device},
    {"images", &DeviceThroughput::images},
    {"images_per_s", &DeviceThroughput::images_per_s},
};

Json CompletedChunkJson(const CompletedChunk& c) {
  return MembersToJson(kCompletedChunkMembers, c);
}

Json LeasedChunkJson(const LeasedChunk& c) { return {{"chunk", c.chunk}, {"items", c.items}}; }

Json DeviceThroughputJson(const DeviceThroughput& d) {
  return MembersToJson(kDeviceThroughputMembers, d);
}

// The elements of the lists below name their fields without the list's
// "key[i]." (ReadJsonList adds it); a non-object names the first field.

Result<CompletedChunk> CompletedChunkFromJson(const Json& c) {
  TESSERA_ASSIGN_OR_RETURN(CompletedChunk done,
                           MembersFromJson(kCompletedChunkMembers, c, "must be an object", "chunk",
                                           CompletedChunk{-1, 0, 0}));
  TESSERA_RETURN_IF_ERROR(CheckCompletedChunk(done));
  return done;
}

Result<LeasedChunk> LeasedChunkFromJson(const Json& c) {
  if (!c.is_object()) return InvalidArgument("must be an object", "chunk");
  LeasedChunk leased;
  leased.chunk = -1;
  JsonFields entry(c);
  TESSERA_RETURN_IF_ERROR(entry.Int("chunk", &leased.chunk));
  TESSERA_ASSIGN_OR_RETURN(const Json* items, ArrayOrEmpty(entry, "items"));
  for (const Json& item : *items) {
    if (!item.is_string()) return InvalidArgument("must hold strings", "items");
    leased.items.push_back(item.get<std::string>());
  }
  return leased;
}

Result<DeviceThroughput> DeviceThroughputFromJson(const Json& d) {
  return MembersFromJson(kDeviceThroughputMembers, d, "must be an object", "rank");
}

}  // namespace

Json ToJson(const LeaseRequest& r) {
  Json j = MembersToJson(kLeaseRequestMembers, r);
  j["completed"] = ToJsonArray(r.completed, CompletedChunkJson);
  return j;
}

Json ToJson(const LeaseResponse& r) {
  Json j = MembersToJson(kLeaseResponseMembers, r);
  j["chunks"] = ToJsonArray(r.chunks, LeasedChunkJson);
  return j;
}

Json ToJson(const InferenceProgress& p) {
  Json j = MembersToJson(kInferenceProgressMembers, p);
  j["devices"] = ToJsonArray(p.devices, DeviceThroughputJson);
  j["eta_s"] = p.eta_s < 0 ? Json(nullptr) : Json(p.eta_s);
  return j;
}

Result<LeaseRequest> LeaseRequestFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("lease request must be a JSON object");
  LeaseRequest r;
  r.rank = -1;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(ReadJsonMembers(kLeaseRequestMembers, fields, &r));
  if (r.attempt < 1) return InvalidArgument("must be an attempt number >= 1", "attempt");
  if (r.rank < 0) return InvalidArgument("must be a rank >= 0", "rank");
  if (r.max_chunks < 0 || r.max_chunks > 64) {
    return InvalidArgument("must be between 0 and 64", "max_chunks");
  }
  TESSERA_ASSIGN_OR_RETURN(const Json* completed, ArrayOrEmpty(fields, "completed"));
  if (completed->size() > 1024) return InvalidArgument("at most 1024 entries", "completed");
  TESSERA_RETURN_IF_ERROR(
      ReadJsonList(completed, "completed", &CompletedChunkFromJson, &r.completed));
  return r;
}

Result<LeaseResponse> LeaseResponseFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("lease answer must be a JSON object");
  LeaseResponse r;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(ReadJsonMembers(kLeaseResponseMembers, fields, &r));
  TESSERA_RETURN_IF_ERROR(ReadJsonList(fields, "chunks", &LeasedChunkFromJson, &r.chunks));
  return r;
}

Result<InferenceProgress> InferenceProgressFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("progress must be a JSON object");
  InferenceProgress p;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(ReadJsonMembers(kInferenceProgressMembers, fields, &p));
  TESSERA_RETURN_IF_ERROR(fields.Double("eta_s", &p.eta_s));
  TESSERA_RETURN_IF_ERROR(ReadJsonList(fields, "devices", &DeviceThroughputFromJson, &p.devices));
  return p;
}

}  // namespace tessera::api
