// SqliteStore (daemon/store/sqlite_store.h): inference chunks and their leases.

#include <string>
#include <utility>
#include <vector>

#include "daemon/store/sqlite_store.h"
#include "daemon/store/sqlite_store_rows.h"
#include "daemon/store/sqlite_util.h"

namespace tessera::daemon {
namespace {

// The job's counters (schema 8 keeps them as chunks change): one row read,
// however many chunks the job has.
Result<ChunkCounts> CountChunksOn(sqlite3* db, api::JobId job) {
  ChunkCounts c;
  TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db,
                                                 "SELECT chunks_total, images_total, chunks_done, "
                                                 "images_done, chunks_leased "
                                                 "FROM infer_chunk_counts WHERE job_id = ?"));
  q.Bind(1, job);
  TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return c;
  c.chunks_total = q.Int(0);
  c.images_total = q.Int(1);
  c.chunks_done = q.Int(2);
  c.images_done = q.Int(3);
  c.chunks_leased = q.Int(4);
  return c;
}

// Columns: chunk, items, state, attempt, rank, lease_until_ms, done_ms.
constexpr std::string_view kChunkColumns =
    "chunk, items, state, attempt, rank, lease_until_ms, done_ms";

Result<InferChunk> ChunkFromRow(const Stmt& q, api::JobId job) {
  InferChunk c;
  c.job_id = job;
  c.chunk = q.Int(0);
  TESSERA_ASSIGN_OR_RETURN(api::Json items, ParseJsonColumn(q, 1, "chunk items"));
  if (!items.is_array()) return Internal("stored chunk items are not an array");
  for (const api::Json& item : items) {
    if (!item.is_string()) return Internal("stored chunk item is not a string");
    c.items.push_back(item.get<std::string>());
  }
  auto state = ParseChunkState(q.Text(2));
  if (!state) return Internal("stored chunk state is unknown: " + q.Text(2));
  c.state = *state;
  c.attempt = q.Int(3);
  c.rank = q.Int(4);
  c.lease_until_ms = q.Int(5);
  c.done_ms = q.Int(6);
  return c;
}

// Each chunk's items as the JSON text of its `items` column (made before the write
// transaction, so the store's lock is not held for it).
std::vector<std::string> ChunkTexts(const std::vector<std::vector<std::string>>& chunks) {
  std::vector<std::string> texts;
  texts.reserve(chunks.size());
  for (const auto& items : chunks) texts.push_back(*JsonColumn(api::Json(items)));
  return texts;
}

// Inserts `chunks` as pending chunks first_chunk, first_chunk + 1, ...; on an error,
// *failed is the chunk whose insert failed.
Status InsertPendingChunks(sqlite3* db, api::JobId job, int64_t first_chunk,
                           const std::vector<std::vector<std::string>>& chunks,
                           const std::vector<std::string>& texts, int64_t* failed) {
  TESSERA_ASSIGN_OR_RETURN(Stmt ins, Stmt::Prepare(db,
                                                   "INSERT INTO infer_chunks "
                                                   "(job_id, chunk, items, images, state) "
                                                   "VALUES (?, ?, ?, ?, 'pending')"));
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int64_t chunk = first_chunk + static_cast<int64_t>(i);
    ins.Reset()
        .Bind(1, job)
        .Bind(2, chunk)
        .Bind(3, std::string_view(texts[i]))
        .Bind(4, static_cast<int64_t>(chunks[i].size()));
    if (Status st = ins.Run(); !st.ok()) {
      *failed = chunk;
      return st;
    }
  }
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------- infer chunks

Status SqliteStore::InsertChunks(api::JobId job,
                                 const std::vector<std::vector<std::string>>& chunks) {
  const std::vector<std::string> texts = ChunkTexts(chunks);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_RETURN_IF_ERROR(CheckJobExists(db, job));
    TESSERA_ASSIGN_OR_RETURN(
        Stmt any, Stmt::Prepare(db, "SELECT 1 FROM infer_chunks WHERE job_id = ? LIMIT 1"));
    any.Bind(1, job);
    TESSERA_ASSIGN_OR_RETURN(bool exists, any.Step());
    if (exists) return AlreadyExists("job " + std::to_string(job) + " already has chunks");
    int64_t failed = 0;
    TESSERA_RETURN_IF_ERROR(InsertPendingChunks(db, job, 0, chunks, texts, &failed));
    TESSERA_ASSIGN_OR_RETURN(
        Stmt seal, Stmt::Prepare(db, "UPDATE infer_chunk_counts SET sealed = 1 WHERE job_id = ?"));
    seal.Bind(1, job);
    return seal.Run();
  });
}

