#include "worker/runtime/chunk_source.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <thread>
#include <utility>

#include "api/http_client.h"
#include "api/server_url.h"
#include "api/url.h"

namespace tessera::worker {
namespace {

// TESSERA_CONTROLLER_URL: http(s)://host[:port][/prefix].
Result<api::ServerUrl> ParseControllerUrl(const std::string& url) {
  return api::ParseServerUrl(url, "TESSERA_CONTROLLER_URL", /*allow_path=*/true);
}

// The message of a {"error":{"message":...}} body, or the body itself.
std::string ErrorMessage(const api::HttpResponse& r) {
  try {
    const api::Json j = api::Json::parse(r.body);
    if (j.contains("error") && j["error"].contains("message")) {
      return j["error"]["message"].get<std::string>();
    }
  } catch (const std::exception&) {
  }
  return r.body.substr(0, 200);
}

class HttpChunkSource final : public ChunkSource {
 public:
  HttpChunkSource(HttpChunkSourceOptions o, api::ServerUrl url)
      : o_(std::move(o)),
        url_(std::move(url)),
        clock_(o_.clock != nullptr ? o_.clock : SystemClock::Default()),
        client_(api::ServerUrl{url_.tls, url_.host, url_.port, ""}, o_.request_timeout, o_.tls) {
    client_.SetBearerToken(o_.token);
    target_ = url_.path_prefix + "/api/v1/jobs/" + api::PercentEncode(o_.job_id) + "/leases";
    if (!o_.sleep) o_.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  }

  Result<api::LeaseResponse> Lease(const std::vector<api::CompletedChunk>& completed,
                                   int64_t max_chunks) override {
    api::LeaseRequest req;
    req.attempt = o_.attempt;
    req.rank = o_.rank;
    req.max_chunks = max_chunks;
    req.completed = completed;
    const std::string body = api::ToJson(req).dump();
    std::lock_guard<std::mutex> lock(mu_);
    const auto start = clock_->SteadyNow();
    std::chrono::milliseconds backoff = o_.first_backoff;
    std::string last_error;
    int tries = 0;
    while (true) {
      ++tries;
      Result<api::HttpResponse> r = client_.Request("POST", target_, body);
      if (r.ok()) {
        const int status = r->status;
        if (status == 200) {
          try {
            return api::LeaseResponseFromJson(api::Json::parse(r->body));
          } catch (const std::exception& e) {
            return Internal(std::string("lease answer is not JSON: ") + e.what());
          }
        }
        const std::string msg = "lease request to " + o_.controller_url + target_ + " answered " +
                                std::to_string(status) + ": " + ErrorMessage(*r);
        if (status == 401) return Unauthenticated(msg);
        if (status == 403) return PermissionDenied(msg);
        if (status == 409 || status == 410) return FailedPrecondition(msg);
        if (status == 404) return NotFound(msg);
        if (status != 429 && status < 500) return InvalidArgument(msg);
        last_error = msg;
      } else {
        last_error = r.status().ToString();
      }
      const auto waited = clock_->SteadyNow() - start;
      if (waited + backoff > o_.retry_for) {
        return Unavailable(
            "controller " + o_.controller_url + " unreachable for " +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()) +
            " ms after " + std::to_string(tries) + " tries: " + last_error);
      }
      o_.sleep(backoff);
      backoff = std::min(o_.max_backoff, backoff * 2);
    }
  }

 private:
  HttpChunkSourceOptions o_;
  api::ServerUrl url_;
  Clock* clock_;
  std::mutex mu_;  // HttpClient is not thread-safe
  api::HttpClient client_;
  std::string target_;
};

class QueueRankSource final : public ChunkSource {
 public:
  QueueRankSource(std::shared_ptr<MemoryChunkQueue> q, int64_t rank)
      : q_(std::move(q)), rank_(rank) {}
  Result<api::LeaseResponse> Lease(const std::vector<api::CompletedChunk>& completed,
                                   int64_t max_chunks) override {
    return q_->Lease(rank_, completed, max_chunks);
  }

 private:
  std::shared_ptr<MemoryChunkQueue> q_;
  int64_t rank_;
};

}  // namespace

