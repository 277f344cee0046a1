// Rank files: the folder every worker rank runs in, the same for ranks an
// agent supervises (agent/supervisor.h, <state> = its --state-dir) and ranks
// Slurm runs (slurm/launcher.h, <state> = the attempt's rank root):
//   <state>/jobs/<job>/<attempt>/rank-<r>/   (CreateRankDir: 0700 each)
//     plan.json        WorkerLaunch.plan (TESSERA_PLAN points here)
//     reform.json      WorkerLaunch.reform, its newest generation
//                      (TESSERA_REFORM_FILE points here; written by agents only)
//     progress.jsonl   the worker appends JSON lines (TESSERA_PROGRESS_FILE)
//     worker.log       stdout + stderr; rotated to worker.log.1 .. .N
//     worker.pid       pid, process group and identity, for re-adoption
//     exit.json        exit code once the worker ended
// and the readers of what workers write there (the agent's heartbeat and the
// Slurm pool report them).
// Thread safety: functions; concurrent calls on different folders are safe.
#ifndef TESSERA_LAUNCH_RANK_FILES_H_
#define TESSERA_LAUNCH_RANK_FILES_H_

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "common/status.h"

namespace tessera::launch {

struct RankPaths {
  std::filesystem::path dir;
  std::filesystem::path plan;
  std::filesystem::path reform;
  std::filesystem::path progress;
  std::filesystem::path log;
  std::filesystem::path pid;
  std::filesystem::path exit;
};
RankPaths RankPathsFor(const std::filesystem::path& state_dir, const api::WorkerKey& key);

// Who may enter a rank's folders besides the agent: nobody (the worker runs
// as the agent's account), or a worker running as another account.
struct RankDirAccess {
  bool other_account = false;
  gid_t group = 0;  // the worker account's primary group, with other_account
};

// Creates <state>/jobs and the rank's folders below it. Each of
// jobs/<job>, <attempt> and rank-<r> is owned by the agent and has mode 0700,
// so one job's plans, logs and progress are closed to every other account.
// For a worker of another account (RankDirAccess::other_account) they are
// 0710 with that account's group instead: it may enter them but not create,
// rename or replace anything there (the agent writes its own files in them as
// root); `state_dir` and jobs/ then get search permission (x) for others, not
// read. Existing folders are re-moded. kInternal naming the folder on
// failure.
Status CreateRankDir(const std::filesystem::path& state_dir, const RankPaths& paths,
                     const RankDirAccess& access);

// The last `max_lines` lines of `log` (continuing into log.1 when the live
// file holds fewer). A final line without newline is included. A line
// rewritten with '\r' (progress bars) keeps only its last rewrite, as a
// terminal shows it. Lines longer than `max_line_bytes` are cut, and the
// oldest lines are dropped until all fit in `max_total_bytes`, so heartbeats
// stay small whatever a worker prints.
std::vector<std::string> ReadLogTail(const std::filesystem::path& log, size_t max_lines = 100,
                                     size_t max_line_bytes = 1024,
                                     size_t max_total_bytes = 16 * 1024);

// The last complete (newline-terminated) line of `progress` that parses as
// JSON; null when none.
api::Json ReadLastProgress(const std::filesystem::path& progress);

// The newest complete lines of `progress` that parse as JSON objects, oldest
// first, at most `max_lines`, from the file's last 64 KiB.
std::vector<api::Json> ReadProgressLines(const std::filesystem::path& progress, size_t max_lines);

// When `log` is larger than `max_bytes`: shifts log.(i) to log.(i+1) (the
// oldest beyond `keep` is deleted), copies `log` to log.1 and truncates `log`
// to zero ("copytruncate": the worker keeps its O_APPEND descriptor, so this
// works for re-adopted workers too; lines written during the copy may be
// lost). keep == 0 just truncates. Returns true when it rotated.
bool RotateLogIfNeeded(const std::filesystem::path& log, int64_t max_bytes, int keep);

}  // namespace tessera::launch

#endif  // TESSERA_LAUNCH_RANK_FILES_H_
