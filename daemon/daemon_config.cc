#include "daemon/daemon_config.h"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>

#include "api/entrypoint_kind.h"
#include "api/server_url.h"
#include "common/yaml_scalars.h"
#include "scheduler/user_policies_yaml.h"

namespace tessera::daemon {
namespace {

using Setter = std::function<Status(const YAML::Node&)>;

template <typename T>
Setter Set(T* field, const std::string& key) {
  return [field, key](const YAML::Node& n) -> Status {
    try {
      *field = n.as<T>();
      return Status::Ok();
    } catch (const YAML::Exception&) {
      return InvalidArgument("has the wrong type", key);
    }
  };
}

Status CheckRange(int64_t v, int64_t lo, int64_t hi, const char* field) {
  if (v < lo || v > hi) {
    return InvalidArgument("must be between " + std::to_string(lo) + " and " + std::to_string(hi),
                           field);
  }
  return Status::Ok();
}

Status LoadDataRoots(const YAML::Node& n, std::vector<DataRoot>* roots) {
  if (!n.IsSequence()) return InvalidArgument("must be a list of {path, access}", "data_roots");
  roots->clear();
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string field = "data_roots[" + std::to_string(i) + "]";
    const YAML::Node& item = n[i];
    if (!item.IsMap()) return InvalidArgument("must be a mapping {path, access}", field);
    DataRoot root;
    std::string access = "read";
    for (const auto& kv : item) {
      const std::string key = kv.first.as<std::string>("");
      try {
        if (key == "path") {
          root.path = kv.second.as<std::string>();
        } else if (key == "access") {
          access = kv.second.as<std::string>();
        } else {
          return InvalidArgument("unknown key (path, access)", field + "." + key);
        }
      } catch (const YAML::Exception&) {
        return InvalidArgument("has the wrong type", field + "." + key);
      }
    }
    if (access != "read" && access != "write") {
      return InvalidArgument("must be read or write", field + ".access");
    }
    root.writable = access == "write";
    roots->push_back(std::move(root));
  }
  return Status::Ok();
}

// Upper-case letters, digits, '_' and the glob characters * ? [ ] - !.
bool IsEnvPattern(const std::string& p) {
  return !p.empty() &&
         p.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_*?[]-!") == std::string::npos;
}

Status LoadEntrypoints(const YAML::Node& n, std::map<std::string, api::EntrypointPolicy>* out) {
  if (!n.IsMap()) return InvalidArgument("must map entrypoint names to policies", "entrypoints");
  out->clear();
  for (const auto& kv : n) {
    const std::string name = kv.first.as<std::string>("");
    const std::string field = "entrypoints." + name;
    if (name != "*") TESSERA_RETURN_IF_ERROR(api::ValidateEntrypointName(name, field));
    if (!kv.second.IsMap()) {
      return InvalidArgument("must be a mapping {env_allow, args_allow, free_args}", field);
    }
    api::EntrypointPolicy policy;
    for (const auto& p : kv.second) {
      const std::string key = p.first.as<std::string>("");
      const std::string f = field + "." + key;
      if (key == "env_allow") {
        TESSERA_ASSIGN_OR_RETURN(policy.env_allow, YamlStringList(p.second, f));
        for (const std::string& pattern : policy.env_allow) {
          if (!IsEnvPattern(pattern)) {
            return InvalidArgument("patterns are globs of [A-Z0-9_] with * ? [ ]", f);
          }
        }
      } else if (key == "args_allow") {
        TESSERA_ASSIGN_OR_RETURN(policy.args_allow, YamlStringList(p.second, f));
      } else if (key == "free_args") {
        TESSERA_ASSIGN_OR_RETURN(policy.free_args, YamlBool(p.second, f));
      } else {
        return InvalidArgument("unknown key (env_allow, args_allow, free_args)", f);
      }
    }
    const api::EntrypointKind kind = api::EntrypointKindOf(name);
    if ((kind == api::EntrypointKind::kBuiltin || kind == api::EntrypointKind::kModel) &&
        (policy.free_args || !policy.args_allow.empty())) {
      return InvalidArgument(
          "builtin: and model: entrypoints accept the worker's documented options only: "
          "args_allow and free_args are for cmd: entrypoints",
          field);
    }
    (*out)[name] = std::move(policy);
  }
  return Status::Ok();
}

// A Unix account name: letters, digits, '_', '-' and '.', not starting with
// '-', at most 32 characters.
bool IsAccountName(const std::string& s) {
  return !s.empty() && s.size() <= 32 && s.front() != '-' &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") ==
             std::string::npos;
}

Status LoadRunAs(const YAML::Node& n, std::map<std::string, std::string>* out) {
  if (!n.IsMap()) return InvalidArgument("must map user names to Unix accounts", "run_as");
  out->clear();
  for (const auto& kv : n) {
    const std::string user = kv.first.as<std::string>("");
    std::string account;
    try {
      account = kv.second.as<std::string>();
    } catch (const YAML::Exception&) {
      return InvalidArgument("must be a Unix account name", "run_as." + user);
    }
    if (!IsAccountName(account) || account == "root") {
      return InvalidArgument("must be a Unix account name other than root", "run_as." + user);
    }
    (*out)[user] = account;
  }
  return Status::Ok();
}

}  // namespace

