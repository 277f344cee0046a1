#include "api/job_spec_validation.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

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
  s.args = {"--threads", "1"};  // --lr is a training option
  return s;
}

// An infer job of a registered exported model: no checkpoint (its weights
// are in the file), the image convention stated.
JobSpec ValidModelSpec() {
  JobSpec s = ValidInferSpec();
  s.entrypoint = "model:lab-unet";
  s.layout = "auto";
  s.checkpoint = "";
  s.args = {"--batch", "8", "--max-tile-px=1024"};
  s.image.input = "l";
  s.image.output = "ab";
  s.image.range = std::make_pair(-1.0, 1.0);
  s.image.align_px = 16;
  return s;
}

// Training an exported model: a train job of a model: entrypoint with steps
// and no options.
JobSpec ValidModelTrainSpec() {
  JobSpec s = ValidModelSpec();
  s.kind = JobKind::kTrain;
  s.steps = 100;
  s.args = {};
  return s;
}

enum class Base { kTrain, kInfer, kModel, kModelTrain };

struct Row {
  const char* rule;
  std::function<void(JobSpec&)> mutate;
  const char* field;  // nullptr: the spec stays valid
  bool infer = false;
  Base base = infer ? Base::kInfer : Base::kTrain;
};

// A row's change that only sets the job's args.
std::function<void(JobSpec&)> Args(std::vector<std::string> args) {
  return [args = std::move(args)](JobSpec& s) { s.args = args; };
}

// A row's change that only sets one variable of the job's env.
std::function<void(JobSpec&)> Env(std::string name, std::string value) {
  return [name = std::move(name), value = std::move(value)](JobSpec& s) { s.env[name] = value; };
}

class ValidateJobSpecTest : public ::testing::TestWithParam<Row> {};

