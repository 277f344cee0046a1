#include "worker/runtime/checkpoint.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "common/atomic_file.h"
#include "common/hex.h"

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[] = "TSRT1\n";

template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
bool Get(const std::string& in, size_t& pos, T* v) {
  if (pos + sizeof(T) > in.size()) return false;
  std::memcpy(v, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return true;
}

std::string Sha256OfBytes(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  return HexEncode(digest, len);
}

std::optional<std::string> ReadWholeFile(const std::string& path) {
  Result<std::string> bytes = FileSystem::Default()->ReadFile(path);
  if (!bytes.ok()) return std::nullopt;
  return *std::move(bytes);
}

}  // namespace

Status WriteTensorFile(const std::string& path, const NamedTensors& tensors, ManifestFile* facts,
                       FileSystem* files) {
  std::string out(kMagic);
  Put<uint32_t>(out, static_cast<uint32_t>(tensors.size()));
  for (const auto& [name, tensor] : tensors) {
    torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    Put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out += name;
    Put<int32_t>(out, static_cast<int32_t>(t.scalar_type()));
    Put<uint32_t>(out, static_cast<uint32_t>(t.dim()));
    for (int64_t d : t.sizes()) Put<int64_t>(out, d);
    const uint64_t nbytes = t.numel() * t.element_size();
    Put<uint64_t>(out, nbytes);
    out.append(static_cast<const char*>(t.data_ptr()), nbytes);
  }
  WriteFileOptions synced;
  synced.sync = true;
  TESSERA_RETURN_IF_ERROR(files->WriteFile(path, out, synced));
  if (facts != nullptr) {
    facts->path = fs::path(path).filename().string();
    facts->size = out.size();
    facts->sha256 = Sha256OfBytes(out);
    facts->tensors.clear();
    for (const auto& nt : tensors) facts->tensors.push_back(nt.first);
  }
  return Status::Ok();
}

static Result<std::map<std::string, torch::Tensor>> ReadTensorFileOrThrow(const std::string& path);

Result<std::map<std::string, torch::Tensor>> ReadTensorFile(const std::string& path) {
  try {
    return ReadTensorFileOrThrow(path);
  } catch (const std::exception& e) {
    return Internal(path + ": " + e.what());
  }
}

static Result<std::map<std::string, torch::Tensor>> ReadTensorFileOrThrow(const std::string& path) {
  auto bytes = ReadWholeFile(path);
  if (!bytes) return NotFound("cannot read " + path);
  const std::string& in = *bytes;
  const size_t magic_len = std::strlen(kMagic);
  if (in.compare(0, magic_len, kMagic) != 0) return Internal(path + ": not a tensor file");
  size_t pos = magic_len;
  uint32_t count = 0;
  if (!Get(in, pos, &count)) return Internal(path + ": truncated");
  std::map<std::string, torch::Tensor> out;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t name_len = 0, ndim = 0;
    int32_t dtype = 0;
    uint64_t nbytes = 0;
    if (!Get(in, pos, &name_len) || pos + name_len > in.size()) {
      return Internal(path + ": truncated");
    }
    std::string name = in.substr(pos, name_len);
    pos += name_len;
    if (!Get(in, pos, &dtype) || !Get(in, pos, &ndim) || ndim > 16) {
      return Internal(path + ": truncated");
    }
    std::vector<int64_t> shape(ndim);
    for (auto& d : shape) {
      if (!Get(in, pos, &d)) return Internal(path + ": truncated");
    }
    if (!Get(in, pos, &nbytes) || pos + nbytes > in.size()) {
      return Internal(path + ": truncated");
    }
    torch::Tensor t =
        torch::empty(shape, torch::TensorOptions().dtype(static_cast<torch::ScalarType>(dtype)));
    if (static_cast<uint64_t>(t.numel() * t.element_size()) != nbytes) {
      return Internal(path + ": size mismatch for " + name);
    }
    std::memcpy(t.data_ptr(), in.data() + pos, nbytes);
    pos += nbytes;
    out.emplace(std::move(name), std::move(t));
  }
  return out;
}

Result<std::string> Sha256OfFile(const std::string& path) {
  auto bytes = ReadWholeFile(path);
  if (!bytes) return NotFound("cannot read " + path);
  return Sha256OfBytes(*bytes);
}

FileProbe DiskProbe(const std::string& dir) {
  return [dir](int64_t step, const std::string& rel, bool want_hash) -> std::optional<FileFacts> {
    const fs::path p = fs::path(dir) / StepDirName(step) / rel;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) return std::nullopt;
    FileFacts facts;
    facts.size = fs::file_size(p, ec);
    if (ec) return std::nullopt;
    if (want_hash) {
      auto h = Sha256OfFile(p.string());
      if (!h.ok()) return std::nullopt;
      facts.sha256 = *h;
    }
    return facts;
  };
}

std::vector<ManifestCandidate> ScanCheckpointDir(const std::string& dir) {
  std::vector<ManifestCandidate> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory()) continue;
    auto step = ParseStepDirName(entry.path().filename().string());
    if (!step) continue;
    out.push_back(ManifestCandidate{*step, ReadWholeFile((entry.path() / "manifest.json"))});
  }
  return out;
}

