#include "slurm/slurm_rest_client.h"

#include <charconv>
#include <sstream>

#include "common/file_system.h"

namespace tessera::slurm {
namespace {

constexpr char kPrefix[] = "/slurm/v0.0.38";

std::string Str(const api::Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

int64_t Int(const api::Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  return it->get<int64_t>();
}

std::vector<std::string> Strings(const api::Json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The objects slurmrestd listed under `list` ("nodes", "jobs"), each read by
// `read`; `one` names an element in the error of one that is not an object.
template <typename T>
Result<std::vector<T>> ObjectsOf(const api::Json& j, const std::string& list,
                                 const std::string& one,
                                 Result<T> (*read)(const api::Json& object)) {
  auto it = j.find(list);  // end() when j is not an object
  if (it == j.end() || !it->is_array()) {
    return Internal("slurmrestd answered without a " + list + " array");
  }
  std::vector<T> out;
  for (const auto& x : *it) {
    if (!x.is_object()) return Internal("slurmrestd answered a " + one + " that is not an object");
    TESSERA_ASSIGN_OR_RETURN(T item, read(x));
    out.push_back(std::move(item));
  }
  return out;
}

Result<SlurmNode> NodeFromJson(const api::Json& n) {
  SlurmNode node;
  node.name = Str(n, "name");
  node.address = Str(n, "address");
  if (node.address.empty()) node.address = Str(n, "hostname");
  node.state = Lower(Str(n, "state"));
  for (std::string f : Strings(n, "state_flags")) node.state_flags.push_back(Upper(f));
  node.partitions = Strings(n, "partitions");
  node.gres = Str(n, "gres");
  node.cpus = Int(n, "cpus");
  node.reason = Str(n, "reason");
  if (node.name.empty()) return Internal("slurmrestd answered a node without a name");
  return node;
}

Result<SlurmJob> JobFromJson(const api::Json& x) {
  SlurmJob job;
  job.job_id = Int(x, "job_id");
  job.het_job_id = Int(x, "het_job_id");
  job.het_job_offset = Int(x, "het_job_offset");
  job.name = Str(x, "name");
  job.state = Upper(Str(x, "job_state"));
  job.exit_code = Int(x, "exit_code");
  job.nodes = Str(x, "nodes");
  job.state_reason = Str(x, "state_reason");
  return job;
}

}  // namespace

bool IsTerminalJobState(const std::string& state) {
  static const char* kLive[] = {"PENDING",     "RUNNING",      "SUSPENDED",   "COMPLETING",
                                "CONFIGURING", "REQUEUED",     "RESIZING",    "SIGNALING",
                                "STAGE_OUT",   "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT"};
  for (const char* s : kLive) {
    if (state == s) return false;
  }
  return true;
}

Result<RestEndpoint> ParseRestUrl(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) {
    return InvalidArgument("must start with http:// (slurmrestd speaks plain HTTP)", "slurm.url");
  }
  std::string rest = url.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) {
    return InvalidArgument("must be http://host:port without a path", "slurm.url");
  }
  auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("must name host and port, e.g. http://127.0.0.1:6820", "slurm.url");
  }
  RestEndpoint e;
  e.host = rest.substr(0, colon);
  int port = 0;
  std::string_view p(rest);
  p.remove_prefix(colon + 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || end != p.data() + p.size() || port <= 0 || port > 65535) {
    return InvalidArgument("port must be 1..65535", "slurm.url");
  }
  e.port = static_cast<uint16_t>(port);
  return e;
}

api::Json SubmitBody(const HetJobRequest& request) {
  api::Json jobs = api::Json::array();
  for (size_t i = 0; i < request.components.size(); ++i) {
    const JobComponent& c = request.components[i];
    std::string nodelist;
    for (const std::string& n : c.nodelist) nodelist += (nodelist.empty() ? "" : ",") + n;
    const int64_t nodes = static_cast<int64_t>(c.nodelist.size());
    api::Json env = api::Json::object();
    for (const auto& [k, v] : c.environment) env[k] = v;
    if (env.empty()) env["PATH"] = "/usr/bin:/bin";  // slurmrestd refuses an empty one
    api::Json job = {{"name", request.name},
                     {"nodes", std::to_string(nodes)},
                     {"tasks", nodes * c.tasks_per_node},
                     {"tasks_per_node", c.tasks_per_node},
                     {"environment", env},
                     {"requeue", false}};
    if (!c.partition.empty()) job["partition"] = c.partition;
    if (!nodelist.empty()) job["nodelist"] = nodelist;
    if (!c.gres.empty()) job["gres"] = c.gres;
    if (i == 0) {
      if (!request.working_dir.empty()) job["current_working_directory"] = request.working_dir;
      if (!request.standard_output.empty()) {
        job["standard_output"] = request.standard_output;
        job["standard_error"] = request.standard_output;
      }
    }
    jobs.push_back(std::move(job));
  }
  // One component is an ordinary job: a "jobs" list, even of one, makes a
  // heterogeneous job, whose srun steps then need --het-group.
  if (jobs.size() == 1) return api::Json{{"script", request.script}, {"job", jobs[0]}};
  return api::Json{{"script", request.script}, {"jobs", jobs}};
}