TEST_P(ValidateJobSpecTest, OneRule) {
  const Row& row = GetParam();
  JobSpec spec = row.base == Base::kModelTrain ? ValidModelTrainSpec()
                 : row.base == Base::kModel    ? ValidModelSpec()
                 : row.base == Base::kInfer    ? ValidInferSpec()
                                               : ValidTrainSpec();
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
    {"args_64_ok",
     [](JobSpec& s) {
       s.entrypoint = "cmd:train-ddp";
       s.args.assign(64, "x");
     },
     nullptr},
    {"arg_nul", [](JobSpec& s) { s.args[1] = std::string("a\0", 2); }, "args[1]"},
    {"env_lower_case", Env("path", "/x"), "env.path"},
    {"env_leading_digit", Env("1X", "1"), "env.1X"},
    {"env_rank", Env("RANK", "0"), "env.RANK"},
    {"env_world_size", Env("WORLD_SIZE", "2"), "env.WORLD_SIZE"},
    {"env_master_addr", Env("MASTER_ADDR", "x"), "env.MASTER_ADDR"},
    {"env_local_rank", Env("LOCAL_RANK", "0"), "env.LOCAL_RANK"},
    {"env_tessera", Env("TESSERA_PLAN", "x"), "env.TESSERA_PLAN"},
    {"env_group_world_size", Env("GROUP_WORLD_SIZE", "2"), "env.GROUP_WORLD_SIZE"},
    {"env_role", Env("ROLE_NAME", "trainer"), "env.ROLE_NAME"},
    {"env_torchelastic", Env("TORCHELASTIC_RUN_ID", "x"), "env.TORCHELASTIC_RUN_ID"},
    {"env_nccl_ok", Env("NCCL_DEBUG", "INFO"), nullptr},
    {"env_value_nul", Env("FOO", std::string("a\0b", 3)), "env.FOO"},
    {"env_ranked_prefix_ok", Env("RANKER", "x"), nullptr},
    // The global deny list: no entrypoint and no role lifts it.
    {"env_ld_preload", Env("LD_PRELOAD", "/home/me/x.so"), "env.LD_PRELOAD"},
    {"env_ld_library_path", Env("LD_LIBRARY_PATH", "/x"), "env.LD_LIBRARY_PATH"},
    {"env_path", Env("PATH", "/home/me/bin"), "env.PATH"},
    {"env_pythonpath", Env("PYTHONPATH", "/x"), "env.PYTHONPATH"},
    {"env_pythonstartup", Env("PYTHONSTARTUP", "/x"), "env.PYTHONSTARTUP"},
    {"env_bash_env", Env("BASH_ENV", "/x"), "env.BASH_ENV"},
    {"env_env", Env("ENV", "/x"), "env.ENV"},
    {"env_bash_func", Env("BASH_FUNC_X", "() { id; }"), "env.BASH_FUNC_X"},
    {"env_gconv", Env("GCONV_PATH", "/x"), "env.GCONV_PATH"},
    {"env_malloc", Env("MALLOC_CHECK_", "3"), "env.MALLOC_CHECK_"},
    {"env_glibc_tunables", Env("GLIBC_TUNABLES", "x"), "env.GLIBC_TUNABLES"},
    {"env_nccl_net_plugin", Env("NCCL_NET_PLUGIN", "/x.so"), "env.NCCL_NET_PLUGIN"},
    {"env_nccl_tuner_plugin", Env("NCCL_TUNER_PLUGIN", "/x.so"), "env.NCCL_TUNER_PLUGIN"},
    {"env_home", Env("HOME", "/home/me"), "env.HOME"},
    {"env_shellopts", Env("SHELLOPTS", "xtrace"), "env.SHELLOPTS"},
    {"env_cuda_injection", Env("CUDA_INJECTION64_PATH", "/x.so"), "env.CUDA_INJECTION64_PATH"},
    {"env_node_options", Env("NODE_OPTIONS", "--require /x"), "env.NODE_OPTIONS"},
    {"env_deny_binds_cmd_too",
     [](JobSpec& s) {
       s.entrypoint = "cmd:train-ddp";
       s.env["LD_AUDIT"] = "/x.so";
     },
     "env.LD_AUDIT"},
    {"env_omp_ok", Env("OMP_NUM_THREADS", "2"), nullptr},
    {"env_cuda_launch_blocking_ok", Env("CUDA_LAUNCH_BLOCKING", "1"),
     nullptr},
    // Builtin entrypoints: documented options only.
    {"builtin_test_hook",
     Args({"--dump-params", "/etc"}),
     "args[0]"},
    {"builtin_test_hook_inline", Args({"--dump-params=/etc"}), "args[0]"},
    {"builtin_hook_as_value",
     Args({"--lr", "--dump-params", "/x"}),
     "args[1]"},
    {"builtin_data_override",
     Args({"--data", "/etc"}),
     "args[0]"},
    {"builtin_steps_override", Args({"--steps=1"}), "args[0]"},
    {"builtin_positional", Args({"extra"}), "args[0]"},
    {"builtin_missing_value", Args({"--lr"}), "args[0]"},
    {"builtin_flag_with_value", Args({"--no-amp=1"}), "args[0]"},
    {"builtin_options_ok",
     Args({"--lr=0.1", "--width", "8", "--no-amp", "--threads", "1", "--momentum", "0.9"}),
     nullptr},
    {"builtin_negative_value_ok",
     Args({"--seed", "-3"}),
     nullptr},
    {"builtin_infer_local", Args({"--local"}), "args[0]", true},
    {"builtin_infer_output",
     Args({"--output", "/x"}),
     "args[0]", true},
    {"builtin_infer_train_option",
     Args({"--lr", "1"}),
     "args[0]", true},
    {"builtin_infer_ok",
     Args({"--max-tile-px", "512", "--threads=2"}),
     nullptr, true},
    {"builtin_infer_pipeline_ok",
     Args({"--batch", "16", "--batch-pixels=1048576", "--decode-threads", "4", "--encode-threads=3"}),
     nullptr, true},
    // model: entrypoints, an exported model file the admin registered.
    {"entrypoint_model_ok", [](JobSpec&) {}, nullptr, true, Base::kModel},
    {"entrypoint_model_empty_name", [](JobSpec& s) { s.entrypoint = "model:"; }, "entrypoint",
     true, Base::kModel},
    {"entrypoint_model_path", [](JobSpec& s) { s.entrypoint = "model:/srv/m.pt"; }, "entrypoint",
     true, Base::kModel},
    {"model_plain_ok",
     [](JobSpec& s) {
       s.image = {};
       s.args = {};
     },
     nullptr, true, Base::kModel},
    // Training an exported sequence of layers: steps and a dataset, train options.
    {"model_train_ok", [](JobSpec&) {}, nullptr, false, Base::kModelTrain},
    {"model_train_needs_steps", [](JobSpec& s) { s.steps = 0; }, "steps", false,
     Base::kModelTrain},
    {"model_train_with_steps",
     Args({"--loss", "l1", "--lr=0.01", "--optimizer", "adam"}),
     nullptr, false, Base::kModelTrain},
    {"model_train_needs_dataset", [](JobSpec& s) { s.dataset = ""; }, "dataset", false,
     Base::kModelTrain},
    {"model_train_infer_option", Args({"--batch", "8"}), "args[0]", false,
     Base::kModelTrain},
    {"model_train_width", Args({"--width", "8"}), "args[0]", false,
     Base::kModelTrain},
    // Training cuts the file's layers: every training layout.
    {"model_train_pipeline_ok", [](JobSpec& s) { s.layout = "pipeline"; }, nullptr, false,
     Base::kModelTrain},
    {"model_train_hybrid_ok",
     [](JobSpec& s) {
       s.args = {"--loss", "l1"};
       s.layout = "hybrid";
     },
     nullptr, false, Base::kModelTrain},
    {"model_train_tiled", [](JobSpec& s) { s.layout = "tiled"; }, "layout", false,
     Base::kModelTrain},
    {"model_infer_loss", Args({"--loss", "l1"}), "args[0]", true,
     Base::kModel},
    {"model_checkpoint", [](JobSpec& s) { s.checkpoint = "/srv/ckpt/step-100"; }, "checkpoint",
     true, Base::kModel},
    {"model_layout_data_ok", [](JobSpec& s) { s.layout = "data"; }, nullptr, true, Base::kModel},
    {"model_layout_tiled", [](JobSpec& s) { s.layout = "tiled"; }, "layout", true, Base::kModel},
    {"model_layout_pipeline", [](JobSpec& s) { s.layout = "pipeline"; }, "layout", true,
     Base::kModel},
    {"model_layout_hybrid", [](JobSpec& s) { s.layout = "hybrid"; }, "layout", true, Base::kModel},
    {"model_needs_dataset", [](JobSpec& s) { s.dataset = ""; }, "dataset", true, Base::kModel},
    {"model_needs_output", [](JobSpec& s) { s.output = ""; }, "output", true, Base::kModel},
    {"model_infer_options_ok",
     Args({"--threads", "2", "--batch-pixels=1048576", "--decode-threads", "4", "--encode-threads=2", "--max-chunks", "3"}),
     nullptr, true, Base::kModel},
    {"model_width", Args({"--batch", "8", "--width", "32"}), "args[2]", true,
     Base::kModel},
    {"model_width_inline", Args({"--width=32"}), "args[0]", true,
     Base::kModel},
    {"model_width_as_value_of_an_option",
     Args({"--threads", "--width"}),
     "args[1]", true, Base::kModel},
    {"model_train_option", Args({"--lr", "1"}), "args[0]", true,
     Base::kModel},
    {"model_sets_its_file", Args({"--model-file", "/tmp/evil.pt"}),
     "args[0]", true, Base::kModel},
    {"model_sets_a_builtin_model", Args({"--model", "colorize-unet"}),
     "args[0]", true, Base::kModel},
    {"model_image_flag_in_args", Args({"--image-input", "rgb"}), "args[0]",
     true, Base::kModel},
    {"model_positional", Args({"/etc/passwd"}), "args[0]", true,
     Base::kModel},
    {"model_image_input", [](JobSpec& s) { s.image.input = "cmyk"; }, "image.input", true,
     Base::kModel},
    {"model_image_output", [](JobSpec& s) { s.image.output = "lab"; }, "image.output", true,
     Base::kModel},
    {"model_image_range", [](JobSpec& s) { s.image.range = std::make_pair(1.0, 0.0); },
     "image.range", true, Base::kModel},
    {"model_image_align", [](JobSpec& s) { s.image.align_px = 2048; }, "image.align_px", true,
     Base::kModel},
    {"model_image_halo", [](JobSpec& s) { s.image.halo_px = -5; }, "image.halo_px", true,
     Base::kModel},
    {"image_for_builtin", [](JobSpec& s) { s.image.input = "rgb"; }, "image", true},
    {"image_for_builtin_train", [](JobSpec& s) { s.image.halo_px = 8; }, "image"},
    {"image_for_cmd",
     [](JobSpec& s) {
       s.entrypoint = "cmd:restore";
       s.checkpoint = "";
       s.image.output = "rgb";
     },
     "image", true},
    {"cmd_args_free_here",
     [](JobSpec& s) {
       s.entrypoint = "cmd:train-ddp";
       s.args = {"--dump-params", "/x"};
     },
     nullptr},
};

