// End to end on a real Slurm cluster: munged, slurmctld, two slurmd ("fa":
// two a100, "fb": one t4; the GPUs are character devices, emulated for the
// ranks) and slurmrestd with JWT, all from Debian's packages, started by
// slurm_cluster.sh in a folder of their own. tesserad's Slurm pool turns the
// partition into nodes, a mixed training job runs as one heterogeneous Slurm
// job across both nodes, fb is marked down mid-run (scontrol), and the job is
// re-planned on fa alone and resumes from its checkpoint.
//
// Needs root (mknod, the munge and slurm service users) and the packages
// (scripts/setup.sh); skips saying which is missing. Everything the cluster
// script started is stopped in TearDown, whatever happened.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

bool PortFree(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

// The lowest port the kernel hands out for outgoing connections and port 0
// binds; ports below it are taken only by a listener that asks for them.
int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (!(in >> low) || low <= 20100) return 32768;
  return low;
}

// A base port with base..base+3 free (slurmctld, two slurmd, slurmrestd),
// below the ephemeral range, so the many loopback connections of tests running
// beside this one cannot take one between this check and the daemons' bind,
// and below tesserad's rendezvous ports (29500 on), which their workers bind.
int FreePortBlock(std::mt19937& rng) {
  const int span = std::min(EphemeralLow(), 29500) - 4 - 20000;
  for (int i = 0; i < 200; ++i) {
    int base = 20000 + static_cast<int>(rng() % static_cast<unsigned>(span));
    if (PortFree(base) && PortFree(base + 1) && PortFree(base + 2) && PortFree(base + 3)) {
      return base;
    }
  }
  return 0;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double Seconds(Steady::duration d) { return std::chrono::duration<double>(d).count(); }

class SlurmE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root: it starts munged and slurmd, makes GPU device nodes with "
                      "mknod and runs slurmrestd as the slurm service user";
    }
    for (const char* bin : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/slurmrestd",
                            "/usr/sbin/munged", "/usr/bin/scontrol", "/usr/bin/sinfo",
                            "/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so"}) {
      if (!fs::exists(bin)) {
        GTEST_SKIP() << "needs Debian's Slurm packages (scripts/setup.sh installs them): " << bin
                     << " is missing";
      }
    }
    if (::getpwnam("munge") == nullptr || ::getpwnam("slurm") == nullptr) {
      GTEST_SKIP() << "needs the munge and slurm service users (Debian's packages make them)";
    }
    ::setenv("TESSERA_TEST_NO_NETNS", "1", 1);  // no agents: loopback is enough
    // A daemon that loses its port to another listener between the check and
    // its bind fails to start: that try is stopped and the cluster started
    // again on another block.
    std::mt19937 rng(static_cast<unsigned>(::getpid()) ^ static_cast<unsigned>(time(nullptr)));
    const auto t0 = Steady::now();
    std::string failure;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (attempt > 0) StopSlurm();
      char tmpl[] = "/tmp/tessera-slurm-XXXXXX";
      ASSERT_NE(::mkdtemp(tmpl), nullptr);
      slurm_dir_ = tmpl;
      const int base = FreePortBlock(rng);
      ASSERT_GT(base, 0) << "no free ports";
      rest_port_ = base + 3;
      std::string start = "timeout 60 bash " + std::string(TESSERA_SLURM_CLUSTER_SCRIPT) +
                          " start " + slurm_dir_.string() + " " + std::to_string(base) + " " +
                          std::to_string(rest_port_) + " > " + (slurm_dir_ / "start.log").string() +
                          " 2>&1";
      started_ = true;
      if (std::system(start.c_str()) == 0) {
        failure.clear();
        break;
      }
      failure = ReadFile(slurm_dir_ / "start.log") +
                "munged: " + ReadFile(slurm_dir_ / "munge/munged.log") +
                "slurmctld: " + ReadFile(slurm_dir_ / "log/slurmctld.log") +
                "slurmd fa: " + ReadFile(slurm_dir_ / "log/slurmd-fa.log") +
                "slurmd fb: " + ReadFile(slurm_dir_ / "log/slurmd-fb.log") +
                "slurmrestd: " + ReadFile(slurm_dir_ / "log/slurmrestd.log");
      if (failure.find("Address already in use") == std::string::npos) break;
      std::cout << "a Slurm daemon lost its port to another listener; starting again\n";
    }
    ASSERT_TRUE(failure.empty()) << "the Slurm cluster did not start:\n" << failure;
    std::cout << "slurm cluster up in " << Seconds(Steady::now() - t0) << " s\n";

    cluster_ =
        std::make_unique<Cluster>(::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::ostringstream config;
    config << "slurm:\n"
           << "  url: http://127.0.0.1:" << rest_port_ << "\n"
           << "  user: root\n"
           << "  token_file: " << (slurm_dir_ / "jwt.token").string() << "\n"
           << "  partition: gpu\n"
           << "  launcher: " << TESSERA_SLURM_LAUNCHER << "\n"
           << "  poll_interval_ms: 200\n"
           << "  gpu_types:\n"
           << "    a100: {tflops: 0.1, relative_speed: 0.5, memory: 1GiB, emulated: true}\n"
           << "    t4: {tflops: 0.05, relative_speed: 0.25, memory: 1GiB, emulated: true}\n";
    cluster_->StartController(config.str());
    ASSERT_TRUE(cluster_->NodesJoin(2));
    ASSERT_TRUE(cluster_->AllowEntrypoint("cmd:checkpointing-worker", TESSERA_CHECKPOINTING_WORKER,
                                          "test worker that checkpoints"));
  }

  void TearDown() override {
    if (cluster_ && HasFailure()) {
      std::cout << "---- tesserad log ----\n"
                << ReadFile(cluster_->dir() / "tesserad-0.log") << "\n";
    }
    cluster_.reset();  // tesserad first: it would cancel nothing, Slurm stops its jobs below
    if (started_) {
      if (HasFailure()) {
        std::cout << "---- slurmctld log (tail) ----\n";
        std::string log = ReadFile(slurm_dir_ / "log/slurmctld.log");
        std::cout << log.substr(log.size() > 4000 ? log.size() - 4000 : 0) << "\n";
      }
      StopSlurm();
    }
  }

  // Stops every daemon started in slurm_dir_ and removes the folder.
  void StopSlurm() {
    std::string stop = "timeout 60 bash " + std::string(TESSERA_SLURM_CLUSTER_SCRIPT) + " stop " +
                       slurm_dir_.string() + " > /dev/null 2>&1";
    EXPECT_EQ(std::system(stop.c_str()), 0);
    std::error_code ec;
    fs::remove_all(slurm_dir_, ec);
    started_ = false;
  }

  void Scontrol(const std::string& args) {
    std::string cmd = "SLURM_CONF=" + (slurm_dir_ / "slurm.conf").string() + " scontrol " + args;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }

  fs::path CheckpointDir(api::JobId id) {
    return cluster_->dir() / "controller" / "checkpoints" / ("job-" + std::to_string(id));
  }

  api::Json Job(api::JobId id) { return cluster_->GetJson("/api/v1/jobs/" + std::to_string(id)); }

  fs::path slurm_dir_;
  int rest_port_ = 0;
  bool started_ = false;
  std::unique_ptr<Cluster> cluster_;
};

