// Inference in process: halo bounds measured on the real models, tiled ==
// whole image for every image model, item/output naming, the rank plan, and
// the infer loop against the in-memory chunk queue (every item once, resume
// after a simulated crash, byte-equal outputs, unreadable inputs).
#include "worker/runtime/inference.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "daemon/controller/attempt_launch.h"
#include "scheduler/layout.h"
#include "tests/worker/runtime/infer_test_util.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;
using testing::BuildTestNet;
using testing::FilesUnder;
using testing::MakeTempDir;
using testing::TestImage;
using testing::WriteTestCheckpoint;

constexpr int64_t kWidth = 4;

std::unique_ptr<InferenceModel> TestModel(const std::string& name, uint64_t seed = 3) {
  auto built = BuildTestNet(name, kWidth, seed);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  auto m = InferenceModel::FromNet(name, built->net);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

int64_t InputChannelsOf(const std::string& name) {
  return name == "colorize-unet" || name == "gan-pix2pix" ? 1 : 3;
}

// Perturbing one input pixel changes outputs only within the declared halo
// (eval mode: batch norm is per-pixel affine, so this is the receptive field).
TEST(InferenceModelTest, HaloCoversTheMeasuredReceptiveField) {
  for (const std::string name : {"colorize-unet", "denoiser-dncnn", "gan-pix2pix"}) {
    auto model = TestModel(name);
    const int64_t side = 192, c = InputChannelsOf(name);
    torch::manual_seed(11);
    const torch::Tensor base_in = torch::rand({c, side, side}) * 2 - 1;
    auto base = model->Forward(base_in);
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    int64_t reach = 0;
    for (int64_t p = 88; p < 96; ++p) {  // every alignment phase of the U-Net
      torch::Tensor in = base_in.clone();
      in.select(1, p).select(1, p) += 50.0;
      auto out = model->Forward(in);
      ASSERT_TRUE(out.ok());
      const torch::Tensor changed = ((*out - *base).abs().amax(0) > 0).nonzero();
      ASSERT_GT(changed.size(0), 0) << name;
      const torch::Tensor dist = (changed - p).abs().amax(1);
      reach = std::max(reach, dist.max().item<int64_t>());
    }
    EXPECT_LE(reach, model->geometry().halo_px) << name;
    EXPECT_GE(reach, model->geometry().halo_px / 2) << name << ": halo far too generous";
  }
}

// Tiled output equals the whole-image output within float tolerance, for an
// image that fits whole and needs several tiles in both directions.
TEST(InferenceModelTest, TiledEqualsWholeImage) {
  for (const std::string name : {"colorize-unet", "denoiser-dncnn", "gan-pix2pix"}) {
    auto model = TestModel(name);
    const Image image = TestImage(203, 150, 2, 5);
    auto input = model->Prepare(image);
    ASSERT_TRUE(input.ok());
    auto whole = RunImage(*model, *input, std::nullopt);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    const TileGeometry g = model->geometry();
    auto spec =
        EffectiveTileSpec({.tile_px = 2 * g.halo_px + 3 * g.align_px + 8, .overlap_px = 0}, g);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    const TileGrid grid = MakeTileGrid(PadTo(150, g.align_px), PadTo(203, g.align_px), *spec);
    EXPECT_GE(grid.rows, 2) << name;
    EXPECT_GE(grid.cols, 2) << name;
    auto tiled = RunImage(*model, *input, *spec);
    ASSERT_TRUE(tiled.ok()) << tiled.status().ToString();
    ASSERT_EQ(tiled->sizes(), whole->sizes());
    EXPECT_EQ(whole->size(1), 150);
    EXPECT_EQ(whole->size(2), 203);
    const double diff = (*tiled - *whole).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << name << " tiles of " << spec->tile_px;
  }
}

TEST(InferenceModelTest, ClassifierRunsWholeAndRefusesTiling) {
  auto model = TestModel("classifier-resnet");
  EXPECT_FALSE(model->spatial());
  EXPECT_EQ(model->output_extension(), ".json");
  auto input = model->Prepare(TestImage(40, 33, 1, 2));
  ASSERT_TRUE(input.ok());
  auto out = RunImage(*model, *input, TileSpec{16, 0});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->dim(), 1);
  EXPECT_EQ(out->size(0), static_cast<int64_t>(SamplePatternNames().size()));
}

