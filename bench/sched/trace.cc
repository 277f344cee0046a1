// Traces: the generated lab day and the CSV format (bench/sched/README.md).
#include "bench/sched/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "scheduler/builtin_profiles.h"
#include "scheduler/planner.h"

namespace tessera::scheduler::sim {
namespace {

// SplitMix64: the same trace for a seed on every platform (the standard
// library's distributions are not portable).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(Next() >> 11) * 0x1.0p-53;
  }
  int64_t Int(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Next() % v.size())];
  }

 private:
  uint64_t state_;
};

// A model's usual batches in the lab.
struct ModelUse {
  std::string model;
  std::vector<int64_t> batches;
};

// The four reference models at their usual batches in the lab.
std::vector<ModelUse> LabModels() {
  return {{"colorize-unet", {16, 32}},
          {"denoiser-dncnn", {16, 32}},
          {"classifier-resnet", {64, 128}},
          {"gan-pix2pix", {8, 16}}};
}

// The reference device job lengths are drawn for: one A100-like GPU.
constexpr double kReferenceTflops = 19.5;
constexpr double kReferenceMemoryGiB = 80;

// The largest image side a trace may name: tesserad's bound on a job's images
// (api/job_spec_validation.h, which this pure library does not link).
constexpr int64_t kMaxImageSide = 100'000;

// The planner's step time of `model` at `batch` alone on the reference device.
double ReferenceStepSeconds(const std::string& model, int64_t batch, JobKind kind) {
  ClusterSnapshot one;
  one.nodes.emplace_back();
  one.nodes[0].name = "ref";
  Device d;
  d.type = "reference";
  d.memory_bytes = static_cast<int64_t>(kReferenceMemoryGiB * kGiB);
  d.tflops = kReferenceTflops;
  one.nodes[0].devices.push_back(d);
  JobRequest request;
  request.kind = kind;
  request.global_batch = batch;
  Result<PlanSet> plans = MakePlans(one, *BuiltinProfile(model), request);
  if (!plans.ok()) {
    std::cerr << model << " at batch " << batch << ": " << plans.status().ToString() << "\n";
    std::exit(1);
  }
  return plans->plans.front().predicted.step_s;
}

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line);
  std::string cell;
  while (std::getline(s, cell, ',')) {
    const auto b = cell.find_first_not_of(" \t\r");
    const auto e = cell.find_last_not_of(" \t\r");
    out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

Result<int64_t> ParseInt(const std::string& s, const std::string& field) {
  try {
    size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used == s.size()) return static_cast<int64_t>(v);
  } catch (const std::exception&) {
  }
  return InvalidArgument("not an integer: '" + s + "'", field);
}

}  // namespace

