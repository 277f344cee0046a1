#include "api/lease_protocol.h"

#include "common/json_fields.h"

namespace tessera::api {
namespace {

std::string Index(const char* key, size_t i) {
  return std::string(key) + "[" + std::to_string(i) + "]";
}

// The optional array member `key` (an empty one when absent or null).
Result<const Json*> ArrayOrEmpty(JsonFields& fields, const char* key) {
  static const Json kEmpty = Json::array();
  TESSERA_ASSIGN_OR_RETURN(const Json* items, fields.Array(key));
  return items != nullptr ? items : &kEmpty;
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
  r.rank = -1;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(fields.Int("attempt", &r.attempt));
  TESSERA_RETURN_IF_ERROR(fields.Int("rank", &r.rank));
  TESSERA_RETURN_IF_ERROR(fields.Int("max_chunks", &r.max_chunks));
  if (r.attempt < 1) return InvalidArgument("must be an attempt number >= 1", "attempt");
  if (r.rank < 0) return InvalidArgument("must be a rank >= 0", "rank");
  if (r.max_chunks < 0 || r.max_chunks > 64) {
    return InvalidArgument("must be between 0 and 64", "max_chunks");
  }
  TESSERA_ASSIGN_OR_RETURN(const Json* completed, ArrayOrEmpty(fields, "completed"));
  if (completed->size() > 1024) return InvalidArgument("at most 1024 entries", "completed");
  for (size_t i = 0; i < completed->size(); ++i) {
    const Json& c = (*completed)[i];
    JsonFields entry(c, Index("completed", i));
    if (!c.is_object()) return InvalidArgument("must be an object", entry.Name("chunk"));
    CompletedChunk done;
    done.chunk = -1;
    TESSERA_RETURN_IF_ERROR(entry.Int("chunk", &done.chunk));
    TESSERA_RETURN_IF_ERROR(entry.Int("images", &done.images));
    TESSERA_RETURN_IF_ERROR(entry.Double("seconds", &done.seconds));
    if (done.chunk < 0) return InvalidArgument("must be a chunk number >= 0", entry.Name("chunk"));
    if (done.images < 0) return InvalidArgument("must be >= 0", entry.Name("images"));
    if (!(done.seconds >= 0)) return InvalidArgument("must be >= 0", entry.Name("seconds"));
    r.completed.push_back(done);
  }
  return r;
}

Result<LeaseResponse> LeaseResponseFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("lease answer must be a JSON object");
  LeaseResponse r;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(fields.Int("lease_ms", &r.lease_ms));
  TESSERA_RETURN_IF_ERROR(fields.Bool("finished", &r.finished));
  TESSERA_RETURN_IF_ERROR(fields.Int("retry_after_ms", &r.retry_after_ms));
  TESSERA_ASSIGN_OR_RETURN(const Json* chunks, ArrayOrEmpty(fields, "chunks"));
  for (size_t i = 0; i < chunks->size(); ++i) {
    const Json& c = (*chunks)[i];
    JsonFields entry(c, Index("chunks", i));
    if (!c.is_object()) return InvalidArgument("must be an object", entry.Name("chunk"));
    LeasedChunk leased;
    leased.chunk = -1;
    TESSERA_RETURN_IF_ERROR(entry.Int("chunk", &leased.chunk));
    TESSERA_ASSIGN_OR_RETURN(const Json* items, ArrayOrEmpty(entry, "items"));
    for (const Json& item : *items) {
      if (!item.is_string()) return InvalidArgument("must hold strings", entry.Name("items"));
      leased.items.push_back(item.get<std::string>());
    }
    r.chunks.push_back(std::move(leased));
  }
  return r;
}

Result<InferenceProgress> InferenceProgressFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("progress must be a JSON object");
  InferenceProgress p;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(fields.Int("images_total", &p.images_total));
  TESSERA_RETURN_IF_ERROR(fields.Int("images_done", &p.images_done));
  TESSERA_RETURN_IF_ERROR(fields.Int("chunks_total", &p.chunks_total));
  TESSERA_RETURN_IF_ERROR(fields.Int("chunks_done", &p.chunks_done));
  TESSERA_RETURN_IF_ERROR(fields.Int("chunks_leased", &p.chunks_leased));
  TESSERA_RETURN_IF_ERROR(fields.Double("images_per_s", &p.images_per_s));
  TESSERA_RETURN_IF_ERROR(fields.Double("eta_s", &p.eta_s));
  TESSERA_ASSIGN_OR_RETURN(const Json* devices, ArrayOrEmpty(fields, "devices"));
  for (size_t i = 0; i < devices->size(); ++i) {
    const Json& d = (*devices)[i];
    JsonFields entry(d, Index("devices", i));
    if (!d.is_object()) return InvalidArgument("must be an object", entry.Name("rank"));
    DeviceThroughput t;
    TESSERA_RETURN_IF_ERROR(entry.Int("rank", &t.rank));
    TESSERA_RETURN_IF_ERROR(entry.String("device", &t.device));
    TESSERA_RETURN_IF_ERROR(entry.Int("images", &t.images));
    TESSERA_RETURN_IF_ERROR(entry.Double("images_per_s", &t.images_per_s));
    p.devices.push_back(std::move(t));
  }
  return p;
}

}  // namespace tessera::api
