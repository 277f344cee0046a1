#include "common/json_fields.h"

#include <utility>

namespace tessera {
namespace {

using Json = nlohmann::json;

// The member types FindOfType checks.
bool IsString(const Json& v) { return v.is_string(); }
bool IsInteger(const Json& v) { return v.is_number_integer() || v.is_number_unsigned(); }
bool IsNumber(const Json& v) { return v.is_number(); }
bool IsBool(const Json& v) { return v.is_boolean(); }
bool IsArray(const Json& v) { return v.is_array(); }
bool IsObject(const Json& v) { return v.is_object(); }

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

const Json* JsonFields::FindOfType(std::string_view key, Presence presence,
                                   bool (*is_type)(const Json&), std::string_view must_be,
                                   Status* status) {
  const Json* v = Find(key, presence, status);
  if (v == nullptr || is_type(*v)) return v;
  *status = InvalidArgument(std::string(must_be), Name(key));
  return nullptr;
}

Status JsonFields::String(std::string_view key, std::string* out, Presence presence) {
  Status st;
  if (const Json* v = FindOfType(key, presence, IsString, "must be a string", &st)) {
    *out = v->get<std::string>();
  }
  return st;
}

Status JsonFields::Int(std::string_view key, int64_t* out, Presence presence) {
  Status st;
  const Json* v = FindOfType(key, presence, IsInteger, "must be an integer", &st);
  if (v == nullptr) return st;
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
  if (const Json* v = FindOfType(key, presence, IsNumber, "must be a number", &st)) {
    *out = v->get<double>();
  }
  return st;
}

Status JsonFields::Bool(std::string_view key, bool* out, Presence presence) {
  Status st;
  if (const Json* v = FindOfType(key, presence, IsBool, "must be true or false", &st)) {
    *out = v->get<bool>();
  }
  return st;
}

Status JsonFields::StringList(std::string_view key, std::vector<std::string>* out,
                              Presence presence) {
  Status st;
  const Json* v = FindOfType(key, presence, IsArray, "must be an array of strings", &st);
  if (v == nullptr) return st;
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
  const Json* v = FindOfType(key, presence, IsArray, "must be an array of integers", &st);
  if (v == nullptr) return st;
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
  const Json* v = FindOfType(key, presence, IsObject, "must be an object of strings", &st);
  if (v == nullptr) return st;
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
  const Json* v = FindOfType(key, presence, IsArray, "must be an array", &st);
  if (!st.ok()) return st;
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
