// ExportedModule: an image model a lab exported with its own PyTorch, loaded
// for archive inference (`tessera-worker infer --model-file`, `model:`
// entrypoints).
//
// Formats, chosen by the file's contents (a zip archive either way):
//   TorchScript    torch.jit.script / torch.jit.trace, then torch.jit.save
//                  (usually `.pt`); loaded with torch::jit::load onto the device.
//   AOTInductor    torch.export.export, then
//                  torch._inductor.aoti_compile_and_package (`.pt2`); loaded
//                  with AOTIModelPackageLoader. A package is compiled for one
//                  device kind (cpu or cuda, its AOTI_DEVICE_KEY): it runs only
//                  on that kind, and its batch, height and width must have been
//                  exported dynamic (torch.export.Dim) for batches and tiles of
//                  any size.
// forward takes one tensor [B, C, H, W] (float32, on the device) and returns
// one tensor (or a tuple/list whose first element is one).
//
// What the module states about its images (api/image_convention.h): a JSON
// object `tessera.json`, saved with the module
//   TorchScript: torch.jit.save(m, path, _extra_files={"tessera.json": ...})
//   AOTInductor: inductor_configs={"aot_inductor.metadata": {"tessera.json": ...}}
// e.g. {"input": "gray", "output": "rgb", "range": [-1, 1], "align_px": 16}.
//
// Errors: kInvalidArgument naming "model-file" for a missing or unreadable
// file, a file that is neither format, a package for another device kind, a
// malformed tessera.json (naming "tessera.json.<member>"); a forward that
// throws is kResourceExhausted for an out-of-memory, else kInvalidArgument
// (the module does not take such input), with the module's own message.
//
// Thread safety: Forward must not run concurrently on one module; the rest
// are read-only.
#ifndef TESSERA_WORKER_RUNTIME_EXPORTED_MODEL_H_
#define TESSERA_WORKER_RUNTIME_EXPORTED_MODEL_H_

#include <torch/torch.h>

#include <memory>
#include <string>

#include "api/image_convention.h"
#include "common/status.h"

namespace tessera::worker {

class ExportedModule {
 public:
  virtual ~ExportedModule() = default;

  // REQUIRES: device is cpu or a cuda device.
  static Result<std::unique_ptr<ExportedModule>> Load(const std::string& path,
                                                      const torch::Device& device);

  // "torchscript" | "aoti".
  virtual std::string format() const = 0;
  // What the module's tessera.json states (empty when it has none).
  const api::ImageConvention& stated() const { return stated_; }
  // One forward of [B, C, H, W] on the device: the output tensor as the
  // module returns it (any shape; callers check it).
  virtual Result<torch::Tensor> Forward(const torch::Tensor& bchw) = 0;

 protected:
  api::ImageConvention stated_;
};

// The stated convention of a tessera.json text ("" -> empty).
Result<api::ImageConvention> ParseTesseraJson(const std::string& text);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_EXPORTED_MODEL_H_
