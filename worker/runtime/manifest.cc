#include "worker/runtime/manifest.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <set>

namespace tessera::worker {

using nlohmann::json;

std::string ManifestToJson(const Manifest& m) {
  json files = json::array();
  for (const ManifestFile& f : m.files) {
    files.push_back(
        {{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}, {"tensors", f.tensors}});
  }
  json doc = {{"format", "tessera-checkpoint-1"},
              {"step", m.step},
              {"samples_seen", m.samples_seen},
              {"global_batch", m.global_batch},
              {"model", m.model},
              {"layout", m.layout},
              {"files", files}};
  return doc.dump(1);
}

Result<Manifest> ManifestFromJson(std::string_view text) {
  try {
    json doc = json::parse(text);
    if (doc.value("format", "") != "tessera-checkpoint-1") {
      return InvalidArgument("unknown manifest format", "format");
    }
    Manifest m;
    m.step = doc.at("step").get<int64_t>();
    m.samples_seen = doc.value("samples_seen", int64_t{0});
    m.global_batch = doc.value("global_batch", int64_t{0});
    m.model = doc.value("model", "");
    m.layout = doc.value("layout", "");
    for (const json& f : doc.at("files")) {
      ManifestFile mf;
      mf.path = f.at("path").get<std::string>();
      mf.size = f.at("size").get<uint64_t>();
      mf.sha256 = f.value("sha256", "");
      mf.tensors = f.value("tensors", std::vector<std::string>{});
      if (mf.path.empty() || mf.path.find('/') != std::string::npos || mf.path[0] == '.') {
        return InvalidArgument("file path must be a plain name: \"" + mf.path + "\"", "files");
      }
      m.files.push_back(std::move(mf));
    }
    return m;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed manifest: ") + e.what());
  }
}

std::string StepDirName(int64_t step) { return "step-" + std::to_string(step); }

std::optional<int64_t> ParseStepDirName(std::string_view name) {
  constexpr std::string_view kPrefix = "step-";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix) {
    return std::nullopt;
  }
  std::string_view digits = name.substr(kPrefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
  return v;
}

std::string CheckManifestFiles(const Manifest& m, const FileProbe& probe) {
  if (m.files.empty()) return "manifest lists no files";
  for (const ManifestFile& f : m.files) {
    auto facts = probe(m.step, f.path, !f.sha256.empty());
    if (!facts) return f.path + " missing";
    if (facts->size != f.size) {
      return f.path + " has " + std::to_string(facts->size) + " bytes, manifest says " +
             std::to_string(f.size);
    }
    if (!f.sha256.empty() && facts->sha256 != f.sha256) return f.path + " hash mismatch";
  }
  return "";
}

Selection SelectNewestComplete(std::vector<ManifestCandidate> candidates, const FileProbe& probe) {
  std::sort(candidates.begin(), candidates.end(),
            [](const ManifestCandidate& a, const ManifestCandidate& b) { return a.step > b.step; });
  Selection out;
  for (const ManifestCandidate& c : candidates) {
    const std::string name = StepDirName(c.step);
    if (!c.manifest_json) {
      out.skipped.push_back(name + ": no manifest (unfinished write)");
      continue;
    }
    Result<Manifest> m = ManifestFromJson(*c.manifest_json);
    if (!m.ok()) {
      out.skipped.push_back(name + ": " + m.status().message());
      continue;
    }
    if (m->step != c.step) {
      out.skipped.push_back(name + ": manifest names step " + std::to_string(m->step));
      continue;
    }
    if (auto why = CheckManifestFiles(*m, probe); !why.empty()) {
      out.skipped.push_back(name + ": " + why);
      continue;
    }
    if (!TensorLocations(*m).ok()) {
      out.skipped.push_back(name + ": a tensor is listed twice");
      continue;
    }
    out.chosen = std::move(m).value();
    break;
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> TensorLocations(const Manifest& m) {
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> seen;
  for (const ManifestFile& f : m.files) {
    for (const std::string& t : f.tensors) {
      if (!seen.insert(t).second) {
        return InvalidArgument("tensor \"" + t + "\" is listed twice", "files");
      }
      out.emplace_back(t, f.path);
    }
  }
  return out;
}

}  // namespace tessera::worker