std::optional<Manifest> FindNewestCheckpoint(const std::string& dir,
                                             std::vector<std::string>* skipped) {
  Selection sel = SelectNewestComplete(ScanCheckpointDir(dir), DiskProbe(dir));
  if (skipped != nullptr) *skipped = sel.skipped;
  return sel.chosen;
}

Result<Manifest> ReadManifest(const std::string& dir, int64_t step) {
  auto text = ReadWholeFile((fs::path(dir) / StepDirName(step) / "manifest.json").string());
  if (!text) return NotFound("no manifest for " + StepDirName(step) + " in " + dir);
  return ManifestFromJson(*text);
}

Status WriteManifestAtomically(const std::string& dir, const Manifest& manifest,
                               FileSystem* files) {
  const fs::path step_dir = fs::path(dir) / StepDirName(manifest.step);
  return WriteFileAtomically(*files, step_dir / "manifest.json", ManifestToJson(manifest));
}

Result<std::map<std::string, torch::Tensor>> LoadTensors(const std::string& dir,
                                                         const Manifest& manifest,
                                                         const std::vector<std::string>& names) {
  TESSERA_ASSIGN_OR_RETURN(auto locations, TensorLocations(manifest));
  std::map<std::string, std::string> where(locations.begin(), locations.end());
  std::map<std::string, std::vector<std::string>> by_file;
  for (const std::string& n : names) {
    auto it = where.find(n);
    if (it == where.end()) {
      return NotFound("checkpoint " + StepDirName(manifest.step) + " has no tensor \"" + n + "\"");
    }
    by_file[it->second].push_back(n);
  }
  std::map<std::string, torch::Tensor> out;
  for (const auto& [file, wanted] : by_file) {
    const std::string path = (fs::path(dir) / StepDirName(manifest.step) / file).string();
    TESSERA_ASSIGN_OR_RETURN(auto all, ReadTensorFile(path));
    for (const std::string& n : wanted) {
      auto it = all.find(n);
      if (it == all.end()) return Internal(path + " lacks " + n + " listed in the manifest");
      out.emplace(n, it->second);
    }
  }
  return out;
}

Status SaveCheckpoint(Collectives& world, const std::string& dir, const CheckpointContent& content,
                      int keep) {
  const fs::path step_dir = fs::path(dir) / StepDirName(content.step);
  std::error_code ec;
  fs::create_directories(step_dir, ec);
  if (ec) return Internal("cannot create " + step_dir.string() + ": " + ec.message());
  nlohmann::json mine = nlohmann::json::array();
  if (!content.file_name.empty()) {
    ManifestFile facts;
    TESSERA_RETURN_IF_ERROR(
        WriteTensorFile((step_dir / content.file_name).string(), content.tensors, &facts));
    mine.push_back({{"path", facts.path},
                    {"size", facts.size},
                    {"sha256", facts.sha256},
                    {"tensors", facts.tensors}});
  }
  const std::string key_prefix = "ckpt/" + std::to_string(content.step) + "/";
  TESSERA_RETURN_IF_ERROR(world.StoreSet(key_prefix + std::to_string(world.rank()), mine.dump()));
  TESSERA_RETURN_IF_ERROR(world.Barrier());
  Status result;
  if (world.rank() == 0) {
    Manifest m;
    m.step = content.step;
    m.samples_seen = content.samples_seen;
    m.global_batch = content.global_batch;
    m.model = content.model;
    m.layout = content.layout;
    for (int r = 0; r < world.size(); ++r) {
      auto v = world.StoreGet(key_prefix + std::to_string(r));
      if (!v.ok()) {
        result = v.status();
        break;
      }
      try {
        for (const auto& f : nlohmann::json::parse(*v)) {
          m.files.push_back(ManifestFile{
              f.at("path").get<std::string>(), f.at("size").get<uint64_t>(),
              f.at("sha256").get<std::string>(), f.at("tensors").get<std::vector<std::string>>()});
        }
      } catch (const std::exception& e) {
        result = Internal(std::string("bad checkpoint entry: ") + e.what());
        break;
      }
    }
    if (result.ok()) result = WriteManifestAtomically(dir, m);
    if (result.ok() && keep > 0) {
      // Prune: keep the newest `keep` steps at or below this one; never touch newer dirs.
      std::vector<int64_t> steps;
      for (const auto& c : ScanCheckpointDir(dir)) {
        if (c.step < content.step) steps.push_back(c.step);
      }
      std::sort(steps.rbegin(), steps.rend());
      for (size_t i = static_cast<size_t>(keep - 1); i < steps.size(); ++i) {
        fs::remove_all(fs::path(dir) / StepDirName(steps[i]), ec);
      }
    }
  }
  TESSERA_RETURN_IF_ERROR(world.Barrier());
  return result;
}

Result<int64_t> ShareResumeStep(Collectives& world, int64_t rank0_step) {
  if (world.rank() == 0) {
    TESSERA_RETURN_IF_ERROR(world.StoreSet("resume/step", std::to_string(rank0_step)));
    return rank0_step;
  }
  TESSERA_ASSIGN_OR_RETURN(std::string v, world.StoreGet("resume/step"));
  try {
    return static_cast<int64_t>(std::stoll(v));
  } catch (const std::exception&) {
    return Internal("bad resume step in the store: " + v);
  }
}

}  // namespace tessera::worker
