// The tessera CLI against a real HttpServer on a loopback port (the router
// over the in-test FakeControlPlane), plus its config and spec-file parsing.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "api/http_server.h"
#include "api/server_url.h"
#include "cli/cli_app.h"
#include "cli/client_config.h"
#include "cli/job_spec_file.h"
#include "tests/api/fake_control_plane.h"
#include "tests/cli/builders.h"
#include "tests/common/temp_dir.h"

namespace tessera::cli {
namespace {

using Env = std::map<std::string, std::string>;
using tessera::testing::TempDir;
using testing::Point;
using testing::WriteFile;

EnvLookup LookupIn(Env env) {
  return [env = std::move(env)](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

// ---- config ----

TEST(ClientConfigTest, FlagsBeatEnvBeatFileBeatDefault) {
  TempDir dir;
  WriteFile(dir, "tessera/cli.yaml", "server: http://file:1\ntoken: file-token\ntimeout_s: 3\n");
  Env env = {{"XDG_CONFIG_HOME", dir.path().string()}};

  auto from_file = ResolveClientConfig({}, LookupIn(env));
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->server, "http://file:1");
  EXPECT_EQ(from_file->token, "file-token");
  EXPECT_EQ(from_file->timeout, std::chrono::seconds(3));

  env["TESSERA_SERVER"] = "http://env:2";
  env["TESSERA_TOKEN"] = "env-token";
  auto from_env = ResolveClientConfig({}, LookupIn(env));
  EXPECT_EQ(from_env->server, "http://env:2");
  EXPECT_EQ(from_env->token, "env-token");

  ClientFlags flags;
  flags.server = "http://flag:3";
  flags.token = "flag-token";
  auto from_flags = ResolveClientConfig(flags, LookupIn(env));
  EXPECT_EQ(from_flags->server, "http://flag:3");
  EXPECT_EQ(from_flags->token, "flag-token");

  auto defaults = ResolveClientConfig({}, LookupIn({}));
  EXPECT_EQ(defaults->server, "http://127.0.0.1:8080");
  EXPECT_TRUE(defaults->token.empty());
}

TEST(ClientConfigTest, BadFilesNameTheProblem) {
  TempDir dir;
  ClientFlags flags;
  flags.config_path = WriteFile(dir, "a.yaml", "sever: http://typo:1\n");
  EXPECT_EQ(ResolveClientConfig(flags, LookupIn({})).status().field(), "sever");
  flags.config_path = (dir.path() / "missing.yaml").string();
  EXPECT_EQ(ResolveClientConfig(flags, LookupIn({})).status().field(), "config");
}

// The CLI takes a server address by the rule every client follows
// (api/server_url.h): the same text is accepted or refused, naming "server".
TEST(ServerFlagTest, FollowsTheOneServerUrlRule) {
  for (const char* url :
       {"http://127.0.0.1:8080", "http://boxA:9000/", "http://boxA", "boxA:7", "boxA",
        "http://[::1]:8080", "[::1]:8080", "https://boxA", "https://boxA:8443", "ftp://boxA:80",
        "http://boxA:0", "http://boxA:99999", "http://boxA:x", "boxA:", "http://:80",
        "http://boxA:80/api", "http://user@boxA:80", "not a url"}) {
    ClientFlags flags;
    flags.server = url;
    auto config = ResolveClientConfig(flags, LookupIn({}));
    auto parsed = api::ParseServerUrl(url, "server");
    ASSERT_EQ(config.ok(), parsed.ok()) << url;
    if (!config.ok()) {
      EXPECT_EQ(config.status().field(), "server") << url;
      EXPECT_EQ(config.status().message(), parsed.status().message()) << url;
    }
  }
}

// ---- spec files ----

TEST(JobSpecFileTest, YamlAndJsonGiveTheSameSpec) {
  auto from_yaml = ParseJobSpecText(
      "name: colorize\nentrypoint: builtin:colorize-unet\nglobal_batch: 256\nsteps: 100\n"
      "args: [--lr, \"0.1\"]\nenv: {OMP_NUM_THREADS: \"4\"}\n",
      "job.yaml");
  auto from_json = ParseJobSpecText(
      R"({"name":"colorize","entrypoint":"builtin:colorize-unet","global_batch":256,)"
      R"("steps":100,"args":["--lr","0.1"],"env":{"OMP_NUM_THREADS":"4"}})",
      "job.json");
  ASSERT_TRUE(from_yaml.ok()) << from_yaml.status().ToString();
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  EXPECT_EQ(*from_yaml, *from_json);
}

TEST(JobSpecFileTest, ErrorsNameTheField) {
  EXPECT_EQ(ParseJobSpecText("name: a\nglobal_batch: lots\n", "j.yaml").status().field(),
            "global_batch");
  EXPECT_EQ(ParseJobSpecText("{", "j.json").status().field(), "file");
  EXPECT_EQ(ParseJobSpecText("a: [", "j.yaml").status().field(), "file");
}

// ---- commands against a real server ----

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<api::HttpServer>(
        api::HttpServerOptions{}, [this](const api::Request& r) { return router_.Handle(r); });
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Stop(); }

