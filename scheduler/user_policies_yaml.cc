#include "scheduler/user_policies_yaml.h"

#include <string>
#include <utility>

namespace tessera::scheduler {
namespace {

// The value of `n` as a T, or "has the wrong type" naming `field`.
template <typename T>
Status Read(const YAML::Node& n, T* out, const std::string& field) {
  try {
    *out = n.as<T>();
    return Status::Ok();
  } catch (const YAML::Exception&) {
    return InvalidArgument("has the wrong type", field);
  }
}

}  // namespace

Status ReadUserPolicies(const YAML::Node& node, UserPolicies* out) {
  if (!node.IsMap()) return InvalidArgument("must map user names to policies", "users");
  UserPolicies read;
  for (const auto& kv : node) {
    const std::string name = kv.first.as<std::string>("");
    const std::string field = "users." + name;
    if (name.empty()) return InvalidArgument("user names must be non-empty strings", "users");
    if (!kv.second.IsMap()) {
      return InvalidArgument(
          "must be a mapping {weight, max_running_jobs, max_devices, max_pending_jobs}", field);
    }
    UserPolicy policy;
    for (const auto& p : kv.second) {
      const std::string key = p.first.as<std::string>("");
      const std::string at = field + "." + key;
      Status st;
      if (key == "weight") {
        st = Read(p.second, &policy.weight, at);
      } else if (key == "max_running_jobs") {
        st = Read(p.second, &policy.max_running_jobs, at);
      } else if (key == "max_devices") {
        st = Read(p.second, &policy.max_devices, at);
      } else if (key == "max_pending_jobs") {
        st = Read(p.second, &policy.max_pending_jobs, at);
      } else {
        return InvalidArgument(
            "unknown key (weight, max_running_jobs, max_devices, max_pending_jobs)", at);
      }
      TESSERA_RETURN_IF_ERROR(st);
    }
    if (Status st = policy.Validate(); !st.ok()) {
      return InvalidArgument(st.message(), field + "." + st.field());
    }
    read.users[name] = policy;
  }
  *out = std::move(read);
  return Status::Ok();
}

}  // namespace tessera::scheduler