TEST(InferenceItemsTest, OutputPaths) {
  struct Case {
    std::string item, ext, expect;  // expect "" = error
  };
  const Case cases[] = {
      {"a/0001.png", ".png", "/out/a/0001.png"},
      {"a/0001.JPG", ".png", "/out/a/0001.JPG.png"},
      {"x.png", ".json", "/out/x.png.json"},
      {"/data/in/b/c.png", ".png", "/out/b/c.png"},
      {"/elsewhere/c.png", ".png", "/out/elsewhere/c.png"},
      {"./a/../b.png", ".png", "/out/b.png"},
      {"../escape.png", ".png", ""},
      {"a/../../escape.png", ".png", ""},
      {"", ".png", ""},
  };
  for (const Case& c : cases) {
    auto p = OutputPathFor("/out", "/data/in", c.item, c.ext);
    if (c.expect.empty()) {
      EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << c.item;
    } else {
      ASSERT_TRUE(p.ok()) << c.item << ": " << p.status().ToString();
      EXPECT_EQ(*p, c.expect) << c.item;
    }
  }
}

TEST(InferenceItemsTest, ListsFoldersAndListFiles) {
  const fs::path dir = MakeTempDir("items");
  fs::create_directories(dir / "in" / "sub");
  fs::create_directories(dir / "in" / "out");
  for (const char* f : {"in/b.png", "in/a.JPG", "in/sub/c.jpeg", "in/notes.txt", "in/.hidden.png",
                        "in/out/done.png"}) {
    std::ofstream(dir / f) << "x";
  }
  auto items = ListInputItems((dir / "in").string(), (dir / "in" / "out").string());
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  EXPECT_EQ(*items, (std::vector<std::string>{"a.JPG", "b.png", "sub/c.jpeg"}));
  std::ofstream(dir / "list.txt") << "# scans\n\nin/b.png\n  /abs/x.png\r\n";
  auto listed = ListInputItems((dir / "list.txt").string());
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, (std::vector<std::string>{"in/b.png", "/abs/x.png"}));
  EXPECT_EQ(DataRoot((dir / "list.txt").string()), dir.string());
  EXPECT_EQ(DataRoot((dir / "in").string()), (dir / "in").string());
  EXPECT_EQ(ListInputItems((dir / "missing").string()).status().field(), "data");
  fs::create_directories(dir / "empty");
  EXPECT_EQ(ListInputItems((dir / "empty").string()).status().code(), StatusCode::kInvalidArgument);
  fs::remove_all(dir);
}

// `plan` parsed, a tiled plan with these rank weights and this tiling.
void ExpectTiledPlan(const Result<InferPlan>& plan, const std::vector<int64_t>& rank_weights,
                     int64_t tile_px, int64_t overlap_px) {
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->layout, scheduler::Layout::kTiled);
  EXPECT_EQ(plan->rank_weights, rank_weights);
  ASSERT_TRUE(plan->tiling.has_value());
  EXPECT_EQ(plan->tiling->tile_px, tile_px);
  EXPECT_EQ(plan->tiling->overlap_px, overlap_px);
}

TEST(InferPlanTest, ParsesLayoutWeightsAndTiling) {
  auto plan = ParseInferPlan(
      R"({"layout":"tiled","global_batch":6,"replicas":[
           {"batch":3,"stages":[{"rank":0,"device":"a:0","layers":[0,9]}]},
           {"batch":2,"stages":[{"rank":2,"device":"b:0","layers":[0,9]}]},
           {"batch":1,"stages":[{"rank":1,"device":"c:0","layers":[0,9]}]}],
          "tiling":{"tile_px":512,"overlap_px":184,"tiles_per_image":6}})",
      3);
  ExpectTiledPlan(plan, {3, 1, 2}, 512, 184);
  struct Bad {
    std::string json, field;
  };
  const Bad bad[] = {
      {R"({"replicas":[{"batch":1,"stages":[{"rank":5}]}]})", "replicas[0].stages[0].rank"},
      {R"({"replicas":[{"batch":-1,"stages":[]}]})", "replicas[0].batch"},
      {R"({"tiling":{"tile_px":"big"}})", "tiling.tile_px"},
      {R"({"layout":3})", "layout"},
      {R"({"layout":"ring"})", "layout"},
  };
  for (const Bad& b : bad) {
    auto p = ParseInferPlan(b.json, 3);
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << b.json;
    EXPECT_EQ(p.status().field(), b.field) << b.json;
  }
  EXPECT_EQ(ParseInferPlan("{", 1).status().code(), StatusCode::kInvalidArgument);
}