// A job of the checkpointing worker: `steps` steps of 0.1 s, 12 samples a
// step, on min_devices..max_devices devices.
api::Json CheckpointingJob(const std::string& name, int steps, int min_devices, int max_devices) {
  return {{"name", name},
          {"entrypoint", "cmd:checkpointing-worker"},
          {"args", {std::to_string(steps), "0.1"}},
          {"global_batch", 12},
          {"steps", steps},
          {"min_devices", min_devices},
          {"max_devices", max_devices}};
}

TEST_F(SlurmE2ETest, MixedJobRunsAsHetjobAndIsReplannedWhenANodeGoesDown) {
  // The partition's nodes are tesserad's, from Slurm.
  api::Json nodes = cluster_->GetJson("/api/v1/nodes");
  ASSERT_TRUE(nodes.contains("nodes")) << nodes.dump();
  std::map<std::string, api::Json> by_name;
  for (const auto& n : nodes["nodes"]) by_name[n["name"]] = n;
  ASSERT_EQ(by_name.size(), 2u) << nodes.dump();
  EXPECT_EQ(by_name["fa"]["source"], "slurm");
  EXPECT_EQ(by_name["fa"]["devices"].size(), 2u);
  EXPECT_EQ(by_name["fa"]["devices"][0]["name"], "a100");
  EXPECT_EQ(by_name["fb"]["devices"].size(), 1u);
  EXPECT_EQ(by_name["fb"]["devices"][0]["name"], "t4");

  int status = 0;
  const auto submitted = Steady::now();
  api::Json request = CheckpointingJob("slurm-e2e", 50, 2, 3);
  request["max_attempts"] = 4;
  api::Json job = cluster_->PostJson("/api/v1/jobs", request, &status);
  ASSERT_EQ(status, 201) << job.dump();
  const api::JobId id = job["id"];

  ASSERT_TRUE(WaitFor(
      [&] {
        std::string state = cluster_->JobState(id);
        return state == "running" || state == "failed";
      },
      60s));
  ASSERT_EQ(cluster_->JobState(id), "running") << Job(id).dump() << "\n"
                                               << ReadFile(slurm_dir_ / "log/slurmctld.log");
  const double to_running = Seconds(Steady::now() - submitted);
  EXPECT_EQ(cluster_->PlannedNodes(id), (std::set<std::string>{"fa", "fb"}));

  // One Slurm job, one component per kind of node.
  const fs::path rank_root = cluster_->dir() / "controller" / "checkpoints" / "slurm";
  api::Json first = api::Json::parse(
      ReadFile(rank_root / "jobs" / std::to_string(id) / "1" / "attempt.json"), nullptr, false);
  ASSERT_FALSE(first.is_discarded());
  ASSERT_EQ(first["mapping"]["components"].size(), 2u) << first["mapping"].dump();
  EXPECT_EQ(first["mapping"]["components"][0]["gres"], "gpu:a100:2");
  EXPECT_EQ(first["mapping"]["components"][1]["gres"], "gpu:t4:1");

  // Let it checkpoint, then Slurm loses fb.
  ASSERT_TRUE(WaitFor([&] { return fs::exists(CheckpointDir(id) / "step"); }, 30s));
  std::this_thread::sleep_for(500ms);
  const auto down = Steady::now();
  Scontrol("update nodename=fb state=down reason=tessera-e2e");

  ASSERT_TRUE(WaitFor(
      [&] {
        api::Json j = Job(id);
        return (j.value("attempt", 0) >= 2 && j.value("state", "") == "running") ||
               j.value("state", "") == "failed";
      },
      60s))
      << Job(id).dump() << "\n"
      << cluster_->controller()->Log();
  const double to_running_again = Seconds(Steady::now() - down);
  ASSERT_EQ(Job(id).value("state", ""), "running") << Job(id).dump();
  EXPECT_EQ(cluster_->PlannedNodes(id), (std::set<std::string>{"fa"}));

  ASSERT_TRUE(WaitFor([&] { return cluster_->JobState(id) == "succeeded"; }, 60s))
      << cluster_->JobState(id) << "\n"
      << cluster_->controller()->Log();
  bool lost = false;
  for (const auto& e : cluster_->Events(id)) {
    lost =
        lost || (e.to_state == "recovering" && e.reason.find("node fb lost") != std::string::npos);
  }
  EXPECT_TRUE(lost);
  // Attempt 2 ran on fa's two GPUs and resumed from the checkpoint.
  std::string trace = ReadFile(CheckpointDir(id) / "trace");
  EXPECT_NE(trace.find("1 2 3 start "), std::string::npos) << trace;  // attempt 1: 3 ranks
  EXPECT_NE(trace.find("2 0 2 start "), std::string::npos) << trace;
  EXPECT_EQ(trace.find("2 0 2 start 0\n"), std::string::npos) << "attempt 2 started over\n"
                                                              << trace;
  EXPECT_NE(trace.find("2 0 2 done 50\n"), std::string::npos) << trace;

  // Figures for the README (measured on this host, printed with the test).
  std::cout << "submit -> running: " << to_running
            << " s; node down -> running again: " << to_running_again << " s\n";
  RecordProperty("submit_to_running_s", std::to_string(to_running));
  RecordProperty("node_down_to_running_s", std::to_string(to_running_again));
}