INSTANTIATE_TEST_SUITE_P(Rules, ValidateJobSpecTest, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           return std::string(info.param.rule);
                         });

// An entrypoint's policy (tesserad's `entrypoints`), one row per rule.
struct PolicyRow {
  const char* rule;
  const char* entrypoint;
  std::map<std::string, std::string> env;
  std::vector<std::string> args;
  EntrypointPolicy policy;
  const char* field;  // nullptr: allowed
};

class EntrypointPolicyTest : public ::testing::TestWithParam<PolicyRow> {};

TEST_P(EntrypointPolicyTest, OneRule) {
  const PolicyRow& row = GetParam();
  JobSpec spec = ValidTrainSpec();
  spec.entrypoint = row.entrypoint;
  spec.env = row.env;
  spec.args = row.args;
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec).ToString();
  Status st = CheckEntrypointPolicy(spec, row.policy);
  if (row.field == nullptr) {
    EXPECT_TRUE(st.ok()) << st.ToString();
  } else {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_EQ(st.field(), row.field) << st.ToString();
  }
}

const PolicyRow kPolicyRows[] = {
    {"no_env_no_args_ok", "cmd:train", {}, {}, {}, nullptr},
    {"env_not_allowed", "cmd:train", {{"FOO", "1"}}, {}, {}, "env.FOO"},
    {"env_pattern",
     "cmd:train",
     {{"WANDB_MODE", "offline"}},
     {},
     {{"WANDB_*"}, {}, false},
     nullptr},
    {"env_pattern_other_key",
     "cmd:train",
     {{"WANDBX", "1"}},
     {},
     {{"WANDB_*"}, {}, false},
     "env.WANDBX"},
    {"builtin_env_needs_allow",
     "builtin:colorize-unet",
     {{"OMP_NUM_THREADS", "2"}},
     {},
     {},
     "env.OMP_NUM_THREADS"},
    {"builtin_args_are_not_policed_here", "builtin:colorize-unet", {}, {"--lr", "1"}, {}, nullptr},
    {"cmd_args_need_allow", "cmd:train", {}, {"100"}, {}, "args[0]"},
    {"cmd_args_pattern",
     "cmd:train",
     {},
     {"100", "--fast"},
     {{}, {"[0-9]*", "--fast"}, false},
     nullptr},
    {"cmd_args_second_refused",
     "cmd:train",
     {},
     {"100", "--dump=/x"},
     {{}, {"[0-9]*"}, false},
     "args[1]"},
    {"cmd_free_args", "cmd:train", {}, {"anything", "--at=/all"}, {{}, {}, true}, nullptr},
};

INSTANTIATE_TEST_SUITE_P(Rules, EntrypointPolicyTest, ::testing::ValuesIn(kPolicyRows),
                         [](const ::testing::TestParamInfo<PolicyRow>& info) {
                           return std::string(info.param.rule);
                         });

// A model: entrypoint takes the worker's documented infer options (checked by
// ValidateJobSpec), not args_allow; its env is policed like any other's.
TEST(EntrypointPolicyTest, ModelArgsAreTheWorkersOptionsItsEnvIsPoliced) {
  JobSpec spec = ValidModelSpec();
  spec.env = {};
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec).ToString();
  EXPECT_TRUE(CheckEntrypointPolicy(spec, {}).ok()) << "args need no args_allow";
  spec.env = {{"OMP_NUM_THREADS", "2"}};
  Status st = CheckEntrypointPolicy(spec, {});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.field(), "env.OMP_NUM_THREADS");
  EXPECT_TRUE(CheckEntrypointPolicy(spec, {{"OMP_*"}, {}, false}).ok());
}

}  // namespace
}  // namespace tessera::api