// The infer plan reads the rank plan tesserad writes for a tiled plan
// (daemon/controller/attempt_launch.h): layout, each rank's replica batch, the tiling.
TEST(InferPlanTest, ReadsTheTiledPlanTheControllerWrites) {
  scheduler::Plan plan;
  plan.layout = scheduler::Layout::kTiled;
  plan.schedule = scheduler::Schedule::kGPipe;
  plan.tiling = scheduler::Tiling{512, 64, 6};
  for (auto [node, index, batch] :
       {std::tuple<const char*, int, int64_t>{"boxa", 0, 3}, {"boxb", 0, 2}, {"boxb", 1, 1}}) {
    scheduler::Stage stage;
    stage.devices = {{node, index}};
    stage.layer_end = 9;
    scheduler::Replica replica;
    replica.batch = batch;
    replica.stages = {stage};
    plan.replicas.push_back(replica);
  }
  api::Job job;
  job.id = 7;
  job.spec.kind = api::JobKind::kInfer;
  job.spec.global_batch = 6;
  auto launch = daemon::BuildAttemptLaunch(job, 1, plan, api::Json::object(), {"builtin:m", ""},
                                           {{"boxa", "10.0.0.1"}, {"boxb", "10.0.0.2"}}, {});
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  ExpectTiledPlan(ParseInferPlan(launch->rank_plan.dump(), 3), {3, 2, 1}, 512, 64);
}

// ---- the loop against the in-memory controller ----

class InferLoopTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    data_ = dir_ / "scans";
    fs::create_directories(data_ / "box1");
    for (int i = 0; i < 7; ++i) {
      const Image img = TestImage(40 + 8 * (i % 3), 32 + 4 * i, i % 6, static_cast<uint64_t>(i));
      const fs::path p = data_ / (i < 3 ? "box1" : "") / ("scan-" + std::to_string(i) + ".png");
      ASSERT_TRUE(WritePng(p.string(), img).ok());
      items_.push_back(p.lexically_relative(data_).generic_string());
    }
    std::sort(items_.begin(), items_.end());
    env_.progress_file = (dir_ / "progress.jsonl").string();
  }

  std::string Checkpoint(const std::string& model) {
    const fs::path ck = dir_ / ("ck-" + model);
    if (!fs::exists(ck)) {
      auto built = BuildTestNet(model, kWidth, 9);
      EXPECT_TRUE(built.ok());
      EXPECT_TRUE(WriteTestCheckpoint(ck.string(), model, *built).ok());
    }
    return ck.string();
  }

  InferOptions Options(const std::string& model, const std::string& out) {
    InferOptions o;
    o.model = model;
    o.data = data_.string();
    o.output = (dir_ / out).string();
    o.checkpoint = Checkpoint(model);
    return o;
  }

  // Rank 0 alone running `o` over the queue, with this test's environment.
  Result<InferOutcome> RunAlone(const InferOptions& o, MemoryChunkQueue& queue) {
    auto source = queue.ForRank(0);
    return RunInference(o, env_, stop_, source.get());
  }

  // Rank 0 running `o` over the seven scans and `bad`, in chunks of 4 (the
  // queue into *queue_out when given): `bad` is the one failed item, the seven
  // scans are written.
  void RunWithOneBadItem(const InferOptions& o, const std::string& bad,
                         std::shared_ptr<MemoryChunkQueue>* queue_out = nullptr) {
    items_.push_back(bad);
    auto queue = MemoryChunkQueue::Create(items_, {.chunk_size = 4});
    if (queue_out != nullptr) *queue_out = queue;
    auto outcome = RunAlone(o, *queue);
    ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
    EXPECT_EQ(outcome->failed, 1);
    EXPECT_EQ(outcome->written, 7);
  }

  // `ranks` ranks (threads) running `o` over the queue at once; their outcomes by rank.
  std::vector<Result<InferOutcome>> RunRanks(int ranks, const InferOptions& o,
                                             MemoryChunkQueue& queue) {
    std::vector<Result<InferOutcome>> results(static_cast<size_t>(ranks), Internal("not run"));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        DistEnv env;
        env.rank = r;
        auto source = queue.ForRank(r);
        results[static_cast<size_t>(r)] = RunInference(o, env, stop_, source.get());
      });
    }
    for (auto& t : threads) t.join();
    return results;
  }

  // Options over the images of SameSizeItems, at most `batch` per forward.
  InferOptions SameSizeOptions(const std::string& model, const std::string& out, int64_t batch) {
    InferOptions o = Options(model, out);
    o.data = (dir_ / "same").string();
    o.batch = batch;
    return o;
  }

  // `n` images of width x height in <dir>/same, their items in order.
  std::vector<std::string> SameSizeItems(int n, int64_t width, int64_t height) {
    std::vector<std::string> items;
    fs::create_directories(dir_ / "same");
    for (int i = 0; i < n; ++i) {
      const std::string name = "img-" + std::to_string(100 + i) + ".png";
      EXPECT_TRUE(WritePng((dir_ / "same" / name).string(),
                           TestImage(width, height, i % 6, static_cast<uint64_t>(50 + i)))
                      .ok());
      items.push_back(name);
    }
    return items;
  }

  // `o` run by two ranks (threads) sharing a queue of `items` in chunks of
  // `chunk_size` writes every item once, the same bytes as one rank alone
  // (outputs in <dir>/two and <dir>/one, whatever o.output says).
  void ExpectTwoRanksWriteTheSameBytesAsOne(const InferOptions& o,
                                            const std::vector<std::string>& items,
                                            int64_t chunk_size) {
    InferOptions one = o;
    one.output = (dir_ / "one").string();
    auto one_queue = MemoryChunkQueue::Create(items, {.chunk_size = chunk_size});
    ASSERT_TRUE(RunAlone(one, *one_queue).ok());

    InferOptions two = o;
    two.output = (dir_ / "two").string();
    auto queue = MemoryChunkQueue::Create(items, {.chunk_size = chunk_size});
    int64_t written = 0;
    for (auto& r : RunRanks(2, two, *queue)) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      written += r->written;
    }
    EXPECT_EQ(written, static_cast<int64_t>(items.size()));
    EXPECT_EQ(FilesUnder(one.output).size(), items.size());
    EXPECT_EQ(FilesUnder(two.output), FilesUnder(one.output));
  }

  fs::path data_;
  std::vector<std::string> items_;
  DistEnv env_;
  std::atomic<bool> stop_{false};
};

TEST_F(InferLoopTest, EveryItemWrittenOnceAndReported) {
  auto queue = MemoryChunkQueue::Create(items_, {.chunk_size = 3});
  InferOptions o = Options("colorize-unet", "out");
  auto outcome = RunAlone(o, *queue);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(outcome->written, 7);
  EXPECT_EQ(outcome->skipped, 0);
  EXPECT_EQ(outcome->chunks, 3);
  auto files = FilesUnder(o.output);
  ASSERT_EQ(files.size(), items_.size());  // no temporary file left
  for (const std::string& item : items_) {
    ASSERT_TRUE(files.count(item)) << item;
    auto img = DecodePng(std::vector<uint8_t>(files[item].begin(), files[item].end()), item);
    ASSERT_TRUE(img.ok());
    auto src = ReadImage((data_ / item).string());
    EXPECT_EQ(img->width, src->width);
    EXPECT_EQ(img->height, src->height);
    EXPECT_EQ(img->channels, 3);
  }
  int64_t reported = 0;
  for (const auto& r : queue->Records()) {
    EXPECT_EQ(r.times_completed, 1);
    reported += r.images_reported;
  }
  EXPECT_EQ(reported, 7);
  // One progress line per chunk, in the JSON-lines format of training.
  std::ifstream progress(env_.progress_file);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(progress, line);)
    lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines.back().at("images_done").get<int>(), 7);
  EXPECT_EQ(lines.back().at("chunks_done").get<int>(), 3);
  EXPECT_GT(lines.back().at("images_per_s").get<double>(), 0.0);
  EXPECT_EQ(lines.back().at("rank").get<int>(), 0);
}

