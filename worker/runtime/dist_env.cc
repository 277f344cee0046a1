#include "worker/runtime/dist_env.h"

#include <cstdlib>
#include <stdexcept>
#include <type_traits>

namespace tessera::worker {
namespace {

// The whole of `text` as a number (std::stod for double, else std::stoll);
// kInvalidArgument "must be <what>, got ..." naming `name` otherwise.
template <typename T>
Result<T> ParseNumber(const std::string& name, const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    T v;
    if constexpr (std::is_floating_point_v<T>) {
      v = std::stod(text, &used);
    } else {
      v = static_cast<T>(std::stoll(text, &used));
    }
    if (used != text.size()) throw std::invalid_argument("trailing characters");
    return v;
  } catch (const std::exception&) {
    return InvalidArgument("must be " + what + ", got \"" + text + "\"", name);
  }
}

Result<int64_t> ParseInt(const std::string& name, const std::string& text) {
  return ParseNumber<int64_t>(name, text, "an integer");
}

Status ReadInt(const EnvGetter& get, const std::string& name, int* out) {
  auto v = get(name);
  if (!v || v->empty()) return Status::Ok();
  TESSERA_ASSIGN_OR_RETURN(int64_t parsed, ParseInt(name, *v));
  *out = static_cast<int>(parsed);
  return Status::Ok();
}

void ReadString(const EnvGetter& get, const std::string& name, std::string* out) {
  auto v = get(name);
  if (v && !v->empty()) *out = *v;
}

}  // namespace

Result<DistEnv> ReadDistEnv(const EnvGetter& get) {
  DistEnv env;
  auto ws = get("WORLD_SIZE");
  env.distributed = ws.has_value() && !ws->empty();
  TESSERA_RETURN_IF_ERROR(ReadInt(get, "WORLD_SIZE", &env.world_size));
  TESSERA_RETURN_IF_ERROR(ReadInt(get, "RANK", &env.rank));
  TESSERA_RETURN_IF_ERROR(ReadInt(get, "LOCAL_RANK", &env.local_rank));
  TESSERA_RETURN_IF_ERROR(ReadInt(get, "LOCAL_WORLD_SIZE", &env.local_world_size));
  TESSERA_RETURN_IF_ERROR(ReadInt(get, "MASTER_PORT", &env.master_port));
  TESSERA_RETURN_IF_ERROR(ReadInt(get, "TESSERA_ATTEMPT", &env.attempt));
  ReadString(get, "MASTER_ADDR", &env.master_addr);
  ReadString(get, "TESSERA_JOB_ID", &env.job_id);
  ReadString(get, "TESSERA_PLAN", &env.plan_path);
  ReadString(get, "TESSERA_CHECKPOINT_DIR", &env.checkpoint_dir);
  ReadString(get, "TESSERA_PROGRESS_FILE", &env.progress_file);
  ReadString(get, "TESSERA_REFORM_FILE", &env.reform_path);
  ReadString(get, "TESSERA_DEVICE", &env.device);
  ReadString(get, "GLOO_SOCKET_IFNAME", &env.gloo_socket_ifname);
  env.gloo_socket_ifname = env.gloo_socket_ifname.substr(0, env.gloo_socket_ifname.find(','));
  if (env.world_size <= 0) return InvalidArgument("must be positive", "WORLD_SIZE");
  if (env.rank < 0 || env.rank >= env.world_size) {
    return InvalidArgument("RANK " + std::to_string(env.rank) +
                               " outside [0, WORLD_SIZE=" + std::to_string(env.world_size) + ")",
                           "RANK");
  }
  if (env.master_port <= 0 || env.master_port > 65535) {
    return InvalidArgument("must be a TCP port", "MASTER_PORT");
  }
  if (!env.plan_path.empty() && !env.distributed) {
    return InvalidArgument("TESSERA_PLAN is set but WORLD_SIZE is not", "WORLD_SIZE");
  }
  if (auto speed = get("TESSERA_DEVICE_SPEED"); speed && !speed->empty()) {
    TESSERA_ASSIGN_OR_RETURN(env.device_speed,
                             ParseNumber<double>("TESSERA_DEVICE_SPEED", *speed, "a number"));
    if (!(env.device_speed > 0.0)) {
      return InvalidArgument("must be positive", "TESSERA_DEVICE_SPEED");
    }
  }
  if (auto mem = get("TESSERA_DEVICE_MEMORY"); mem && !mem->empty()) {
    TESSERA_ASSIGN_OR_RETURN(
        env.device_memory_bytes,
        ParseNumber<int64_t>("TESSERA_DEVICE_MEMORY", *mem, "a number of bytes"));
    if (env.device_memory_bytes < 0) {
      return InvalidArgument("must not be negative", "TESSERA_DEVICE_MEMORY");
    }
  }
  if (auto timeout = get("TESSERA_COLLECTIVE_TIMEOUT_S"); timeout && !timeout->empty()) {
    TESSERA_ASSIGN_OR_RETURN(int64_t seconds, ParseInt("TESSERA_COLLECTIVE_TIMEOUT_S", *timeout));
    if (seconds < 1 || seconds > kMaxCollectiveTimeoutSeconds) {
      return InvalidArgument(
          "must be between 1 and " + std::to_string(kMaxCollectiveTimeoutSeconds) + " seconds",
          "TESSERA_COLLECTIVE_TIMEOUT_S");
    }
    env.collective_timeout = std::chrono::seconds(seconds);
  }
  return env;
}

EnvGetter ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

}  // namespace tessera::worker
