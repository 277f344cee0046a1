// DaemonConfig: everything tesserad can be told, from a YAML file and flags.
//
// Every field has an embedded default, so `tesserad --state-dir DIR` alone
// runs a working controller. LoadDaemonConfig reads a YAML file whose keys are
// the field names below; an unknown key or a value of the wrong type is an
// error naming the key. Validate() checks ranges.
//
// Thread safety: plain value.
#ifndef TESSERA_DAEMON_DAEMON_CONFIG_H_
#define TESSERA_DAEMON_DAEMON_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/job_spec_validation.h"
#include "common/status.h"
#include "daemon/data_roots.h"
#include "scheduler/queue_order.h"

namespace tessera::daemon {

struct DaemonConfig {
  std::string listen_address = "127.0.0.1";
  uint16_t port = 8080;
  std::string state_dir = "var/tesserad";  // holds tessera.db unless db_path is set
  std::string db_path;                     // default: <state_dir>/tessera.db
  std::string web_dir;                     // static UI; default: web/ beside the binary's source
  std::string checkpoint_root;             // default: <state_dir>/checkpoints
  std::string join_token_file;             // agents' join token; default: <state_dir>/join-token
  int64_t io_threads = 32;  // handlers block on the group commit: one per in-flight submit
  int64_t body_limit_bytes = 1 << 20;
  int64_t idle_timeout_ms = 30'000;
  int64_t heartbeat_interval_ms = 1000;
  int64_t suspect_after_missed = 2;    // beats missed before a node is suspect
  int64_t dead_after_ms = 3000;        // silence before a node is dead
  int64_t schedule_interval_ms = 100;  // controller loop period
  int64_t retry_backoff_ms = 500;      // first re-plan delay; doubles per attempt
  int64_t max_retry_backoff_ms = 10'000;
  int64_t crash_loop_window_ms = 300'000;  // JobControllerOptions::crash_loop_window_ms
  double grow_min_speedup = 1.2;           // JobControllerOptions::grow_min_speedup; 0: never grow
  // JobControllerOptions::share_running_jobs / move_cost_s: running train jobs
  // shrink for waiting ones when the share policy finds it pays; move_cost_s
  // is charged until a re-form has been measured (move_costs.h).
  bool share_running_jobs = true;
  bool share_restart_moves = true;  // JobControllerOptions::share_restart_moves
  double move_cost_s = 10;
  // JobControllerOptions::share_catch_up_above; 0: off.
  double share_catch_up_above = 2.0;
  int64_t stop_grace_ms = 5000;       // SIGTERM -> SIGKILL for cancelled ranks
  int64_t infer_chunk_images = 32;    // images per leased chunk of an infer job
  int64_t lease_ms = 30'000;          // a chunk lease not renewed this long goes back
  int64_t collective_timeout_s = 60;  // ranks' TESSERA_COLLECTIVE_TIMEOUT_S
  // The rendezvous ports (MASTER_PORT) rank 0 of an attempt listens on:
  // master_port_base .. master_port_base + master_port_span - 1.
  int64_t master_port_base = 29500;
  int64_t master_port_span = 2000;
  std::string worker_binary;  // builtin entrypoints; default: beside tesserad
  std::string log_level = "info";
  // TLS (api/tls_context.h). "auto": HTTPS unless listen_address is
  // loopback and no certificate is configured; "on": always HTTPS; "off":
  // plain HTTP, refused off loopback unless allow_insecure_http.
  std::string tls = "auto";
  // The server's certificate chain (PEM, leaf first) and key; both or
  // neither. Neither: tesserad makes its own CA and a certificate signed by
  // it in <state_dir>/tls at first start (daemon/self_signed_ca.h).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Extra names (DNS or IP) the self-made certificate carries, beside the
  // host name, localhost, 127.0.0.1, ::1 and listen_address.
  std::vector<std::string> tls_server_names;
  bool allow_insecure_http = false;  // plain HTTP on a non-loopback address

  // ---- multi-user safety (README "Security") ----
  // Folders jobs may read and write (daemon/data_roots.h), from
  //   data_roots: [{path: /srv/archive/shared, access: read},
  //                {path: /srv/archive/{user}, access: write}]
  // Default none: admins may name any path, users none (a warning at start).
  std::vector<DataRoot> data_roots;
  // What the jobs of each entrypoint may set (api::EntrypointPolicy), from
  //   entrypoints: {"cmd:train-ddp": {env_allow: ["WANDB_*"], free_args: true},
  //                 "*": {env_allow: ["OMP_NUM_THREADS"]}}
  // "*" applies to entrypoints without their own entry. Default none: users'
  // jobs may set no env and pass no args to cmd: entrypoints; builtin options
  // stay allowed (to builtin: and model: entrypoints, which take env_allow
  // only). Admins are not bound by these lists (they may change the
  // entrypoints anyway); everyone is bound by the global env deny list and
  // the builtin options.
  std::map<std::string, api::EntrypointPolicy> entrypoints;
  // Tessera user -> Unix account a root agent runs that user's workers as,
  //   run_as: {alice: alice, bob: lab-bob}
  // Users not listed run as the agent's own account.
  std::map<std::string, std::string> run_as;
  // Each user's share of the lab and limits (scheduler/queue_order.h), from
  //   users: {"*": {max_pending_jobs: 200, max_running_jobs: 4},
  //           alice: {weight: 2, max_devices: 6}}
  // "*" applies to users without their own entry. weight (default 1) sets
  // the queue's interleaving by weighted device share; a limit of 0 (the
  // default) is none. max_pending_jobs is checked when a job is submitted
  // (HTTP 429 beyond it), the others when the queue places jobs.
  scheduler::UserPolicies users;
  // The queue's order: "fair" (priority, then users' weighted device shares,
  // then submission) or "fifo" (priority, then submission: the order before
  // users were interleaved). Limits hold jobs under both.
  std::string queue_policy = "fair";

  std::string DbPath() const;
  std::string JoinTokenPath() const;
  std::string CheckpointRoot() const;
  // Whether the listener speaks TLS (see tls).
  bool ServesTls() const;
  Status Validate() const;
};

// REQUIRES: path names a readable YAML file. Fields absent from the file keep
// the values already in *config.
Status LoadDaemonConfig(const std::string& path, DaemonConfig* config);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_DAEMON_CONFIG_H_