// A crash while chunk 1's outputs are made final (after its first output was
// renamed, before the second's rename: later outputs of the chunk are still
// temporary files), then the lease comes back: the rerun skips what is on
// disk, removes the temporary files, and the outputs are byte-equal to an
// uninterrupted run; every chunk is reported done once.
TEST_F(InferLoopTest, ResumeAfterCrashSkipsDoneItemsAndMatchesCleanRun) {
  auto clean_queue = MemoryChunkQueue::Create(items_, {.chunk_size = 3});
  InferOptions clean = Options("denoiser-dncnn", "clean");
  ASSERT_TRUE(RunAlone(clean, *clean_queue).ok());

  auto queue = MemoryChunkQueue::Create(items_, {.chunk_size = 3});
  InferOptions o = Options("denoiser-dncnn", "out");
  const std::string crash_at = fs::path(items_[4]).filename().string();  // chunk 1's second
  // One encode thread: a chunk's outputs are staged, and made final, in the
  // order they were encoded; with two, scan-4 may be staged before scan-3.
  o.encode_threads = 1;
  o.write_faults = [&crash_at](AtomicWriteStep step, const std::string& tmp) -> Status {
    if (step == AtomicWriteStep::kAfterSync && tmp.find(crash_at) != std::string::npos) {
      return Internal("simulated kill -9");
    }
    return Status::Ok();
  };
  EXPECT_EQ(RunAlone(o, *queue).status().code(), StatusCode::kInternal);
  auto partial = FilesUnder(o.output);
  const auto clean_files = FilesUnder(clean.output);
  int temps = 0;
  for (const auto& [name, bytes] : partial) {
    if (IsTempFileName(fs::path(name).filename().string())) {
      ++temps;
      continue;
    }
    EXPECT_EQ(bytes, clean_files.at(name)) << name << ": a final output must be complete";
  }
  // Chunk 0 whole and chunk 1's first output are final; chunk 1's second and
  // third outputs are temporary files (chunk 2's may or may not be written).
  EXPECT_TRUE(partial.count(items_[3])) << "chunk 1's first output was renamed before the crash";
  EXPECT_FALSE(partial.count(items_[4]));
  EXPECT_FALSE(partial.count(items_[5]));
  EXPECT_GE(temps, 2);
  // Chunk 0 is reported only if the loop saw it finish before the crash.
  EXPECT_FALSE(queue->Records()[1].done);
  // Items of the chunks left undone, and how many of them are final already.
  int64_t undone = 0, undone_final = 0;
  for (const auto& r : queue->Records()) {
    if (r.done) continue;
    for (const std::string& item : r.items) {
      ++undone;
      undone_final += partial.count(item);
    }
  }

  queue->ReleaseRank(0);  // the controller notices the crash
  o.write_faults = nullptr;
  auto source = queue->ForRank(1);
  auto resumed = RunInference(o, env_, stop_, source.get());
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->skipped + resumed->written, undone);
  EXPECT_EQ(resumed->skipped, undone_final);  // scan-3 at least
  EXPECT_GE(resumed->skipped, 1);
  EXPECT_EQ(queue->Records()[1].images_reported, 2);
  for (const auto& r : queue->Records()) EXPECT_EQ(r.times_completed, 1);
  EXPECT_EQ(FilesUnder(o.output), clean_files);  // and no temporary file left
}

// Two ranks (threads) sharing the queue produce the same bytes as one rank.
TEST_F(InferLoopTest, TwoRanksWriteTheSameBytesAsOne) {
  ExpectTwoRanksWriteTheSameBytesAsOne(Options("gan-pix2pix", "out"), items_, 2);
}

