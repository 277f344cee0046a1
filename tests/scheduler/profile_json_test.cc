#include "scheduler/profile_json.h"

#include <gtest/gtest.h>

namespace tessera::scheduler {
namespace {

nlohmann::json WorkerProfile() {
  return {{"model", "colorize-unet"},
          {"device", "cpu"},
          {"batch", 4},
          {"in_shape", {1, 64, 64}},
          {"layers",
           {{{"name", "enc0"},
             {"fwd_flops", 4.0e8},
             {"fwd_flops_per_sample", 1.0e8},
             {"param_bytes", 4096},
             {"activation_bytes_per_sample", 262144},
             {"output_bytes_per_sample", 131072}},
            {{"name", "head"},
             {"fwd_flops", 0},
             {"param_bytes", 132},
             {"activation_bytes_per_sample", 32768},
             {"output_bytes_per_sample", 32768}}}}};
}

// A layer's measured milliseconds as `profile` writes them: per call of the whole batch
// (`fwd_ms`, `bwd_ms`) and, with `--fixed-batch`, the per-call part of them.
void SetMs(nlohmann::json& layer, double fwd_ms, double bwd_ms) {
  layer["fwd_ms"] = fwd_ms;
  layer["bwd_ms"] = bwd_ms;
}
void SetFixedMs(nlohmann::json& layer, double fwd_fixed_ms, double bwd_fixed_ms) {
  layer["fwd_fixed_ms"] = fwd_fixed_ms;
  layer["bwd_fixed_ms"] = bwd_fixed_ms;
}

bool WorkerProfileHasNoTimes() {
  auto p = ModelProfileFromWorkerJson(WorkerProfile());
  return p.ok() && p->layers[0].measured_forward_ms.empty();
}

TEST(ProfileJsonTest, ConvertsTheWorkersMeasuredLayers) {
  auto p = ModelProfileFromWorkerJson(WorkerProfile());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->layers[0].measured_forward_ms.empty()) << "no fwd_ms: FLOP-based";
  EXPECT_EQ(p->name, "colorize-unet");
  EXPECT_FALSE(p->estimated);
  EXPECT_EQ(p->nominal_image_px, 64);
  EXPECT_EQ(p->input_bytes, 64 * 64 * 4);
  ASSERT_EQ(p->layers.size(), 2u);
  EXPECT_EQ(p->layers[0].name, "enc0");
  EXPECT_DOUBLE_EQ(p->layers[0].forward_flops, 1.0e8);
  EXPECT_EQ(p->layers[0].activation_bytes, 262144);
  EXPECT_EQ(p->layers[0].output_bytes, 131072);
  EXPECT_DOUBLE_EQ(p->layers[1].forward_flops, 1.0) << "no-FLOP layers keep a token cost";
}

TEST(ProfileJsonTest, ReadsBackwardWorkingMemoryAndBatchNorms) {
  nlohmann::json j = WorkerProfile();
  j["layers"][0]["backward_transient_bytes_per_sample"] = 524288;
  j["layers"][0]["batch_norms"] = 2;
  auto p = ModelProfileFromWorkerJson(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->layers[0].backward_transient_bytes, 524288);
  EXPECT_EQ(p->layers[0].batch_norms, 2);
  EXPECT_EQ(p->layers[1].backward_transient_bytes, 0) << "absent: unknown";
  EXPECT_EQ(p->layers[1].batch_norms, 0);
}

TEST(ProfileJsonTest, ReadsWhetherTheModelCanBeSplit) {
  auto plain = ModelProfileFromWorkerJson(WorkerProfile());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->data_parallel_only) << "absent: splittable";
  EXPECT_EQ(plain->max_micro_batches, 0) << "absent: no limit";
  nlohmann::json j = WorkerProfile();
  j["data_parallel_only"] = true;
  j["max_micro_batches"] = 1;
  auto p = ModelProfileFromWorkerJson(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->data_parallel_only);
  EXPECT_EQ(p->max_micro_batches, 1);
  for (auto [key, bad] : {std::pair<const char*, nlohmann::json>{"data_parallel_only", 1},
                          {"max_micro_batches", -1},
                          {"max_micro_batches", 1.5}}) {
    nlohmann::json b = WorkerProfile();
    b[key] = bad;
    auto got = ModelProfileFromWorkerJson(b);
    ASSERT_FALSE(got.ok()) << key;
    EXPECT_EQ(got.status().field(), key);
  }
}

