// The simulator's inference jobs: the trace's kind column (bench/sched/
// trace.cc) and how the share policy's runs treat them (shared_run.cc), on
// the demo lab's devices.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "bench/sched/clusters.h"
#include "bench/sched/run.h"
#include "bench/sched/sim_planner.h"
#include "bench/sched/trace.h"
#include "tests/common/temp_dir.h"

namespace tessera::scheduler::sim {
namespace {

std::string WriteFile(const testing::TempDir& dir, const std::string& text) {
  const std::string path = dir.File("trace.csv");
  std::ofstream(path) << text;
  return path;
}

TraceJob Job(double submit_s, const std::string& user, JobKind kind, const std::string& model,
             int64_t batch, int64_t steps, int64_t max_devices) {
  return TraceJob{.submit_s = submit_s,
                  .user = user,
                  .model = model,
                  .global_batch = batch,
                  .steps = steps,
                  .max_devices = max_devices,
                  .kind = kind};
}

TEST(TraceTest, TheKindColumnMarksInferenceJobs) {
  testing::TempDir dir;
  Result<Trace> t = ReadTrace(WriteFile(dir, std::string(kCsvHeader) +
                                                 "\n0,alice,colorize-unet,32,500,1,0,0,infer\n"
                                                 "5,bob,denoiser-dncnn,16,100,1,2,0,train\n"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].kind, JobKind::kInfer);
  EXPECT_EQ(t->jobs[1].kind, JobKind::kTrain);

  // Written and read again, the kinds stay.
  const std::string copy = dir.File("copy.csv");
  ASSERT_TRUE(WriteTrace(*t, copy).ok());
  Result<Trace> again = ReadTrace(copy);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->jobs[0].kind, JobKind::kInfer);
  EXPECT_EQ(again->jobs[1].kind, JobKind::kTrain);
}

TEST(TraceTest, WithoutTheKindColumnEveryJobTrains) {
  testing::TempDir dir;
  Result<Trace> t = ReadTrace(
      WriteFile(dir, std::string(kCsvHeaderTrainOnly) + "\n0,alice,colorize-unet,16,500,1,2,0\n"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].kind, JobKind::kTrain);
}

TEST(TraceTest, AJobsImagesAreReadAndWrittenAgain) {
  testing::TempDir dir;
  Result<Trace> t = ReadTrace(WriteFile(dir, std::string(kCsvHeader) + "," + kCsvImageColumns +
                                                 "\n0,alice,colorize-unet,32,500,1,0,0,infer,"
                                                 "1024,768\n5,bob,denoiser-dncnn,16,100,1,2,0,"
                                                 "train,0,0\n"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].image_width, 1024);
  EXPECT_EQ(t->jobs[0].image_height, 768);
  EXPECT_EQ(t->jobs[1].image_width, 0);

  const std::string copy = dir.File("copy.csv");
  ASSERT_TRUE(WriteTrace(*t, copy).ok());
  Result<Trace> again = ReadTrace(copy);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->jobs[0].image_width, 1024);
  EXPECT_EQ(again->jobs[0].image_height, 768);
}