// Same-size images: with --batch 4 consecutive images of a chunk share a
// forward (chunks of 5: 4 + 1), and their outputs match one image at a time
// up to the kernels' float rounding (at most one level of 255).
TEST_F(InferLoopTest, SameSizeImagesShareForwardsAndMatchOneAtATime) {
  const std::vector<std::string> same = SameSizeItems(10, 48, 40);
  auto one_queue = MemoryChunkQueue::Create(same, {.chunk_size = 5});
  InferOptions one = SameSizeOptions("colorize-unet", "one", 1);
  auto alone = RunAlone(one, *one_queue);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->forwards, 10);

  auto queue = MemoryChunkQueue::Create(same, {.chunk_size = 5});
  InferOptions batched = SameSizeOptions("colorize-unet", "batched", 4);
  auto together = RunAlone(batched, *queue);
  ASSERT_TRUE(together.ok()) << together.status().ToString();
  EXPECT_EQ(together->written, 10);
  EXPECT_EQ(together->forwards, 4);  // per chunk of 5: a batch of 4, then 1

  const auto a = FilesUnder(one.output), b = FilesUnder(batched.output);
  ASSERT_EQ(a.size(), 10u);
  ASSERT_EQ(b.size(), 10u);
  for (const auto& [name, bytes] : a) {
    auto x = DecodePng(std::vector<uint8_t>(bytes.begin(), bytes.end()), name);
    auto y = DecodePng(std::vector<uint8_t>(b.at(name).begin(), b.at(name).end()), name);
    ASSERT_TRUE(x.ok() && y.ok()) << name;
    ASSERT_EQ(x->pixels.size(), y->pixels.size());
    int worst = 0;
    for (size_t i = 0; i < x->pixels.size(); ++i) {
      worst = std::max(worst, std::abs(int{x->pixels[i]} - int{y->pixels[i]}));
    }
    EXPECT_LE(worst, 1) << name;
  }
}

// The pixel budget caps a forward: 48 x 40 images with room for two per
// forward run 2 + 2 + 1 in a chunk of 5.
TEST_F(InferLoopTest, PixelBudgetCapsImagesPerForward) {
  const std::vector<std::string> same = SameSizeItems(5, 48, 40);
  auto queue = MemoryChunkQueue::Create(same, {.chunk_size = 5});
  InferOptions o = SameSizeOptions("denoiser-dncnn", "out", 8);
  o.batch_pixels = 2 * 48 * 40;
  auto r = RunAlone(o, *queue);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->written, 5);
  EXPECT_EQ(r->forwards, 3);
}

// Batches are formed from a chunk's items alone, so two ranks sharing the
// queue write the same bytes as one rank, whichever rank ran which chunk.
TEST_F(InferLoopTest, BatchedRanksWriteTheSameBytesAsOne) {
  const std::vector<std::string> same = SameSizeItems(9, 32, 40);
  ExpectTwoRanksWriteTheSameBytesAsOne(SameSizeOptions("gan-pix2pix", "out", 2), same, 3);
}

// A stop (SIGTERM) lets the model take no more images: the images it took are
// written (and made final, so a rerun skips them), the chunks of the lease
// already finished are reported, and the interrupted chunk is left to expire.
TEST_F(InferLoopTest, StopReportsFinishedChunksOfTheLease) {
  auto queue = MemoryChunkQueue::Create(items_, {.chunk_size = 2});
  InferOptions o = Options("denoiser-dncnn", "out");
  o.max_chunks = 3;  // chunks 0, 1, 2 in one lease
  int processed = 0;
  o.before_item = [&](const std::string&) {
    if (++processed == 3) stop_ = true;  // while the first item of chunk 1 runs
    return Status::Ok();
  };
  auto outcome = RunAlone(o, *queue);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_TRUE(outcome->stopped);
  EXPECT_EQ(outcome->written, 3);
  const auto records = queue->Records();
  EXPECT_TRUE(records[0].done);
  EXPECT_EQ(records[0].images_reported, 2);
  EXPECT_FALSE(records[1].done);
  EXPECT_EQ(FilesUnder(o.output).size(), 3u);
}

