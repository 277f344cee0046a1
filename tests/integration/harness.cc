#include "tests/integration/harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "agent/inventory_file.h"

namespace tessera::testing {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

Process::Process(std::vector<std::string> argv, std::map<std::string, std::string> env,
                 fs::path log, std::string netns)
    : log_(std::move(log)) {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    if (!env.contains(kv.substr(0, kv.find('=')))) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::setpgid(0, 0);
    FILE* f = std::fopen(log_.c_str(), "a");
    if (f != nullptr) {
      ::dup2(fileno(f), 1);
      ::dup2(fileno(f), 2);
    }
    if (!netns.empty()) {
      int fd = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
        std::perror(("setns " + netns).c_str());
        ::_exit(126);
      }
      ::close(fd);
    }
    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    ::execve(args[0], args.data(), envp.data());
    std::perror("execve");
    ::_exit(127);
  }
}

Process::~Process() {
  if (running()) Kill9();
}

bool Process::running() {
  if (exit_code_ || pid_ <= 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return false;
}

void Process::Signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  WaitFor([this] { return !running(); }, timeout);
  return exit_code_;
}

void Process::Kill9() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_) exit_code_ = 128 + SIGKILL;
}

std::string Process::Log() const {
  std::ifstream in(log_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

fs::path ScriptLauncher(const fs::path& path, const std::string& python, const fs::path& script) {
  {
    std::ofstream out(path);
    out << "#!/bin/sh\nexec '" << python << "' '" << script.string() << "' \"$@\"\n";
  }
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
  return path;
}

std::string InventoryYaml(const std::vector<EmulatedDevices>& devices, const std::string& extra) {
  std::ostringstream yaml;
  yaml << "devices:\n";
  for (const EmulatedDevices& d : devices) {
    for (int i = 0; i < d.count; ++i) {
      yaml << "  - {name: \"" << d.name << "\", memory: " << d.memory
           << ", relative_speed: " << d.relative_speed << "}\n";
    }
  }
  if (!extra.empty()) yaml << extra << "\n";
  return yaml.str();
}

std::string BinaryPath(const std::string& name) {
  if (name == "tesserad") {
    // Benches compare another build's tesserad with this one.
    const char* other = std::getenv("TESSERA_TEST_TESSERAD");
    return other != nullptr && *other != '\0' ? other : TESSERA_TESSERAD_BINARY;
  }
  if (name == "tessera-agent") return TESSERA_AGENT_BINARY;
  if (name == "tessera") return TESSERA_CLI_BINARY;
#ifdef TESSERA_WORKER_BINARY
  if (name == "tessera-worker") return TESSERA_WORKER_BINARY;
#endif
  throw std::invalid_argument("unknown binary " + name);
}

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, fs::path> FilesBelow(const fs::path& root) {
  std::map<std::string, fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file()) {
      out[it->path().lexically_relative(root).generic_string()] = it->path();
    }
  }
  return out;
}

std::vector<fs::path> RankFiles(const Cluster& cluster, const std::string& node, api::JobId id,
                                const std::string& file_name) {
  std::vector<fs::path> out;
  const fs::path jobs = cluster.dir() / ("agent-" + node) / "jobs" / std::to_string(id);
  for (const auto& [relative, path] : FilesBelow(jobs)) {
    if (path.filename() == file_name) out.push_back(path);
  }
  return out;
}

TreeDiff CompareTrees(const fs::path& output, const fs::path& reference) {
  const auto outputs = FilesBelow(output);
  const auto expected = FilesBelow(reference);
  TreeDiff diff;
  for (const auto& [name, path] : expected) {
    auto it = outputs.find(name);
    if (it == outputs.end()) {
      ++diff.missing;
    } else if (ReadText(it->second) != ReadText(path)) {
      ++diff.different;
    }
  }
  for (const auto& [name, path] : outputs) diff.extra += !expected.contains(name);
  return diff;
}

void ExpectOutputsExactlyOnce(const fs::path& output, const fs::path& reference) {
  const TreeDiff diff = CompareTrees(output, reference);
  EXPECT_EQ(diff.missing, 0);
  EXPECT_EQ(diff.different, 0);
  EXPECT_EQ(diff.extra, 0) << "temporary or unexpected files left in the output folder";
}

