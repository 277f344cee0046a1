#include "common/json_fields.h"

#include <utility>

namespace tessera {
namespace {

using Json = nlohmann::json;

bool IsInteger(const Json& v) { return v.is_number_integer() || v.is_number_unsigned(); }

// REQUIRES: IsInteger(v).
Result<int64_t> IntegerValue(const Json& v, const std::string& field) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return InvalidArgument("is out of range", field);
  }
  return v.get<int64_t>();
}

}  // namespace

JsonFields::JsonFields(const Json& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {}

Status JsonFields::CheckObject() const {
  if (!object_.is_object()) return InvalidArgument("must be a JSON object", Name(""));
  return Status::Ok();
}

const Json* JsonFields::Find(std::string_view key, Presence presence, Status* status) {
  if (auto it = asked_.find(key); it == asked_.end()) asked_.emplace(key);
  const Json* v = nullptr;
  if (object_.is_object()) {
    auto it = object_.find(key);
    if (it != object_.end() && !it->is_null()) v = &*it;
  }
  if (v == nullptr && presence == Presence::kRequired) {
    *status = InvalidArgument("is required", Name(key));
  }
  return v;
}

Status JsonFields::String(std::string_view key, std::string* out, Presence presence) {
  Status st;
  const Json* v = Find(key, presence, &st);
  if (v == nullptr) return st;
  if (!v->is_string()) return InvalidArgument("must be a string", Name(key));
  *out = v->get<std::string>();
  return Status::Ok();
}

Status JsonFields::Int(std::string_view key, int64_t* out, Presence presence) {
  Status st;
  const Json* v = Find(key, presence, &st);
  if (v == nullptr) return st;
  if (!IsInteger(*v)) return InvalidArgument("must be an integer", Name(key));
  TESSERA_ASSIGN_OR_RETURN(*out, IntegerValue(*v, Name(key)));
  return Status::Ok();
}

Status JsonFields::Int(std::string_view key, std::optional<int64_t>* out) {
  int64_t value = 0;
  Status st;
  if (Find(key, Presence::kOptional, &st) == nullptr) return Status::Ok();
  TESSERA_RETURN_IF_ERROR(Int(key, &value));
  *out = value;
  return Status::Ok();
}

Status JsonFields::Double(std::string_view key, double* out, Presence presence) {
  Status st;
  const Json* v = Find(key, presence, &st);
  if (v == nullptr) return st;
  if (!v->is_number()) return InvalidArgument("must be a number", Name(key));
  *out = v->get<double>();
  return Status::Ok();
}

Status JsonFields::Bool(std::string_view key, bool* out, Presence presence) {
  Status st;
  const Json* v = Find(key, presence, &st);
  if (v == nullptr) return st;
  if (!v->is_boolean()) return InvalidArgument("must be true or false", Name(key));
  *out = v->get<bool>();
  return Status::Ok();
}

Status JsonFields::StringList(std::string_view key, std::vector<std::string>* out,
                              Presence presence) {
  Status st;
  const Json* v = Find(key, presence, &st);
  if (v == nullptr) return st;
  if (!v->is_array()) return InvalidArgument("must be an array of strings", Name(key));
  std::vector<std::string> items;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      return InvalidArgument("must be a string", Name(key) + "[" + std::to_string(i) + "]");
    }
    items.push_back((*v)[i].get<std::string>());
  }
  *out = std::move(items);
  return Status::Ok();
}

Status JsonFields::IntList(std::string_view key, std::vector<int64_t>* out, Presence presence) {
  Status st;
  const Json* v = Find(key, presence, &st);
  if (v == nullptr) return st;
  if (!v->is_array()) return InvalidArgument("must be an array of integers", Name(key));
  std::vector<int64_t> items;
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string item = Name(key) + "[" + std::to_string(i) + "]";
    if (!IsInteger((*v)[i])) return InvalidArgument("must be an integer", item);
    TESSERA_ASSIGN_OR_RETURN(int64_t value, IntegerValue((*v)[i], item));
    items.push_back(value);
  }
  *out = std::move(items);
  return Status::Ok();
}

Status JsonFields::StringMap(std::string_view key, std::map<std::string, std::string>* out,
                             Presence presence) {
  Status st;
  const Json* v = Find(key, presence, &st);
  if (v == nullptr) return st;
  if (!v->is_object()) return InvalidArgument("must be an object of strings", Name(key));
  std::map<std::string, std::string> items;
  for (const auto& [k, val] : v->items()) {
    if (!val.is_string()) return InvalidArgument("must be a string", Name(key) + "." + k);
    items[k] = val.get<std::string>();
  }
  *out = std::move(items);
  return Status::Ok();
}

Status JsonFields::Raw(std::string_view key, Json* out) {
  asked_.emplace(key);
  if (!object_.is_object()) return Status::Ok();
  auto it = object_.find(key);
  if (it != object_.end()) *out = *it;
  return Status::Ok();
}

Result<const Json*> JsonFields::Array(std::string_view key, Presence presence) {
  Status st;
  const Json* v = Find(key, presence, &st);
  if (v == nullptr) {
    if (!st.ok()) return st;
    return static_cast<const Json*>(nullptr);
  }
  if (!v->is_array()) return InvalidArgument("must be an array", Name(key));
  return v;
}

Status JsonFields::NoUnknownFields() const {
  if (!object_.is_object()) return Status::Ok();
  for (const auto& [k, v] : object_.items()) {
    if (!asked_.contains(k)) return InvalidArgument("unknown field", Name(k));
  }
  return Status::Ok();
}

std::string JsonFields::Name(std::string_view key) const {
  if (prefix_.empty()) return std::string(key);
  if (key.empty()) return prefix_;
  return prefix_ + "." + std::string(key);
}

}  // namespace tessera
