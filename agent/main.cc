// tessera-agent: the node agent of Tessera (systemd service).
//
// Reports the node's devices, heartbeats to tesserad and runs the workers it
// is told to run. See agent/README.md.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "agent/advertised_address.h"
#include "agent/agent.h"
#include "agent/benchmark_child.h"
#include "agent/device_benchmark.h"
#include "agent/http_transport.h"
#include "agent/inventory.h"
#include "agent/service_notifier.h"
#include "agent/supervisor.h"
#include "api/entrypoint_kind.h"
#include "api/join_bundle.h"
#include "api/tls_context.h"
#include "common/file_system.h"

namespace {

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::string DefaultStateDir() {
  // systemd's StateDirectory= sets STATE_DIRECTORY.
  if (const char* dir = std::getenv("STATE_DIRECTORY")) return dir;
  return "/var/lib/tessera-agent";
}

bool ReadToken(const std::string& path, std::string* token) {
  auto text = tessera::FileSystem::Default()->ReadFile(path);
  if (!text.ok()) return false;
  std::istringstream in(*text);
  std::getline(in, *token);
  while (!token->empty() && (token->back() == '\r' || token->back() == ' ')) token->pop_back();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera;
  using namespace tessera::agent;

  // Before anything initialises CUDA: the benchmark's cuda:<i> must be NVML's device i.
  UsePciBusIdDeviceOrder();

  CLI::App app{"tessera-agent: reports this node's devices to tesserad and runs its workers"};
  app.set_config("--config", "", "config file (TOML or INI) with the options below");
  std::string controller = "http://127.0.0.1:8080";
  std::string join_token;
  std::string join_token_file;
  std::string join_bundle_file;
  std::string credential_file;
  std::string ca_file;
  std::string ca_sha256;
  std::string node = Hostname();
  std::string address;  // empty: the local address facing the controller
  std::string state_dir = DefaultStateDir();
  std::string inventory_file;
  bool inventory_combine = false;
  int64_t heartbeat_ms = 1000;
  double stop_grace_s = 10;
  int64_t log_max_bytes = 16 * 1024 * 1024;
  int log_keep = 3;
  bool rebenchmark = false;
  bool no_benchmark = false;
  bool print_inventory = false;
  std::string benchmark_binary;
  std::string worker_binary;
  bool no_profile = false;
  bool stop_workers_on_exit = false;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string log_level = "info";
  app.add_option("--controller", controller,
                 "controller URL, https://host:port, http://host:port or host:port (plain HTTP)")
      ->envname("TESSERA_CONTROLLER")
      ->capture_default_str();
  app.add_option("--join-token", join_token, "join token (prefer --join-token-file)")
      ->envname("TESSERA_JOIN_TOKEN");
  app.add_option("--join-token-file", join_token_file, "file holding the join token")
      ->envname("TESSERA_JOIN_TOKEN_FILE");
  app.add_option("--join-bundle", join_bundle_file,
                 "join bundle file (tessera nodes join-bundle): controller, CA fingerprint, "
                 "join token")
      ->envname("TESSERA_JOIN_BUNDLE");
  app.add_option("--credential-file", credential_file,
                 "where the node's own credential is kept (default: <state-dir>/node-credential)")
      ->envname("TESSERA_CREDENTIAL_FILE");
  app.add_option("--ca-file", ca_file, "PEM CA file to verify an https:// controller with")
      ->envname("TESSERA_CA_FILE");
  app.add_option("--ca-sha256", ca_sha256,
                 "SHA-256 fingerprint of the controller's CA to pin (from the join bundle)")
      ->envname("TESSERA_CA_SHA256");
  app.add_option("--node", node, "node name, unique in the cluster")
      ->envname("TESSERA_NODE")
      ->capture_default_str();
  app.add_option("--address", address,
                 "address other nodes reach this node's ranks at (MASTER_ADDR); default: the "
                 "local address facing the controller; loopback only with a local controller")
      ->envname("TESSERA_ADDRESS");
  app.add_option("--state-dir", state_dir, "pid files, logs, plans, benchmark cache")
      ->envname("TESSERA_STATE_DIR")
      ->capture_default_str();
  app.add_option("--inventory", inventory_file, "inventory file declaring (emulated) devices")
      ->envname("TESSERA_INVENTORY");
  app.add_flag("--inventory-combine", inventory_combine,
               "add the inventory file's devices to discovered ones instead of replacing them");
  app.add_option("--heartbeat-ms", heartbeat_ms, "heartbeat interval until the controller sets one")
      ->check(CLI::Range(int64_t{50}, int64_t{60'000}))
      ->capture_default_str();
  app.add_option("--stop-grace-s", stop_grace_s, "SIGTERM to SIGKILL grace period")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--log-max-bytes", log_max_bytes, "size cap of a worker's live log file")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--log-keep", log_keep, "rotated worker log files kept")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  app.add_flag("--rebenchmark", rebenchmark, "measure devices again, ignoring the cache");
  app.add_flag("--no-benchmark", no_benchmark, "do not measure devices (figures stay 0)");
  app.add_flag("--print-inventory", print_inventory,
               "print this node's devices and links as JSON (discovery and benchmark, no "
               "controller) and exit");
  app.add_option("--benchmark-binary", benchmark_binary,
                 "tessera-device-bench to measure devices with (default: beside this program)");
  app.add_option("--worker-binary", worker_binary,
                 "tessera-worker that profiles the builtin models on this node's GPUs (default: "
                 "beside this program)");
  app.add_flag("--no-profile", no_profile,
               "do not profile the builtin models on this node's GPUs (the planner estimates "
               "their times from the benchmark)");
  app.add_flag("--stop-workers-on-exit", stop_workers_on_exit,
               "stop all workers when the agent exits (default: leave them for re-adoption)");
  app.add_option("--nvml-library", nvml_library, "NVML library to load")->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  spdlog::set_level(spdlog::level::from_str(log_level));
  InventoryOptions inventory_options;
  inventory_options.inventory_file = inventory_file;
  inventory_options.state_dir = state_dir;
  inventory_options.nvml_library = nvml_library;
  if (!no_benchmark) {
    BenchmarkChildOptions child;
    child.binary = benchmark_binary.empty() ? DefaultBenchmarkBinary() : benchmark_binary;
    inventory_options.benchmark = [child](const std::string& device) {
      return RunBenchmarkChild(child, device);
    };
    inventory_options.gloo_link = [child] { return RunGlooLinkChild(child); };
  }
  if (!no_benchmark && !no_profile) {
    ProfileChildOptions profile_child;
    profile_child.worker_binary =
        worker_binary.empty() ? BesideThisProgram("tessera-worker") : worker_binary;
    inventory_options.profile = [profile_child](const std::string& device,
                                                const std::string& model) {
      return RunProfileChild(profile_child, device, model);
    };
    // The GAN's whole-step profile is measured on the CPU only (tessera-worker
    // profile refuses it on a GPU); the other builtin models are measured here.
    for (std::string_view entrypoint : api::kBuiltinEntrypoints) {
      const std::string model(api::EntrypointId(entrypoint));
      if (model != "gan-pix2pix") inventory_options.profile_models.push_back(model);
    }
    // Another worker (an upgrade) measures again: its size and modification time.
    std::error_code ec;
    const auto size = std::filesystem::file_size(profile_child.worker_binary, ec);
    const auto mtime = std::filesystem::last_write_time(profile_child.worker_binary, ec);
    inventory_options.profile_version =
        ec ? "unknown"
           : std::to_string(size) + "@" + std::to_string(mtime.time_since_epoch().count());
  }
  inventory_options.rebenchmark = rebenchmark;
  inventory_options.force_combine = inventory_combine;
  if (print_inventory) {
    // What this node would report, without a controller: NVML discovery, the
    // inventory file, and each device's benchmark (in its child process). The
    // log goes to stderr, the JSON alone to stdout.
    spdlog::set_default_logger(spdlog::stderr_color_mt("tessera-agent-inventory"));
    spdlog::set_level(spdlog::level::from_str(log_level));
    std::error_code dir_ec;
    std::filesystem::create_directories(state_dir, dir_ec);
    SystemInventoryProvider provider(inventory_options);
    auto inv = provider.Load();
    if (!inv.ok()) {
      std::fprintf(stderr, "tessera-agent: %s\n", inv.status().ToString().c_str());
      return 1;
    }
    api::Json devices = api::Json::array();
    for (const api::Device& d : inv->devices) devices.push_back(api::ToJson(d));
    api::Json links = api::Json::array();
    for (const DeviceLink& l : inv->links) links.push_back(ToJson(l));
    std::printf("%s\n", api::Json{{"devices", devices}, {"links", links}}.dump(2).c_str());
    return 0;
  }
  if (!join_token_file.empty() && !ReadToken(join_token_file, &join_token)) {
    spdlog::critical("cannot read the join token file {}", join_token_file);
    return 2;
  }
  if (!join_bundle_file.empty()) {
    auto text = FileSystem::Default()->ReadFile(join_bundle_file);
    auto bundle = api::ParseJoinBundle(text.ok() ? *text : std::string());
    if (!text.ok() || !bundle.ok()) {
      spdlog::critical("--join-bundle {}: {}", join_bundle_file,
                       text.ok() ? bundle.status().ToString() : "cannot read it");
      return 2;
    }
    // The bundle fills what the command line left unset.
    if (app.count("--controller") == 0 && std::getenv("TESSERA_CONTROLLER") == nullptr) {
      controller = bundle->controller;
    }
    if (join_token.empty()) join_token = bundle->join_token;
    if (ca_sha256.empty() && ca_file.empty()) ca_sha256 = bundle->ca_sha256;
  }
  if (credential_file.empty()) credential_file = state_dir + "/node-credential";
  if (join_token.empty() && !std::filesystem::exists(credential_file)) {
    spdlog::critical(
        "no join token and no node credential: pass --join-bundle, --join-token-file (or "
        "--join-token)");
    return 2;
  }
  api::TlsClientOptions tls{ca_file, ca_sha256};
  if (!ca_sha256.empty()) {
    auto normalized = api::NormalizeSha256Fingerprint(ca_sha256, "ca-sha256");
    if (!normalized.ok()) {
      spdlog::critical("--ca-sha256: {}", normalized.status().ToString());
      return 2;
    }
    tls.ca_sha256 = *normalized;
  }

  // TERM/INT/HUP are handled by a dedicated thread (sigwait); every other
  // thread, and through the supervisor's reset every worker, is unaffected.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) {
    spdlog::critical("cannot create state dir {}: {}", state_dir, ec.message());
    return 1;
  }

  SystemInventoryProvider inventory(inventory_options);

  SupervisorOptions supervisor_options;
  supervisor_options.state_dir = state_dir;
  supervisor_options.stop_grace =
      std::chrono::milliseconds(static_cast<int64_t>(stop_grace_s * 1000));
  supervisor_options.log_max_bytes = log_max_bytes;
  supervisor_options.log_keep = log_keep;
  // Infer ranks lease their chunks from the controller the agent talks to.
  supervisor_options.base_env = launch::DefaultBaseEnv();
  (*supervisor_options.base_env)["TESSERA_CONTROLLER_URL"] = controller;
  // ... and verify it as the agent does.
  if (!tls.ca_file.empty()) {
    (*supervisor_options.base_env)["TESSERA_CONTROLLER_CA_FILE"] =
        std::filesystem::absolute(tls.ca_file).string();
  }
  if (!tls.ca_sha256.empty()) {
    (*supervisor_options.base_env)["TESSERA_CONTROLLER_CA_SHA256"] = tls.ca_sha256;
  }
  ProcessSupervisor supervisor(supervisor_options);
  HttpAgentTransportOptions transport_options;
  transport_options.controller_url = controller;
  transport_options.join_token = join_token;
  transport_options.node = node;
  transport_options.credential_file = credential_file;
  transport_options.tls = tls;
  auto transport = HttpAgentTransport::Create(transport_options);
  if (!transport.ok()) {
    spdlog::critical("{}", transport.status().ToString());
    return 2;
  }
  {
    auto url = ParseControllerUrl(controller);
    auto advertised =
        url.ok() ? AdvertisedAddress(address, *url) : Result<std::string>(url.status());
    if (!advertised.ok()) {
      spdlog::critical("--address: {}", advertised.status().ToString());
      return 2;
    }
    address = *advertised;
  }

  SystemdNotifier notifier;
  AgentOptions options;
  options.node = node;
  options.address = address;
  options.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
  options.watchdog_interval = SystemdNotifier::WatchdogPingInterval();
  options.stop_workers_on_exit = stop_workers_on_exit;
  Agent agent(options, transport->get(), &inventory, &supervisor, &notifier);
  Status init = agent.Init();
  if (!init.ok()) {
    spdlog::critical("refusing to start: {}", init.ToString());
    notifier.SetStatus("refusing to start: " + init.ToString());
    return 1;
  }
  // Re-adopt the previous agent's workers before the first heartbeat, so
  // they are reported (and stopped if no longer wanted) instead of restarted.
  auto recovered = supervisor.Recover();
  if (!recovered.ok()) {
    spdlog::error("re-adoption failed: {}", recovered.status().ToString());
  } else {
    spdlog::info("re-adoption: {} adopted, {} already exited, {} stale pid files dropped",
                 recovered->adopted, recovered->exited, recovered->dropped);
  }

  std::thread signal_thread([&agent, signals] {
    while (true) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig == SIGHUP) {
        spdlog::info("SIGHUP: reloading the inventory");
        agent.RequestReload();
      } else {
        spdlog::info("signal {}: stopping", sig);
        agent.RequestStop();
        return;
      }
    }
  });
  signal_thread.detach();

  spdlog::info("tessera-agent on node {} ({}) heartbeating to {}", node, address, controller);
  agent.Run();
  spdlog::info("tessera-agent stopped");
  return 0;
}
