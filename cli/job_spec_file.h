// Reading job specs for `tessera submit FILE` and `tessera plan FILE`.
//
// FILE is JSON (".json", or anything starting with '{') or YAML (".yaml",
// ".yml"); both are turned into the same JSON and read by
// api::JobSpecFromJson, so the two formats accept exactly the same fields.
// "-" reads standard input.
//
// Thread safety: pure functions (LoadJobSpecFile reads one file).
#ifndef TESSERA_CLI_JOB_SPEC_FILE_H_
#define TESSERA_CLI_JOB_SPEC_FILE_H_

#include <string>

#include "api/types.h"
#include "common/status.h"

namespace tessera::cli {

// Parses spec text; `name` (a path) chooses YAML or JSON and prefixes errors.
Result<api::JobSpec> ParseJobSpecText(const std::string& text, const std::string& name);

// Reads and parses a file ("-": stdin).
Result<api::JobSpec> LoadJobSpecFile(const std::string& path);

// YAML to JSON: plain scalars become integers, floats, booleans or null
// when they look like one; quoted scalars stay strings.
Result<api::Json> YamlTextToJson(const std::string& text);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_JOB_SPEC_FILE_H_