Status SqliteStore::AppendChunks(api::JobId job, int64_t first_chunk,
                                 const std::vector<std::vector<std::string>>& chunks) {
  if (first_chunk < 0) return InvalidArgument("must be >= 0", "first_chunk");
  const std::vector<std::string> texts = ChunkTexts(chunks);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_RETURN_IF_ERROR(CheckJobExists(db, job));
    int64_t failed = -1;
    Status st = InsertPendingChunks(db, job, first_chunk, chunks, texts, &failed);
    if (!st.ok() && failed >= 0) {
      return AlreadyExists("job " + std::to_string(job) + " already has chunk " +
                           std::to_string(failed));
    }
    return st;
  });
}

Status SqliteStore::SealChunks(api::JobId job) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_RETURN_IF_ERROR(CheckJobExists(db, job));
    TESSERA_ASSIGN_OR_RETURN(
        Stmt row,
        Stmt::Prepare(db, "INSERT OR IGNORE INTO infer_chunk_counts (job_id) VALUES (?)"));
    row.Bind(1, job);
    TESSERA_RETURN_IF_ERROR(row.Run());
    TESSERA_ASSIGN_OR_RETURN(
        Stmt seal, Stmt::Prepare(db, "UPDATE infer_chunk_counts SET sealed = 1 WHERE job_id = ?"));
    seal.Bind(1, job);
    return seal.Run();
  });
}

Result<bool> SqliteStore::ChunksSealed(api::JobId job) {
  bool sealed = false;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db, "SELECT sealed FROM infer_chunk_counts WHERE job_id = ?"));
    q.Bind(1, job);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    sealed = row && q.Int(0) != 0;
    return Status::Ok();
  }));
  return sealed;
}

Status SqliteStore::DeleteChunks(api::JobId job) {
  return Write([&](sqlite3* db) -> Status {
    for (const char* sql : {"DELETE FROM infer_chunks WHERE job_id = ?",
                            "DELETE FROM infer_chunk_counts WHERE job_id = ?"}) {
      TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, sql));
      q.Bind(1, job);
      TESSERA_RETURN_IF_ERROR(q.Run());
    }
    return Status::Ok();
  });
}

