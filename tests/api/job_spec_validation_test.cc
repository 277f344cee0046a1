#include "api/job_spec_validation.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace tessera::api {
namespace {

// A spec that passes every rule; each row breaks exactly one.
JobSpec ValidTrainSpec() {
  JobSpec s;
  s.name = "colorize-1930s_train.v2";
  s.kind = JobKind::kTrain;
  s.entrypoint = "builtin:colorize-unet";
  s.dataset = "/srv/archive/scans-2026";
  s.global_batch = 256;
  s.steps = 20000;
  s.checkpoint_every_s = 300;
  s.layout = "auto";
  s.priority = 10;
  s.max_attempts = 5;
  s.min_devices = 1;
  s.max_devices = 0;
  s.env = {{"OMP_NUM_THREADS", "4"}};
  s.args = {"--lr", "0.001"};
  return s;
}

JobSpec ValidInferSpec() {
  JobSpec s = ValidTrainSpec();
  s.kind = JobKind::kInfer;
  s.layout = "tiled";
  s.steps = 0;
  s.output = "/srv/out";
  s.checkpoint = "/srv/ckpt/step-100";
  return s;
}

struct Row {
  const char* rule;
  std::function<void(JobSpec&)> mutate;
  const char* field;  // nullptr: the spec stays valid
  bool infer = false;
};

class ValidateJobSpecTest : public ::testing::TestWithParam<Row> {};

TEST_P(ValidateJobSpecTest, OneRule) {
  const Row& row = GetParam();
  JobSpec spec = row.infer ? ValidInferSpec() : ValidTrainSpec();
  row.mutate(spec);
  Status st = ValidateJobSpec(spec);
  if (row.field == nullptr) {
    EXPECT_TRUE(st.ok()) << st.ToString();
  } else {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_EQ(st.field(), row.field) << st.ToString();
    EXPECT_FALSE(st.message().empty());
  }
}

const Row kRows[] = {
    {"valid_train", [](JobSpec&) {}, nullptr},
    {"valid_infer", [](JobSpec&) {}, nullptr, true},
    {"name_empty", [](JobSpec& s) { s.name = ""; }, "name"},
    {"name_too_long", [](JobSpec& s) { s.name = std::string(129, 'a'); }, "name"},
    {"name_128_ok", [](JobSpec& s) { s.name = std::string(128, 'a'); }, nullptr},
    {"name_space", [](JobSpec& s) { s.name = "my job"; }, "name"},
    {"name_slash", [](JobSpec& s) { s.name = "a/b"; }, "name"},
    {"name_nul", [](JobSpec& s) { s.name = std::string("a\0b", 3); }, "name"},
    {"entrypoint_empty", [](JobSpec& s) { s.entrypoint = ""; }, "entrypoint"},
    {"entrypoint_no_prefix", [](JobSpec& s) { s.entrypoint = "colorize"; }, "entrypoint"},
    {"entrypoint_bad_prefix", [](JobSpec& s) { s.entrypoint = "shell:rm"; }, "entrypoint"},
    {"entrypoint_empty_name", [](JobSpec& s) { s.entrypoint = "cmd:"; }, "entrypoint"},
    {"entrypoint_path", [](JobSpec& s) { s.entrypoint = "cmd:/bin/sh"; }, "entrypoint"},
    {"entrypoint_cmd_ok", [](JobSpec& s) { s.entrypoint = "cmd:train-resnet"; }, nullptr},
    {"global_batch_zero", [](JobSpec& s) { s.global_batch = 0; }, "global_batch"},
    {"global_batch_negative", [](JobSpec& s) { s.global_batch = -4; }, "global_batch"},
    {"global_batch_too_big", [](JobSpec& s) { s.global_batch = kMaxGlobalBatch + 1; },
     "global_batch"},
    {"global_batch_max_ok", [](JobSpec& s) { s.global_batch = kMaxGlobalBatch; }, nullptr},
    {"steps_zero_train", [](JobSpec& s) { s.steps = 0; }, "steps"},
    {"steps_too_many", [](JobSpec& s) { s.steps = kMaxSteps + 1; }, "steps"},
    {"steps_zero_infer_ok", [](JobSpec& s) { s.steps = 0; }, nullptr, true},
    {"steps_optional_for_cmd_train",
     [](JobSpec& s) {
       s.entrypoint = "cmd:train-ddp";
       s.steps = 0;
     },
     nullptr},
    {"steps_negative_for_cmd_train",
     [](JobSpec& s) {
       s.entrypoint = "cmd:train-ddp";
       s.steps = -1;
     },
     "steps"},
    {"steps_too_many_for_cmd_train",
     [](JobSpec& s) {
       s.entrypoint = "cmd:train-ddp";
       s.steps = kMaxSteps + 1;
     },
     "steps"},
    {"checkpoint_every_zero", [](JobSpec& s) { s.checkpoint_every_s = 0; }, "checkpoint_every_s"},
    {"checkpoint_every_too_long", [](JobSpec& s) { s.checkpoint_every_s = 86401; },
     "checkpoint_every_s"},
    {"layout_unknown", [](JobSpec& s) { s.layout = "ring"; }, "layout"},
    {"layout_tiled_train", [](JobSpec& s) { s.layout = "tiled"; }, "layout"},
    {"layout_hybrid_ok", [](JobSpec& s) { s.layout = "hybrid"; }, nullptr},
    {"priority_too_low", [](JobSpec& s) { s.priority = -1001; }, "priority"},
    {"priority_too_high", [](JobSpec& s) { s.priority = 1001; }, "priority"},
    {"max_attempts_zero", [](JobSpec& s) { s.max_attempts = 0; }, "max_attempts"},
    {"max_attempts_too_many", [](JobSpec& s) { s.max_attempts = 101; }, "max_attempts"},
    {"min_devices_zero", [](JobSpec& s) { s.min_devices = 0; }, "min_devices"},
    {"max_devices_below_min",
     [](JobSpec& s) {
       s.min_devices = 4;
       s.max_devices = 2;
     },
     "max_devices"},
    {"max_devices_too_many", [](JobSpec& s) { s.max_devices = 4097; }, "max_devices"},
    {"max_devices_equal_min_ok",
     [](JobSpec& s) {
       s.min_devices = 2;
       s.max_devices = 2;
     },
     nullptr},
    {"infer_needs_dataset", [](JobSpec& s) { s.dataset = ""; }, "dataset", true},
    {"infer_needs_output", [](JobSpec& s) { s.output = ""; }, "output", true},
    {"output_relative", [](JobSpec& s) { s.output = "out"; }, "output", true},
    {"dataset_relative", [](JobSpec& s) { s.dataset = "scans"; }, "dataset"},
    {"dataset_nul", [](JobSpec& s) { s.dataset = std::string("/srv/\0x", 7); }, "dataset"},
    {"checkpoint_relative", [](JobSpec& s) { s.checkpoint = "ckpt"; }, "checkpoint", true},
    {"infer_builtin_needs_checkpoint", [](JobSpec& s) { s.checkpoint = ""; }, "checkpoint", true},
    {"infer_command_needs_no_checkpoint",
     [](JobSpec& s) {
       s.entrypoint = "cmd:restore";
       s.checkpoint = "";
     },
     nullptr, true},
    {"image_size_ok",
     [](JobSpec& s) {
       s.image_width = 12000;
       s.image_height = 9000;
     },
     nullptr, true},
    {"image_width_alone", [](JobSpec& s) { s.image_width = 12000; }, "image_height", true},
    {"image_height_alone", [](JobSpec& s) { s.image_height = 9000; }, "image_width", true},
    {"image_too_large",
     [](JobSpec& s) {
       s.image_width = 100001;
       s.image_height = 10;
     },
     "image_width", true},
    {"image_size_for_training",
     [](JobSpec& s) {
       s.image_width = 100;
       s.image_height = 100;
     },
     "image_width"},
    {"args_too_many", [](JobSpec& s) { s.args.assign(65, "x"); }, "args"},
    {"args_64_ok", [](JobSpec& s) { s.args.assign(64, "x"); }, nullptr},
    {"arg_nul", [](JobSpec& s) { s.args[1] = std::string("a\0", 2); }, "args[1]"},
    {"env_lower_case", [](JobSpec& s) { s.env["path"] = "/x"; }, "env.path"},
    {"env_leading_digit", [](JobSpec& s) { s.env["1X"] = "1"; }, "env.1X"},
    {"env_rank", [](JobSpec& s) { s.env["RANK"] = "0"; }, "env.RANK"},
    {"env_world_size", [](JobSpec& s) { s.env["WORLD_SIZE"] = "2"; }, "env.WORLD_SIZE"},
    {"env_master_addr", [](JobSpec& s) { s.env["MASTER_ADDR"] = "x"; }, "env.MASTER_ADDR"},
    {"env_local_rank", [](JobSpec& s) { s.env["LOCAL_RANK"] = "0"; }, "env.LOCAL_RANK"},
    {"env_tessera", [](JobSpec& s) { s.env["TESSERA_PLAN"] = "x"; }, "env.TESSERA_PLAN"},
    {"env_group_world_size", [](JobSpec& s) { s.env["GROUP_WORLD_SIZE"] = "2"; },
     "env.GROUP_WORLD_SIZE"},
    {"env_role", [](JobSpec& s) { s.env["ROLE_NAME"] = "trainer"; }, "env.ROLE_NAME"},
    {"env_torchelastic", [](JobSpec& s) { s.env["TORCHELASTIC_RUN_ID"] = "x"; },
     "env.TORCHELASTIC_RUN_ID"},
    {"env_nccl_ok", [](JobSpec& s) { s.env["NCCL_DEBUG"] = "INFO"; }, nullptr},
    {"env_value_nul", [](JobSpec& s) { s.env["FOO"] = std::string("a\0b", 3); }, "env.FOO"},
    {"env_ranked_prefix_ok", [](JobSpec& s) { s.env["RANKER"] = "x"; }, nullptr},
};

INSTANTIATE_TEST_SUITE_P(Rules, ValidateJobSpecTest, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           return std::string(info.param.rule);
                         });

}  // namespace
}  // namespace tessera::api
