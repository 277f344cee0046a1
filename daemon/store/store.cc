#include "daemon/store/store.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "api/entrypoint_kind.h"
#include "common/enum_names.h"
#include "daemon/auth/token_crypto.h"

namespace tessera::daemon {

Status ValidateNodeHealth(std::string_view health) {
  if (health == "healthy" || health == "suspect" || health == "dead") return Status::Ok();
  return InvalidArgument("must be healthy, suspect or dead", "health");
}

Status ValidateNode(const api::Node& node) {
  if (node.name.empty()) return InvalidArgument("must not be empty", "node");
  TESSERA_RETURN_IF_ERROR(ValidateNodeHealth(node.health));
  std::set<int64_t> seen;
  for (size_t i = 0; i < node.devices.size(); ++i) {
    if (!seen.insert(node.devices[i].index).second) {
      return InvalidArgument("duplicate device index " + std::to_string(node.devices[i].index),
                             "devices[" + std::to_string(i) + "].index");
    }
  }
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (size_t i = 0; i < node.links.size(); ++i) {
    const api::DeviceLink& l = node.links[i];
    const std::string field = "links[" + std::to_string(i) + "]";
    if (!seen.contains(l.a) || !seen.contains(l.b) || l.a >= l.b) {
      return InvalidArgument("must join two devices of the node, a < b", field);
    }
    if (!pairs.insert({l.a, l.b}).second) return InvalidArgument("duplicate device pair", field);
  }
  return Status::Ok();
}

Result<api::Job> PendingJobOf(const NewJob& in) {
  if (in.owner.empty()) return InvalidArgument("must not be empty", "owner");
  api::Job job;
  job.owner = in.owner;
  job.spec = in.spec;
  job.state = api::JobState::kPending;
  job.created_ms = in.now_ms;
  job.updated_ms = in.now_ms;
  job.reason = in.reason;
  return job;
}

Status ValidateEntrypoint(const api::Entrypoint& e) {
  const api::EntrypointKind kind = api::EntrypointKindOf(e.name);
  if (kind == api::EntrypointKind::kUnknown || api::EntrypointId(e.name).empty()) {
    return InvalidArgument("must be builtin:<name>, cmd:<name> or model:<name>", "name");
  }
  if (!api::HasCommandPath(kind)) {
    if (!e.command.empty()) return InvalidArgument("must be empty for builtin:", "command");
    return Status::Ok();
  }
  if (e.command.empty() || e.command.front() != '/') {
    return InvalidArgument(
        "must be an absolute path for " + std::string(api::EntrypointPrefix(kind)), "command");
  }
  return Status::Ok();
}

Status ValidateTokenRecord(const TokenRecord& record) {
  if (record.info.id.empty()) return InvalidArgument("must not be empty", "id");
  if (record.info.user.empty()) return InvalidArgument("must not be empty", "user");
  return Status::Ok();
}

Status ValidateNodeCredentialRecord(const NodeCredentialRecord& record) {
  if (record.enrolment.node.empty()) return InvalidArgument("must not be empty", "node");
  if (record.enrolment.credential_id.empty()) {
    return InvalidArgument("must not be empty", "credential_id");
  }
  return Status::Ok();
}

Result<IssuedToken> Store::CreateToken(std::string_view user, api::Role role, int64_t now_ms) {
  if (user.empty()) return InvalidArgument("must not be empty", "user");
  TESSERA_ASSIGN_OR_RETURN(FreshToken fresh, MakeFreshToken());
  TokenRecord record{TokenInfo{fresh.parts.id, std::string(user), role, now_ms, std::nullopt},
                     SecretDigest{std::move(fresh.salt), std::move(fresh.hash)}};
  TESSERA_RETURN_IF_ERROR(InsertToken(record));
  return IssuedToken{std::move(record.info), FormatApiToken(fresh.parts)};
}

Status Store::SetAgentJoinToken(std::string_view plaintext) {
  if (plaintext.empty()) return InvalidArgument("must not be empty", "join_token");
  SecretDigest digest;
  TESSERA_ASSIGN_OR_RETURN(digest.salt, RandomHex(16));
  TESSERA_ASSIGN_OR_RETURN(digest.hash, SaltedSha256(digest.salt, plaintext));
  return PutAgentJoinToken(digest);
}

constexpr EnumName<ChunkState> kChunkStateNames[] = {
    {ChunkState::kPending, "pending"},
    {ChunkState::kLeased, "leased"},
    {ChunkState::kDone, "done"},
};
static_assert(IsValidNameTable(kChunkStateNames));

std::string_view ChunkStateName(ChunkState state) { return NameOf(kChunkStateNames, state); }

std::optional<ChunkState> ParseChunkState(std::string_view name) {
  return ParseName(kChunkStateNames, name);
}

Status ValidateChunkLeaseRequest(const ChunkLeaseRequest& r) {
  if (r.attempt < 1) return InvalidArgument("must be >= 1", "attempt");
  if (r.rank < 0) return InvalidArgument("must be >= 0", "rank");
  if (r.max_chunks < 0) return InvalidArgument("must be >= 0", "max_chunks");
  if (r.lease_until_ms < r.now_ms)
    return InvalidArgument("must not be before now", "lease_until_ms");
  return Status::Ok();
}

bool ChunkLeasable(const InferChunk& c, const ChunkLeaseRequest& r) {
  if (c.state == ChunkState::kPending) return true;
  if (c.state != ChunkState::kLeased) return false;
  return c.lease_until_ms <= r.now_ms || c.attempt < r.attempt;
}

int64_t ClampStoreLimit(int64_t limit) { return std::clamp<int64_t>(limit, 1, 1000); }

Status ValidateProgressReport(const ProgressReport& report) {
  for (size_t i = 0; i < report.points.size(); ++i) {
    const api::MetricPoint& p = report.points[i].point;
    const std::string field = "points[" + std::to_string(i) + "]";
    if (p.step < 0) return InvalidArgument("must be >= 0", field + ".step");
    if (p.rank < 0) return InvalidArgument("must be >= 0", field + ".rank");
  }
  return Status::Ok();
}

bool MetricPageOrder(const api::MetricPoint& a, const api::MetricPoint& b) {
  return std::tie(a.step, a.attempt, a.rank) < std::tie(b.step, b.attempt, b.rank);
}

Result<api::MetricsPage> CutMetricsPage(
    api::JobId job, std::vector<api::MetricPoint> rows, int64_t limit,
    const std::function<Result<std::vector<api::MetricPoint>>(int64_t step)>& whole_step) {
  api::MetricsPage page;
  page.job_id = job;
  const auto n = static_cast<size_t>(std::max<int64_t>(limit, 1));
  if (rows.size() > n) {
    const int64_t cut_step = rows[n].step;  // the first step that did not fit whole
    size_t keep = n;
    while (keep > 0 && rows[keep - 1].step == cut_step) --keep;
    if (keep == 0) {
      TESSERA_ASSIGN_OR_RETURN(rows, whole_step(cut_step));
    } else {
      rows.resize(keep);
    }
    page.next_since = rows.empty() ? cut_step : rows.back().step;
  }
  page.points = std::move(rows);
  return page;
}

}  // namespace tessera::daemon
