#include "worker/runtime/exported_model.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/script.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

namespace tessera::worker {
namespace {

constexpr char kField[] = "model-file";
constexpr char kTesseraJson[] = "tessera.json";

// The first line of a LibTorch message (its C++ backtrace and TorchScript
// call stack follow).
std::string FirstLines(const std::string& what) {
  std::string out;
  size_t start = 0;
  for (int line = 0; line < 3 && start < what.size(); ++line) {
    size_t end = what.find('\n', start);
    if (end == std::string::npos) end = what.size();
    std::string text = what.substr(start, end - start);
    start = end + 1;
    if (text.empty() || text.starts_with("Exception raised from") || text.starts_with("frame #")) {
      break;
    }
    out += (out.empty() ? "" : " ") + text;
  }
  return out.empty() ? what.substr(0, what.find('\n')) : out;
}

// What went wrong in a forward, in the module's own words: the TorchScript
// interpreter wraps the error in its traceback, whose last "...Error: " line
// is the error itself.
std::string ModuleError(const std::exception& e) {
  std::string what = e.what();
  if (const auto* c10e = dynamic_cast<const c10::Error*>(&e)) what = c10e->what_without_backtrace();
  if (what.find("TorchScript interpreter") != std::string::npos) {
    size_t line = what.size();
    while (line > 0) {
      const size_t start = what.rfind('\n', line - 1);
      const size_t from = start == std::string::npos ? 0 : start + 1;
      const std::string text = what.substr(from, line - from);
      const size_t colon = text.find("Error: ");
      if (colon != std::string::npos && text.find(' ') > colon) return text;
      if (start == std::string::npos) break;
      line = start;
    }
  }
  return FirstLines(what);
}

Status ForwardFailure(const std::exception& e) {
  const std::string what = ModuleError(e);
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr ||
      what.find("out of memory") != std::string::npos) {
    return ResourceExhausted("the exported module's forward: " + what);
  }
  return InvalidArgument("the exported module's forward failed: " + what, kField);
}

torch::Tensor FirstTensor(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor();
  if (v.isTuple() && !v.toTupleRef().elements().empty()) {
    return FirstTensor(v.toTupleRef().elements()[0]);
  }
  if (v.isList() && !v.toListRef().empty()) return FirstTensor(v.toListRef()[0]);
  if (v.isTensorList() && v.toTensorList().size() > 0) return v.toTensorList().get(0);
  return torch::Tensor();
}

class TorchScriptModule : public ExportedModule {
 public:
  explicit TorchScriptModule(torch::jit::Module m) : module_(std::move(m)) { module_.eval(); }
  std::string format() const override { return "torchscript"; }
  Result<torch::Tensor> Forward(const torch::Tensor& bchw) override {
    try {
      const torch::Tensor out = FirstTensor(module_.forward({bchw}));
      if (!out.defined()) {
        return InvalidArgument("the exported module's forward returned no tensor", kField);
      }
      return out;
    } catch (const std::exception& e) {
      return ForwardFailure(e);
    }
  }
  void set_stated(api::ImageConvention c) { stated_ = std::move(c); }

 private:
  torch::jit::Module module_;
};

class AotiModule : public ExportedModule {
 public:
  explicit AotiModule(std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader)
      : loader_(std::move(loader)) {}
  std::string format() const override { return "aoti"; }
  Result<torch::Tensor> Forward(const torch::Tensor& bchw) override {
    try {
      std::vector<torch::Tensor> out = loader_->run({bchw});
      if (out.empty() || !out[0].defined()) {
        return InvalidArgument("the exported module's forward returned no tensor", kField);
      }
      return out[0];
    } catch (const std::exception& e) {
      return ForwardFailure(e);
    }
  }
  void set_stated(api::ImageConvention c) { stated_ = std::move(c); }

 private:
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
};

Result<std::unique_ptr<ExportedModule>> LoadTorchScript(const std::string& path,
                                                        const torch::Device& device) {
  std::unordered_map<std::string, std::string> extra{{kTesseraJson, ""}};
  torch::jit::Module m;
  try {
    m = torch::jit::load(path, device, extra);
  } catch (const std::exception& e) {
    return InvalidArgument(path + " is not a loadable TorchScript module: " + FirstLines(e.what()),
                           kField);
  }
  if (!m.find_method("forward")) {
    return InvalidArgument(path + " has no forward method", kField);
  }
  TESSERA_ASSIGN_OR_RETURN(api::ImageConvention stated, ParseTesseraJson(extra[kTesseraJson]));
  auto out = std::make_unique<TorchScriptModule>(std::move(m));
  out->set_stated(std::move(stated));
  return Result<std::unique_ptr<ExportedModule>>(std::move(out));
}

Result<std::unique_ptr<ExportedModule>> LoadAoti(const std::string& path,
                                                 const torch::Device& device) {
  std::unordered_map<std::string, std::string> metadata;
  try {
    metadata = torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(path, "model");
  } catch (const std::exception& e) {
    return InvalidArgument(path + " is not a loadable AOTInductor package: " + FirstLines(e.what()),
                           kField);
  }
  const std::string kind = metadata.contains("AOTI_DEVICE_KEY") ? metadata["AOTI_DEVICE_KEY"] : "";
  const std::string want = device.is_cuda() ? "cuda" : "cpu";
  if (kind != want) {
    return InvalidArgument(path + " is an AOTInductor package compiled for " +
                               (kind.empty() ? std::string("an unknown device") : kind) +
                               "; this rank's device is " + device.str() +
                               " (export it again with the model and inputs on " + want + ")",
                           kField);
  }
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
  try {
    // The package's own kernels, not LibTorch's allocator bookkeeping, are
    // host memory of the loader; its weights are tensors (counted on an
    // emulated device, as a GPU's would be).
    loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
        path, "model", /*run_single_threaded=*/false, /*num_runners=*/1,
        device.is_cuda() ? device.index() : static_cast<c10::DeviceIndex>(-1));
  } catch (const std::exception& e) {
    return InvalidArgument(path + " is not a loadable AOTInductor package: " + FirstLines(e.what()),
                           kField);
  }
  TESSERA_ASSIGN_OR_RETURN(
      api::ImageConvention stated,
      ParseTesseraJson(metadata.contains(kTesseraJson) ? metadata[kTesseraJson] : std::string()));
  auto out = std::make_unique<AotiModule>(std::move(loader));
  out->set_stated(std::move(stated));
  return Result<std::unique_ptr<ExportedModule>>(std::move(out));
}

}  // namespace

Result<api::ImageConvention> ParseTesseraJson(const std::string& text) {
  if (text.empty()) return api::ImageConvention{};
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("is not valid JSON", kTesseraJson);
  return api::ImageConventionFromJson(j, kTesseraJson);
}

Result<std::unique_ptr<ExportedModule>> ExportedModule::Load(const std::string& path,
                                                             const torch::Device& device) {
  std::error_code ec;
  if (path.empty()) return InvalidArgument("an exported model file is required", kField);
  if (!std::filesystem::is_regular_file(path, ec)) {
    return InvalidArgument(path + " does not exist or is not a file", kField);
  }
  bool aoti = false;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    aoti = reader.hasRecord("archive_format");
  } catch (const std::exception& e) {
    return InvalidArgument(path +
                               " is neither a TorchScript file nor an AOTInductor package (not a "
                               "PyTorch archive: " +
                               FirstLines(e.what()) + ")",
                           kField);
  }
  return aoti ? LoadAoti(path, device) : LoadTorchScript(path, device);
}

}  // namespace tessera::worker