std::string DaemonConfig::DbPath() const {
  return db_path.empty() ? state_dir + "/tessera.db" : db_path;
}

std::string DaemonConfig::JoinTokenPath() const {
  return join_token_file.empty() ? state_dir + "/join-token" : join_token_file;
}

bool DaemonConfig::ServesTls() const {
  if (tls == "on") return true;
  if (tls == "off") return false;
  return !tls_cert_file.empty() || !api::IsLoopbackHost(listen_address);
}

std::string DaemonConfig::CheckpointRoot() const {
  return checkpoint_root.empty() ? state_dir + "/checkpoints" : checkpoint_root;
}

Status DaemonConfig::Validate() const {
  if (state_dir.empty()) return InvalidArgument("must not be empty", "state_dir");
  TESSERA_RETURN_IF_ERROR(CheckRange(io_threads, 1, 64, "io_threads"));
  TESSERA_RETURN_IF_ERROR(CheckRange(body_limit_bytes, 1024, int64_t{1} << 30, "body_limit_bytes"));
  TESSERA_RETURN_IF_ERROR(CheckRange(idle_timeout_ms, 100, 3'600'000, "idle_timeout_ms"));
  TESSERA_RETURN_IF_ERROR(CheckRange(heartbeat_interval_ms, 50, 60'000, "heartbeat_interval_ms"));
  TESSERA_RETURN_IF_ERROR(CheckRange(suspect_after_missed, 1, 100, "suspect_after_missed"));
  TESSERA_RETURN_IF_ERROR(CheckRange(dead_after_ms, 100, 3'600'000, "dead_after_ms"));
  if (dead_after_ms <= heartbeat_interval_ms) {
    return InvalidArgument("must be longer than heartbeat_interval_ms", "dead_after_ms");
  }
  TESSERA_RETURN_IF_ERROR(CheckRange(schedule_interval_ms, 10, 60'000, "schedule_interval_ms"));
  TESSERA_RETURN_IF_ERROR(CheckRange(retry_backoff_ms, 0, 3'600'000, "retry_backoff_ms"));
  TESSERA_RETURN_IF_ERROR(
      CheckRange(max_retry_backoff_ms, retry_backoff_ms, 3'600'000, "max_retry_backoff_ms"));
  TESSERA_RETURN_IF_ERROR(CheckRange(crash_loop_window_ms, 0, 86'400'000, "crash_loop_window_ms"));
  if (!(grow_min_speedup == 0 || (grow_min_speedup >= 1.0 && grow_min_speedup <= 100.0))) {
    return InvalidArgument("must be 0 (never) or between 1 and 100", "grow_min_speedup");
  }
  if (!(move_cost_s >= 0 && move_cost_s <= 86'400)) {
    return InvalidArgument("must be between 0 and 86400 seconds", "move_cost_s");
  }
  if (!(share_catch_up_above == 0 ||
        (share_catch_up_above >= 1.0 && share_catch_up_above <= 100.0))) {
    return InvalidArgument("must be 0 (off) or between 1 and 100", "share_catch_up_above");
  }
  TESSERA_RETURN_IF_ERROR(CheckRange(stop_grace_ms, 0, 600'000, "stop_grace_ms"));
  TESSERA_RETURN_IF_ERROR(CheckRange(infer_chunk_images, 1, 100'000, "infer_chunk_images"));
  TESSERA_RETURN_IF_ERROR(CheckRange(lease_ms, 500, 3'600'000, "lease_ms"));
  TESSERA_RETURN_IF_ERROR(CheckRange(collective_timeout_s, 1, 86'400, "collective_timeout_s"));
  TESSERA_RETURN_IF_ERROR(CheckRange(master_port_base, 1024, 65'535, "master_port_base"));
  TESSERA_RETURN_IF_ERROR(
      CheckRange(master_port_span, 1, 65'536 - master_port_base, "master_port_span"));
  if (queue_policy != "fair" && queue_policy != "fifo") {
    return InvalidArgument("must be fair or fifo", "queue_policy");
  }
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  bool known = false;
  for (const char* l : kLevels) known = known || log_level == l;
  if (!known) return InvalidArgument("must be one of trace, debug, info, warn, error", "log_level");
  if (tls != "auto" && tls != "on" && tls != "off") {
    return InvalidArgument("must be auto, on or off", "tls");
  }
  if (tls_cert_file.empty() != tls_key_file.empty()) {
    return InvalidArgument("tls_cert_file and tls_key_file go together",
                           tls_cert_file.empty() ? "tls_cert_file" : "tls_key_file");
  }
  if (tls == "off" && !tls_cert_file.empty()) {
    return InvalidArgument("a certificate is configured but tls is off", "tls");
  }
  for (const std::string& name : tls_server_names) {
    if (name.empty() || name.find_first_of(" ,/") != std::string::npos) {
      return InvalidArgument("must be DNS names or IP addresses", "tls_server_names");
    }
  }
  if (!ServesTls() && !api::IsLoopbackHost(listen_address) && !allow_insecure_http) {
    return InvalidArgument(
        "plain HTTP is served on loopback addresses only; use tls: on (or auto), or set "
        "allow_insecure_http: true",
        "allow_insecure_http");
  }
  for (size_t i = 0; i < data_roots.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(
        ValidateDataRoot(data_roots[i], "data_roots[" + std::to_string(i) + "]"));
  }
  return Status::Ok();
}

Status LoadDaemonConfig(const std::string& path, DaemonConfig* c) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return InvalidArgument("cannot read config file " + path, "config");
  } catch (const YAML::Exception& e) {
    return InvalidArgument("config file " + path + " is not valid YAML: " + e.what(), "config");
  }
  if (root.IsNull()) return Status::Ok();  // empty file: all defaults
  if (!root.IsMap()) return InvalidArgument("config file must be a YAML mapping", "config");

  int64_t port = c->port;
  const std::map<std::string, Setter> setters = {
      {"listen_address", Set(&c->listen_address, "listen_address")},
      {"port", Set(&port, "port")},
      {"state_dir", Set(&c->state_dir, "state_dir")},
      {"db_path", Set(&c->db_path, "db_path")},
      {"web_dir", Set(&c->web_dir, "web_dir")},
      {"checkpoint_root", Set(&c->checkpoint_root, "checkpoint_root")},
      {"join_token_file", Set(&c->join_token_file, "join_token_file")},
      {"io_threads", Set(&c->io_threads, "io_threads")},
      {"body_limit_bytes", Set(&c->body_limit_bytes, "body_limit_bytes")},
      {"idle_timeout_ms", Set(&c->idle_timeout_ms, "idle_timeout_ms")},
      {"heartbeat_interval_ms", Set(&c->heartbeat_interval_ms, "heartbeat_interval_ms")},
      {"suspect_after_missed", Set(&c->suspect_after_missed, "suspect_after_missed")},
      {"dead_after_ms", Set(&c->dead_after_ms, "dead_after_ms")},
      {"schedule_interval_ms", Set(&c->schedule_interval_ms, "schedule_interval_ms")},
      {"retry_backoff_ms", Set(&c->retry_backoff_ms, "retry_backoff_ms")},
      {"max_retry_backoff_ms", Set(&c->max_retry_backoff_ms, "max_retry_backoff_ms")},
      {"crash_loop_window_ms", Set(&c->crash_loop_window_ms, "crash_loop_window_ms")},
      {"grow_min_speedup", Set(&c->grow_min_speedup, "grow_min_speedup")},
      {"share_running_jobs", Set(&c->share_running_jobs, "share_running_jobs")},
      {"share_restart_moves", Set(&c->share_restart_moves, "share_restart_moves")},
      {"move_cost_s", Set(&c->move_cost_s, "move_cost_s")},
      {"share_catch_up_above", Set(&c->share_catch_up_above, "share_catch_up_above")},
      {"stop_grace_ms", Set(&c->stop_grace_ms, "stop_grace_ms")},
      {"infer_chunk_images", Set(&c->infer_chunk_images, "infer_chunk_images")},
      {"lease_ms", Set(&c->lease_ms, "lease_ms")},
      {"collective_timeout_s", Set(&c->collective_timeout_s, "collective_timeout_s")},
      {"master_port_base", Set(&c->master_port_base, "master_port_base")},
      {"master_port_span", Set(&c->master_port_span, "master_port_span")},
      {"worker_binary", Set(&c->worker_binary, "worker_binary")},
      {"log_level", Set(&c->log_level, "log_level")},
      {"tls", Set(&c->tls, "tls")},
      {"tls_cert_file", Set(&c->tls_cert_file, "tls_cert_file")},
      {"tls_key_file", Set(&c->tls_key_file, "tls_key_file")},
      {"tls_server_names", Set(&c->tls_server_names, "tls_server_names")},
      {"allow_insecure_http", Set(&c->allow_insecure_http, "allow_insecure_http")},
      {"data_roots", [c](const YAML::Node& n) { return LoadDataRoots(n, &c->data_roots); }},
      {"entrypoints", [c](const YAML::Node& n) { return LoadEntrypoints(n, &c->entrypoints); }},
      {"run_as", [c](const YAML::Node& n) { return LoadRunAs(n, &c->run_as); }},
      {"users", [c](const YAML::Node& n) { return scheduler::ReadUserPolicies(n, &c->users); }},
      {"queue_policy", Set(&c->queue_policy, "queue_policy")},
  };
  for (const auto& kv : root) {
    std::string key;
    try {
      key = kv.first.as<std::string>();
    } catch (const YAML::Exception&) {
      return InvalidArgument("config keys must be strings", "config");
    }
    if (key == "slurm") continue;  // the Slurm pool's block: slurm/slurm_config.h
    auto it = setters.find(key);
    if (it == setters.end()) return InvalidArgument("unknown config key", key);
    TESSERA_RETURN_IF_ERROR(it->second(kv.second));
  }
  if (port < 0 || port > 65535) return InvalidArgument("must be between 0 and 65535", "port");
  c->port = static_cast<uint16_t>(port);
  return Status::Ok();
}

}  // namespace tessera::daemon
