// End to end: a lab's own DDP script (ddp_checkpointing_worker.py, run by
// the project's Python with PyPI's torch) as a cmd: job on the real tesserad and
// three real tessera-agents with emulated devices of different speeds. Each
// rank takes its planned share of every global batch through
// python/tessera_shares.py; a node is killed mid-run, the job is re-planned on
// the survivors, resumes from the script's own checkpoint at the new shares,
// and ends where one process training on the whole global batch ends.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kTwoFast = InventoryYaml({{2, "A100 (emulated)", "80GiB", 0.6}});
const std::string kOneMid = InventoryYaml({{1, "RTX4090 (emulated)", "24GiB", 0.45}});
const std::string kTwoSlow = InventoryYaml({{2, "GTX1080 (emulated)", "8GiB", 0.2}});

// One "attempt rank world start step local/global" line of the script's trace.
struct Start {
  int attempt = 0, rank = 0, world = 0, step = 0, local = 0, global = 0;
};

TEST(DdpScriptE2ETest, NodeKilledMidRunResumesFromTheScriptsCheckpointAtNewShares) {
  // The project's Python (scripts/setup.sh puts PyPI's torch there); CI must run this.
  ASSERT_EQ(std::system("'" TESSERA_PYTHON "' -c 'import torch.distributed' >/dev/null 2>&1"), 0)
      << TESSERA_PYTHON << " cannot import torch.distributed (run scripts/setup.sh)";
  Cluster cluster("ddp-script");
  // As a lab runs a script from its virtual environment: a launcher that execs it.
  const fs::path launcher =
      ScriptLauncher(cluster.dir() / "ddp-script.sh", TESSERA_PYTHON, TESSERA_DDP_SCRIPT);
  cluster.StartController();
  cluster.StartAgent("boxa", kTwoFast);
  cluster.StartAgent("boxb", kOneMid);
  cluster.StartAgent("boxc", kTwoSlow);
  ASSERT_TRUE(cluster.NodesJoin(3));
  ASSERT_TRUE(cluster.AllowEntrypoint("cmd:ddp-script", launcher.string(),
                                      "a DDP script with uneven shares"));

  constexpr int kSteps = 50;
  // No "steps": Tessera cannot know a script's steps.
  api::JobId id = 0;
  ASSERT_TRUE(cluster.SubmitJob({{"name", "ddp-script"},
                                 {"entrypoint", "cmd:ddp-script"},
                                 {"args", {std::to_string(kSteps), "0.15"}},
                                 {"global_batch", 12},
                                 // Three devices: no node holds as many, so the plan
                                 // spans nodes whatever the agents measured.
                                 {"min_devices", 3},
                                 {"max_devices", 3},
                                 {"max_attempts", 4}},
                                &id));
  const fs::path ckdir =
      cluster.dir() / "controller" / "checkpoints" / ("job-" + std::to_string(id));

  ASSERT_TRUE(WaitFor([&] { return cluster.JobState(id) == "running"; }, 60s))
      << cluster.JobState(id) << "\n"
      << cluster.controller()->Log();
  const std::set<std::string> first_nodes = cluster.PlannedNodes(id);
  ASSERT_GE(first_nodes.size(), 2u) << "the plan should span nodes";
  // Let it train and checkpoint a few steps, then kill a node holding a rank.
  ASSERT_TRUE(WaitFor([&] { return fs::exists(ckdir / "ckpt.pt"); }, 60s))
      << ReadText(ckdir / "trace");
  std::this_thread::sleep_for(1500ms);
  const std::string victim = *first_nodes.begin();
  cluster.StopAgent(victim, SIGKILL);
  EXPECT_GT(KillProcessesUnder(cluster.dir() / ("agent-" + victim)), 0);

  ASSERT_TRUE(WaitFor([&] { return cluster.JobState(id) == "succeeded"; }, 180s))
      << cluster.JobState(id) << "\n"
      << ReadText(ckdir / "trace") << "\n"
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(id)).dump() << "\n"
      << cluster.controller()->Log();
  // The attempt ends when the node is declared lost, or earlier when a
  // survivor's collective fails on its dead peer and the survivor exits.
  int recoveries = 0;
  std::string reasons;
  for (const auto& e : cluster.Events(id)) {
    reasons += e.to_state + ": " + e.reason + "\n";
    if (e.to_state == "recovering") ++recoveries;
  }
  EXPECT_GE(recoveries, 1) << reasons;
  EXPECT_EQ(cluster.PlannedNodes(id).count(victim), 0u);

  // Every attempt's ranks cover the global batch exactly; the last attempt
  // resumed from the checkpoint, not from step 0.
  const std::string trace = ReadText(ckdir / "trace");
  std::map<int, std::vector<Start>> starts;
  std::optional<double> err;
  int done_step = -1, done_attempt = 0;
  std::istringstream lines(trace);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    Start s;
    std::string what;
    in >> s.attempt >> s.rank >> s.world >> what;
    if (what == "start") {
      char slash = 0;
      in >> s.step >> s.local >> slash >> s.global;
      starts[s.attempt].push_back(s);
    } else if (what == "done") {
      std::string word;
      double e = 0;
      in >> done_step >> word >> e;
      err = e;
      done_attempt = s.attempt;
    }
  }
  ASSERT_GE(starts.size(), 2u) << trace;
  for (const auto& [attempt, ranks] : starts) {
    int sum = 0;
    for (const Start& s : ranks) {
      sum += s.local;
      EXPECT_EQ(s.global, 12) << trace;
      EXPECT_EQ(s.world, static_cast<int>(ranks.size())) << trace;
    }
    EXPECT_EQ(sum, 12) << "attempt " << attempt << "\n" << trace;
  }
  const std::vector<Start>& last = starts.rbegin()->second;
  EXPECT_GT(last.front().step, 0) << "the last attempt started from scratch\n" << trace;
  EXPECT_EQ(done_attempt, starts.rbegin()->first) << trace;
  EXPECT_EQ(done_step, kSteps) << trace;
  ASSERT_TRUE(err.has_value()) << trace;
  EXPECT_LE(*err, 1e-5) << "the shares did not add up to global-batch SGD\n" << trace;
  std::printf("%s%s", reasons.c_str(), trace.c_str());
}

