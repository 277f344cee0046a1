// tesserad's config: the multi-user safety keys (data_roots, entrypoints,
// run_as) from real YAML files, and configs from before them.
#include "daemon/daemon_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

Result<DaemonConfig> Load(const std::string& yaml) {
  testing::TempDir dir;
  const std::string path = dir.File("tesserad.yaml");
  std::ofstream(path) << yaml;
  DaemonConfig c;
  TESSERA_RETURN_IF_ERROR(LoadDaemonConfig(path, &c));
  TESSERA_RETURN_IF_ERROR(c.Validate());
  return c;
}

TEST(DaemonConfigSecurityTest, AnOlderConfigKeepsWorkingWithSafeDefaults) {
  auto c = Load("state_dir: /var/lib/tesserad\nport: 8080\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->data_roots.empty()) << "no roots: admins only name paths";
  EXPECT_TRUE(c->entrypoints.empty()) << "no policies: users set no env";
  EXPECT_TRUE(c->run_as.empty());
}

TEST(DaemonConfigSharingTest, ReadsTheShareSwitches) {
  auto defaults = Load("port: 8080\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_TRUE(defaults->share_running_jobs);
  EXPECT_TRUE(defaults->share_restart_moves);
  EXPECT_EQ(defaults->share_catch_up_above, 2.0);
  auto off = Load(
      "share_running_jobs: false\nshare_restart_moves: false\nmove_cost_s: 30\n"
      "share_catch_up_above: 0\n");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->share_running_jobs);
  EXPECT_FALSE(off->share_restart_moves);
  EXPECT_EQ(off->move_cost_s, 30);
  EXPECT_EQ(off->share_catch_up_above, 0);
}

TEST(DaemonConfigLaunchTest, ReadsTheRendezvousPorts) {
  auto defaults = Load("port: 8080\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->master_port_base, 29500);
  EXPECT_EQ(defaults->master_port_span, 2000);
  auto moved = Load("master_port_base: 41000\nmaster_port_span: 100\n");
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->master_port_base, 41000);
  EXPECT_EQ(moved->master_port_span, 100);
}

TEST(DaemonConfigSecurityTest, ReadsRootsPoliciesAndAccounts) {
  auto c = Load(R"yaml(
data_roots:
  - {path: /srv/archive/shared, access: read}
  - path: "/srv/archive/{user}"
    access: write
  - {path: /srv/scratch}
entrypoints:
  "cmd:train-ddp": {env_allow: ["WANDB_*", "MY_FLAG"], args_allow: ["--epochs=*"]}
  "cmd:legacy": {free_args: true}
  "builtin:colorize-unet": {env_allow: [OMP_NUM_THREADS]}
  "model:lab-unet": {env_allow: [OMP_NUM_THREADS]}
  "*": {env_allow: [CUDA_LAUNCH_BLOCKING]}
run_as: {alice: alice, bob: lab-bob}
)yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->data_roots.size(), 3u);
  EXPECT_EQ(c->data_roots[0], (DataRoot{"/srv/archive/shared", false}));
  EXPECT_EQ(c->data_roots[1], (DataRoot{"/srv/archive/{user}", true}));
  EXPECT_EQ(c->data_roots[2], (DataRoot{"/srv/scratch", false})) << "read by default";
  ASSERT_EQ(c->entrypoints.size(), 5u);
  EXPECT_EQ(c->entrypoints.at("cmd:train-ddp").env_allow,
            (std::vector<std::string>{"WANDB_*", "MY_FLAG"}));
  EXPECT_EQ(c->entrypoints.at("cmd:train-ddp").args_allow,
            (std::vector<std::string>{"--epochs=*"}));
  EXPECT_FALSE(c->entrypoints.at("cmd:train-ddp").free_args);
  EXPECT_TRUE(c->entrypoints.at("cmd:legacy").free_args);
  EXPECT_EQ(c->entrypoints.at("model:lab-unet").env_allow,
            (std::vector<std::string>{"OMP_NUM_THREADS"}));
  EXPECT_EQ(c->run_as.at("bob"), "lab-bob");
}

TEST(DaemonConfigUsersTest, ReadsWeightsAndLimitsWithADefaultForEveryoneElse) {
  auto c = Load(R"yaml(
users:
  "*": {max_pending_jobs: 200, max_running_jobs: 4}
  alice: {weight: 2.5, max_devices: 6}
)yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->users.For("alice").weight, 2.5);
  EXPECT_EQ(c->users.For("alice").max_devices, 6);
  EXPECT_EQ(c->users.For("alice").max_pending_jobs, 0) << "an own entry replaces \"*\"";
  EXPECT_DOUBLE_EQ(c->users.For("bob").weight, 1.0);
  EXPECT_EQ(c->users.For("bob").max_pending_jobs, 200);
  EXPECT_EQ(c->users.For("bob").max_running_jobs, 4);
  EXPECT_EQ(c->queue_policy, "fair") << "users interleave by default";
  auto none = Load("port: 8080\nqueue_policy: fifo\n");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->queue_policy, "fifo");
  EXPECT_EQ(none->users.For("anyone").max_pending_jobs, 0) << "no limits by default";
}