Result<std::unique_ptr<ChunkSource>> MakeHttpChunkSource(HttpChunkSourceOptions options) {
  TESSERA_ASSIGN_OR_RETURN(api::ServerUrl url, ParseControllerUrl(options.controller_url));
  if (options.tls.ca_file.empty() && options.tls.ca_sha256.empty()) {
    // Verified as the agent that started this rank verifies the controller.
    if (const char* f = std::getenv("TESSERA_CONTROLLER_CA_FILE")) options.tls.ca_file = f;
    if (const char* p = std::getenv("TESSERA_CONTROLLER_CA_SHA256")) options.tls.ca_sha256 = p;
  }
  if (options.job_id.empty()) return InvalidArgument("must be set", "TESSERA_JOB_ID");
  if (options.attempt < 1) return InvalidArgument("must be an attempt >= 1", "TESSERA_ATTEMPT");
  if (options.rank < 0) return InvalidArgument("must be >= 0", "RANK");
  try {
    return std::unique_ptr<ChunkSource>(
        std::make_unique<HttpChunkSource>(std::move(options), std::move(url)));
  } catch (const std::exception& e) {
    return Internal(std::string("creating the HTTP client: ") + e.what());
  }
}

// ---- MemoryChunkQueue ----

MemoryChunkQueue::MemoryChunkQueue(MemoryChunkQueueOptions options)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : SystemClock::Default()) {}

std::shared_ptr<MemoryChunkQueue> MemoryChunkQueue::Create(const std::vector<std::string>& items,
                                                           MemoryChunkQueueOptions options) {
  auto q = std::shared_ptr<MemoryChunkQueue>(new MemoryChunkQueue(options));
  const size_t n = static_cast<size_t>(std::max<int64_t>(1, options.chunk_size));
  for (size_t i = 0; i < items.size(); i += n) {
    ChunkRecord c;
    c.items.assign(items.begin() + static_cast<std::ptrdiff_t>(i),
                   items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), i + n)));
    q->chunks_.push_back(std::move(c));
  }
  return q;
}

void MemoryChunkQueue::ExpireLocked(std::chrono::steady_clock::time_point now) {
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.deadline <= now) {
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<api::LeaseResponse> MemoryChunkQueue::Lease(
    int64_t rank, const std::vector<api::CompletedChunk>& completed, int64_t max_chunks) {
  if (max_chunks < 0 || max_chunks > 64) {
    return InvalidArgument("must be between 0 and 64", "max_chunks");
  }
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t n = static_cast<int64_t>(chunks_.size());
  for (const api::CompletedChunk& c : completed) {
    TESSERA_RETURN_IF_ERROR(api::CheckCompletedChunk(c));  // as the controller refuses it
    if (c.chunk >= n) {
      return InvalidArgument("unknown chunk " + std::to_string(c.chunk), "completed");
    }
  }
  for (const api::CompletedChunk& c : completed) {
    ChunkRecord& rec = chunks_[static_cast<size_t>(c.chunk)];
    rec.done = true;
    ++rec.times_completed;
    rec.images_reported += c.images;
    leases_.erase(c.chunk);
  }
  const auto now = clock_->SteadyNow();
  const auto deadline = now + std::chrono::milliseconds(options_.lease_ms);
  ExpireLocked(now);
  for (auto& [chunk, lease] : leases_) {
    if (lease.rank == rank) lease.deadline = deadline;
  }
  api::LeaseResponse out;
  out.lease_ms = options_.lease_ms;
  // As the controller does (api/lease_protocol.h): chunks still leased to
  // the rank are sent again first, then free ones.
  for (const auto& [chunk, lease] : leases_) {
    if (static_cast<int64_t>(out.chunks.size()) >= max_chunks) break;
    if (lease.rank == rank)
      out.chunks.push_back({chunk, chunks_[static_cast<size_t>(chunk)].items});
  }
  for (int64_t i = 0; i < n && static_cast<int64_t>(out.chunks.size()) < max_chunks; ++i) {
    ChunkRecord& rec = chunks_[static_cast<size_t>(i)];
    if (rec.done || leases_.count(i) > 0) continue;
    leases_[i] = {rank, deadline};
    ++rec.times_leased;
    out.chunks.push_back({i, rec.items});
  }
  out.finished =
      std::all_of(chunks_.begin(), chunks_.end(), [](const ChunkRecord& c) { return c.done; });
  if (out.chunks.empty() && !out.finished) out.retry_after_ms = options_.retry_after_ms;
  return out;
}

std::unique_ptr<ChunkSource> MemoryChunkQueue::ForRank(int64_t rank) {
  return std::make_unique<QueueRankSource>(shared_from_this(), rank);
}

void MemoryChunkQueue::ReleaseRank(int64_t rank) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.rank == rank) {
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<MemoryChunkQueue::ChunkRecord> MemoryChunkQueue::Records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chunks_;
}

int64_t MemoryChunkQueue::num_chunks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(chunks_.size());
}

}  // namespace tessera::worker