TEST(ProfileJsonTest, MeasuredMillisecondsBecomePerSampleTimesOfTheProfiledDevice) {
  nlohmann::json j = WorkerProfile();
  SetMs(j["layers"][0], 8.0, 20.0);  // whole batch of 4
  SetMs(j["layers"][1], 0.4, 1.2);
  auto p = ModelProfileFromWorkerJson(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->layers[0].measured_forward_ms.at("cpu"), 2.0);
  EXPECT_DOUBLE_EQ(p->layers[0].measured_backward_ms.at("cpu"), 5.0);
  EXPECT_DOUBLE_EQ(p->layers[1].measured_backward_ms.at("cpu"), 0.3);
  EXPECT_TRUE(WorkerProfileHasNoTimes()) << "the base fixture carries no fwd_ms";
}

// A profile measured on a GPU ("device": "cuda:0") lends its times to the CPU's profile
// under the GPU's type; the CPU's times and the rest stay; different layers are refused.
TEST(ProfileJsonTest, AGpusMeasuredTimesJoinTheProfileUnderItsType) {
  nlohmann::json cpu_json = WorkerProfile();
  SetMs(cpu_json["layers"][0], 8.0, 20.0);
  SetMs(cpu_json["layers"][1], 0.4, 1.2);
  nlohmann::json gpu_json = WorkerProfile();
  gpu_json["device"] = "cuda:0";
  SetMs(gpu_json["layers"][0], 0.8, 1.6);  // batch of 4: 0.1 + 0.05 per sample after fixed
  SetFixedMs(gpu_json["layers"][0], 0.4, 0.8);
  SetMs(gpu_json["layers"][1], 0.04, 0.08);
  gpu_json["layers"][1]["opt_ms"] = 0.02;
  auto cpu = ModelProfileFromWorkerJson(cpu_json);
  auto gpu = ModelProfileFromWorkerJson(gpu_json);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  ModelProfile merged = *cpu;
  ASSERT_TRUE(AddMeasuredTimes(*gpu, "cuda:0", "NVIDIA H100 80GB HBM3", &merged).ok());
  const std::string h100 = "NVIDIA H100 80GB HBM3";
  EXPECT_DOUBLE_EQ(merged.layers[0].measured_forward_ms.at(h100), 0.1);
  EXPECT_DOUBLE_EQ(merged.layers[0].measured_backward_ms.at(h100), 0.2);
  EXPECT_DOUBLE_EQ(merged.layers[0].measured_forward_fixed_ms.at(h100), 0.4);
  EXPECT_DOUBLE_EQ(merged.layers[1].measured_backward_ms.at(h100), 0.02);
  EXPECT_DOUBLE_EQ(merged.layers[1].measured_optimizer_ms.at(h100), 0.02);
  EXPECT_FALSE(merged.layers[1].measured_forward_fixed_ms.contains(h100));
  EXPECT_DOUBLE_EQ(merged.layers[0].measured_forward_ms.at("cpu"), 2.0);  // kept
  EXPECT_FALSE(merged.layers[0].measured_forward_ms.contains("cuda:0"));
  EXPECT_EQ(merged.layers[0].forward_flops, cpu->layers[0].forward_flops);

  nlohmann::json other = gpu_json;
  other["layers"][1]["name"] = "tail";
  auto renamed = ModelProfileFromWorkerJson(other);
  ASSERT_TRUE(renamed.ok());
  ModelProfile untouched = *cpu;
  Status s = AddMeasuredTimes(*renamed, "cuda:0", h100, &untouched);
  EXPECT_EQ(s.field(), "layers") << s.ToString();
  EXPECT_EQ(untouched, *cpu);
  other["layers"].erase(1);
  auto shorter = ModelProfileFromWorkerJson(other);
  ASSERT_TRUE(shorter.ok());
  EXPECT_EQ(AddMeasuredTimes(*shorter, "cuda:0", h100, &untouched).field(), "layers");
}

TEST(ProfileJsonTest, FixedMillisecondsArePerMicroBatchAndLeaveThePerSampleRest) {
  nlohmann::json j = WorkerProfile();
  SetMs(j["layers"][0], 8.0, 20.0);  // whole batch of 4: 2 ms per call + 1.5 ms per sample
  SetFixedMs(j["layers"][0], 2.0, 4.0);
  SetMs(j["layers"][1], 0.4, 1.2);  // no fixed part: all per sample
  auto p = ModelProfileFromWorkerJson(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->layers[0].measured_forward_ms.at("cpu"), 1.5);
  EXPECT_DOUBLE_EQ(p->layers[0].measured_backward_ms.at("cpu"), 4.0);
  EXPECT_DOUBLE_EQ(p->layers[0].measured_forward_fixed_ms.at("cpu"), 2.0);
  EXPECT_DOUBLE_EQ(p->layers[0].measured_backward_fixed_ms.at("cpu"), 4.0);
  EXPECT_DOUBLE_EQ(p->layers[1].measured_forward_ms.at("cpu"), 0.1);
  EXPECT_TRUE(p->layers[1].measured_forward_fixed_ms.empty());
}

