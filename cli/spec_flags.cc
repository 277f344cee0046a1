#include "cli/spec_flags.h"

#include <CLI/CLI.hpp>

#include "api/job_spec_validation.h"
#include "cli/job_spec_file.h"

namespace tessera::cli {

Result<api::JobSpec> BuildSpec(CLI::App& cmd, const SubmitFlags& f) {
  api::JobSpec spec;
  if (!f.file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(spec, LoadJobSpecFile(f.file));
  }
  auto given = [&](const char* name) { return cmd.count(name) > 0; };
  if (given("--name")) spec.name = f.name;
  if (given("--kind")) {
    auto kind = api::ParseJobKind(f.kind);
    if (!kind) return InvalidArgument("must be train or infer", "kind");
    spec.kind = *kind;
  }
  if (given("--entrypoint")) spec.entrypoint = f.entrypoint;
  if (given("--dataset")) spec.dataset = f.dataset;
  if (given("--output")) spec.output = f.output;
  if (given("--checkpoint")) spec.checkpoint = f.checkpoint;
  if (given("--layout")) spec.layout = f.layout;
  if (given("--global-batch")) spec.global_batch = f.global_batch;
  if (given("--steps")) spec.steps = f.steps;
  if (given("--checkpoint-every-s")) spec.checkpoint_every_s = f.checkpoint_every_s;
  if (given("--priority")) spec.priority = f.priority;
  if (given("--max-attempts")) spec.max_attempts = f.max_attempts;
  if (given("--min-devices")) spec.min_devices = f.min_devices;
  if (given("--max-devices")) spec.max_devices = f.max_devices;
  if (given("--image-width")) spec.image_width = f.image_width;
  if (given("--image-height")) spec.image_height = f.image_height;
  if (given("--arg")) spec.args = f.args;
  for (const std::string& kv : f.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument("must be KEY=VALUE", "env");
    spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  TESSERA_RETURN_IF_ERROR(api::ValidateJobSpec(spec));
  return spec;
}

void AddSpecFlags(CLI::App* cmd, SubmitFlags* f) {
  cmd->add_option("file", f->file, "job spec file (.json or .yaml; - for stdin)");
  cmd->add_option("--name", f->name, "job name");
  cmd->add_option("--kind", f->kind, "train or infer");
  cmd->add_option("--entrypoint", f->entrypoint, "builtin:<model> or cmd:<registered name>");
  cmd->add_option("--dataset", f->dataset, "input folder or list file (absolute path)");
  cmd->add_option("--output", f->output, "infer: output folder (absolute path)");
  cmd->add_option("--checkpoint", f->checkpoint, "infer: checkpoint to load");
  cmd->add_option("--layout", f->layout, "auto|data|pipeline|hybrid|tiled");
  cmd->add_option("--global-batch", f->global_batch, "global batch size");
  cmd->add_option("--steps", f->steps, "training steps");
  cmd->add_option("--checkpoint-every-s", f->checkpoint_every_s, "seconds between checkpoints");
  cmd->add_option("--priority", f->priority, "-1000..1000");
  cmd->add_option("--max-attempts", f->max_attempts, "attempts before the job fails");
  cmd->add_option("--min-devices", f->min_devices, "fewest devices to run on");
  cmd->add_option("--max-devices", f->max_devices, "most devices (0: no limit)");
  cmd->add_option("--image-width", f->image_width, "infer: width of the largest scans (px)");
  cmd->add_option("--image-height", f->image_height, "infer: height of the largest scans (px)");
  cmd->add_option("--arg", f->args, "argument for the entrypoint (repeatable)");
  cmd->add_option("--env", f->env, "KEY=VALUE for every rank (repeatable)");
}

}  // namespace tessera::cli