TEST(DaemonConfigSecurityTest, MistakesNameTheKey) {
  struct Row {
    const char* name;
    const char* yaml;
    const char* field;
  } rows[] = {
      {"root_relative", "data_roots: [{path: srv/a}]", "data_roots[0]"},
      {"root_dot_dot", "data_roots: [{path: /srv/../etc}]", "data_roots[0]"},
      {"root_bad_placeholder", "data_roots: [{path: \"/srv/{group}\"}]", "data_roots[0]"},
      {"root_bad_access", "data_roots: [{path: /srv, access: all}]", "data_roots[0].access"},
      {"root_unknown_key", "data_roots: [{path: /srv, mode: rw}]", "data_roots[0].mode"},
      {"roots_not_a_list", "data_roots: /srv", "data_roots"},
      {"entrypoint_bad_name", "entrypoints: {\"shell:x\": {}}", "entrypoints.shell:x"},
      {"entrypoint_unknown_key", "entrypoints: {\"cmd:x\": {env: [A]}}", "entrypoints.cmd:x.env"},
      {"env_pattern_lower_case", "entrypoints: {\"cmd:x\": {env_allow: [path]}}",
       "entrypoints.cmd:x.env_allow"},
      {"builtin_free_args", "entrypoints: {\"builtin:colorize-unet\": {free_args: true}}",
       "entrypoints.builtin:colorize-unet"},
      {"builtin_args_allow", "entrypoints: {\"builtin:colorize-unet\": {args_allow: [\"*\"]}}",
       "entrypoints.builtin:colorize-unet"},
      {"model_free_args", "entrypoints: {\"model:lab-unet\": {free_args: true}}",
       "entrypoints.model:lab-unet"},
      {"model_args_allow", "entrypoints: {\"model:lab-unet\": {args_allow: [\"*\"]}}",
       "entrypoints.model:lab-unet"},
      {"model_empty_id", "entrypoints: {\"model:\": {}}", "entrypoints.model:"},
      {"run_as_root", "run_as: {alice: root}", "run_as.alice"},
      {"run_as_bad_account", "run_as: {alice: \"a b\"}", "run_as.alice"},
      {"users_not_a_map", "users: [alice]", "users"},
      {"user_not_a_map", "users: {alice: 2}", "users.alice"},
      {"user_zero_weight", "users: {alice: {weight: 0}}", "users.alice.weight"},
      {"user_negative_limit", "users: {\"*\": {max_devices: -1}}", "users.*.max_devices"},
      {"queue_policy_unknown", "queue_policy: lottery", "queue_policy"},
      {"grow_below_one", "grow_min_speedup: 0.5", "grow_min_speedup"},
      {"grow_not_a_number", "grow_min_speedup: fast", "grow_min_speedup"},
      {"move_cost_negative", "move_cost_s: -1", "move_cost_s"},
      {"move_cost_over_a_day", "move_cost_s: 90000", "move_cost_s"},
      {"share_not_a_bool", "share_running_jobs: sometimes", "share_running_jobs"},
      {"restart_moves_not_a_bool", "share_restart_moves: 2", "share_restart_moves"},
      {"catch_up_below_one", "share_catch_up_above: 0.5", "share_catch_up_above"},
      {"catch_up_not_a_number", "share_catch_up_above: often", "share_catch_up_above"},
      {"master_port_privileged", "master_port_base: 80", "master_port_base"},
      {"master_ports_past_65535", "master_port_base: 65000\nmaster_port_span: 1000",
       "master_port_span"},
      {"master_port_span_zero", "master_port_span: 0", "master_port_span"},
      {"user_unknown_key", "users: {alice: {max_gpus: 2}}", "users.alice.max_gpus"},
      {"user_limit_not_a_number", "users: {alice: {max_running_jobs: many}}",
       "users.alice.max_running_jobs"},
  };
  for (const Row& row : rows) {
    auto c = Load(row.yaml);
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << row.name;
    EXPECT_EQ(c.status().field(), row.field) << row.name << ": " << c.status().ToString();
  }
}

}  // namespace
}  // namespace tessera::daemon
