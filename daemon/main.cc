// tesserad: the Tessera controller daemon.
//
// Opens the SQLite store, rebuilds the controller's picture, serves the REST
// API and web UI, and runs the control loop. A systemd Type=notify service:
// READY=1 once the listener is bound, WATCHDOG=1 from the control loop,
// RELOADING=1/READY=1 around a SIGHUP reload, STOPPING=1 on SIGTERM, after
// which in-flight requests finish and the store is closed cleanly.
//
// `tesserad token ...` is API token administration on the store instead
// (daemon/auth/token_admin.h); it starts no daemon.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/http_server.h"
#include "api/router.h"
#include "api/server_url.h"
#include "api/tls_context.h"
#include "common/clock.h"
#include "common/file_system.h"
#include "daemon/auth/lease_tokens.h"
#include "daemon/auth/token_admin.h"
#include "daemon/auth/token_crypto.h"
#include "daemon/control_plane_service.h"
#include "daemon/controller/job_admission.h"
#include "daemon/controller/job_controller.h"
#include "daemon/controller/profile_cache.h"
#include "daemon/daemon_config.h"
#include "daemon/secret_file.h"
#include "daemon/self_signed_ca.h"
#include "daemon/store/sqlite_store.h"
#include "slurm/slurm_config.h"
#include "slurm/slurm_pool.h"
#include "slurm/slurm_rest_client.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

fs::path ExeDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

std::string FirstExisting(std::initializer_list<fs::path> candidates) {
  for (const auto& p : candidates) {
    std::error_code ec;
    if (fs::exists(p, ec)) return fs::weakly_canonical(p).string();
  }
  return candidates.begin()->string();
}

// The agents' join token: read from its file, or made once and written there.
Result<std::string> EnsureJoinToken(const daemon::DaemonConfig& config) {
  fs::path path = config.JoinTokenPath();
  if (auto existing = daemon::ReadSecretLine(*FileSystem::Default(), path); existing.ok())
    return existing;
  TESSERA_ASSIGN_OR_RETURN(std::string secret, daemon::RandomHex(24));
  std::string token = "tsj_" + secret;
  TESSERA_RETURN_IF_ERROR(daemon::WriteSecretLine(*FileSystem::Default(), path, token));
  spdlog::info("created the agents' join token in {}", path.string());
  return token;
}

// On a store with no token at all, makes an admin token so the operator can
// get in; it is written to <state_dir>/admin-token (mode 0600) once.
Status BootstrapAdmin(daemon::Store* store, const daemon::DaemonConfig& config) {
  TESSERA_ASSIGN_OR_RETURN(auto tokens, store->ListTokens());
  if (!tokens.empty()) return Status::Ok();
  TESSERA_ASSIGN_OR_RETURN(
      auto issued,
      store->CreateToken("admin", api::Role::kAdmin, SystemClock::Default()->NowUnixMillis()));
  fs::path path = fs::path(config.state_dir) / "admin-token";
  TESSERA_RETURN_IF_ERROR(daemon::WriteSecretLine(*FileSystem::Default(), path, issued.plaintext));
  spdlog::info("first start: created an admin token in {}", path.string());
  return Status::Ok();
}