// Encode threads commit chunks at once: every chunk's time share is >= 0 (the
// controller refuses a negative one, which once failed a rank), over many
// one-item chunks with more encode threads than the default.
TEST_F(InferLoopTest, ChunksCommittedAtOnceReportTimesTheControllerTakes) {
  const std::vector<std::string> items = SameSizeItems(48, 12, 12);
  auto queue = MemoryChunkQueue::Create(items, {.chunk_size = 1});
  InferOptions o = SameSizeOptions("denoiser-dncnn", "out", 1);
  o.encode_threads = 6;
  o.max_chunks = 16;
  auto outcome = RunAlone(o, *queue);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();  // a refused report fails the run
  EXPECT_EQ(outcome->written, 48);
  for (const auto& r : queue->Records()) EXPECT_EQ(r.times_completed, 1);
  std::ifstream progress(env_.progress_file);
  int lines = 0;
  for (std::string line; std::getline(progress, line); ++lines) {
    EXPECT_GE(nlohmann::json::parse(line).at("chunk_s").get<double>(), 0.0) << line;
  }
  EXPECT_EQ(lines, 48);
}

TEST_F(InferLoopTest, UnreadableImageGetsAnErrorNoteAndTheRestIsDone) {
  std::ofstream(data_ / "broken.png") << "not a png";
  const InferOptions o = Options("classifier-resnet", "out");
  ASSERT_NO_FATAL_FAILURE(RunWithOneBadItem(o, "broken.png"));
  auto files = FilesUnder(o.output);
  ASSERT_TRUE(files.count("broken.png.json.error.txt"));
  EXPECT_NE(files["broken.png.json.error.txt"].find("broken.png"), std::string::npos);
  const auto j = nlohmann::json::parse(files.at(items_[0] + ".json"));
  EXPECT_EQ(j.at("item"), items_[0]);
  EXPECT_EQ(j.at("scores").size(), SamplePatternNames().size());
  double sum = 0;
  for (double s : j.at("scores")) sum += s;
  EXPECT_NEAR(sum, 1.0, 1e-9);
}

// An item whose output would leave the output folder is failed, not
// written anywhere, and its chunk is still done.
TEST_F(InferLoopTest, ItemLeavingTheOutputFolderCountsAsFailed) {
  const InferOptions o = Options("denoiser-dncnn", "out");
  std::shared_ptr<MemoryChunkQueue> queue;
  ASSERT_NO_FATAL_FAILURE(RunWithOneBadItem(o, "../outside.png", &queue));
  EXPECT_EQ(FilesUnder(o.output).size(), 7u);
  EXPECT_FALSE(fs::exists(dir_ / "outside.png"));
  for (const auto& r : queue->Records()) EXPECT_TRUE(r.done);
}

TEST_F(InferLoopTest, BadSetupIsAnInvalidArgument) {
  auto queue = MemoryChunkQueue::Create(items_, {});
  auto source = queue->ForRank(0);
  struct Case {
    std::function<void(InferOptions&)> change;
    std::string field;
  };
  const Case cases[] = {
      {[](InferOptions& o) { o.checkpoint = "/nonexistent/ck"; }, "checkpoint"},
      {[this](InferOptions& o) { o.checkpoint = (dir_ / "scans").string(); }, "checkpoint"},
      {[this](InferOptions& o) { o.checkpoint = Checkpoint("denoiser-dncnn"); }, "checkpoint"},
      {[](InferOptions& o) { o.model = "resnet-9000"; }, "model"},
      {[](InferOptions& o) { o.data = "/nonexistent/scans"; }, "data"},
      {[](InferOptions& o) { o.max_tile_px = 64; }, "tile_px"},  // < 2 x 56 + 8
  };
  for (const Case& c : cases) {
    InferOptions o = Options("colorize-unet", "out");
    c.change(o);
    auto r = RunInference(o, env_, stop_, source.get());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument)
        << c.field << ": " << r.status().ToString();
    EXPECT_EQ(r.status().field(), c.field) << r.status().ToString();
  }
}

}  // namespace
}  // namespace tessera::worker
