// A lab's own model profiles for the scheduler simulator (trace_sim
// --profile): so a trace can name the lab's models, not only the builtin
// reference ones.
//
// A profile file is the JSON `tessera-worker profile` prints, as tesserad
// caches it (<state-dir>/profiles/*.json; a `model:` train job's profile is
// measured there on first use), read with the planner's own reader
// (scheduler/profile_json.h). Its name in a trace's model column is the
// file's "model" field, or NAME given as NAME=FILE.json; a profile named as a
// builtin replaces the builtin (e.g. replaying on the profiles tesserad
// measured rather than the estimates).
//
// On the simulator's clusters (GPUs described by TFLOPS and memory) the
// planner estimates a layer's time from its FLOPs and bytes, as it does on any
// device the profile was not measured on; measured milliseconds count only on
// devices measured as the profile's "device".
// Thread safety: pure functions.
#ifndef TESSERA_BENCH_SCHED_PROFILE_FILES_H_
#define TESSERA_BENCH_SCHED_PROFILE_FILES_H_

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/model_profile.h"

namespace tessera::scheduler::sim {

struct NamedProfile {
  std::string name;  // as traces name it
  ModelProfile profile;
};

// `arg`: FILE.json or NAME=FILE.json. NotFound when the file is missing,
// kInvalidArgument when it is not a profile (naming the field, "model" among
// them), each with the path; kInvalidArgument ("name") when NAME is empty.
Result<NamedProfile> ReadProfileArg(const std::string& arg);

// The builtin reference profiles by name, with `own` added over them (a later
// one of a name over an earlier).
std::map<std::string, ModelProfile> SimProfiles(const std::vector<NamedProfile>& own);

}  // namespace tessera::scheduler::sim

#endif  // TESSERA_BENCH_SCHED_PROFILE_FILES_H_
