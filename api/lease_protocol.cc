#include "api/lease_protocol.h"

namespace tessera::api {
namespace {

// Reads an optional member of type T; a missing or null member gives
// fallback, a member of another type an error naming prefix + key.
template <typename T>
Result<T> Member(const Json& j, const char* key, T fallback, const std::string& prefix = {}) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  bool good = false;
  if constexpr (std::is_same_v<T, bool>) {
    good = it->is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    good = it->is_number_integer();
  } else if constexpr (std::is_floating_point_v<T>) {
    good = it->is_number();
  } else {
    good = it->is_string();
  }
  if (!good) {
    const char* what = std::is_same_v<T, bool>       ? "a boolean"
                       : std::is_integral_v<T>       ? "an integer"
                       : std::is_floating_point_v<T> ? "a number"
                                                     : "a string";
    return InvalidArgument(std::string("must be ") + what, prefix + key);
  }
  return it->get<T>();
}

Result<const Json*> ArrayMember(const Json& j, const char* key, const std::string& prefix = {}) {
  static const Json kEmpty = Json::array();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return &kEmpty;
  if (!it->is_array()) return InvalidArgument("must be an array", prefix + key);
  return &*it;
}

std::string Index(const char* key, size_t i) {
  return std::string(key) + "[" + std::to_string(i) + "].";
}

}  // namespace

Json ToJson(const LeaseRequest& r) {
  Json completed = Json::array();
  for (const CompletedChunk& c : r.completed) {
    completed.push_back({{"chunk", c.chunk}, {"images", c.images}, {"seconds", c.seconds}});
  }
  return {{"attempt", r.attempt},
          {"rank", r.rank},
          {"max_chunks", r.max_chunks},
          {"completed", completed}};
}

Json ToJson(const LeaseResponse& r) {
  Json chunks = Json::array();
  for (const LeasedChunk& c : r.chunks) chunks.push_back({{"chunk", c.chunk}, {"items", c.items}});
  return {{"chunks", chunks},
          {"lease_ms", r.lease_ms},
          {"finished", r.finished},
          {"retry_after_ms", r.retry_after_ms}};
}

Json ToJson(const InferenceProgress& p) {
  Json devices = Json::array();
  for (const DeviceThroughput& d : p.devices) {
    devices.push_back({{"rank", d.rank},
                       {"device", d.device},
                       {"images", d.images},
                       {"images_per_s", d.images_per_s}});
  }
  Json j = {{"images_total", p.images_total},
            {"images_done", p.images_done},
            {"chunks_total", p.chunks_total},
            {"chunks_done", p.chunks_done},
            {"chunks_leased", p.chunks_leased},
            {"images_per_s", p.images_per_s},
            {"devices", devices}};
  j["eta_s"] = p.eta_s < 0 ? Json(nullptr) : Json(p.eta_s);
  return j;
}

Result<LeaseRequest> LeaseRequestFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("lease request must be a JSON object");
  LeaseRequest r;
  TESSERA_ASSIGN_OR_RETURN(r.attempt, Member<int64_t>(j, "attempt", 0));
  TESSERA_ASSIGN_OR_RETURN(r.rank, Member<int64_t>(j, "rank", -1));
  TESSERA_ASSIGN_OR_RETURN(r.max_chunks, Member<int64_t>(j, "max_chunks", 1));
  if (r.attempt < 1) return InvalidArgument("must be an attempt number >= 1", "attempt");
  if (r.rank < 0) return InvalidArgument("must be a rank >= 0", "rank");
  if (r.max_chunks < 0 || r.max_chunks > 64) {
    return InvalidArgument("must be between 0 and 64", "max_chunks");
  }
  TESSERA_ASSIGN_OR_RETURN(const Json* completed, ArrayMember(j, "completed"));
  if (completed->size() > 1024) return InvalidArgument("at most 1024 entries", "completed");
  for (size_t i = 0; i < completed->size(); ++i) {
    const Json& c = (*completed)[i];
    std::string prefix = Index("completed", i);
    if (!c.is_object()) return InvalidArgument("must be an object", prefix + "chunk");
    CompletedChunk done;
    TESSERA_ASSIGN_OR_RETURN(done.chunk, Member<int64_t>(c, "chunk", -1, prefix));
    TESSERA_ASSIGN_OR_RETURN(done.images, Member<int64_t>(c, "images", 0, prefix));
    TESSERA_ASSIGN_OR_RETURN(done.seconds, Member<double>(c, "seconds", 0.0, prefix));
    if (done.chunk < 0) return InvalidArgument("must be a chunk number >= 0", prefix + "chunk");
    if (done.images < 0) return InvalidArgument("must be >= 0", prefix + "images");
    if (!(done.seconds >= 0)) return InvalidArgument("must be >= 0", prefix + "seconds");
    r.completed.push_back(done);
  }
  return r;
}