std::string GenImages(const fs::path& out, int count, int size, std::chrono::seconds timeout) {
  return RunTool({BinaryPath("tessera-worker"), "gen-images", "--out", out.string(), "--count",
                  std::to_string(count), "--size", std::to_string(size)},
                 {}, fs::path(out.string() + ".gen-images.log"), timeout);
}

api::Json InferJobSpec(const std::string& name, const std::string& entrypoint, const fs::path& in,
                       const fs::path& out, const std::vector<std::string>& args) {
  return {{"name", name},           {"kind", "infer"},        {"entrypoint", entrypoint},
          {"dataset", in.string()}, {"output", out.string()}, {"args", args}};
}

std::string RunTool(const std::vector<std::string>& argv,
                    const std::map<std::string, std::string>& env, const fs::path& log,
                    std::chrono::seconds timeout) {
  Process p(argv, env, log);
  auto code = p.Wait(timeout);
  const std::string what = argv.size() > 1 ? argv[1] : argv.at(0);
  if (!code) return what + " timed out\n" + p.Log();
  if (*code != 0) return what + " failed with exit code " + std::to_string(*code) + "\n" + p.Log();
  return "";
}

int KillProcessesUnder(const fs::path& dir, const std::string& exe_name) {
  int killed = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code ec;
    fs::path cwd = fs::read_symlink(entry.path() / "cwd", ec);
    if (ec || cwd.string().rfind(dir.string(), 0) != 0) continue;
    if (!exe_name.empty()) {
      fs::path exe = fs::read_symlink(entry.path() / "exe", ec);
      if (ec || exe.filename() != exe_name) continue;
    }
    if (::kill(std::stoi(name), SIGKILL) == 0) ++killed;
  }
  return killed;
}

std::set<std::string> Cluster::PlannedNodes(api::JobId id) {
  std::set<std::string> nodes;
  api::Json job = GetJson("/api/v1/jobs/" + std::to_string(id));
  if (!job.contains("plan") || !job["plan"].is_object()) return nodes;
  for (const auto& r : job["plan"]["replicas"]) {
    for (const auto& s : r["stages"]) {
      for (const auto& d : s["devices"]) {
        std::string dev = d.get<std::string>();
        nodes.insert(dev.substr(0, dev.find(':')));
      }
    }
  }
  return nodes;
}