std::string ErrorsOf(const api::Json& j) {
  std::string out;
  auto it = j.find("errors");
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& e : *it) {
    if (!e.is_object()) continue;
    std::string msg = Str(e, "description");
    if (msg.empty()) msg = Str(e, "error");
    if (msg.empty()) continue;
    out += (out.empty() ? "" : "; ") + msg;
  }
  return out;
}

Result<std::vector<SlurmNode>> NodesFromJson(const api::Json& j) {
  return ObjectsOf<SlurmNode>(j, "nodes", "node", NodeFromJson);
}

Result<std::vector<SlurmJob>> JobsFromJson(const api::Json& j) {
  return ObjectsOf<SlurmJob>(j, "jobs", "job", JobFromJson);
}

SlurmRestClient::SlurmRestClient(RestEndpoint endpoint, std::string user, std::string token_file)
    : endpoint_(std::move(endpoint)), user_(std::move(user)), token_file_(std::move(token_file)) {}

SlurmRestClient::~SlurmRestClient() = default;

Result<api::Json> SlurmRestClient::Call(const std::string& method, const std::string& path,
                                        const std::string& body) {
  Result<std::string> text = FileSystem::Default()->ReadFile(token_file_);
  if (!text.ok()) return Unavailable("cannot read the Slurm token file " + token_file_);
  std::istringstream in(*text);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.rfind("SLURM_JWT=", 0) == 0) token = token.substr(10);
  std::lock_guard lock(mu_);
  if (!http_) {
    http_ =
        std::make_unique<api::HttpClient>(endpoint_.host, endpoint_.port, std::chrono::seconds(10));
  }
  http_->SetHeader("X-SLURM-USER-NAME", user_);
  http_->SetHeader("X-SLURM-USER-TOKEN", token);
  auto resp = http_->Request(method, kPrefix + path, body);
  if (!resp.ok()) {
    http_.reset();  // a fresh connection next time
    return Unavailable("slurmrestd: " + resp.status().message());
  }
  api::Json j = api::Json::parse(resp->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Unavailable("slurmrestd answered " + std::to_string(resp->status) +
                       " without JSON: " + resp->body.substr(0, 200));
  }
  std::string errors = ErrorsOf(j);
  if (resp->status == 401 || resp->status == 403) {
    return Unavailable("slurmrestd refused the token (" + std::to_string(resp->status) + ")");
  }
  if (resp->status >= 400 || !errors.empty()) {
    std::string msg = "slurmrestd " + method + " " + path + ": " +
                      (errors.empty() ? "HTTP " + std::to_string(resp->status) : errors);
    if (errors.find("Invalid job id") != std::string::npos) return NotFound(msg);
    if (resp->status >= 500 && errors.empty()) return Unavailable(msg);
    return FailedPrecondition(msg);
  }
  return j;
}

Result<std::vector<SlurmNode>> SlurmRestClient::ListNodes() {
  TESSERA_ASSIGN_OR_RETURN(api::Json j, Call("GET", "/nodes"));
  return NodesFromJson(j);
}

Result<int64_t> SlurmRestClient::SubmitHetJob(const HetJobRequest& request) {
  if (request.components.empty()) return InvalidArgument("a job needs a component", "components");
  TESSERA_ASSIGN_OR_RETURN(api::Json j, Call("POST", "/job/submit", SubmitBody(request).dump()));
  int64_t id = Int(j, "job_id");
  if (id <= 0) return Internal("slurmrestd accepted the job without a job_id: " + j.dump());
  return id;
}

Result<std::vector<SlurmJob>> SlurmRestClient::GetJob(int64_t job_id) {
  TESSERA_ASSIGN_OR_RETURN(api::Json j, Call("GET", "/job/" + std::to_string(job_id)));
  return JobsFromJson(j);
}

Result<std::vector<SlurmJob>> SlurmRestClient::ListJobs() {
  TESSERA_ASSIGN_OR_RETURN(api::Json j, Call("GET", "/jobs"));
  return JobsFromJson(j);
}

Status SlurmRestClient::CancelJob(int64_t job_id) {
  return Call("DELETE", "/job/" + std::to_string(job_id)).status();
}

}  // namespace tessera::slurm
