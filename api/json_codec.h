// The JSON members of a wire struct, listed once for both directions.
//
// A JsonMember names a JSON key and the data member that holds it. A struct's
// table of them is what its ToJson writes (MembersToJson) and what its
// FromJson reads (ReadJsonMembers), so a member is added, renamed or retyped
// in one place:
//
//   constexpr JsonMember<DeviceLink> kDeviceLinkMembers[] = {
//       {"a", &DeviceLink::a}, {"kind", &DeviceLink::kind}, ...};
//   Json ToJson(const DeviceLink& l) { return MembersToJson(kDeviceLinkMembers, l); }
//   ... JsonFields r(j); TESSERA_RETURN_IF_ERROR(ReadJsonMembers(kDeviceLinkMembers, r, &l));
//
// Reading goes through JsonFields (common/json_fields.h), in the table's
// order, so the first member in error is the one named: a wrong JSON type is
// kInvalidArgument naming the key with JsonFields' message, and an absent or
// null member keeps the value it had (the struct's default). A member is
//
//   std::string, int64_t, double, bool    a string, an integer, a number, true/false
//   std::vector<std::string>              an array of strings
//   std::map<std::string, std::string>    an object of strings
//   std::optional<int64_t>                an integer; written as null when unset
//   Json                                  any value, kept as it is
//   EnumMember<...>(error)                the enum's name; a name it does not
//                                         know is `error`, naming the key
//   JsonCustom<T>                         what its two functions write and read
//
// Presence::kRequired applies to every kind but std::optional<int64_t>, Json
// and JsonCustom (which decide for themselves). What is no member of the
// table (a value written only when set, a list of structs, a rule the value
// must meet) stays code beside it.
//
// ObjectFromJson reads a whole object; MembersFromJson an element or nested
// object whose caller words the error for a value that is no object.
//
// Also the arrays of wire structs: ToJsonArray writes one, ReadJsonList reads
// one with the element's FromJson and names an element's error "key[i].field".
//
// Thread safety: tables are constants; the functions keep no state.
#ifndef TESSERA_API_JSON_CODEC_H_
#define TESSERA_API_JSON_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "common/json_fields.h"
#include "common/status.h"

