// SlurmRestClient: SlurmClient over slurmrestd's REST API, version v0.0.38
// (Slurm 22.05), on TCP with JWT authentication: every request carries
// X-SLURM-USER-NAME and X-SLURM-USER-TOKEN, the token read from a file
// (re-read on each request, so `scontrol token` can renew it in place).
//
// Endpoints: GET /slurm/v0.0.38/nodes, POST /slurm/v0.0.38/job/submit
// ({"script", "jobs": [...]} — one entry per component), GET
// /slurm/v0.0.38/job/{id}, GET /slurm/v0.0.38/jobs, DELETE
// /slurm/v0.0.38/job/{id}. The JSON shapes are the pure functions below, so
// they are tested without a server.
//
// Thread safety: every method may be called concurrently (one connection,
// one mutex).
#ifndef TESSERA_SLURM_SLURM_REST_CLIENT_H_
#define TESSERA_SLURM_SLURM_REST_CLIENT_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/http_client.h"
#include "api/types.h"
#include "slurm/slurm_client.h"

namespace tessera::slurm {

struct RestEndpoint {
  std::string host;
  uint16_t port = 0;
};
// "http://host:port" (no path, no TLS: slurmrestd speaks plain HTTP).
Result<RestEndpoint> ParseRestUrl(const std::string& url);

// The body of POST /job/submit: {"script", "jobs": [one per component]}, or
// {"script", "job"} for a single component (an ordinary, not heterogeneous,
// job). Every component carries the job's name; the first also carries the
// script's working folder and output file.
api::Json SubmitBody(const HetJobRequest& request);
// Parsers of slurmrestd's answers; kInternal when the shape is not Slurm's.
Result<std::vector<SlurmNode>> NodesFromJson(const api::Json& j);
Result<std::vector<SlurmJob>> JobsFromJson(const api::Json& j);
// Slurm's "errors" array as one message ("" when empty).
std::string ErrorsOf(const api::Json& j);

class SlurmRestClient : public SlurmClient {
 public:
  // user: the Slurm user jobs run as (the token's user).
  SlurmRestClient(RestEndpoint endpoint, std::string user, std::string token_file);
  ~SlurmRestClient() override;

  Result<std::vector<SlurmNode>> ListNodes() override;
  Result<int64_t> SubmitHetJob(const HetJobRequest& request) override;
  Result<std::vector<SlurmJob>> GetJob(int64_t job_id) override;
  Result<std::vector<SlurmJob>> ListJobs() override;
  Status CancelJob(int64_t job_id) override;

 private:
  Result<api::Json> Call(const std::string& method, const std::string& path,
                         const std::string& body = {});

  const RestEndpoint endpoint_;
  const std::string user_;
  const std::string token_file_;
  std::mutex mu_;
  std::unique_ptr<api::HttpClient> http_;
};

}  // namespace tessera::slurm

#endif  // TESSERA_SLURM_SLURM_REST_CLIENT_H_
