// Test harness for end-to-end tests: real tesserad and tessera-agent
// processes, each with its own state folder under one temp dir.
//
// Networking: where the test may create network namespaces (root with
// CAP_NET_ADMIN/CAP_SYS_ADMIN and `ip`; see netns.h), every agent, and so its
// workers, runs in its own namespace with its own address on a private bridge,
// and tesserad listens on the bridge's address; otherwise everything runs on
// loopback. TESSERA_TEST_NO_NETNS=1 forces loopback. The same tests run in
// both modes: reach the controller through Client() / controller_host() /
// controller_url(), never through a literal 127.0.0.1. The mode is printed
// once per Cluster and recorded as the test property "network".
//
// Shaped links: when a node's inventory declares `network:` (bandwidth and
// latency, agent/inventory_file.h), StartAgent shapes that node's veth with
// tc (NetworkLab::ShapeNode) so the emulated link costs what it declares.
// Loopback cannot shape. The mode line says which: "network: namespaces,
// links shaped (...)", "..., links shaped, rate only (...)" (a kernel without
// netem) or "..., links not shaped (...)"; the test property "links" holds
// "shaped", "rate only" or "not shaped".
//
// Ownership: a Cluster owns its processes and kills (SIGKILL) whatever is
// still running when destroyed, then deletes its namespaces and its temp dir.
// Thread safety: none; one test thread drives it.
#ifndef TESSERA_TESTS_INTEGRATION_HARNESS_H_
#define TESSERA_TESTS_INTEGRATION_HARNESS_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/http_client.h"
#include "api/types.h"
#include "tests/integration/netns.h"

namespace tessera::testing {

// A child process started with fork/exec; stdout/stderr go to a log file.
// With `netns` (a /run/netns/<name> path) the child enters that network
// namespace (setns) before exec, so pid() is the program's own pid.
class Process {
 public:
  Process(std::vector<std::string> argv, std::map<std::string, std::string> env,
          std::filesystem::path log, std::string netns = "");
  ~Process();  // SIGKILLs and reaps if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  void Signal(int sig);
  // Waits for exit; returns the exit code (128+signal when killed), or
  // nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  void Kill9();  // SIGKILL and reap
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::filesystem::path log_;
};

// The whole file at `p` (bytes), or "" when it cannot be read.
std::string ReadText(const std::filesystem::path& p);

// Every regular file below `root`, by its path relative to `root` (generic
// form); empty when `root` does not exist.
std::map<std::string, std::filesystem::path> FilesBelow(const std::filesystem::path& root);

// How the files below an output folder compare with a reference folder's,
// by relative path: reference files absent, present but not byte-equal, and
// files the reference lacks (temporaries, partial writes).
struct TreeDiff {
  int missing = 0;
  int different = 0;
  int extra = 0;
};
TreeDiff CompareTrees(const std::filesystem::path& output, const std::filesystem::path& reference);
// EXPECTs every reference file in `output` exactly once and byte-equal, and
// nothing else there (no temporary or partial file).
void ExpectOutputsExactlyOnce(const std::filesystem::path& output,
                              const std::filesystem::path& reference);

// Runs a tool (argv[0]) to its end with `env`, output to `log`; "" when it
// exited 0 within `timeout`, else what went wrong with its log.
std::string RunTool(const std::vector<std::string>& argv,
                    const std::map<std::string, std::string>& env, const std::filesystem::path& log,
                    std::chrono::seconds timeout);

// One kind of emulated device in an agent's inventory (agent/inventory_file.h):
// `count` devices named `name` with `memory` ("16GiB") at `relative_speed`.
struct EmulatedDevices {
  int count = 1;
  std::string name;
  std::string memory;
  double relative_speed = 1.0;
};

// The inventory YAML that declares `devices` in order, then `extra` (more
// top-level YAML, e.g. "network: {bandwidth: 20Mbit, latency: 5ms}").
std::string InventoryYaml(const std::vector<EmulatedDevices>& devices,
                          const std::string& extra = "");

// As a lab runs a script from its virtual environment: writes the executable
// `path`, a shell script that execs `python script "$@"`, and returns `path`.
std::filesystem::path ScriptLauncher(const std::filesystem::path& path, const std::string& python,
                                     const std::filesystem::path& script);

// Writes `count` synthetic photographs of `size` pixels into `out` with
// `tessera-worker gen-images`; "" when it did, else what went wrong (its log
// lies beside `out`).
std::string GenImages(const std::filesystem::path& out, int count, int size,
                      std::chrono::seconds timeout = std::chrono::seconds(120));

// An infer job's spec: `entrypoint` over the scans in `in` into `out`, with
// the job's `args`; a test adds what else its job needs.
api::Json InferJobSpec(const std::string& name, const std::string& entrypoint,
                       const std::filesystem::path& in, const std::filesystem::path& out,
                       const std::vector<std::string>& args);

// Polls `pred` every 20 ms until it is true or `timeout` passes.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// From compile definitions; $TESSERA_TEST_TESSERAD (when set) names another
// tesserad, for benches comparing builds.
std::string BinaryPath(const std::string& name);

// SIGKILLs every process whose working folder lies under `dir` (an agent's
// state folder holds its workers' rank folders); with `exe_name`, only
// processes running that program (e.g. "tessera-worker"). Returns how many.
int KillProcessesUnder(const std::filesystem::path& dir, const std::string& exe_name = "");

class Cluster {
 public:
  // fast: test timings (200 ms heartbeats, 1.5 s dead timeout); otherwise
  // the daemon's and agents' embedded defaults.
  explicit Cluster(std::string name, bool fast = true);
  ~Cluster();

