// A lab's own model profiles for the simulator (profile_files.h).
#include "bench/sched/profile_files.h"

#include <nlohmann/json.hpp>

#include "common/file_system.h"
#include "scheduler/builtin_profiles.h"
#include "scheduler/profile_json.h"

namespace tessera::scheduler::sim {

Result<NamedProfile> ReadProfileArg(const std::string& arg) {
  std::string name;
  std::string path = arg;
  // NAME=FILE: a name has no '/', so a path with '=' in a folder's name reads as a path.
  if (const size_t eq = arg.find('=');
      eq != std::string::npos && arg.substr(0, eq).find('/') == std::string::npos) {
    name = arg.substr(0, eq);
    path = arg.substr(eq + 1);
    if (name.empty()) return InvalidArgument(arg + ": NAME=FILE.json with an empty NAME", "name");
  }
  TESSERA_ASSIGN_OR_RETURN(std::string text, FileSystem::Default()->ReadFile(path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument(path +
                           ": not a JSON object (a profile as tessera-worker profile prints it)");
  }
  Result<ModelProfile> profile = ModelProfileFromWorkerJson(j);
  if (!profile.ok()) return profile.status().WithPrefix(path);
  if (name.empty()) name = profile->name;  // "model", which the reader requires
  profile->name = name;
  return NamedProfile{name, *std::move(profile)};
}

std::map<std::string, ModelProfile> SimProfiles(const std::vector<NamedProfile>& own) {
  std::map<std::string, ModelProfile> out;
  for (const std::string& m : BuiltinProfileNames()) out.emplace(m, *BuiltinProfile(m));
  for (const NamedProfile& p : own) out.insert_or_assign(p.name, p.profile);
  return out;
}

}  // namespace tessera::scheduler::sim