Result<LeaseResponse> LeaseResponseFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("lease answer must be a JSON object");
  LeaseResponse r;
  TESSERA_ASSIGN_OR_RETURN(r.lease_ms, Member<int64_t>(j, "lease_ms", 0));
  TESSERA_ASSIGN_OR_RETURN(r.finished, Member<bool>(j, "finished", false));
  TESSERA_ASSIGN_OR_RETURN(r.retry_after_ms, Member<int64_t>(j, "retry_after_ms", 0));
  TESSERA_ASSIGN_OR_RETURN(const Json* chunks, ArrayMember(j, "chunks"));
  for (size_t i = 0; i < chunks->size(); ++i) {
    const Json& c = (*chunks)[i];
    std::string prefix = Index("chunks", i);
    if (!c.is_object()) return InvalidArgument("must be an object", prefix + "chunk");
    LeasedChunk leased;
    TESSERA_ASSIGN_OR_RETURN(leased.chunk, Member<int64_t>(c, "chunk", -1, prefix));
    TESSERA_ASSIGN_OR_RETURN(const Json* items, ArrayMember(c, "items", prefix));
    for (const Json& item : *items) {
      if (!item.is_string()) return InvalidArgument("must hold strings", prefix + "items");
      leased.items.push_back(item.get<std::string>());
    }
    r.chunks.push_back(std::move(leased));
  }
  return r;
}

Result<InferenceProgress> InferenceProgressFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("progress must be a JSON object");
  InferenceProgress p;
  TESSERA_ASSIGN_OR_RETURN(p.images_total, Member<int64_t>(j, "images_total", 0));
  TESSERA_ASSIGN_OR_RETURN(p.images_done, Member<int64_t>(j, "images_done", 0));
  TESSERA_ASSIGN_OR_RETURN(p.chunks_total, Member<int64_t>(j, "chunks_total", 0));
  TESSERA_ASSIGN_OR_RETURN(p.chunks_done, Member<int64_t>(j, "chunks_done", 0));
  TESSERA_ASSIGN_OR_RETURN(p.chunks_leased, Member<int64_t>(j, "chunks_leased", 0));
  TESSERA_ASSIGN_OR_RETURN(p.images_per_s, Member<double>(j, "images_per_s", 0.0));
  TESSERA_ASSIGN_OR_RETURN(p.eta_s, Member<double>(j, "eta_s", -1.0));
  TESSERA_ASSIGN_OR_RETURN(const Json* devices, ArrayMember(j, "devices"));
  for (size_t i = 0; i < devices->size(); ++i) {
    const Json& d = (*devices)[i];
    std::string prefix = Index("devices", i);
    if (!d.is_object()) return InvalidArgument("must be an object", prefix + "rank");
    DeviceThroughput t;
    TESSERA_ASSIGN_OR_RETURN(t.rank, Member<int64_t>(d, "rank", 0, prefix));
    TESSERA_ASSIGN_OR_RETURN(t.device, Member<std::string>(d, "device", "", prefix));
    TESSERA_ASSIGN_OR_RETURN(t.images, Member<int64_t>(d, "images", 0, prefix));
    TESSERA_ASSIGN_OR_RETURN(t.images_per_s, Member<double>(d, "images_per_s", 0.0, prefix));
    p.devices.push_back(std::move(t));
  }
  return p;
}

}  // namespace tessera::api