  const std::filesystem::path& dir() const { return dir_; }

  // Starts tesserad on an ephemeral port; waits until it listens.
  // extra_config: YAML lines appended to its config file.
  void StartController(const std::string& extra_config = "");
  void StopController(int sig);  // SIGTERM or SIGKILL, then wait
  Process* controller() { return controller_.get(); }
  uint16_t port() const { return port_; }
  const std::string& admin_token() const { return admin_token_; }
  // Where tesserad listens: 127.0.0.1, or the bridge's address with
  // namespaces. Both the test process and every node reach it there.
  const std::string& controller_host() const { return controller_host_; }
  // "https://host:port" when tesserad serves TLS (tls()), else "http://...".
  std::string controller_url() const;
  // Whether tesserad serves HTTPS: with namespaces (it listens off loopback,
  // so its default "tls: auto" turns TLS on) unless extra_config says
  // "tls: off", or on loopback with "tls: on". Agents then get --ca-file
  // ca_file() and Client() verifies with it.
  bool tls() const { return tls_; }
  // tesserad's own CA (<state_dir>/tls/ca.pem).
  std::filesystem::path ca_file() const;

  // true when nodes run in their own network namespaces.
  bool namespaces() const { return lab_ != nullptr; }
  // "namespaces" or "loopback".
  std::string network_mode() const { return namespaces() ? "namespaces" : "loopback"; }
  // What StartAgent does with a declared `network:` link (kNone on loopback),
  // and why links are not (fully) shaped.
  NetworkLab::Shaping link_shaping() const;
  std::string link_shaping_note() const;

  // Starts an agent named `node` whose inventory declares `inventory_yaml`.
  // With namespaces it runs in the node's namespace (made on first start and
  // kept for restarts) and announces the node's address (--address); a
  // `network:` link the inventory declares is shaped where link_shaping()
  // allows, and said to be unshaped otherwise.
  void StartAgent(const std::string& node, const std::string& inventory_yaml,
                  const std::vector<std::string>& extra_args = {});
  // The address a started node's agent announces (MASTER_ADDR of ranks it
  // hosts first): 127.0.0.1 on loopback.
  std::string node_address(const std::string& node) const;
  // The node's network namespace name, "" on loopback.
  std::string node_netns(const std::string& node) const;
  Process* agent(const std::string& node) { return agents_.at(node).get(); }
  void StopAgent(const std::string& node, int sig);
  // A node's power cut: SIGKILL of its agent and of every process below the
  // agent's folder (its workers). Returns how many workers it killed.
  int KillNode(const std::string& node);