namespace tessera::api {

// An enum member as its name (made by EnumMember below).
template <typename T>
struct JsonEnum {
  std::string_view (*name_of)(const T& value);
  bool (*assign)(std::string_view name, T* value);  // false: not a name of the enum
  const char* unknown_name_error;
};

// A member no other kind fits: `write` gives its JSON value; `read` reads the
// member `key` from `fields` into *value (and names its own errors).
template <typename T>
struct JsonCustom {
  nlohmann::json (*write)(const T& value);
  Status (*read)(JsonFields& fields, std::string_view key, T* value);
};

template <typename T>
using JsonMemberPointer =
    std::variant<std::string T::*, int64_t T::*, double T::*, bool T::*,
                 std::vector<std::string> T::*, std::map<std::string, std::string> T::*,
                 std::optional<int64_t> T::*, nlohmann::json T::*, JsonEnum<T>, JsonCustom<T>>;

template <typename T>
struct JsonMember {
  const char* key;
  JsonMemberPointer<T> member;
  Presence presence = Presence::kOptional;
};

// *v, or null when unset.
template <typename V>
nlohmann::json JsonOrNull(const std::optional<V>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

namespace json_codec_internal {

template <typename M>
struct MemberOf;
template <typename C, typename V>
struct MemberOf<V C::*> {
  using Class = C;
};

template <typename V>
nlohmann::json PlainJson(const V& v) {
  return nlohmann::json(v);
}
template <typename V>
nlohmann::json PlainJson(const std::optional<V>& v) {
  return JsonOrNull(v);
}

inline Status ReadPlain(JsonFields& f, std::string_view key, std::string* out, Presence p) {
  return f.String(key, out, p);
}
inline Status ReadPlain(JsonFields& f, std::string_view key, int64_t* out, Presence p) {
  return f.Int(key, out, p);
}
inline Status ReadPlain(JsonFields& f, std::string_view key, double* out, Presence p) {
  return f.Double(key, out, p);
}
inline Status ReadPlain(JsonFields& f, std::string_view key, bool* out, Presence p) {
  return f.Bool(key, out, p);
}
inline Status ReadPlain(JsonFields& f, std::string_view key, std::vector<std::string>* out,
                        Presence p) {
  return f.StringList(key, out, p);
}
inline Status ReadPlain(JsonFields& f, std::string_view key,
                        std::map<std::string, std::string>* out, Presence p) {
  return f.StringMap(key, out, p);
}
inline Status ReadPlain(JsonFields& f, std::string_view key, std::optional<int64_t>* out,
                        Presence) {
  return f.Int(key, out);
}
inline Status ReadPlain(JsonFields& f, std::string_view key, nlohmann::json* out, Presence) {
  return f.Raw(key, out);
}

}  // namespace json_codec_internal

// The enum member kMember, written as kNameOf(value) and read back with
// kParse (an std::optional of the enum, nullopt for an unknown name).
template <auto kMember, auto kNameOf, auto kParse>
constexpr auto EnumMember(const char* unknown_name_error) {
  using T = typename json_codec_internal::MemberOf<decltype(kMember)>::Class;
  return JsonEnum<T>{[](const T& value) -> std::string_view { return kNameOf(value.*kMember); },
                     [](std::string_view name, T* value) {
                       auto parsed = kParse(name);
                       if (parsed) value->*kMember = *parsed;
                       return parsed.has_value();
                     },
                     unknown_name_error};
}

// An object of every member of `value` in `members`.
template <typename T, size_t N>
nlohmann::json MembersToJson(const JsonMember<T> (&members)[N], const T& value) {
  nlohmann::json out = nlohmann::json::object();
  for (const JsonMember<T>& m : members) {
    out[m.key] = std::visit(
        [&](const auto& member) -> nlohmann::json {
          using M = std::decay_t<decltype(member)>;
          if constexpr (std::is_same_v<M, JsonEnum<T>>) {
            return nlohmann::json(member.name_of(value));
          } else if constexpr (std::is_same_v<M, JsonCustom<T>>) {
            return member.write(value);
          } else {
            return json_codec_internal::PlainJson(value.*member);
          }
        },
        m.member);
  }
  return out;
}

// Reads every member in `members`, in order, from the object of `fields`
// into *value; the first error stops it.
template <typename T, size_t N>
Status ReadJsonMembers(const JsonMember<T> (&members)[N], JsonFields& fields, T* value) {
  for (const JsonMember<T>& m : members) {
    TESSERA_RETURN_IF_ERROR(std::visit(
        [&](const auto& member) -> Status {
          using M = std::decay_t<decltype(member)>;
          if constexpr (std::is_same_v<M, JsonEnum<T>>) {
            std::string name(member.name_of(*value));
            TESSERA_RETURN_IF_ERROR(fields.String(m.key, &name, m.presence));
            if (!member.assign(name, value)) {
              return InvalidArgument(member.unknown_name_error, fields.Name(m.key));
            }
            return Status::Ok();
          } else if constexpr (std::is_same_v<M, JsonCustom<T>>) {
            return member.read(fields, m.key, value);
          } else {
            return json_codec_internal::ReadPlain(fields, m.key, &(value->*member), m.presence);
          }
        },
        m.member));
  }
  return Status::Ok();
}

// CheckObject, then ReadJsonMembers: the members of a whole JSON object, which
// a caller may read on from `fields` (more keys, NoUnknownFields).
template <typename T, size_t N>
Status ReadJsonObject(const JsonMember<T> (&members)[N], JsonFields& fields, T* value) {
  TESSERA_RETURN_IF_ERROR(fields.CheckObject());
  return ReadJsonMembers(members, fields, value);
}

// A default T with the members of the JSON object `j` (ReadJsonObject).
template <typename T, size_t N>
Result<T> ObjectFromJson(const JsonMember<T> (&members)[N], const nlohmann::json& j) {
  T value;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(ReadJsonObject(members, fields, &value));
  return value;
}

// `start` with the members of the JSON object `j` (ReadJsonMembers): for an
// element of a list or a nested object, whose caller names its own error when
// `j` is no object (kInvalidArgument `not_object`, naming `field`).
template <typename T, size_t N>
Result<T> MembersFromJson(const JsonMember<T> (&members)[N], const nlohmann::json& j,
                          std::string_view not_object, std::string_view field = {}, T start = T{}) {
  if (!j.is_object()) return InvalidArgument(std::string(not_object), std::string(field));
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(ReadJsonMembers(members, fields, &start));
  return start;
}

// [to_json(item) for every item].
template <typename T, typename ToJsonFn>
nlohmann::json ToJsonArray(const std::vector<T>& items, ToJsonFn to_json) {
  nlohmann::json out = nlohmann::json::array();
  for (const T& item : items) out.push_back(to_json(item));
  return out;
}

// [ToJson(item) for every item], with the item type's own ToJson.
template <typename T>
nlohmann::json ToJsonArray(const std::vector<T>& items) {
  return ToJsonArray(items, [](const T& item) { return ToJson(item); });
}

// Appends parse(element) (a Result<T>) of every element of the array `items`
// (nullptr: none) to *out. An element's error is named "key[i].field", or
// "key[i]" when it names no field; the first error stops it.
template <typename T, typename ParseFn>
Status ReadJsonList(const nlohmann::json* items, std::string_view key, ParseFn parse,
                    std::vector<T>* out) {
  if (items == nullptr) return Status::Ok();
  for (size_t i = 0; i < items->size(); ++i) {
    Result<T> item = parse((*items)[i]);
    if (!item.ok()) {
      const Status& e = item.status();
      return Status(e.code(), e.message(),
                    std::string(key) + "[" + std::to_string(i) + "]" +
                        (e.field().empty() ? "" : ".") + e.field());
    }
    out->push_back(*std::move(item));
  }
  return Status::Ok();
}

// The same for the optional array member `key` of the object of `fields`.
template <typename T, typename ParseFn>
Status ReadJsonList(JsonFields& fields, std::string_view key, ParseFn parse, std::vector<T>* out) {
  TESSERA_ASSIGN_OR_RETURN(const nlohmann::json* items, fields.Array(key));
  return ReadJsonList(items, key, parse, out);
}

}  // namespace tessera::api

#endif  // TESSERA_API_JSON_CODEC_H_