Cluster::Cluster(std::string name, bool fast) : fast_(fast) {
  dir_ = fs::temp_directory_path() / ("tessera-e2e-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  std::string why;
  const char* no_netns = std::getenv("TESSERA_TEST_NO_NETNS");
  if (no_netns != nullptr && *no_netns != '\0' && std::string(no_netns) != "0") {
    why = "TESSERA_TEST_NO_NETNS is set";
  } else if (auto lab = NetworkLab::Create(); lab.ok()) {
    lab_ = *std::move(lab);
    controller_host_ = lab_->hub_address();
  } else {
    why = lab.status().message();
  }
  std::string links = "links not shaped";
  std::string detail = lab_ ? lab_->Describe() + ", tesserad on " + controller_host_ : why;
  if (!lab_) {
    detail += "; loopback cannot shape links";
  } else if (link_shaping() == NetworkLab::Shaping::kFull) {
    links = "links shaped";
  } else if (link_shaping() == NetworkLab::Shaping::kRateOnly) {
    links = "links shaped, rate only";
    detail += "; no latency: " + link_shaping_note();
  } else {
    detail += "; " + link_shaping_note();
  }
  std::string line = "[ cluster  ] network: " + network_mode() + ", " + links + " (" + detail + ")";
  std::fprintf(stderr, "%s\n", line.c_str());
  if (::testing::UnitTest::GetInstance()->current_test_info() != nullptr) {
    ::testing::Test::RecordProperty("network", network_mode());
    ::testing::Test::RecordProperty("links", links.substr(links.find(' ') + 1));
  }
}

NetworkLab::Shaping Cluster::link_shaping() const {
  return lab_ ? lab_->link_shaping() : NetworkLab::Shaping::kNone;
}

std::string Cluster::link_shaping_note() const {
  return lab_ ? lab_->link_shaping_note() : "loopback cannot shape links";
}

Cluster::~Cluster() {
  for (auto& [name, agent] : agents_) agent.reset();
  controller_.reset();
  // Workers run in their own process groups; kill any left by killed agents.
  ::system(("pkill -9 -f " + dir_.string() + " >/dev/null 2>&1").c_str());
  lab_.reset();  // after every process in its namespaces is gone
  std::error_code ec;
  if (std::getenv("TESSERA_KEEP_TEST_DIRS") == nullptr) fs::remove_all(dir_, ec);
}

std::string Cluster::controller_url() const {
  return (tls_ ? "https://" : "http://") + controller_host_ + ":" + std::to_string(port_);
}

fs::path Cluster::ca_file() const { return dir_ / "controller" / "tls" / "ca.pem"; }

std::string Cluster::node_address(const std::string& node) const {
  auto it = node_addresses_.find(node);
  return it == node_addresses_.end() ? "127.0.0.1" : it->second;
}

std::string Cluster::node_netns(const std::string& node) const {
  return lab_ ? lab_->NamespaceName(node) : "";
}

void Cluster::StartController(const std::string& extra_config) {
  fs::path state = dir_ / "controller";
  fs::create_directories(state);
  fs::path config = dir_ / "tesserad.yaml";
  {
    std::ofstream c(config);
    c << "state_dir: " << state.string() << "\n"
      << "port: " << port_ << "\n";  // 0 first; the same port after a restart
    if (extra_config.find("master_port_base:") == std::string::npos) {
      // Clusters of tests that run at once on this host (ctest -j) rendezvous
      // on ports of their own: every one would otherwise give its job 1's
      // rank 0 the same port.
      c << "master_port_base: " << 10000 + (getpid() % 220) * 100 << "\n"
        << "master_port_span: 100\n";
    }
    if (lab_ && extra_config.find("listen_address:") == std::string::npos) {
      c << "listen_address: " << controller_host_ << "\n";
    }
    if (fast_) {
      // Test timings, unless extra_config sets the key itself.
      for (const char* kv :
           {"heartbeat_interval_ms: 200", "dead_after_ms: 1500", "retry_backoff_ms: 200",
            "schedule_interval_ms: 50", "stop_grace_ms: 1000"}) {
        std::string key = std::string(kv).substr(0, std::string(kv).find(':') + 1);
        if (extra_config.find(key) == std::string::npos) c << kv << "\n";
      }
    }
    c << extra_config;
  }
  if (extra_config.find("tls: on") != std::string::npos) {
    tls_ = true;
  } else if (extra_config.find("tls: off") != std::string::npos) {
    tls_ = false;
  } else {
    tls_ = lab_ != nullptr;  // "tls: auto" off loopback
  }
  fs::remove(state / "tesserad.port");
  controller_ = std::make_unique<Process>(
      std::vector<std::string>{BinaryPath("tesserad"), "--config", config.string()},
      std::map<std::string, std::string>{},
      dir_ / ("tesserad-" + std::to_string(controller_starts_++) + ".log"));
  bool up = WaitFor([&] { return fs::exists(state / "tesserad.port"); }, 20s);
  if (!up) throw std::runtime_error("tesserad did not start:\n" + controller_->Log());
  std::ifstream(state / "tesserad.port") >> port_;
  std::ifstream(state / "admin-token") >> admin_token_;
}

void Cluster::StopController(int sig) {
  if (sig == SIGKILL) {
    controller_->Kill9();
  } else {
    controller_->Signal(sig);
    controller_->Wait(20s);
  }
}

void Cluster::StartAgent(const std::string& node, const std::string& inventory_yaml,
                         const std::vector<std::string>& extra_args) {
  fs::path state = dir_ / ("agent-" + node);
  fs::create_directories(state);
  fs::path inventory = dir_ / (node + "-inventory.yaml");
  std::ofstream(inventory) << inventory_yaml;
  std::string netns;
  if (lab_) {
    auto address = lab_->AddNode(node);
    if (!address.ok()) {
      throw std::runtime_error("namespace for " + node + ": " + address.status().ToString());
    }
    node_addresses_[node] = *address;
    netns = lab_->NamespacePath(node);
  }
  // The link the inventory declares (a bad file is the agent's to refuse).
  auto declared = agent::ParseInventoryFile(inventory_yaml);
  if (declared.ok() && declared->network) {
    const agent::NetworkSpec& link = *declared->network;
    char declares[160];
    std::snprintf(declares, sizeof declares,
                  "[ cluster  ] %s declares %.4g Mbit/s, %.4g ms: ", node.c_str(),
                  link.bandwidth_bytes_per_s * 8 / 1e6, link.latency_s * 1e3);
    std::string line = declares;
    if (link_shaping() == NetworkLab::Shaping::kNone) {
      line += "not shaped (" + link_shaping_note() + ")";
    } else {
      Status shaped = lab_->ShapeNode(node, link.bandwidth_bytes_per_s, link.latency_s);
      if (!shaped.ok()) {
        throw std::runtime_error("shaping the link of " + node + ": " + shaped.ToString());
      }
      line += "shaped (" + lab_->DescribeShape(node) + ")";
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::vector<std::string> argv = {BinaryPath("tessera-agent"),
                                   "--controller",
                                   controller_url(),
                                   "--address",
                                   node_address(node),
                                   "--join-token-file",
                                   (dir_ / "controller" / "join-token").string(),
                                   "--node",
                                   node,
                                   "--state-dir",
                                   state.string(),
                                   "--inventory",
                                   inventory.string(),
                                   "--heartbeat-ms",
                                   fast_ ? "200" : "1000"};
  if (tls_) argv.insert(argv.end(), {"--ca-file", ca_file().string()});
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  agents_[node] = std::make_unique<Process>(argv, std::map<std::string, std::string>{},
                                            dir_ / ("agent-" + node + ".log"), netns);
}

void Cluster::StopAgent(const std::string& node, int sig) {
  auto& a = agents_.at(node);
  if (sig == SIGKILL) {
    a->Kill9();
  } else {
    a->Signal(sig);
    a->Wait(20s);
  }
}

int Cluster::KillNode(const std::string& node) {
  StopAgent(node, SIGKILL);
  return KillProcessesUnder(dir_ / ("agent-" + node));
}

std::unique_ptr<api::HttpClient> Cluster::Client(const std::string& token) {
  auto c =
      std::make_unique<api::HttpClient>(api::ServerUrl{tls_, controller_host_, port_, ""}, 10s,
                                        api::TlsClientOptions{tls_ ? ca_file().string() : "", ""});
  c->SetBearerToken(token.empty() ? admin_token_ : token);
  return c;
}

api::Json Cluster::GetJson(const std::string& target) {
  auto r = Client()->Request("GET", target);
  if (!r.ok() || r->status != 200) return nullptr;
  return api::Json::parse(r->body, nullptr, false);
}

std::string Cluster::UserToken(const std::string& user) {
  const fs::path log = dir_ / ("token-" + user + ".log");
  Process p({BinaryPath("tesserad"), "token", "--state-dir", (dir_ / "controller").string(),
             "create", user},
            {}, log);
  auto code = p.Wait(std::chrono::seconds(30));
  if (!code || *code != 0) throw std::runtime_error("token create failed: " + p.Log());
  std::string token;
  std::istringstream(ReadText(log)) >> token;
  return token;
}

api::Json Cluster::PostJson(const std::string& target, const api::Json& body, int* status,
                            const std::string& token) {
  auto r = Client(token)->Request("POST", target, body.dump());
  if (!r.ok()) {
    if (status) *status = 0;
    return nullptr;
  }
  if (status) *status = r->status;
  return api::Json::parse(r->body, nullptr, false);
}

::testing::AssertionResult Cluster::SubmitJob(const api::Json& spec, api::JobId* id,
                                              const std::string& token) {
  int status = 0;
  const api::Json answer = PostJson("/api/v1/jobs", spec, &status, token);
  *id = answer.is_object() ? answer.value("id", api::JobId{0}) : 0;
  if (status == 201) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "submitting " << spec.value("name", "") << ": HTTP " << status << " " << answer.dump();
}

::testing::AssertionResult Cluster::NodesJoin(int nodes, std::chrono::seconds timeout) {
  if (WaitFor([&] { return HealthyNodes() == nodes; }, timeout)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << HealthyNodes() << " of " << nodes << " nodes healthy after " << timeout.count()
         << " s; tesserad's log:\n"
         << controller_->Log();
}

::testing::AssertionResult Cluster::StartWorkerLab(
    const std::vector<std::pair<std::string, std::string>>& nodes, const std::string& extra_config,
    std::chrono::seconds timeout) {
  StartController("worker_binary: " + BinaryPath("tessera-worker") + "\n" + extra_config);
  for (const auto& [node, inventory] : nodes) StartAgent(node, inventory);
  return NodesJoin(static_cast<int>(nodes.size()), timeout);
}

::testing::AssertionResult Cluster::AllowEntrypoint(const std::string& name,
                                                    const std::string& command,
                                                    const std::string& description) {
  api::Json body = {{"name", name}, {"command", command}};
  if (!description.empty()) body["description"] = description;
  int status = 0;
  api::Json answer = PostJson("/api/v1/entrypoints", body, &status);
  if (status >= 200 && status <= 204) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "allowing " << name << ": HTTP " << status << " " << answer.dump();
}

std::string Cluster::JobState(api::JobId id) {
  api::Json j = GetJson("/api/v1/jobs/" + std::to_string(id));
  return j.is_object() ? j.value("state", "") : "";
}

int64_t Cluster::ImagesDone(api::JobId id) {
  api::Json j = GetJson("/api/v1/jobs/" + std::to_string(id));
  return j.is_object() && j.contains("inference") && j["inference"].is_object()
             ? j["inference"].value("images_done", int64_t{0})
             : 0;
}

::testing::AssertionResult Cluster::RunningPast(api::JobId id, int64_t images,
                                                std::chrono::seconds timeout) {
  const bool reached =
      WaitFor([&] { return ImagesDone(id) >= images || JobState(id) == "succeeded"; }, timeout);
  const std::string state = JobState(id);
  if (reached && state == "running") return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "job " << id << " is " << state << " with " << ImagesDone(id) << " images done ("
         << (reached ? "it must still be running past " : "waited for ") << images << " images)\n"
         << controller_->Log();
}

::testing::AssertionResult Cluster::RecoversAndRuns(api::JobId id) {
  if (!WaitFor([&] { return JobState(id) == "recovering"; }, std::chrono::seconds(30))) {
    return ::testing::AssertionFailure()
           << "job " << id << " did not go recovering: " << JobState(id);
  }
  if (!WaitFor([&] { return JobState(id) == "running"; }, std::chrono::seconds(60))) {
    return ::testing::AssertionFailure() << "job " << id << " did not run again: " << JobState(id);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Cluster::EndsIn(api::JobId id, const std::string& state,
                                           std::chrono::seconds timeout) {
  auto ended = [&] {
    const std::string s = JobState(id);
    return s == "succeeded" || s == "failed" || s == "cancelled";
  };
  const bool in_time = WaitFor(ended, timeout);
  const std::string now = JobState(id);
  if (now == state) return ::testing::AssertionSuccess();
  std::string trail;
  for (const auto& e : Events(id)) trail += e.to_state + ": " + e.reason + "\n";
  return ::testing::AssertionFailure()
         << "job " << id << " is " << now << (in_time ? "" : " (still, after the wait)") << ", not "
         << state << "\n"
         << trail << GetJson("/api/v1/jobs/" + std::to_string(id)).dump(2) << "\n"
         << controller_->Log();
}

std::vector<api::Event> Cluster::Events(api::JobId id) {
  std::vector<api::Event> out;
  api::Json j = GetJson("/api/v1/jobs/" + std::to_string(id) + "/events?limit=500");
  if (!j.is_object() || !j.contains("events")) return out;
  for (const auto& e : j["events"]) {
    auto ev = api::EventFromJson(e);
    if (ev.ok()) out.push_back(*ev);
  }
  return out;
}

int Cluster::HealthyNodes() {
  api::Json j = GetJson("/api/v1/nodes");
  int n = 0;
  if (j.is_object() && j.contains("nodes")) {
    for (const auto& node : j["nodes"]) n += node.value("health", "") == "healthy";
  }
  return n;
}

}  // namespace tessera::testing