// Cancelling the job cancels its Slurm job: Slurm signals the launchers,
// which pass SIGTERM on to the ranks.
TEST_F(SlurmE2ETest, CancelCancelsTheSlurmJob) {
  int status = 0;
  api::Json job =
      cluster_->PostJson("/api/v1/jobs", CheckpointingJob("slurm-cancel", 600, 3, 3), &status);
  ASSERT_EQ(status, 201) << job.dump();
  const api::JobId id = job["id"];
  ASSERT_TRUE(WaitFor([&] { return cluster_->JobState(id) == "running"; }, 60s)) << Job(id).dump();
  const std::string name = "tessera-" + std::to_string(id) + "-1";
  auto slurm_state = [&] {
    std::string cmd = "SLURM_CONF=" + (slurm_dir_ / "slurm.conf").string() +
                      " squeue --states=all -h -n " + name + " -o %T > " +
                      (slurm_dir_ / "squeue.out").string() + " 2>&1";
    if (std::system(cmd.c_str()) != 0) return std::string("squeue failed");
    return ReadFile(slurm_dir_ / "squeue.out");
  };
  EXPECT_NE(slurm_state().find("RUNNING"), std::string::npos) << slurm_state();

  cluster_->PostJson("/api/v1/jobs/" + std::to_string(id) + "/cancel", api::Json::object(),
                     &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(cluster_->JobState(id), "cancelled");
  // Every component ends cancelled, and every rank saw SIGTERM (143).
  ASSERT_TRUE(WaitFor(
      [&] {
        std::string s = slurm_state();
        return s.find("CANCELLED") != std::string::npos && s.find("RUNNING") == std::string::npos &&
               s.find("COMPLETING") == std::string::npos;
      },
      30s))
      << slurm_state();
  const fs::path rank_root =
      cluster_->dir() / "controller" / "checkpoints" / "slurm" / "jobs" / std::to_string(id) / "1";
  for (int rank = 0; rank < 3; ++rank) {
    const fs::path exit = rank_root / ("rank-" + std::to_string(rank)) / "exit.json";
    ASSERT_TRUE(WaitFor([&] { return fs::exists(exit); }, 20s)) << exit;
    api::Json code = api::Json::parse(ReadFile(exit), nullptr, false);
    EXPECT_EQ(code.value("exit_code", -1), 143) << rank << ": " << code.dump();
  }
}

}  // namespace
}  // namespace tessera::testing