Result<ChunkLeaseResult> SqliteStore::LeaseChunks(const ChunkLeaseRequest& r) {
  TESSERA_RETURN_IF_ERROR(ValidateChunkLeaseRequest(r));
  ChunkLeaseResult out;
  TESSERA_RETURN_IF_ERROR(Write([&](sqlite3* db) -> Status {
    out = ChunkLeaseResult{};
    TESSERA_RETURN_IF_ERROR(CheckJobExists(db, r.job_id));
    TESSERA_ASSIGN_OR_RETURN(Stmt done, Stmt::Prepare(db,
                                                      "UPDATE infer_chunks SET state = 'done', "
                                                      "attempt = ?, rank = ?, done_ms = ? "
                                                      "WHERE job_id = ? AND chunk = ? "
                                                      "AND state <> 'done'"));
    for (int64_t chunk : r.completed) {
      done.Reset()
          .Bind(1, r.attempt)
          .Bind(2, r.rank)
          .Bind(3, r.now_ms)
          .Bind(4, r.job_id)
          .Bind(5, chunk);
      TESSERA_RETURN_IF_ERROR(done.Run());
      out.newly_done += sqlite3_changes(db);
    }
    TESSERA_ASSIGN_OR_RETURN(Stmt renew, Stmt::Prepare(db,
                                                       "UPDATE infer_chunks SET lease_until_ms = ? "
                                                       "WHERE job_id = ? AND state = 'leased' "
                                                       "AND attempt = ? AND rank = ?"));
    renew.Bind(1, r.lease_until_ms).Bind(2, r.job_id).Bind(3, r.attempt).Bind(4, r.rank);
    TESSERA_RETURN_IF_ERROR(renew.Run());
    if (r.max_chunks > 0) {
      // Chunks the rank still holds (an answer it never got) come first,
      // then pending chunks and reclaimable leases, lowest numbers first.
      std::vector<InferChunk> candidates;
      auto of_job = [&](const Stmt& row) { return ChunkFromRow(row, r.job_id); };
      {
        TESSERA_ASSIGN_OR_RETURN(
            Stmt held, Stmt::Prepare(db, "SELECT " + std::string(kChunkColumns) +
                                             " FROM infer_chunks WHERE job_id = ? AND "
                                             "state = 'leased' AND attempt = ? AND rank = ? "
                                             "ORDER BY chunk LIMIT ?"));
        held.Bind(1, r.job_id).Bind(2, r.attempt).Bind(3, r.rank).Bind(4, r.max_chunks);
        TESSERA_RETURN_IF_ERROR(held.AppendRows(of_job, &candidates));
      }
      const size_t resent = candidates.size();
      for (std::string_view where :
           {"state = 'pending'", "state = 'leased' AND (lease_until_ms <= ? OR attempt < ?)"}) {
        TESSERA_ASSIGN_OR_RETURN(
            Stmt q, Stmt::Prepare(db, "SELECT " + std::string(kChunkColumns) +
                                          " FROM infer_chunks WHERE job_id = ? AND " +
                                          std::string(where) + " ORDER BY chunk LIMIT ?"));
        q.Bind(1, r.job_id);
        if (where == "state = 'pending'") {
          q.Bind(2, r.max_chunks);
        } else {
          q.Bind(2, r.now_ms).Bind(3, r.attempt).Bind(4, r.max_chunks);
        }
        TESSERA_RETURN_IF_ERROR(q.AppendRows(of_job, &candidates));
      }
      std::sort(candidates.begin() + static_cast<std::ptrdiff_t>(resent), candidates.end(),
                [](const InferChunk& a, const InferChunk& b) { return a.chunk < b.chunk; });
      if (candidates.size() > static_cast<size_t>(r.max_chunks)) {
        candidates.resize(static_cast<size_t>(r.max_chunks));
      }
      TESSERA_ASSIGN_OR_RETURN(Stmt lease,
                               Stmt::Prepare(db,
                                             "UPDATE infer_chunks SET state = 'leased', "
                                             "attempt = ?, rank = ?, lease_until_ms = ? "
                                             "WHERE job_id = ? AND chunk = ?"));
      for (InferChunk& c : candidates) {
        lease.Reset()
            .Bind(1, r.attempt)
            .Bind(2, r.rank)
            .Bind(3, r.lease_until_ms)
            .Bind(4, r.job_id)
            .Bind(5, c.chunk);
        TESSERA_RETURN_IF_ERROR(lease.Run());
        c.state = ChunkState::kLeased;
        c.attempt = r.attempt;
        c.rank = r.rank;
        c.lease_until_ms = r.lease_until_ms;
        out.leased.push_back(std::move(c));
      }
    }
    TESSERA_ASSIGN_OR_RETURN(out.counts, CountChunksOn(db, r.job_id));
    return Status::Ok();
  }));
  return out;
}

Result<ChunkCounts> SqliteStore::CountChunks(api::JobId job) {
  ChunkCounts counts;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(counts, CountChunksOn(db, job));
    return Status::Ok();
  }));
  return counts;
}

Result<std::vector<InferChunk>> SqliteStore::ListChunks(api::JobId job) {
  std::vector<InferChunk> out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    out.clear();
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, "SELECT " + std::string(kChunkColumns) +
                                                           " FROM infer_chunks WHERE job_id = ? "
                                                           "ORDER BY chunk"));
    q.Bind(1, job);
    return q.AppendRows([&](const Stmt& row) { return ChunkFromRow(row, job); }, &out);
  }));
  return out;
}

}  // namespace tessera::daemon
