#include "agent/benchmark_cache.h"

#include "common/atomic_file.h"

namespace tessera::agent {

BenchmarkCache::BenchmarkCache(std::filesystem::path file, FileSystem* fs)
    : file_(std::move(file)), fs_(fs) {}

void BenchmarkCache::Load() {
  entries_.clear();
  profiles_.clear();
  if (file_.empty()) return;
  Result<std::string> text = fs_->ReadFile(file_);
  if (!text.ok()) return;
  api::Json j = api::Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  if (j.contains("profiles") && j["profiles"].is_object()) {
    for (const auto& [key, value] : j["profiles"].items()) {
      if (value.is_object()) profiles_[key] = value;
    }
  }
  if (!j.contains("devices") || !j["devices"].is_object()) return;
  for (const auto& [key, value] : j["devices"].items()) {
    if (!value.is_object()) continue;
    // Entries written before 16-bit throughput was measured lack "tflops_half":
    // they are measured again.
    BenchmarkFigures f;
    bool complete = true;
    for (auto [name, out] : {std::pair{"tflops", &f.tflops},
                             {"tflops_half", &f.tflops_half},
                             {"tflops_fp16", &f.tflops_fp16},
                             {"tflops_bf16", &f.tflops_bf16},
                             {"mem_bandwidth_gbps", &f.mem_bandwidth_gbps}}) {
      auto it = value.find(name);
      if (it == value.end() || !it->is_number()) {
        complete = false;
        break;
      }
      *out = it->get<double>();
    }
    if (complete) entries_[key] = f;
  }
}

Status BenchmarkCache::Save() const {
  if (file_.empty()) return Status::Ok();
  api::Json devices = api::Json::object();
  for (const auto& [key, f] : entries_) {
    devices[key] = {{"tflops", f.tflops},
                    {"tflops_half", f.tflops_half},
                    {"tflops_fp16", f.tflops_fp16},
                    {"tflops_bf16", f.tflops_bf16},
                    {"mem_bandwidth_gbps", f.mem_bandwidth_gbps}};
  }
  api::Json j = {{"version", 2}, {"devices", devices}};
  if (!profiles_.empty()) {
    api::Json profiles = api::Json::object();
    for (const auto& [key, profile] : profiles_) profiles[key] = profile;
    j["profiles"] = std::move(profiles);
  }
  return WriteFileAtomically(*fs_, file_, j.dump(2) + "\n");
}

std::optional<BenchmarkFigures> BenchmarkCache::Get(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void BenchmarkCache::Put(const std::string& key, const BenchmarkFigures& figures) {
  entries_[key] = figures;
}

std::string BenchmarkCache::KeyFor(const api::Device& device) {
  if (!device.uuid.empty() && device.type != "cpu") return device.type + ":" + device.uuid;
  return device.type + ":" + device.name;
}

std::optional<api::Json> BenchmarkCache::GetProfile(const std::string& key) const {
  auto it = profiles_.find(key);
  if (it == profiles_.end()) return std::nullopt;
  return it->second;
}

void BenchmarkCache::PutProfile(const std::string& key, api::Json profile) {
  profiles_[key] = std::move(profile);
}

}  // namespace tessera::agent