TEST(TraceTest, TheHeaderNamesTheColumnsInAnyOrderAndTheLastFourMayBeLeftOut) {
  testing::TempDir dir;
  Result<Trace> t = ReadTrace(WriteFile(dir,
                                        "user, model, steps, submit_s, global_batch, max_devices\n"
                                        "alice, colorize-unet, 500, 30, 16, 2\n"
                                        "bob, denoiser-dncnn, 200, 0, 32, 0\n"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  // By submission: bob's first.
  const TraceJob& bob = t->jobs[0];
  const TraceJob& alice = t->jobs[1];
  EXPECT_EQ(bob.user, "bob");
  EXPECT_EQ(bob.model, "denoiser-dncnn");
  EXPECT_EQ(bob.global_batch, 32);
  EXPECT_EQ(bob.steps, 200);
  EXPECT_DOUBLE_EQ(alice.submit_s, 30);
  EXPECT_EQ(alice.max_devices, 2);
  // What the header leaves out takes its default.
  EXPECT_EQ(alice.min_devices, 1);
  EXPECT_EQ(alice.priority, 0);
  EXPECT_EQ(alice.kind, JobKind::kTrain);
}

TEST(TraceTest, AHeaderWithAnUnknownRepeatedOrMissingColumnIsRefused) {
  const struct {
    std::string header;
    std::string says;
  } cases[] = {
      {"submit_s,user,model,global_batch,steps,gpus", "'gpus', not a column"},
      {"submit_s,user,model,global_batch,steps,user", "'user' twice"},
      {"submit_s,user,model,global_batch,min_devices", "no 'steps' column"},
      {"0,alice,colorize-unet,16,500,1,2,0", "'0', not a column"},
      {"submit_s,user,model,global_batch,steps,image_width", "go together"},
  };
  for (const auto& c : cases) {
    testing::TempDir dir;
    Result<Trace> t = ReadTrace(
        WriteFile(dir, "# a comment first\n" + c.header + "\n0,alice,colorize-unet,16,500,1\n"));
    ASSERT_FALSE(t.ok()) << c.header;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << c.header;
    EXPECT_NE(t.status().message().find(":2: "), std::string::npos) << t.status().ToString();
    EXPECT_NE(t.status().message().find(c.says), std::string::npos) << t.status().ToString();
  }
}

TEST(TraceTest, BadRowsNameTheirField) {
  const std::string kWithImages = std::string(kCsvHeader) + "," + kCsvImageColumns;
  const struct {
    std::string header;
    std::string row;
    std::string field;  // empty: the row's shape
  } cases[] = {
      {kCsvHeader, "0,alice,colorize-unet,32,500,1,0,0,predict", "kind"},
      {kCsvHeader, "0,alice,colorize-unet,32,500,1,0,0", ""},
      {kCsvHeaderTrainOnly, "0,alice,colorize-unet,32,500,1,0,0,infer", ""},
      {kCsvHeader, "0,alice,nosuch-model,32,500,1,0,0,infer", "model"},
      {kCsvHeader, "-1,alice,colorize-unet,32,500,1,0,0,infer", "submit_s"},
      {kCsvHeader, "0,alice,colorize-unet,x,500,1,0,0,infer", "global_batch"},
      {kCsvHeader, "0,alice,colorize-unet,0,500,1,0,0,infer", "global_batch"},
      {kCsvHeader, "0,alice,colorize-unet,32,0,1,0,0,train", "steps"},
      {kCsvHeader, "0,alice,colorize-unet,32,500,0,0,0,train", "min_devices"},
      {kCsvHeader, "0,alice,colorize-unet,32,500,2,1,0,train", "max_devices"},
      {kCsvHeader, "0,alice,colorize-unet,32,500,1,-1,0,train", "max_devices"},
      {kWithImages, "0,alice,colorize-unet,32,500,1,0,0,train,-1,64", "image_width"},
      {kWithImages, "0,alice,colorize-unet,32,500,1,0,0,train,64,100001", "image_height"},
      {kWithImages, "0,alice,colorize-unet,32,500,1,0,0,train,64,0", "image_width"},
      {kWithImages, "0,alice,colorize-unet,32,500,1,0,0,train,64,x", "image_height"},
  };
  for (const auto& c : cases) {
    testing::TempDir dir;
    Result<Trace> t = ReadTrace(WriteFile(dir, c.header + "\n" + c.row + "\n"));
    ASSERT_FALSE(t.ok()) << c.row;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << c.row;
    EXPECT_EQ(t.status().field(), c.field) << c.row << ": " << t.status().ToString();
    EXPECT_NE(t.status().message().find(":2: "), std::string::npos) << t.status().ToString();
  }
}

// Alice's archive alone on the lab, bob's training job 2 min later (within a
// training job's dwell time, past an archive's settling time).
Trace ArchiveThenTraining() {
  Trace trace;
  trace.name = "archive-then-training";
  trace.jobs.push_back(
      Job(0, "alice", JobKind::kInfer, "colorize-unet", 32, /*steps=*/60'000, /*max=*/0));
  trace.jobs.push_back(
      Job(120, "bob", JobKind::kTrain, "denoiser-dncnn", 16, /*steps=*/2'000, /*max=*/2));
  return trace;
}

TEST(SharedRunTest, AnArchiveGivesTrainingItsShareAndGrowsBackAfterIt) {
  const Trace trace = ArchiveThenTraining();
  const Cluster lab = DemoLab();
  SimPlanner planner(lab.snapshot);
  SharedOptions options;
  options.grow_min_speedup = 1.2;  // tesserad's rules
  const sim::Run run = SimulateShared(trace, lab, options, &planner);
  ASSERT_EQ(run.jobs.size(), 2u);
  const JobOutcome& archive = run.jobs[0];
  const JobOutcome& training = run.jobs[1];
  ASSERT_GE(archive.end_s, 0) << archive.why_not;
  ASSERT_GE(training.end_s, 0) << training.why_not;
  // Bob's job starts as it arrives, on devices the archive gave up, and the
  // archive takes them again once it has ended.
  EXPECT_DOUBLE_EQ(training.start_s, 120);
  const size_t shrink = archive.plan.find("-> shrink");
  ASSERT_NE(shrink, std::string::npos) << archive.plan;
  EXPECT_NE(archive.plan.find("-> grow", shrink), std::string::npos) << archive.plan;
  EXPECT_GT(archive.end_s, training.end_s);
  // Each job counts its own changes (the shrink and the growth at least), and
  // they add up to the run's.
  EXPECT_GE(archive.moves, 2);
  EXPECT_EQ(archive.moves + training.moves, run.moves);

  // Rigid, bob's job waits for the whole archive.
  const sim::Run rigid = SimulateRigid(trace, lab, QueueOrdering::kFifo, &planner);
  EXPECT_GE(rigid.jobs[1].start_s, rigid.jobs[0].end_s);
}

TEST(SharedRunTest, AnArchiveWhileNoneWaitsTakesEveryDeviceItsPlanUses) {
  Trace trace;
  trace.name = "archive-alone";
  trace.jobs.push_back(
      Job(0, "alice", JobKind::kInfer, "denoiser-dncnn", 32, /*steps=*/20'000, /*max=*/0));
  // A short training job holds two devices at first; when it ends the archive
  // grows onto them.
  trace.jobs.push_back(
      Job(0, "bob", JobKind::kTrain, "denoiser-dncnn", 16, /*steps=*/500, /*max=*/2));
  const Cluster lab = DemoLab();
  SimPlanner planner(lab.snapshot);
  SharedOptions options;
  options.grow_min_speedup = 1.2;
  const sim::Run run = SimulateShared(trace, lab, options, &planner);
  const JobOutcome& archive = run.jobs[0];
  ASSERT_GE(archive.end_s, 0) << archive.why_not;
  ASSERT_GE(run.jobs[1].end_s, 0) << run.jobs[1].why_not;
  const size_t grow = archive.plan.rfind("-> grow x");
  ASSERT_NE(grow, std::string::npos) << archive.plan;
  // The archive's plan on the whole lab, as the planner makes it alone there.
  Result<RateOnDevices> whole = planner.Rate(trace.jobs[0], 0, [&] {
    DeviceSet all;
    for (const Node& n : lab.snapshot.nodes) {
      for (const Device& d : n.devices) all.insert(DeviceId{n.name, d.index}.ToString());
    }
    return all;
  }());
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(archive.plan.substr(grow + 9, 1), std::to_string(whole->used.size())) << archive.plan;
}

// Alice's long job holds four devices at least; carol's short gang job of
// four arrives 15 min later (past the dwell time). Under share alice's goes
// back to the queue, carol's runs at once, and alice's restarts from its
// checkpoint after it; without restarts carol's waits for alice's end.
TEST(SharedRunTest, ALongJobGoesBackToTheQueueForAShortGangJob) {
  Trace trace;
  trace.name = "long-then-gang";
  trace.jobs.push_back(
      Job(0, "alice", JobKind::kTrain, "colorize-unet", 32, /*steps=*/20'000, /*max=*/0));
  trace.jobs.back().min_devices = 4;
  trace.jobs.push_back(
      Job(900, "carol", JobKind::kTrain, "classifier-resnet", 128, /*steps=*/30'000, /*max=*/4));
  trace.jobs.back().min_devices = 4;
  const Cluster lab = DemoLab();
  SimPlanner planner(lab.snapshot);
  for (bool restarts : {true, false}) {
    SCOPED_TRACE(restarts ? "restarts" : "no restarts");
    SharedOptions options;
    options.grow_min_speedup = 1.2;
    options.restart_moves = restarts;
    const sim::Run run = SimulateShared(trace, lab, options, &planner);
    const JobOutcome& alice = run.jobs[0];
    const JobOutcome& carol = run.jobs[1];
    ASSERT_GE(alice.end_s, 0) << alice.why_not;
    ASSERT_GE(carol.end_s, 0) << carol.why_not;
    if (!restarts) {
      EXPECT_EQ(alice.plan.find("requeue"), std::string::npos) << alice.plan;
      EXPECT_GE(carol.start_s, alice.end_s);
      continue;
    }
    EXPECT_DOUBLE_EQ(carol.start_s, 900);
    const size_t requeue = alice.plan.find("-> requeue");
    ASSERT_NE(requeue, std::string::npos) << alice.plan;
    EXPECT_NE(alice.plan.find("-> restart x", requeue), std::string::npos) << alice.plan;
    EXPECT_GT(alice.end_s, carol.end_s);
  }
}

// Five users' equal one-device jobs start together on the demo lab's five
// devices, and a sixth user's long job waits. The two on the GTX1080s would
// finish about 2.3x their time alone on a fair share (one device, the
// RTX4090); with the catch-up (the default) each swaps onto a faster device
// with a job that has done enough there to stay within 2x, so the last of
// the five ends sooner than without it (3808 s against 4199 s when written).
TEST(SharedRunTest, JobsOnTheSlowDevicesSwapOntoFasterOnesWithJobsAheadOfTheirShare) {
  Trace trace;
  trace.name = "five-equal";
  for (const char* user : {"alice", "bob", "carol", "dave", "erin"}) {
    trace.jobs.push_back(Job(0, user, JobKind::kTrain, "denoiser-dncnn", 16, 6000, 1));
  }
  trace.jobs.push_back(Job(0, "frank", JobKind::kTrain, "denoiser-dncnn", 16, 200'000, 1));
  const Cluster lab = DemoLab();
  SimPlanner planner(lab.snapshot);
  double last_end[2] = {0, 0};
  for (bool catch_up : {true, false}) {
    SCOPED_TRACE(catch_up ? "catch-up" : "no catch-up");
    SharedOptions options;
    options.grow_min_speedup = 1.2;
    if (!catch_up) options.share.catch_up_above = 0;
    const sim::Run run = SimulateShared(trace, lab, options, &planner);
    int swapped_up = 0, swapped_down = 0;
    for (size_t i = 0; i < 5; ++i) {
      const JobOutcome& o = run.jobs[i];
      ASSERT_GE(o.end_s, 0) << o.why_not;
      last_end[catch_up ? 0 : 1] = std::max(last_end[catch_up ? 0 : 1], o.end_s);
      const size_t first_move = o.plan.find("-> move x1 on ");
      if (first_move == std::string::npos) continue;
      const std::string to = o.plan.substr(first_move + 14, 4);
      swapped_up += o.plan.starts_with("x1 on boxc") && to == "boxa" ? 1 : 0;
      swapped_down += o.plan.starts_with("x1 on boxa") && to == "boxc" ? 1 : 0;
    }
    // (Without it, one moves up only once an A100 job has ended.)
    EXPECT_EQ(swapped_down, catch_up ? 2 : 0);
    if (catch_up) {
      EXPECT_EQ(swapped_up, 2);
    }
  }
  EXPECT_LT(last_end[0], last_end[1] * 0.95);
}

TEST(SharedRunTest, EveryJobOfAGeneratedDayWithArchivesEnds) {
  const Trace day = GenerateLabDay(/*seed=*/1, /*load=*/1);
  int archives = 0;
  for (const TraceJob& j : day.jobs) archives += j.kind == JobKind::kInfer ? 1 : 0;
  EXPECT_EQ(archives, 3);
  const Cluster lab = DemoLab();
  SimPlanner planner(lab.snapshot);
  for (double grow_min_speedup : {1.2, 0.0}) {
    SharedOptions options;
    options.grow_min_speedup = grow_min_speedup;
    const sim::Run run = SimulateShared(day, lab, options, &planner);
    for (size_t i = 0; i < run.jobs.size(); ++i) {
      EXPECT_GE(run.jobs[i].end_s, day.jobs[i].submit_s)
          << "job " << i + 1 << " under " << run.policy << ": " << run.jobs[i].why_not;
    }
  }
}

}  // namespace
}  // namespace tessera::scheduler::sim