  // An HTTP client with the admin token set.
  std::unique_ptr<api::HttpClient> Client(const std::string& token = "");

  // GET helpers (admin).
  api::Json GetJson(const std::string& target);
  // POST as the admin, or as the user whose `token` is given.
  api::Json PostJson(const std::string& target, const api::Json& body, int* status = nullptr,
                     const std::string& token = "");
  // Submits the job `spec` as the admin, or as the user whose `token` is
  // given; succeeds when tesserad answered 201. *id gets the id it answered
  // (0 when none); the failure says what tesserad answered.
  ::testing::AssertionResult SubmitJob(const api::Json& spec, api::JobId* id,
                                       const std::string& token = "");
  // A new API token for `user` (`tesserad token create`, on tesserad's state
  // folder); throws std::runtime_error with the tool's output when it fails.
  std::string UserToken(const std::string& user);
  std::string JobState(api::JobId id);
  std::vector<api::Event> Events(api::JobId id);
  int HealthyNodes();
  // Waits until `nodes` nodes are healthy; on timeout the failure carries
  // tesserad's log.
  ::testing::AssertionResult NodesJoin(int nodes,
                                       std::chrono::seconds timeout = std::chrono::seconds(30));
  // A lab that runs the real worker: tesserad with `worker_binary` (and the
  // lines of `extra_config`), then one agent per (node, inventory YAML);
  // succeeds once every node joined within `timeout`.
  ::testing::AssertionResult StartWorkerLab(
      const std::vector<std::pair<std::string, std::string>>& nodes,
      const std::string& extra_config = "",
      std::chrono::seconds timeout = std::chrono::seconds(60));
  // An admin allows entrypoint `name` (e.g. "cmd:ddp-script") to run `command`;
  // the failure says what tesserad answered.
  ::testing::AssertionResult AllowEntrypoint(const std::string& name, const std::string& command,
                                             const std::string& description = "");
  // Nodes holding ranks of the job's current plan.
  std::set<std::string> PlannedNodes(api::JobId id);
  // An infer job's images done so far (0 before its first report).
  int64_t ImagesDone(api::JobId id);
  // Waits until the infer job has done at least `images` images and checks it
  // is still running then (a test that kills something mid-run needs that);
  // the failure says the state and carries tesserad's log.
  ::testing::AssertionResult RunningPast(api::JobId id, int64_t images,
                                         std::chrono::seconds timeout);
  // After a rank was killed: the job goes recovering (within 30 s), then
  // running again (within 60 s).
  ::testing::AssertionResult RecoversAndRuns(api::JobId id);
  // Waits until the job ends (succeeded, failed or cancelled); succeeds when
  // it ended in `state`. The failure says the state it was in, the job and
  // its events, and carries tesserad's log.
  ::testing::AssertionResult EndsIn(api::JobId id, const std::string& state,
                                    std::chrono::seconds timeout);

 private:
  std::filesystem::path dir_;
  std::unique_ptr<Process> controller_;
  std::map<std::string, std::unique_ptr<Process>> agents_;
  std::unique_ptr<NetworkLab> lab_;  // null on loopback
  std::string controller_host_ = "127.0.0.1";
  std::map<std::string, std::string> node_addresses_;
  uint16_t port_ = 0;
  std::string admin_token_;
  int controller_starts_ = 0;
  bool fast_ = true;
  bool tls_ = false;
};

// The files named `file_name` ("worker.log", "progress.jsonl") in the rank
// folders `node`'s agent kept for job `id`, every attempt's, sorted by path.
std::vector<std::filesystem::path> RankFiles(const Cluster& cluster, const std::string& node,
                                             api::JobId id, const std::string& file_name);

}  // namespace tessera::testing

#endif  // TESSERA_TESTS_INTEGRATION_HARNESS_H_
