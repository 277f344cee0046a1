// EntrypointKind: what an entrypoint name says it runs, read from its prefix.
//
//   "builtin:<model>"  the reference worker's own model (worker/models/), with
//                      a checkpoint the job names
//   "cmd:<name>"       a registered executable (the entrypoint's command),
//                      opaque to Tessera
//   "model:<name>"     a registered exported PyTorch model file (the
//                      entrypoint's command: a TorchScript `.pt` or an
//                      AOTInductor `.pt2`), run by the worker's infer mode
//
// The one place that tells the kinds apart by prefix; validation, planning,
// launch and the allow-list ask here.
//
// Thread safety: pure functions.
#ifndef TESSERA_API_ENTRYPOINT_KIND_H_
#define TESSERA_API_ENTRYPOINT_KIND_H_

#include <string_view>

namespace tessera::api {

// The reference models' entrypoints: every new store starts with them, tesserad
// profiles each on its CPU, and agents profile them on their GPUs.
inline constexpr std::string_view kBuiltinEntrypoints[] = {
    "builtin:colorize-unet",
    "builtin:denoiser-dncnn",
    "builtin:classifier-resnet",
    "builtin:gan-pix2pix",
};

enum class EntrypointKind {
  kUnknown,  // no known prefix
  kBuiltin,  // "builtin:"
  kCommand,  // "cmd:"
  kModel,    // "model:"
};

// The kind `name`'s prefix names; kUnknown without one. The id after the
// prefix is not checked here (ValidateEntrypointName does).
EntrypointKind EntrypointKindOf(std::string_view name);

// The part of `name` after its prefix ("colorize-unet" of
// "builtin:colorize-unet"); `name` whole for kUnknown.
std::string_view EntrypointId(std::string_view name);

// The prefix of `kind`, colon included ("model:"); "" for kUnknown.
std::string_view EntrypointPrefix(EntrypointKind kind);

// True when an entrypoint of `kind` is registered with the absolute path of
// a file (its command): cmd: and model:. builtin: ones have none.
bool HasCommandPath(EntrypointKind kind);

}  // namespace tessera::api

#endif  // TESSERA_API_ENTRYPOINT_KIND_H_