TEST(ProfileJsonTest, OptimizerStepIsPerLayerAndOptional) {
  nlohmann::json j = WorkerProfile();
  for (auto& l : j["layers"]) SetMs(l, 1.0, 2.0);
  auto without = ModelProfileFromWorkerJson(j);
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_TRUE(without->layers[0].measured_optimizer_ms.empty());
  j["layers"][0]["opt_ms"] = 0.75;
  j["layers"][1]["opt_ms"] = 0.0;
  auto with = ModelProfileFromWorkerJson(j);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_DOUBLE_EQ(with->layers[0].measured_optimizer_ms.at("cpu"), 0.75);
  EXPECT_DOUBLE_EQ(with->layers[1].measured_optimizer_ms.at("cpu"), 0.0);
  j["layers"][0]["opt_ms"] = "slow";
  auto bad = ModelProfileFromWorkerJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "layers[0].opt_ms");
}

TEST(ProfileJsonTest, HaloComesFromTheWorkerWhenItCanTile) {
  nlohmann::json j = WorkerProfile();
  EXPECT_EQ(ModelProfileFromWorkerJson(j)->halo_px, 0) << "absent: not tileable";
  j["halo_px"] = nullptr;
  EXPECT_EQ(ModelProfileFromWorkerJson(j)->halo_px, 0) << "null: not tileable";
  j["halo_px"] = 56;
  EXPECT_EQ(ModelProfileFromWorkerJson(j)->halo_px, 56);
}

TEST(ProfileJsonTest, MalformedFieldsAreNamed) {
  struct Row {
    const char* what;
    std::function<void(nlohmann::json&)> mutate;
    const char* field;
  };
  const Row rows[] = {
      {"no model", [](nlohmann::json& j) { j.erase("model"); }, "model"},
      {"batch 0", [](nlohmann::json& j) { j["batch"] = 0; }, "batch"},
      {"bad shape",
       [](nlohmann::json& j) {
         j["in_shape"] = {1, -2};
       },
       "in_shape"},
      {"no layers", [](nlohmann::json& j) { j["layers"] = nlohmann::json::array(); }, "layers"},
      {"nameless layer", [](nlohmann::json& j) { j["layers"][1].erase("name"); }, "layers[1].name"},
      {"negative bytes", [](nlohmann::json& j) { j["layers"][0]["param_bytes"] = -1; },
       "layers[0].param_bytes"},
      {"no flops", [](nlohmann::json& j) { j["layers"][1].erase("fwd_flops"); },
       "layers[1].fwd_flops"},
      {"empty device", [](nlohmann::json& j) { j["device"] = ""; }, "device"},
      {"negative halo", [](nlohmann::json& j) { j["halo_px"] = -3; }, "halo_px"},
      {"text halo", [](nlohmann::json& j) { j["halo_px"] = "56"; }, "halo_px"},
      {"fwd_ms without bwd_ms", [](nlohmann::json& j) { j["layers"][0]["fwd_ms"] = 1.0; },
       "layers[0].bwd_ms"},
      {"fixed above the batch time",
       [](nlohmann::json& j) {
         SetMs(j["layers"][0], 1.0, 1.0);
         SetFixedMs(j["layers"][0], 2.0, 0.5);
       },
       "layers[0].fwd_fixed_ms"},
      {"fwd_fixed_ms without bwd_fixed_ms",
       [](nlohmann::json& j) {
         SetMs(j["layers"][0], 1.0, 1.0);
         j["layers"][0]["fwd_fixed_ms"] = 0.5;
       },
       "layers[0].bwd_fixed_ms"},
      {"negative ms", [](nlohmann::json& j) { SetMs(j["layers"][0], -1.0, 1.0); },
       "layers[0].fwd_ms"},
  };
  for (const Row& r : rows) {
    nlohmann::json j = WorkerProfile();
    r.mutate(j);
    auto p = ModelProfileFromWorkerJson(j);
    ASSERT_FALSE(p.ok()) << r.what;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << r.what;
    EXPECT_EQ(p.status().field(), r.field) << r.what;
  }
}

}  // namespace
}  // namespace tessera::scheduler