  // Runs `tessera <args>` with the server and token in the environment.
  int Run(std::vector<std::string> args, Env env = {}) {
    args.insert(args.begin(), "tessera");
    if (!env.count("TESSERA_SERVER")) {
      env["TESSERA_SERVER"] = "http://127.0.0.1:" + std::to_string(server_->port());
    }
    if (!env.count("TESSERA_TOKEN")) env["TESSERA_TOKEN"] = "user-token";
    env["HOME"] = "/nonexistent";
    out_.str("");
    err_.str("");
    return RunCli(args, out_, err_, {}, LookupIn(env));
  }

  api::testing::FakeControlPlane cp_;
  api::Router router_{cp_, api::RouterOptions{}};
  std::unique_ptr<api::HttpServer> server_;
  std::ostringstream out_, err_;
};

TEST_F(CliTest, SubmitWithFlagsThenListAndShow) {
  ASSERT_EQ(Run({"submit", "--name", "colorize", "--entrypoint", "builtin:colorize-unet",
                 "--global-batch", "64", "--steps", "10", "--env", "OMP_NUM_THREADS=2"}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(out_.str(), "submitted job 1 (pending)\n");
  EXPECT_EQ(cp_.last_spec->env.at("OMP_NUM_THREADS"), "2");

  ASSERT_EQ(Run({"jobs"}), kExitOk) << err_.str();
  EXPECT_NE(out_.str().find("ID"), std::string::npos);
  EXPECT_NE(out_.str().find("colorize"), std::string::npos);

  ASSERT_EQ(Run({"job", "1"}), kExitOk) << err_.str();
  EXPECT_NE(out_.str().find("builtin:colorize-unet"), std::string::npos);
  EXPECT_NE(out_.str().find("devices:       1 or more, elastic\n"), std::string::npos)
      << out_.str();

  ASSERT_EQ(
      Run({"submit", "--name", "fixed", "--entrypoint", "builtin:colorize-unet", "--global-batch",
           "64", "--steps", "10", "--min-devices", "2", "--max-devices", "4", "--no-elastic"}),
      kExitOk)
      << err_.str();
  EXPECT_FALSE(cp_.last_spec->elastic);
  ASSERT_EQ(Run({"job", "2"}), kExitOk) << err_.str();
  EXPECT_NE(
      out_.str().find("devices:       2 to 4, not elastic (keeps the devices it starts on)\n"),
      std::string::npos)
      << out_.str();

  ASSERT_EQ(Run({"--json", "cancel", "1"}), kExitOk) << err_.str();
  EXPECT_EQ(api::Json::parse(out_.str())["state"], "cancelled");
}

TEST_F(CliTest, SubmitInferJobAndShowItsProgress) {
  ASSERT_EQ(Run({"submit", "--name", "colorize-1931", "--kind", "infer", "--entrypoint",
                 "builtin:colorize-unet", "--dataset", "/srv/scans", "--output", "/srv/out",
                 "--checkpoint", "/srv/ckpt", "--global-batch", "4", "--image-width", "12000",
                 "--image-height", "9000"}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(cp_.last_spec->kind, api::JobKind::kInfer);
  EXPECT_EQ(cp_.last_spec->image_width, 12000);
  EXPECT_EQ(cp_.last_spec->image_height, 9000);

  cp_.SetInference(1, api::ToJson(testing::InferenceUnderWay()));
  // An infer rank's newest report counts chunks, not steps: the inference
  // lines below say it.
  cp_.UpdateJob(1, [](api::Job& j) {
    j.progress = api::Json::parse(R"({"chunk": 18, "chunks_done": 19, "images_done": 600})");
  });
  ASSERT_EQ(Run({"job", "1"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str().find("progress:"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("images   6400 / 10000  64.0%\n"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("speed    812.5 images/s  eta 4.4 s\n"), std::string::npos);
  EXPECT_NE(out_.str().find("rank 1   b:1   3200 images   402.2 images/s\n"), std::string::npos);
  EXPECT_EQ(out_.str().find("[#"), std::string::npos) << "no bar when not on a terminal";
}

TEST_F(CliTest, AJobsPlanAndProgressReadAsTextNotJson) {
  const api::JobId id = cp_.AddJob("alice", api::JobState::kRunning);
  cp_.UpdateJob(id, [](api::Job& j) {
    j.spec.steps = 500;
    j.progress = api::Json::parse(R"({"step": 120, "loss": 0.04321, "samples_per_s": 38.84})");
    j.plan = api::Json::parse(R"({"layout": "hybrid", "micro_batches": 4, "schedule": "1f1b",
        "predicted": {"step_s": 0.4123, "samples_per_s": 38.8},
        "why": "1.42x an even split over all 4 devices",
        "replicas": [
          {"batch": 10, "stages": [
             {"devices": ["boxa:0"], "layers": [0, 5], "time_s": 0.2, "peak_mem_bytes": 3221225472},
             {"devices": ["boxa:1"], "layers": [5, 9], "time_s": 0.19}]},
          {"batch": 6, "stages": [
             {"devices": ["boxb:0"], "layers": [0, 4], "time_s": 0.21},
             {"devices": ["boxc:0"], "layers": [4, 9], "time_s": 0.2}]}]})");
  });
  ASSERT_EQ(Run({"job", std::to_string(id)}), kExitOk) << err_.str();
  const std::string out = out_.str();
  EXPECT_EQ(out.find("{\""), std::string::npos) << "raw JSON in:\n" << out;
  EXPECT_NE(out.find("progress: step 120 of 500, loss 0.04321, 38.8 samples/s\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("plan: hybrid: 2 replicas x 2 stages, 4 micro-batches (1f1b); predicted "
                     "0.412 s/step, 38.8 samples/s\n  1.42x an even split over all 4 devices\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("boxa:0"), std::string::npos);
  EXPECT_NE(out.find("0-4"), std::string::npos) << "layers [0, 5) read as 0-4:\n" << out;
  EXPECT_NE(out.find("3.0 GiB"), std::string::npos) << out;
  EXPECT_NE(out.find("boxc:0"), std::string::npos);
}

TEST_F(CliTest, QueueShowsPlacesSharesAndWhyEachJobWaits) {
  ASSERT_EQ(Run({"queue"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "no job waits\n");
  cp_.queue = {{1, 7, "bob", 0, 0.0, "no free device (5 in the cluster)"},
               {2, 0, "alice", 0, 1.5, ""},
               {0, 9, "bob", 0, 2.0, "held by a user limit: bob runs 2 of 2 jobs allowed"}};
  out_.str("");
  ASSERT_EQ(Run({"queue"}), kExitOk) << err_.str();
  const std::string out = out_.str();
  EXPECT_NE(out.find("POS"), std::string::npos) << out;
  EXPECT_NE(out.find("no free device (5 in the cluster)"), std::string::npos) << out;
  EXPECT_NE(out.find("1.50"), std::string::npos) << out;
  EXPECT_NE(out.find("held"), std::string::npos) << out;
  EXPECT_NE(out.find("bob runs 2 of 2 jobs allowed"), std::string::npos) << out;
  out_.str("");
  ASSERT_EQ(Run({"--json", "queue"}), kExitOk) << err_.str();
  api::Json j = api::Json::parse(out_.str());
  ASSERT_EQ(j["queue"].size(), 3u);
  EXPECT_TRUE(j["queue"][1]["id"].is_null()) << "another user's job has no id";
  EXPECT_EQ(j["queue"][2]["position"], 0);
}

// `tessera trace`: the jobs as the scheduler simulator's trace, by
// submission, each job's work as the simulator counts it; what it cannot
// count is a comment saying why.
TEST_F(CliTest, TraceWritesTheJobsAsASimulatorTrace) {
  auto add = [&](const std::string& owner, int64_t created_ms, api::JobKind kind,
                 const std::string& entrypoint, int64_t batch, int64_t steps) {
    const api::JobId id = cp_.AddJob(owner, api::JobState::kSucceeded);
    cp_.UpdateJob(id, [&](api::Job& j) {
      j.created_ms = created_ms;
      j.spec.kind = kind;
      j.spec.entrypoint = entrypoint;
      j.spec.global_batch = batch;
      j.spec.steps = steps;
    });
    return id;
  };
  const api::JobId train =
      add("alice", 10'000, api::JobKind::kTrain, "builtin:colorize-unet", 32, 2000);
  cp_.UpdateJob(train, [](api::Job& j) {
    j.spec.max_devices = 2;
    j.spec.args = {"--width", "32", "--image-size", "128"};
  });
  const api::JobId own = add("bob", 70'500, api::JobKind::kTrain, "model:own-unet", 16, 500);
  cp_.UpdateJob(own, [](api::Job& j) {
    j.spec.priority = 3;
    j.spec.min_devices = 2;
  });
  const api::JobId archive =
      add("carol", 40'000, api::JobKind::kInfer, "builtin:denoiser-dncnn", 32, 0);
  cp_.SetInference(archive, api::Json{{"images_total", 1000}, {"images_done", 10}});
  cp_.UpdateJob(archive, [](api::Job& j) {
    j.spec.image_width = 1024;
    j.spec.image_height = 768;
  });
  add("dave", 20'000, api::JobKind::kTrain, "cmd:ddp-script", 64, 0);
  add("erin", 30'000, api::JobKind::kInfer, "builtin:colorize-unet", 8, 0);

  ASSERT_EQ(Run({"trace"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(),
            "submit_s,user,model,global_batch,steps,min_devices,max_devices,priority,kind,"
            "image_width,image_height\n"
            "0.000,alice,colorize-unet,32,2000,1,2,0,train,128,128\n"   // its --image-size
            "30.000,carol,denoiser-dncnn,32,32,1,0,0,infer,1024,768\n"  // 1000 images, 32 a step
            "60.500,bob,own-unet,16,500,2,0,3,train,0,0\n"
            "# job 4 (dave, cmd:ddp-script) left out: a script counts its own steps\n"
            "# job 5 (erin, builtin:colorize-unet) left out: its archive's images are not "
            "counted yet\n");

  // --out writes the file; every page of the listing is read.
  for (int i = 0; i < 600; ++i)
    add("frank", 90'000 + i, api::JobKind::kTrain, "builtin:gan-pix2pix", 8, 100);
  TempDir dir;
  const std::string path = (dir.path() / "lab.csv").string();
  ASSERT_EQ(Run({"trace", "--out", path}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "wrote 603 jobs to " + path + " (2 left out: see its # lines)\n");
  std::ifstream in(path);
  int rows = 0;
  for (std::string line; std::getline(in, line);)
    rows += line.find(",frank,gan-pix2pix,") != std::string::npos;
  EXPECT_EQ(rows, 600);
  EXPECT_EQ(Run({"trace", "--out", (dir.path() / "no" / "such" / "lab.csv").string()}), kExitUsage);
  EXPECT_NE(err_.str().find("error: out: cannot write"), std::string::npos) << err_.str();
}

TEST_F(CliTest, SubmitYamlFileWithFlagOverride) {
  TempDir dir;
  std::string file = WriteFile(
      dir, "job.yaml", "name: from-file\nentrypoint: builtin:denoise\nglobal_batch: 8\nsteps: 5\n");
  ASSERT_EQ(Run({"--json", "submit", file, "--steps", "7"}), kExitOk) << err_.str();
  api::Json job = api::Json::parse(out_.str());
  EXPECT_EQ(job["spec"]["name"], "from-file");
  EXPECT_EQ(job["spec"]["steps"], 7);
}

// A spec made of flags names the flag to give; one read from a file names the
// file's field.
TEST_F(CliTest, LocalValidationErrorNamesTheFlagOrTheField) {
  EXPECT_EQ(Run({"submit", "--name", "x", "--entrypoint", "builtin:a", "--global-batch", "0",
                 "--steps", "1"}),
            kExitUsage);
  EXPECT_EQ(err_.str().rfind("error: --global-batch: must be between 1 and ", 0), 0u) << err_.str();
  EXPECT_EQ(Run({"submit", "--name", "x", "--kind", "infer", "--entrypoint", "builtin:a",
                 "--dataset", "/srv/scans", "--output", "/srv/out", "--checkpoint", "/srv/ckpt"}),
            kExitUsage);
  EXPECT_EQ(err_.str().rfind("error: --global-batch: ", 0), 0u) << "no default: " << err_.str();
  TempDir dir;
  const std::string file =
      WriteFile(dir, "job.yaml", "name: x\nentrypoint: builtin:a\nglobal_batch: 0\nsteps: 1\n");
  EXPECT_EQ(Run({"submit", file}), kExitUsage);
  EXPECT_EQ(err_.str().rfind("error: global_batch: ", 0), 0u) << err_.str();
}

TEST_F(CliTest, ApiErrorsPrintFieldAndMessage) {
  EXPECT_EQ(Run({"job", "99"}), kExitApiError);
  EXPECT_EQ(err_.str(), "error: no job 99\n");
  EXPECT_EQ(Run({"jobs", "--state", "sleeping"}), kExitApiError);
  EXPECT_EQ(err_.str().rfind("error: state: ", 0), 0u) << err_.str();
  EXPECT_EQ(Run({"nodes"}, {{"TESSERA_TOKEN", "wrong"}}), kExitApiError);
  EXPECT_NE(err_.str().find("error: "), std::string::npos);
  EXPECT_EQ(Run({"job", "abc"}), kExitUsage);
  EXPECT_EQ(err_.str(), "error: id: must be a positive job id\n");
}

// A plan set as scheduler/plan_json.h writes it: two plans, both baselines (one
// that does not fit), one rejected layout.
api::Json PlanSetJson() {
  return api::Json::parse(R"({
    "plans": [
      {"layout": "hybrid", "dp": 2, "pp": 2, "micro_batches": 4, "schedule": "1f1b",
       "replicas": [{"batch": 40, "stages": [{"devices": ["boxa:0"], "layers": [0, 6]},
                                            {"devices": ["boxa:1"], "layers": [6, 12]}]},
                    {"batch": 24, "stages": [{"devices": ["boxb:0"], "layers": [0, 5]},
                                            {"devices": ["boxb:1"], "layers": [5, 12]}]}],
       "predicted": {"step_s": 0.25, "samples_per_s": 256},
       "why": "fastest of 2 layouts; 1.42x an even split over all 4 devices, ..."},
      {"layout": "data", "dp": 2, "pp": 1, "micro_batches": 1, "schedule": "1f1b",
       "replicas": [{"batch": 40, "stages": [{"devices": ["boxa:0"], "layers": [0, 12]}]},
                    {"batch": 24, "stages": [{"devices": ["boxb:0"], "layers": [0, 12]}]}],
       "predicted": {"step_s": 0.3, "samples_per_s": 213.3},
       "why": "1.20x the best step time"}],
    "rejected": [{"layout": "pipeline", "reason": "no partition fits"}],
    "baselines": [
      {"name": "even_all", "description": "an even split over all 4 devices", "feasible": true,
       "step_s": 0.355, "speedup": 1.42,
       "plan": {"layout": "data", "micro_batches": 2, "schedule": "1f1b",
                "replicas": [{"batch": 16, "stages": [{"devices": ["boxa:0"], "layers": [0, 12]}]},
                             {"batch": 16, "stages": [{"devices": ["boxa:1"], "layers": [0, 12]}]},
                             {"batch": 16, "stages": [{"devices": ["boxb:0"], "layers": [0, 12]}]},
                             {"batch": 16, "stages": [{"devices": ["boxb:1"], "layers": [0, 12]}]}],
                "predicted": {"step_s": 0.355}}},
      {"name": "best_group", "description": "the 2 A100s alone", "feasible": false,
       "reason": "doesn't fit on boxa:0", "step_s": null, "speedup": null, "plan": null}]
  })");
}

TEST_F(CliTest, PlanPrintsPlansAndBaselinesAsTables) {
  cp_.preview = PlanSetJson();
  const std::vector<std::string> spec = {
      "plan", "--name",  "colorize", "--entrypoint", "builtin:colorize-unet", "--global-batch",
      "64",   "--steps", "10"};
  ASSERT_EQ(Run(spec), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(),
            "#  LAYOUT  DEVICES                      MICRO-BATCHES  STEP S  SAMPLES/S  WHY\n"
            "1  hybrid  boxa:0,boxa:1,boxb:0,boxb:1  4              0.25    256.0      fastest of "
            "2 layouts; 1.42x an even split over all 4 devices, ...\n"
            "2  data    boxa:0,boxb:0                1              0.3     213.3      1.20x the "
            "best step time\n"
            "\n"
            "hand-made baselines (SPEEDUP: the best plan over each):\n"
            "BASELINE    DESCRIPTION                       DEVICES                      STEP S  "
            "SPEEDUP\n"
            "even_all    an even split over all 4 devices  boxa:0,boxa:1,boxb:0,boxb:1  0.355   "
            "1.42x\n"
            "best_group  the 2 A100s alone                 -                            -       "
            "does not fit: doesn't fit on boxa:0\n"
            "\n"
            "why other layouts lost:\n"
            "  pipeline: no partition fits\n");

  std::vector<std::string> json = spec;
  json.insert(json.begin(), "--json");
  ASSERT_EQ(Run(json), kExitOk) << err_.str();
  EXPECT_EQ(api::Json::parse(out_.str()), PlanSetJson());
}

TEST_F(CliTest, EntrypointsAddListRemove) {
  ASSERT_EQ(Run({"entrypoints", "add", "cmd:train", "--command", "/opt/train"},
                {{"TESSERA_TOKEN", "admin-token"}}),
            kExitOk)
      << err_.str();
  ASSERT_EQ(Run({"entrypoints"}), kExitOk) << err_.str();
  EXPECT_NE(out_.str().find("/opt/train"), std::string::npos);
  ASSERT_EQ(Run({"entrypoints", "rm", "cmd:train"}, {{"TESSERA_TOKEN", "admin-token"}}), kExitOk)
      << err_.str();
  EXPECT_TRUE(cp_.entrypoints.empty());
}

// An exported model file is registered as a command is: `--command` is its
// absolute path; the API's refusal names the field.
TEST_F(CliTest, EntrypointsAddAnExportedModelFile) {
  ASSERT_EQ(Run({"entrypoints", "add", "model:lab-unet", "--command", "/srv/models/unet.pt2",
                 "--description", "exported U-Net"},
                {{"TESSERA_TOKEN", "admin-token"}}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(out_.str(), "allowed model:lab-unet\n");
  ASSERT_EQ(cp_.entrypoints.size(), 1u);
  EXPECT_EQ(cp_.entrypoints[0].command, "/srv/models/unet.pt2");
  ASSERT_EQ(Run({"entrypoints"}), kExitOk) << err_.str();
  EXPECT_NE(out_.str().find("model:lab-unet"), std::string::npos) << out_.str();

  EXPECT_EQ(Run({"entrypoints", "add", "model:other", "--command", "unet.pt"},
                {{"TESSERA_TOKEN", "admin-token"}}),
            kExitApiError);
  EXPECT_NE(err_.str().find("error: command: "), std::string::npos) << err_.str();
  EXPECT_EQ(cp_.entrypoints.size(), 1u);
}

// `submit` of a model: job: the image flags fill spec.image; a bad one is a
// usage error naming the flag, and nothing is sent.
TEST_F(CliTest, SubmitModelJobWithImageFlags) {
  const std::vector<std::string> base = {
      "submit",     "--name",       "colorize-1931",  "--kind",
      "infer",      "--entrypoint", "model:lab-unet", "--dataset",
      "/srv/scans", "--output",     "/srv/out",       "--global-batch",
      "4"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--image-input", "l", "--image-output", "ab", "--value-range", "-1,1",
                           "--align-px", "16", "--halo-px", "0"});
  ASSERT_EQ(Run(args), kExitOk) << err_.str();
  ASSERT_TRUE(cp_.last_spec.has_value());
  EXPECT_EQ(cp_.last_spec->entrypoint, "model:lab-unet");
  EXPECT_EQ(
      api::ToJson(cp_.last_spec->image),
      api::Json::parse(R"({"input":"l","output":"ab","range":[-1,1],"align_px":16,"halo_px":0})"));

  args = base;
  args.insert(args.end(), {"--value-range", "1,0"});
  cp_.last_spec.reset();
  EXPECT_EQ(Run(args), kExitUsage);
  EXPECT_EQ(err_.str().rfind("error: --value-range: ", 0), 0u) << err_.str();
  EXPECT_FALSE(cp_.last_spec.has_value()) << "nothing is sent";
}

TEST_F(CliTest, LogsPrintLines) {
  cp_.logs = std::vector<std::string>{"step 1", "step 2"};
  ASSERT_EQ(Run({"logs", "3", "--rank", "1", "--tail", "2"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "step 1\nstep 2\n");
  EXPECT_EQ(cp_.last_logs_rank_tail, (std::pair<int64_t, int64_t>{1, 2}));
  EXPECT_EQ(Run({"logs", "3", "--tail", "500"}), kExitApiError);
  EXPECT_EQ(err_.str().rfind("error: tail: ", 0), 0u) << err_.str();
}

// Node `name` with `devices`, the i-th at index i.
api::Node NodeWith(const std::string& name, std::vector<api::Device> devices) {
  api::Node n;
  n.name = name;
  for (size_t i = 0; i < devices.size(); ++i) {
    devices[i].node = name;
    devices[i].index = static_cast<int64_t>(i);
  }
  n.devices = std::move(devices);
  return n;
}

// `tessera nodes` with one node: what its table shows, and what it must not.
struct NodesRow {
  const char* name;
  api::Node node;
  std::vector<std::string> shown;
  std::vector<std::string> not_shown;
};
void PrintTo(const NodesRow& row, std::ostream* os) { *os << row.name; }

class CliNodesTest : public CliTest, public ::testing::WithParamInterface<NodesRow> {};

TEST_P(CliNodesTest, TableShowsEachDevice) {
  cp_.nodes = {GetParam().node};
  ASSERT_EQ(Run({"nodes"}), kExitOk) << err_.str();
  const std::string out = out_.str();
  for (const std::string& text : GetParam().shown) {
    EXPECT_NE(out.find(text), std::string::npos) << text << " not in:\n" << out;
  }
  for (const std::string& text : GetParam().not_shown) {
    EXPECT_EQ(out.find(text), std::string::npos) << text << " in:\n" << out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Nodes, CliNodesTest,
    ::testing::Values(
        NodesRow{
            "one_cpu", NodeWith("boxA", {{.name = "cpu", .type = "cpu"}}), {"boxA", "cpu:0"}, {}},
        // An emulated device measures a share of the CPU: gigaflops, not "0.0 TFLOPS".
        NodesRow{
            "speed_in_a_unit_that_shows_it",
            NodeWith("boxA", {{.name = "A100",
                               .type = "cuda",
                               .measured_tflops = 312.04,
                               .measured_tflops_half = 624.5},
                              {.name = "GTX1080 (emulated)",
                               .type = "cuda",
                               .measured_tflops = 0.01234,
                               .emulated = true},
                              {.name = "tiny", .type = "cuda", .measured_tflops = 0.0000425},
                              {.name = "unmeasured", .type = "cpu"}}),
            {" SPEED ", "312.0 TFLOPS", " HALF ", "624.5 TFLOPS", "12.3 GFLOPS", "42.5 MFLOPS"},
            {"0.0 TFLOPS"}},
        NodesRow{"why_a_device_was_not_measured",
                 NodeWith("gpubox",
                          {{.name = "A100-SXM4-80GB",
                            .type = "cuda",
                            .measure_error = "benchmark of cuda:0 failed: unavailable: CUDA is "
                                             "not available to LibTorch"},
                           {.name = "A100", .type = "cuda", .measured_tflops = 19.5}}),
                 {"gpubox cuda:0 not measured, the planner leaves it out: benchmark of cuda:0 "
                  "failed: unavailable: CUDA is not available to LibTorch"},
                 {"cuda:1 not measured"}},
        NodesRow{
            "why_a_gpu_was_not_profiled",
            NodeWith("gpubox", {{.name = "T4",
                                 .type = "cuda",
                                 .measured_tflops = 8.1,
                                 .profile_error = "profile of denoiser-dncnn on cuda:0 failed: "
                                                  "internal: out of memory"},
                                {.name = "T4", .type = "cuda", .measured_tflops = 8.1}}),
            {"gpubox cuda:0 planned from its benchmark, not its own profile: profile of "
             "denoiser-dncnn on cuda:0 failed: internal: out of memory"},
            {"cuda:1 planned from its benchmark"}}),
    [](const ::testing::TestParamInfo<NodesRow>& info) { return std::string(info.param.name); });

TEST_F(CliTest, PlanWaitsWhileTheModelProfileIsMeasured) {
  cp_.preview_first = {api::Json{{"state", "measuring_profile"},
                                 {"message", "measuring the model profile (about 12 s)"},
                                 {"retry_after_s", 0}},
                       api::Json{{"state", "measuring_profile"},
                                 {"message", "measuring the model profile (about 12 s)"},
                                 {"retry_after_s", 0}}};
  cp_.preview = PlanSetJson();
  ASSERT_EQ(Run({"plan", "--name", "colorize", "--entrypoint", "builtin:colorize-unet",
                 "--global-batch", "64", "--steps", "10"}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(err_.str(), "measuring the model profile (about 12 s); waiting\n")
      << "said once while it does not change, on stderr";
  EXPECT_EQ(out_.str().rfind("#  LAYOUT", 0), 0u) << out_.str();
  EXPECT_EQ(cp_.preview_calls, 3);
}

// A training job of two ranks on boxa:0 and boxb:0 whose attempt 2 resumed at
// step 3; rank 0 reports loss, both the step time split and memory.
class CliMetricsTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    id_ = cp_.AddJob("alice", api::JobState::kSucceeded);
    cp_.UpdateJob(id_, [](api::Job& j) {
      j.attempt = 2;
      j.plan = api::Json::parse(R"({"layout": "data", "replicas": [
          {"batch": 8, "stages": [{"devices": ["boxa:0"], "layers": [0, 4]}]},
          {"batch": 8, "stages": [{"devices": ["boxb:0"], "layers": [0, 4]}]}]})");
    });
    api::Node a{.name = "boxa"}, b{.name = "boxb"};
    a.devices = {api::Device{.node = "boxa", .index = 0, .memory_bytes = int64_t{80} << 30}};
    b.devices = {api::Device{.node = "boxb", .index = 0, .memory_bytes = int64_t{24} << 30}};
    cp_.nodes = {a, b};
    std::vector<api::MetricPoint>& m = cp_.metrics[id_];
    const double first[] = {2.0, 1.6, 1.2};
    for (int64_t step = 1; step <= 3; ++step) {
      for (int64_t rank : {0, 1}) m.push_back(Point(step, 1, rank, first[step - 1]));
    }
    const double second[] = {1.1, 0.8, 0.6, 0.4};
    for (int64_t step = 3; step <= 6; ++step) {
      api::MetricPoint p = Point(step, 2, 0, second[step - 3]);
      p.compute_s = 0.375;
      p.comm_s = 0.09375;
      p.bubble_s = 0.03125;
      p.peak_memory_bytes = int64_t{3} << 30;
      m.push_back(p);
    }
    api::MetricPoint r1 = Point(6, 2, 1, 0.4);
    r1.compute_s = 0.25;
    r1.comm_s = 0.125;
    r1.bubble_s = 0.125;
    r1.peak_memory_bytes = int64_t{512} << 20;
    r1.predicted_peak_memory_bytes = int64_t{600} << 20;
    m.push_back(r1);
  }

  static constexpr const char* kTrainingView =
      "loss     █▆▄▃▂▁  2 -> 0.4  (steps 1-6)\n"
      "recovered: attempt 2 from step 3\n"
      "RANK  DEVICE  STEP  STEP S  COMPUTE      COMM         BUBBLE       MEMORY\n"
      "0     boxa:0  6     0.500   0.375 (75%)  0.094 (19%)  0.031 (6%)   3.0 GiB of 80.0 GiB "
      "(4%)\n"
      "1     boxb:0  6     0.500   0.250 (50%)  0.125 (25%)  0.125 (25%)  512.0 MiB of 24.0 GiB "
      "(2%)\n";

  api::JobId id_ = 0;
};

TEST_F(CliMetricsTest, WatchShowsTheLossSparklineAndEachRanksSplitAndMemory) {
  ASSERT_EQ(Run({"job", std::to_string(id_), "--watch"}), kExitOk) << err_.str();
  const std::string out = out_.str();
  EXPECT_NE(out.find("state:         succeeded\n"), std::string::npos) << out;
  ASSERT_GE(out.size(), std::string(kTrainingView).size());
  EXPECT_EQ(out.substr(out.size() - std::string(kTrainingView).size()), kTrainingView) << out;
}

TEST_F(CliMetricsTest, WatchPollsForNewPointsOnlyUntilTheJobEnds) {
  cp_.UpdateJob(id_, [](api::Job& j) { j.state = api::JobState::kRunning; });
  std::thread finish([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cp_.UpdateJob(id_, [](api::Job& j) { j.state = api::JobState::kSucceeded; });
  });
  const int code = Run({"job", std::to_string(id_), "--watch"});
  finish.join();
  ASSERT_EQ(code, kExitOk) << err_.str();
  // One frame per poll on a pipe: the state line, then the view.
  EXPECT_EQ(out_.str().rfind("job 1 running\n" + std::string(kTrainingView), 0), 0u) << out_.str();
  ASSERT_EQ(cp_.metrics_queries.size(), 2u);
  EXPECT_FALSE(cp_.metrics_queries[0].since.has_value()) << "the whole history first";
  EXPECT_EQ(cp_.metrics_queries[1].attempt, 2) << "then only the current attempt's";
  EXPECT_EQ(cp_.metrics_queries[1].since, 6) << "steps after the last one its ranks reported";
}

TEST_F(CliMetricsTest, MetricsPrintTheHistoryAsATableCsvOrJson) {
  ASSERT_EQ(Run({"metrics", std::to_string(id_), "--rank", "1", "--csv"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(),
            "step,attempt,rank,ts_ms,loss,samples_per_s,compute_s,comm_s,bubble_s,"
            "peak_memory_bytes,predicted_peak_memory_bytes\n"
            "1,1,1,1700000001000,2,,,,,,\n"
            "2,1,1,1700000002000,1.6,,,,,,\n"
            "3,1,1,1700000003000,1.2,,,,,,\n"
            "6,2,1,1700000006000,0.4,,0.25,0.125,0.125,536870912,629145600\n");
  EXPECT_EQ(cp_.metrics_queries.back().rank, 1);

  ASSERT_EQ(Run({"metrics", std::to_string(id_)}), kExitOk) << err_.str();
  std::istringstream table(out_.str());
  std::string header, first;
  std::getline(table, header);
  std::getline(table, first);
  EXPECT_EQ(header.rfind("STEP  ATTEMPT  RANK  TIME                  LOSS  SAMPLES/S", 0), 0u)
      << header;
  EXPECT_EQ(first.rfind("1     1        0     2023-11-14 22:13:21Z  2     -", 0), 0u) << first;
  EXPECT_NE(out_.str().find("3.0 GiB"), std::string::npos);

  ASSERT_EQ(Run({"--json", "metrics", std::to_string(id_)}), kExitOk) << err_.str();
  auto page = api::MetricsPageFromJson(api::Json::parse(out_.str()));
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->points.size(), 11u);

  EXPECT_EQ(Run({"metrics", "99"}), kExitApiError);
  EXPECT_EQ(err_.str(), "error: no job 99\n");
  EXPECT_EQ(Run({"metrics", std::to_string(id_), "--rank", "-3"}), kExitApiError);
  EXPECT_EQ(err_.str().rfind("error: rank: ", 0), 0u) << err_.str();
}

TEST_F(CliMetricsTest, MetricsFollowEveryPage) {
  // More points than one page holds (5000): the CLI asks again from next_since.
  std::vector<api::MetricPoint>& m = cp_.metrics[id_];
  m.clear();
  for (int64_t step = 1; step <= 2600; ++step) {
    for (int64_t rank : {0, 1}) m.push_back(Point(step, 1, rank, 1.0));
  }
  ASSERT_EQ(Run({"metrics", std::to_string(id_), "--csv"}), kExitOk) << err_.str();
  const std::string out = out_.str();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1 + 5200);
  ASSERT_EQ(cp_.metrics_queries.size(), 2u);
  EXPECT_EQ(cp_.metrics_queries[1].since, 2500);
}

TEST_F(CliTest, UnreachableServer) {
  int port = server_->port();
  server_->Stop();
  EXPECT_EQ(Run({"nodes"}, {{"TESSERA_SERVER", "http://127.0.0.1:" + std::to_string(port)}}),
            kExitUnreachable);
  EXPECT_NE(err_.str().find("cannot reach tesserad"), std::string::npos);
}

TEST_F(CliTest, UsageErrors) {
  EXPECT_EQ(Run({}), kExitUsage);
  EXPECT_EQ(Run({"frobnicate"}), kExitUsage);
}

TEST_F(CliTest, ExtraCommandsCanBeRegistered) {
  bool ran = false;
  CommandRegistrar local = [&ran](CLI::App& app, CliContext& ctx) {
    (void)ctx;
    app.add_subcommand("local", "a local command")->callback([&ran] { ran = true; });
  };
  std::vector<std::string> args = {"tessera", "local"};
  EXPECT_EQ(RunCli(args, out_, err_, {local}, LookupIn({})), kExitOk);
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace tessera::cli
