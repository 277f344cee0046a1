#include "cli/spec_flags.h"

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "api/image_convention.h"
#include "api/job_spec_validation.h"
#include "cli/api_call.h"
#include "cli/job_spec_file.h"

namespace tessera::cli {
namespace {

// The image flags given on `cmd` over `image`; a bad one is kInvalidArgument
// naming its flag.
Status ApplyImageFlags(CLI::App& cmd, const SubmitFlags& f, api::ImageConvention* image) {
  auto given = [&](const char* name) { return cmd.count(name) > 0; };
  api::ImageConvention flags;
  if (given("--image-input")) flags.input = f.image_input;
  if (given("--image-output")) flags.output = f.image_output;
  if (given("--value-range")) {
    TESSERA_ASSIGN_OR_RETURN(flags.range, api::ParseValueRange(f.value_range, "--value-range"));
  }
  if (given("--align-px")) flags.align_px = f.align_px;
  if (given("--halo-px")) flags.halo_px = f.halo_px;
  if (Status st = api::ValidateImageConvention(flags, ""); !st.ok()) {
    static const std::map<std::string, std::string> kFlagOf = {{"input", "--image-input"},
                                                               {"output", "--image-output"},
                                                               {"range", "--value-range"},
                                                               {"align_px", "--align-px"},
                                                               {"halo_px", "--halo-px"}};
    auto flag = kFlagOf.find(st.field());
    return InvalidArgument(st.message(), flag == kFlagOf.end() ? st.field() : flag->second);
  }
  if (given("--image-input")) image->input = flags.input;
  if (given("--image-output")) image->output = flags.output;
  if (given("--value-range")) image->range = flags.range;
  if (given("--align-px")) image->align_px = flags.align_px;
  if (given("--halo-px")) image->halo_px = flags.halo_px;
  return Status::Ok();
}

}  // namespace

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
  if (given("--elastic")) spec.elastic = f.elastic;
  if (given("--image-width")) spec.image_width = f.image_width;
  if (given("--image-height")) spec.image_height = f.image_height;
  if (given("--arg")) spec.args = f.args;
  for (const std::string& kv : f.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument("must be KEY=VALUE", "env");
    spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  TESSERA_RETURN_IF_ERROR(ApplyImageFlags(cmd, f, &spec.image));
  if (Status st = api::ValidateJobSpec(spec); !st.ok()) {
    // Without a spec file every member came from a flag (or its default):
    // the error names the flag to give.
    static const std::map<std::string, std::string> kFlagOf = {
        {"name", "--name"},
        {"kind", "--kind"},
        {"entrypoint", "--entrypoint"},
        {"dataset", "--dataset"},
        {"output", "--output"},
        {"checkpoint", "--checkpoint"},
        {"layout", "--layout"},
        {"global_batch", "--global-batch"},
        {"steps", "--steps"},
        {"checkpoint_every_s", "--checkpoint-every-s"},
        {"priority", "--priority"},
        {"max_attempts", "--max-attempts"},
        {"min_devices", "--min-devices"},
        {"max_devices", "--max-devices"},
        {"image_width", "--image-width"},
        {"image_height", "--image-height"},
        {"args", "--arg"},
        {"env", "--env"}};
    auto flag = kFlagOf.find(st.field());
    if (!f.file.empty() || flag == kFlagOf.end()) return st;
    return InvalidArgument(st.message(), flag->second);
  }
  return spec;
}

void AddSpecFlags(CLI::App* cmd, SubmitFlags* f) {
  cmd->add_option("file", f->file, "job spec file (.json or .yaml; - for stdin)");
  cmd->add_option("--name", f->name, "job name");
  cmd->add_option("--kind", f->kind, "train or infer");
  cmd->add_option("--entrypoint", f->entrypoint,
                  "builtin:<model>, cmd:<registered name> or model:<registered name>");
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
  cmd->add_flag("--elastic,!--no-elastic", f->elastic,
                "whether tesserad may shrink, grow or move the running job to share the lab "
                "(default: it may)");
  cmd->add_option("--image-width", f->image_width, "infer: width of the largest scans (px)");
  cmd->add_option("--image-height", f->image_height, "infer: height of the largest scans (px)");
  cmd->add_option("--arg", f->args, "argument for the entrypoint (repeatable)");
  cmd->add_option("--env", f->env, "KEY=VALUE for every rank (repeatable)");
  cmd->add_option("--image-input", f->image_input,
                  "model: the tensor the module takes: rgb, gray or l (default: the module's)");
  cmd->add_option("--image-output", f->image_output,
                  "model: what the module gives: rgb, gray, ab or scores (default: the module's)");
  cmd->add_option("--value-range", f->value_range,
                  "model: lo,hi the values of black and white in rgb/gray tensors (e.g. -1,1)");
  cmd->add_option("--align-px", f->align_px,
                  "model: image sides must be multiples of this (1..1024; default: probed)");
  cmd->add_option("--halo-px", f->halo_px,
                  "model: context a tile needs around its part (0..4096; default: probed)");
}

void AddSpecCommand(CLI::App& app, CliContext& ctx, const char* name, const char* help,
                    std::function<void(const api::JobSpec& spec)> run) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* cmd = app.add_subcommand(name, help);
  AddSpecFlags(cmd, f.get());
  cmd->callback([&ctx, f, cmd, run = std::move(run)] {
    std::optional<api::JobSpec> spec = UsageChecked(ctx, BuildSpec(*cmd, *f));
    if (spec) run(*spec);
  });
}

}  // namespace tessera::cli