void Notify(const std::string& state) { sd_notify(0, state.c_str()); }

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "token") {
    return daemon::RunTokenAdmin(std::vector<std::string>(argv + 2, argv + argc), std::cout,
                                 std::cerr, daemon::ProcessEnvironment);
  }
  CLI::App app{"tesserad: the Tessera controller (job queue, GPU inventory, REST API)"};
  app.footer(
      "API tokens: tesserad token [--db PATH | --state-dir DIR] create USER [--admin] | list | "
      "revoke ID (tesserad token --help)");
  std::string config_path;
  daemon::DaemonConfig config;
  std::string state_dir, listen, web_dir, log_level, worker_binary, join_token_file;
  int port = -1;
  app.add_option("--config", config_path, "YAML configuration file")->check(CLI::ExistingFile);
  app.add_option("--state-dir", state_dir, "state folder (SQLite file, tokens)");
  app.add_option("--listen", listen, "address to listen on");
  app.add_option("--port", port, "TCP port (0: ephemeral, written to <state-dir>/tesserad.port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--web-dir", web_dir, "folder of the web UI");
  app.add_option("--worker-binary", worker_binary, "path of tessera-worker");
  app.add_option("--join-token-file", join_token_file, "the agents' join token file");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  CLI11_PARSE(app, argc, argv);

  auto apply_flags = [&](daemon::DaemonConfig* c) -> Status {
    if (!config_path.empty()) TESSERA_RETURN_IF_ERROR(daemon::LoadDaemonConfig(config_path, c));
    if (!state_dir.empty()) c->state_dir = state_dir;
    if (!listen.empty()) c->listen_address = listen;
    if (port >= 0) c->port = static_cast<uint16_t>(port);
    if (!web_dir.empty()) c->web_dir = web_dir;
    if (!worker_binary.empty()) c->worker_binary = worker_binary;
    if (!join_token_file.empty()) c->join_token_file = join_token_file;
    if (!log_level.empty()) c->log_level = log_level;
    if (c->web_dir.empty()) {
      c->web_dir = FirstExisting({ExeDir() / "../share/tessera/web", TESSERA_SOURCE_WEB_DIR});
    }
    if (c->worker_binary.empty()) {
      c->worker_binary = FirstExisting(
          {ExeDir() / "tessera-worker", ExeDir() / "../worker/runtime/tessera-worker"});
    }
    return c->Validate();
  };
  if (Status st = apply_flags(&config); !st.ok()) {
    std::fprintf(stderr, "tesserad: configuration: %s\n", st.ToString().c_str());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  std::optional<slurm::SlurmConfig> slurm_config;
  if (!config_path.empty()) {
    auto loaded = slurm::LoadSlurmConfig(config_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "tesserad: configuration: %s\n", loaded.status().ToString().c_str());
      return 2;
    }
    slurm_config = *std::move(loaded);
  }

  // Signals are taken synchronously by the main thread; block them before
  // any other thread starts so none of those receives them.
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  std::error_code ec;
  fs::create_directories(config.state_dir, ec);
  if (ec) {
    spdlog::critical("cannot create state folder {}: {}", config.state_dir, ec.message());
    return 1;
  }
  ::chmod(config.state_dir.c_str(), 0750);

  auto opened = daemon::SqliteStore::Open(config.DbPath());
  if (!opened.ok()) {
    spdlog::critical("cannot open the store {}: {}", config.DbPath(), opened.status().ToString());
    return 1;
  }
  std::unique_ptr<daemon::SqliteStore> store = *std::move(opened);
  auto join_token = EnsureJoinToken(config);
  Status setup = join_token.ok() ? store->SetAgentJoinToken(*join_token) : join_token.status();
  if (setup.ok()) setup = BootstrapAdmin(store.get(), config);
  if (!setup.ok()) {
    spdlog::critical("setup failed: {}", setup.ToString());
    return 1;
  }

  // Infer ranks lease chunks with per-attempt tokens derived from this key;
  // keeping it across restarts keeps running ranks' tokens valid.
  const fs::path lease_key_path = fs::path(config.state_dir) / "lease-key";
  auto lease_key = daemon::ReadSecretLine(*FileSystem::Default(), lease_key_path);
  if (!lease_key.ok()) {
    lease_key = daemon::RandomHex(32);
    if (Status st = lease_key.ok() ? daemon::WriteSecretLine(*FileSystem::Default(), lease_key_path,
                                                             *lease_key)
                                   : lease_key.status();
        !st.ok()) {
      spdlog::critical("cannot write the lease key: {}", st.ToString());
      return 1;
    }
  }
  const daemon::LeaseTokens lease_tokens(*lease_key);

  // TLS: the configured certificate, or tesserad's own CA and certificate in
  // <state_dir>/tls. Clients pin ca_sha256 (the join bundle's fingerprint).
  std::optional<api::TlsServerFiles> tls_files;
  std::string ca_sha256;
  if (config.ServesTls()) {
    if (!config.tls_cert_file.empty()) {
      tls_files = api::TlsServerFiles{config.tls_cert_file, config.tls_key_file};
      Status st = api::CheckTlsServerFiles(*tls_files);
      auto pin = st.ok() ? api::CertificateFileSha256(config.tls_cert_file) : st;
      if (!pin.ok()) {
        spdlog::critical("TLS: {}", pin.status().ToString());
        return 1;
      }
      ca_sha256 = *pin;  // the server certificate itself; clients may use a CA file instead
    } else {
      auto made = daemon::EnsureSelfSignedTls(
          (fs::path(config.state_dir) / "tls").string(),
          daemon::DefaultServerNames(config.listen_address, config.tls_server_names));
      if (!made.ok()) {
        spdlog::critical("cannot make tesserad's TLS certificate: {}", made.status().ToString());
        return 1;
      }
      if (made->made_ca) spdlog::info("first start: made tesserad's own CA in {}", made->ca_file);
      tls_files = made->server;
      ca_sha256 = made->ca_sha256;
    }
    spdlog::info("serving HTTPS; clients pin the SHA-256 fingerprint {}",
                 api::DisplayFingerprint(ca_sha256));
  } else if (!api::IsLoopbackHost(config.listen_address)) {
    spdlog::warn(
        "serving plain HTTP on {} (allow_insecure_http): tokens cross the network in clear",
        config.listen_address);
  }

  // Entrypoint policies and data roots: what users' jobs may set and touch.
  const daemon::JobAdmission admission(daemon::DataRoots(config.data_roots), config.entrypoints,
                                       fs::absolute(config.CheckpointRoot()).string());
  if (config.data_roots.empty()) {
    spdlog::warn(
        "no data_roots configured: only admins may submit jobs that name a dataset, output or "
        "checkpoint (README, \"Security\")");
  }

  Clock* clock = SystemClock::Default();
  // A Slurm partition as a pool (slurm/slurm_pool.h): its heartbeats reach
  // the service below as an agent's would; it starts once the service runs.
  daemon::ControlPlaneService* heartbeat_target = nullptr;
  std::unique_ptr<slurm::SlurmClient> slurm_client;
  std::unique_ptr<slurm::SlurmPool> slurm_pool;
  if (slurm_config) {
    auto endpoint = slurm::ParseRestUrl(slurm_config->url);
    if (!endpoint.ok()) {
      spdlog::critical("slurm: {}", endpoint.status().ToString());
      return 2;
    }
    slurm_client = std::make_unique<slurm::SlurmRestClient>(*endpoint, slurm_config->user,
                                                            slurm_config->token_file);
    slurm::SlurmPoolOptions so;
    so.partition = slurm_config->partition;
    so.gpu_types = slurm_config->gpu_types;
    so.launcher = !slurm_config->launcher.empty()
                      ? slurm_config->launcher
                      : FirstExisting({ExeDir() / "tessera-slurm-launch",
                                       ExeDir() / "../slurm/tessera-slurm-launch"});
    so.rank_root = !slurm_config->rank_root.empty()
                       ? slurm_config->rank_root
                       : (fs::absolute(config.CheckpointRoot()) / "slurm").string();
    so.poll_interval = std::chrono::milliseconds(slurm_config->poll_interval_ms);
    slurm_pool = std::make_unique<slurm::SlurmPool>(
        slurm_client.get(),
        [&heartbeat_target](const api::Json& hb) -> Result<api::Json> {
          if (heartbeat_target == nullptr) return Unavailable("tesserad is starting");
          return heartbeat_target->Heartbeat(hb);
        },
        clock, so);
    spdlog::info("slurm: pool of partition \"{}\" through {} (launcher {})", so.partition,
                 slurm_config->url, so.launcher);
  }
  daemon::JobControllerOptions jc;
  if (slurm_pool) {
    jc.node_up = [&slurm_pool](const std::string& node) { return slurm_pool->NodeUp(node); };
  }
  jc.infer_chunk_images = config.infer_chunk_images;
  jc.lease_tokens = &lease_tokens;
  jc.admission = &admission;
  jc.detector = {config.heartbeat_interval_ms, config.suspect_after_missed, config.dead_after_ms};
  jc.launch.worker_binary = config.worker_binary;
  jc.launch.checkpoint_root = fs::absolute(config.CheckpointRoot()).string();
  jc.launch.collective_timeout_s = static_cast<int>(config.collective_timeout_s);
  jc.launch.master_port_base = static_cast<int>(config.master_port_base);
  jc.launch.master_port_span = static_cast<int>(config.master_port_span);
  jc.launch.run_as = config.run_as;
  jc.retry_backoff_ms = config.retry_backoff_ms;
  jc.grow_min_speedup = config.grow_min_speedup;
  jc.share_running_jobs = config.share_running_jobs;
  jc.share_restart_moves = config.share_restart_moves;
  jc.share_catch_up_above = config.share_catch_up_above;
  jc.move_cost_s = config.move_cost_s;
  jc.max_retry_backoff_ms = config.max_retry_backoff_ms;
  jc.crash_loop_window_ms = config.crash_loop_window_ms;
  jc.users = config.users;
  jc.ordering = config.queue_policy == "fifo" ? scheduler::QueueOrdering::kFifo
                                              : scheduler::QueueOrdering::kFairShare;
  // Plans cut builtin models (and the model files labs train) where the
  // worker's layers are: measure them once.
  daemon::ProfileCache profiles(fs::path(config.state_dir) / "profiles",
                                daemon::BuiltinModelsToProfile(),
                                daemon::WorkerProfileSource(config.worker_binary));
  profiles.StartWarmup();
  jc.profiles = [&profiles](const daemon::ProfileTarget& target) { return profiles.Get(target); };
  jc.remeasure_profile = [&profiles](const daemon::ProfileTarget& target, const std::string& why) {
    return profiles.Remeasure(target, why);
  };
  daemon::JobController controller(store.get(), clock, jc);
  if (Status st = controller.Recover(); !st.ok()) {
    spdlog::critical("cannot rebuild the controller's state: {}", st.ToString());
    return 1;
  }

  daemon::ControlPlaneOptions cp;
  cp.heartbeat_interval = std::chrono::milliseconds(config.heartbeat_interval_ms);
  cp.lease_tokens = &lease_tokens;
  cp.join_bundle = [&config, ca_sha256]() -> Result<api::Json> {
    TESSERA_ASSIGN_OR_RETURN(
        std::string token, daemon::ReadSecretLine(*FileSystem::Default(), config.JoinTokenPath()));
    return api::Json{{"join_token", token},
                     {"ca_sha256", ca_sha256.empty() ? api::Json() : api::Json(ca_sha256)}};
  };
  cp.admission = &admission;
  cp.max_pending_jobs = [users = config.users](const std::string& user) {
    return users.For(user).max_pending_jobs;
  };
  cp.waiting_reason = [&controller](api::JobId id) { return controller.WaitingReason(id); };
  cp.queue = [&controller] { return controller.Queue(); };
  cp.live_ranks = [&controller](api::JobId id, int64_t attempt) {
    return controller.LiveRanks(id, attempt);
  };
  cp.lease_duration = std::chrono::milliseconds(config.lease_ms);
  cp.planner = [&controller](const api::JobSpec& spec, const std::vector<api::Node>&) {
    return controller.Preview(spec);
  };
  cp.desired_workers =
      [&controller](const api::HeartbeatRequest& hb) -> Result<std::vector<api::WorkerLaunch>> {
    return controller.OnHeartbeat(hb).desired;
  };
  // Long polls are parked in the controller, not held in an io thread.
  cp.desired_workers_async = [&controller](const api::HeartbeatRequest& hb,
                                           std::function<void(api::HeartbeatResponse)> done) {
    controller.OnHeartbeat(hb, std::move(done));
  };
  if (slurm_pool) {
    cp.node_source = [&slurm_pool](const std::string& node) -> std::string {
      return slurm_pool->Owns(node) ? "slurm" : "agent";
    };
  }
  daemon::ControlPlaneService service(store.get(), clock, cp);
  heartbeat_target = &service;
  api::Router router(service, api::RouterOptions{config.web_dir, clock});

  api::HttpServerOptions http;
  http.address = config.listen_address;
  http.port = config.port;
  http.io_threads = static_cast<int>(config.io_threads);
  http.idle_timeout = std::chrono::milliseconds(config.idle_timeout_ms);
  http.body_limit = static_cast<size_t>(config.body_limit_bytes);
  http.tls = tls_files;
  http.on_listening = [&config, &tls_files](uint16_t bound) {
    Status port_file = daemon::WriteSecretLine(*FileSystem::Default(),
                                               fs::path(config.state_dir) / "tesserad.port",
                                               std::to_string(bound));
    if (!port_file.ok()) spdlog::warn("port file not written: {}", port_file.ToString());
    spdlog::info("listening on {}://{}:{}", tls_files ? "https" : "http", config.listen_address,
                 bound);
    Notify("READY=1\nSTATUS=listening on port " + std::to_string(bound));
  };
  api::HttpServer server(
      http, api::AsyncHttpHandler([&router](const api::Request& r, api::Responder done) {
        router.HandleAsync(r, std::move(done));
      }));
  if (Status st = server.Start(); !st.ok()) {
    spdlog::critical("cannot listen on {}:{}: {}", config.listen_address, config.port,
                     st.ToString());
    return 1;
  }

  if (slurm_pool) slurm_pool->Start();

  // The control loop; it also feeds the systemd watchdog, so a stuck loop
  // gets the daemon restarted.
  std::atomic<bool> stop{false};
  std::mutex loop_mu;
  std::condition_variable loop_cv;
  uint64_t watchdog_usec = 0;
  bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
  std::thread loop([&] {
    auto last_ping = std::chrono::steady_clock::now();
    while (!stop) {
      // The edge of the control loop: an exception a step let through is
      // logged and the next tick runs (the state that matters is in the
      // store), rather than ending the daemon and every job's control.
      try {
        if (Status st = controller.Tick(); !st.ok()) {
          spdlog::warn("control loop: {}", st.ToString());
        }
      } catch (const std::exception& e) {
        spdlog::error("control loop: a tick threw (a defect; please report it): {}", e.what());
      }
      auto now = std::chrono::steady_clock::now();
      if (watchdog && now - last_ping > std::chrono::microseconds(watchdog_usec / 2)) {
        Notify("WATCHDOG=1");
        last_ping = now;
      }
      std::unique_lock lock(loop_mu);
      loop_cv.wait_for(lock, std::chrono::milliseconds(config.schedule_interval_ms),
                       [&] { return stop.load(); });
    }
  });

  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      Notify("RELOADING=1");
      daemon::DaemonConfig fresh;
      Status st = apply_flags(&fresh);
      if (st.ok()) {
        // Live-reloadable: log level and the join token. Listener, state
        // folder and timings take effect on restart.
        spdlog::set_level(spdlog::level::from_str(fresh.log_level));
        auto token = daemon::ReadSecretLine(*FileSystem::Default(), fresh.JoinTokenPath());
        if (token.ok()) st = store->SetAgentJoinToken(*token);
      }
      if (st.ok()) {
        spdlog::info("reloaded configuration");
      } else {
        spdlog::error("reload refused, keeping the running configuration: {}", st.ToString());
      }
      Notify("READY=1");
      continue;
    }
    spdlog::info("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    break;
  }
  Notify("STOPPING=1");
  service.SetStopping();
  // The pool's Slurm jobs run on; a restarted tesserad re-adopts them.
  if (slurm_pool) slurm_pool->Stop();
  controller.Shutdown();  // answers held heartbeats now
  server.Stop();          // finishes in-flight requests
  {
    std::lock_guard lock(loop_mu);
    stop = true;
  }
  loop_cv.notify_all();
  loop.join();
  store.reset();  // closes the database cleanly (checkpoints the WAL)
  spdlog::info("stopped");
  return 0;
}