// A lab day: 25 jobs of alice, bob, carol and dave at random times over 8
// hours, and a burst at 1 h: bob submits a sweep of 15 denoiser jobs at once;
// then 3 archive inference jobs.
// Job lengths are drawn as hours alone on one A100-like GPU (19.5 TFLOPS) and
// become steps of the model at its batch: 7 in 10 are short (5-45 min, on 1-2
// devices), the rest long (2-6 h, on up to 4, 8 or any number of devices);
// the sweep's jobs take 15-45 min on 1-2 devices. The archives (colorizing or
// denoising scans, 32 images a step, on any number of devices) take 1-3 h,
// submitted at random times over the 8 hours by random users. The training
// jobs are drawn first, so a seed's training jobs are the same with or without
// the archives.
// `load` multiplies every length (1: the day as described).
Trace GenerateLabDay(uint64_t seed, double load) {
  Rng rng(seed);
  const std::vector<ModelUse> models = LabModels();
  const std::vector<std::string> users = {"alice", "bob", "carol", "dave"};
  auto steps_for = [load](const TraceJob& j, double seconds) {
    const double step = ReferenceStepSeconds(j.model, j.global_batch, j.kind) / load;
    return std::max<int64_t>(100, static_cast<int64_t>(std::round(seconds / step / 100)) * 100);
  };
  Trace trace;
  trace.name = "lab-day";
  for (int i = 0; i < 25; ++i) {
    TraceJob j;
    j.submit_s = std::round(rng.Uniform(0, 8 * kHour));
    j.user = rng.Pick(users);
    const ModelUse& m = rng.Pick(models);
    j.model = m.model;
    j.global_batch = rng.Pick(m.batches);
    if (rng.Uniform(0, 1) < 0.7) {
      j.steps = steps_for(j, rng.Uniform(5, 45) * 60);
      j.max_devices = rng.Int(1, 2);
    } else {
      j.steps = steps_for(j, rng.Uniform(2, 6) * kHour);
      j.max_devices = rng.Pick(std::vector<int64_t>{4, 8, 0});
    }
    trace.jobs.push_back(j);
  }
  for (int i = 0; i < 15; ++i) {
    TraceJob j;
    j.submit_s = 1 * kHour;
    j.user = "bob";
    j.model = "denoiser-dncnn";
    j.global_batch = 16;
    j.steps = steps_for(j, rng.Uniform(15, 45) * 60);
    j.max_devices = 2;
    trace.jobs.push_back(j);
  }
  for (int i = 0; i < 3; ++i) {
    TraceJob j;
    j.kind = JobKind::kInfer;
    j.submit_s = std::round(rng.Uniform(0, 8 * kHour));
    j.user = rng.Pick(users);
    j.model = rng.Pick(std::vector<std::string>{"colorize-unet", "denoiser-dncnn"});
    j.global_batch = 32;
    j.steps = steps_for(j, rng.Uniform(1, 3) * kHour);
    trace.jobs.push_back(j);
  }
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  char load_text[48] = "";
  if (load != 1) std::snprintf(load_text, sizeof load_text, ", every job %gx as long", load);
  trace.about = "generated, seed " + std::to_string(seed) +
                ": 25 jobs of 4 users over 8 h, bob's burst of 15 at 1 h and 3 archives to infer" +
                load_text;
  return trace;
}
// Gavel's generated traces (OSDI'20), their shapes from Microsoft's Philly
// cluster (Jeon et al., ATC'19): arrivals a Poisson process; lengths 10^x
// minutes alone on one reference GPU, x uniform in [1.5, 3] for 8 jobs in 10
// and in [3, 4] for the rest; GPU counts 1 (7 in 10), 2 (1 in 10), 4 (15 in
// 100) or 8 (the rest), here a job's max_devices (the job is elastic from one
// device up). Models: the four reference ones at their usual batches.
Trace GeneratePhilly(uint64_t seed, double load, int jobs, double jobs_per_hour, int users) {
  Rng rng(seed);
  const std::vector<ModelUse> models = LabModels();
  const std::vector<std::string> names = {"alice", "bob",   "carol", "dave",
                                          "erin",  "frank", "grace", "heidi"};
  Trace trace;
  trace.name = "philly";
  double at = 0;
  for (int i = 0; i < jobs; ++i) {
    TraceJob j;
    j.submit_s = std::round(at);
    // The next arrival: an exponential gap of mean 1 / rate hours.
    at += -std::log(1.0 - rng.Uniform(0, 1)) / jobs_per_hour * kHour;
    const int64_t u = rng.Int(0, users - 1);
    j.user = u < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(u)]
                                                    : "user" + std::to_string(u + 1);
    const ModelUse& m = rng.Pick(models);
    j.model = m.model;
    j.global_batch = rng.Pick(m.batches);
    const double exponent = rng.Uniform(0, 1) < 0.8 ? rng.Uniform(1.5, 3) : rng.Uniform(3, 4);
    const double seconds = std::pow(10.0, exponent) * 60 * load;
    const double r = rng.Uniform(0, 1);
    j.max_devices = r < 0.7 ? 1 : r < 0.8 ? 2 : r < 0.95 ? 4 : 8;
    const double step = ReferenceStepSeconds(j.model, j.global_batch, j.kind);
    j.steps = std::max<int64_t>(100, static_cast<int64_t>(std::round(seconds / step / 100)) * 100);
    trace.jobs.push_back(j);
  }
  char load_text[48] = "";
  if (load != 1) std::snprintf(load_text, sizeof load_text, ", every job %gx as long", load);
  char about[256];
  std::snprintf(about, sizeof about,
                "generated, seed %llu: %d jobs of %d users, Poisson arrivals at %g an hour, "
                "Philly-shaped lengths and sizes (as Gavel's traces)%s",
                static_cast<unsigned long long>(seed), jobs, users, jobs_per_hour, load_text);
  trace.about = about;
  return trace;
}

