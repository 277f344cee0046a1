// JsonFields: reads the members of one JSON object with a type check each,
// and an error naming the member. The one JSON field reader of every module
// (api/ request and protocol shapes, scheduler/ profiles, worker/ rank plans).
//
// Every error is kInvalidArgument whose `field` is the member's path: the
// reader's prefix, a '.', the key ("replicas[1].batch"); the key alone when
// the prefix is empty. Messages:
//   absent or null, Presence::kRequired   "is required"
//   wrong type                            "must be a string" | "must be an integer" |
//                                         "must be a number" | "must be true or false" |
//                                         "must be an array" | "must be an array of strings" |
//                                         "must be an array of integers" |
//                                         "must be an object of strings"
//   an integer beyond int64_t             "is out of range"
//   an element of a list or map           "must be a string" / "must be an integer",
//                                         naming "key[i]" / "key.name"
// An optional member that is absent or null leaves *out as it is, so the
// caller's initial value is the default. Integers are JSON integers (signed or
// unsigned within int64_t); numbers are any JSON number.
//
// The reader remembers which keys it was asked for, so NoUnknownFields can
// reject the rest.
//
// Ownership: borrows the object, which must outlive the reader.
// Thread safety: one reader per thread; the object is only read.
#ifndef TESSERA_COMMON_JSON_FIELDS_H_
#define TESSERA_COMMON_JSON_FIELDS_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tessera {

enum class Presence { kOptional, kRequired };

class JsonFields {
 public:
  // REQUIRES: `object` outlives the reader. `prefix` names the object itself
  // ("" at the top of a document).
  explicit JsonFields(const nlohmann::json& object, std::string prefix = {});

  // "must be a JSON object" naming the prefix unless the value is an object.
  // The readers below treat a non-object as having no members.
  Status CheckObject() const;

  Status String(std::string_view key, std::string* out, Presence presence = Presence::kOptional);
  Status Int(std::string_view key, int64_t* out, Presence presence = Presence::kOptional);
  // Set when present; absent or null leaves *out as it is.
  Status Int(std::string_view key, std::optional<int64_t>* out);
  Status Double(std::string_view key, double* out, Presence presence = Presence::kOptional);
  Status Bool(std::string_view key, bool* out, Presence presence = Presence::kOptional);
  Status StringList(std::string_view key, std::vector<std::string>* out,
                    Presence presence = Presence::kOptional);
  Status IntList(std::string_view key, std::vector<int64_t>* out,
                 Presence presence = Presence::kOptional);
  Status StringMap(std::string_view key, std::map<std::string, std::string>* out,
                   Presence presence = Presence::kOptional);
  // The member as it is, of any type (absent leaves *out as it is).
  Status Raw(std::string_view key, nlohmann::json* out);
  // The member if it is an array; nullptr when it is absent or null (and optional).
  Result<const nlohmann::json*> Array(std::string_view key,
                                      Presence presence = Presence::kOptional);

  // "unknown field" naming the first member no reader asked for.
  Status NoUnknownFields() const;

  // The path of `key` in errors ("prefix.key", or the prefix when key is "").
  std::string Name(std::string_view key) const;

 private:
  // The member, or nullptr when absent or null (recorded as asked for);
  // *status gets "is required" for an absent required member.
  const nlohmann::json* Find(std::string_view key, Presence presence, Status* status);
  // Find, then the member's type: nullptr with *status `must_be` (naming the member)
  // unless is_type(member).
  const nlohmann::json* FindOfType(std::string_view key, Presence presence,
                                   bool (*is_type)(const nlohmann::json&), std::string_view must_be,
                                   Status* status);

  const nlohmann::json& object_;
  std::string prefix_;
  std::set<std::string, std::less<>> asked_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_JSON_FIELDS_H_