// A lab script whose first attempt dies mid-write of its checkpoint (an empty
// snapshot.pt, then SIGKILL): every later attempt fails at torch.load. The
// job's reason names the error from the script's traceback, and the second
// identical failure stops the job as a crash loop instead of spending all five
// attempts on "exited with code 1".
TEST(DdpScriptE2ETest, ACutCheckpointFailsAsANamedCrashLoop) {
  ASSERT_EQ(std::system("'" TESSERA_PYTHON "' -c 'import torch' >/dev/null 2>&1"), 0)
      << TESSERA_PYTHON << " cannot import torch (run scripts/setup.sh)";
  Cluster cluster("cut-checkpoint");
  const fs::path script = cluster.dir() / "resume.py";
  {
    std::ofstream out(script);
    out << "import os, signal, torch\n"
           "path = os.path.join(os.environ['TESSERA_CHECKPOINT_DIR'], 'snapshot.pt')\n"
           "def load_snapshot():\n"
           "    return torch.load(path)\n"
           "if os.path.exists(path):\n"
           "    state = load_snapshot()\n"
           "os.makedirs(os.path.dirname(path), exist_ok=True)\n"
           "open(path, 'wb').close()  # the write is cut here: the node dies\n"
           "os.kill(os.getpid(), signal.SIGKILL)\n";
  }
  const fs::path launcher = ScriptLauncher(cluster.dir() / "resume.sh", TESSERA_PYTHON, script);
  cluster.StartController();
  cluster.StartAgent("nodea", kOneMid);
  ASSERT_TRUE(cluster.NodesJoin(1));
  ASSERT_TRUE(cluster.AllowEntrypoint("cmd:resume", launcher.string()));
  api::JobId id = 0;
  ASSERT_TRUE(cluster.SubmitJob({{"name", "resume"},
                                 {"entrypoint", "cmd:resume"},
                                 {"global_batch", 4},
                                 {"min_devices", 1},
                                 {"max_devices", 1},
                                 {"max_attempts", 5}},
                                &id));
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  ASSERT_TRUE(WaitFor([&] { return cluster.JobState(id) == "failed"; }, 120s))
      << cluster.GetJson(path).dump(2);
  const api::Json end = cluster.GetJson(path);
  const std::string reason = end.value("reason", "");
  EXPECT_EQ(end.value("attempt", 0), 3) << "attempt 1 cut the file, 2 and 3 failed on it\n"
                                        << reason;
  // torch 2.x's weights-only loader raises a bare EOFError on an empty file.
  EXPECT_EQ(reason.rfind("crash loop: attempts 2 and 3 failed the same way before any progress: "
                         "rank 0 on nodea exited with code 1: EOFError",
                         0),
            0u)
      << reason;
  EXPECT_NE(reason.find("at resume.py:4 in load_snapshot: return torch.load(path)"),
            std::string::npos)
      << reason;
}

}  // namespace
}  // namespace tessera::testing