// The CSV: a header line naming the columns (kCsvHeader's, in any order;
// submit_s, user, model, global_batch and steps required), then one job a
// line; '#' lines and blank lines are skipped.
Result<Trace> ReadTrace(const std::string& path,
                        const std::map<std::string, ModelProfile>* profiles) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  Trace trace;
  trace.name = path.substr(path.find_last_of('/') + 1);
  const std::string all_columns = std::string(kCsvHeader) + "," + kCsvImageColumns;
  const std::vector<std::string> known = SplitCsv(all_columns);
  constexpr size_t kRequired = 5;        // known's first five
  std::map<std::string, size_t> column;  // by name: its index in a row
  std::string line;
  int line_no = 0;
  size_t columns = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    const std::string at = path + ":" + std::to_string(line_no) + ": ";
    if (columns == 0) {
      const std::vector<std::string> names = SplitCsv(line);
      for (size_t i = 0; i < names.size(); ++i) {
        if (std::find(known.begin(), known.end(), names[i]) == known.end()) {
          return InvalidArgument(at + "the header names '" + names[i] +
                                 "', not a column; the columns are " + all_columns +
                                 " (the last six may be left out)");
        }
        if (!column.emplace(names[i], i).second) {
          return InvalidArgument(at + "the header names '" + names[i] + "' twice");
        }
      }
      for (size_t k = 0; k < kRequired; ++k) {
        if (!column.contains(known[k])) {
          return InvalidArgument(at + "the header has no '" + known[k] +
                                 "' column; the columns are " + all_columns +
                                 " (the last six may be left out)");
        }
      }
      if (column.contains("image_width") != column.contains("image_height")) {
        return InvalidArgument(at + "image_width and image_height go together");
      }
      columns = names.size();
      continue;
    }
    const std::vector<std::string> cells = SplitCsv(line);
    if (cells.size() != columns) {
      return InvalidArgument(at + std::to_string(columns) + " fields expected, as in the header");
    }
    // The cell of a column; nullptr when the header has none (its default).
    auto cell = [&](const std::string& name) -> const std::string* {
      const auto c = column.find(name);
      return c == column.end() ? nullptr : &cells[c->second];
    };
    TraceJob j;
    const std::string& submit = *cell("submit_s");
    try {
      size_t used = 0;
      j.submit_s = std::stod(submit, &used);
      if (used != submit.size() || !(j.submit_s >= 0) || !std::isfinite(j.submit_s)) {
        throw std::invalid_argument("");
      }
    } catch (const std::exception&) {
      return InvalidArgument(at + "not a time >= 0: '" + submit + "'", "submit_s");
    }
    j.user = *cell("user");
    j.model = *cell("model");
    if (j.user.empty()) return InvalidArgument(at + "empty", "user");
    if (profiles == nullptr ? !BuiltinProfile(j.model).ok() : !profiles->contains(j.model)) {
      return InvalidArgument(at + "not a builtin model" +
                                 (profiles == nullptr ? "" : " or one a --profile names") + ": '" +
                                 j.model + "'",
                             "model");
    }
    if (const std::string* kind_cell = cell("kind")) {
      const std::optional<JobKind> kind = ParseJobKind(*kind_cell);
      if (!kind) return InvalidArgument(at + "train or infer, not '" + *kind_cell + "'", "kind");
      j.kind = *kind;
    }
    const char* names[] = {"global_batch", "steps",       "min_devices", "max_devices",
                           "priority",     "image_width", "image_height"};
    int64_t* fields[] = {&j.global_batch, &j.steps,       &j.min_devices, &j.max_devices,
                         &j.priority,     &j.image_width, &j.image_height};
    for (int f = 0; f < 7; ++f) {
      const std::string* c = cell(names[f]);
      if (c == nullptr) continue;  // left out: TraceJob's default
      Result<int64_t> v = ParseInt(*c, names[f]);
      if (!v.ok()) return InvalidArgument(at + v.status().message(), names[f]);
      *fields[f] = *v;
    }
    for (int f = 0; f < 3; ++f) {
      if (*fields[f] < 1) {
        return InvalidArgument(at + "at least 1, not " + std::to_string(*fields[f]), names[f]);
      }
    }
    for (int f = 5; f < 7; ++f) {
      if (*fields[f] < 0 || *fields[f] > kMaxImageSide) {
        return InvalidArgument(at + "0 (the profile's own) or 1 to " +
                                   std::to_string(kMaxImageSide) + ", not " +
                                   std::to_string(*fields[f]),
                               names[f]);
      }
    }
    if ((j.image_width == 0) != (j.image_height == 0)) {
      return InvalidArgument(at + "both 0 (the profile's own images) or neither", "image_width");
    }
    if (j.max_devices < 0 || (j.max_devices > 0 && j.max_devices < j.min_devices)) {
      return InvalidArgument(at + "0 (no bound) or at least min_devices (" +
                                 std::to_string(j.min_devices) + "), not " +
                                 std::to_string(j.max_devices),
                             "max_devices");
    }
    trace.jobs.push_back(j);
  }
  if (trace.jobs.empty()) return InvalidArgument(path + ": no jobs");
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  std::set<std::string> users;
  for (const TraceJob& j : trace.jobs) users.insert(j.user);
  trace.about = "from " + path + ": " + std::to_string(trace.jobs.size()) + " jobs of " +
                std::to_string(users.size()) + " users";
  return trace;
}

Status WriteTrace(const Trace& trace, const std::string& path) {
  std::ofstream out(path);
  const bool images = std::any_of(trace.jobs.begin(), trace.jobs.end(),
                                  [](const TraceJob& j) { return j.image_width > 0; });
  out << "# " << trace.about << "\n"
      << kCsvHeader << (images ? std::string(",") + kCsvImageColumns : "") << "\n";
  for (const TraceJob& j : trace.jobs) {
    out << j.submit_s << "," << j.user << "," << j.model << "," << j.global_batch << "," << j.steps
        << "," << j.min_devices << "," << j.max_devices << "," << j.priority << ","
        << JobKindName(j.kind);
    if (images) out << "," << j.image_width << "," << j.image_height;
    out << "\n";
  }
  out.close();
  return out ? Status::Ok() : Internal("cannot write " + path);
}

}  // namespace tessera::scheduler::sim
