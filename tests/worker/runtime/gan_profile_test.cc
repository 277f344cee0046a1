#include "worker/runtime/gan_profile.h"

#include <gtest/gtest.h>

#include <string>

#include "scheduler/planner.h"
#include "scheduler/profile_json.h"
#include "worker/model/gan.h"
#include "worker/model/profile.h"

namespace tessera::worker {
namespace {

GanProfileOptions Small(int64_t batch) {
  GanProfileOptions o;
  o.batch = batch;
  o.image_size = 32;
  o.width = 8;
  o.repeats = 1;
  return o;
}

double Sum(const nlohmann::json& layers, const char* key) {
  double s = 0;
  for (const auto& l : layers) s += l.at(key).get<double>();
  return s;
}

TEST(GanProfileTest, OneWholeStepSharedByGeneratorThenDiscriminatorLayers) {
  auto got = ProfileGan(Small(4));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const nlohmann::json& j = *got;
  ModelConfig mc;
  mc.width = 8;
  mc.image_size = 32;
  auto gan = MakeGan("gan-pix2pix", mc);
  ASSERT_TRUE(gan.ok());
  const size_t gl = gan->generator->num_layers(), dl = gan->discriminator->num_layers();
  EXPECT_EQ(j.at("model"), "gan-pix2pix");
  EXPECT_EQ(j.at("in_shape"), nlohmann::json({1, 32, 32}));
  EXPECT_TRUE(j.at("data_parallel_only").get<bool>());
  EXPECT_EQ(j.at("max_micro_batches"), 1);
  const nlohmann::json& layers = j.at("layers");
  ASSERT_EQ(layers.size(), gl + dl) << "the ranges a data plan's stage covers";
  for (size_t i = 0; i < gl; ++i) {
    EXPECT_EQ(layers[i].at("name").get<std::string>().rfind("g_", 0), 0u) << i;
  }
  for (size_t i = gl; i < gl + dl; ++i) {
    EXPECT_EQ(layers[i].at("name").get<std::string>().rfind("d_", 0), 0u) << i;
  }
  // The layers' times add up to the whole measured step, forward and backward.
  const nlohmann::json& step = j.at("step");
  EXPECT_EQ(step.at("generator_layers"), gl);
  EXPECT_EQ(step.at("discriminator_layers"), dl);
  EXPECT_GT(step.at("fwd_ms").get<double>(), 0);
  EXPECT_GT(step.at("bwd_ms").get<double>(), 0);
  EXPECT_NEAR(Sum(layers, "fwd_ms"), step.at("fwd_ms").get<double>(), 1e-6);
  EXPECT_NEAR(Sum(layers, "bwd_ms"), step.at("bwd_ms").get<double>(), 1e-6);
  // Memory: the step's measured peak, not less; parameters of both networks.
  const double act = step.at("activation_bytes_per_sample").get<double>();
  EXPECT_GE(Sum(layers, "activation_bytes_per_sample"), act);
  EXPECT_LE(Sum(layers, "activation_bytes_per_sample"), act + static_cast<double>(gl + dl));
  int64_t params = 0;
  for (const auto* m : {gan->generator.get(), gan->discriminator.get()}) {
    for (const auto& [n, t] : m->NamedParameters(0, m->num_layers())) {
      params += t.numel() * static_cast<int64_t>(t.element_size());
    }
  }
  EXPECT_EQ(Sum(layers, "param_bytes"), static_cast<double>(params));
  // The step keeps more than the networks' own forward passes do: the discriminator
  // runs three times and the generator's graph lives through the second backward.
  auto d_alone = ProfileModel(*gan->discriminator, 4, {4, 32, 32}, 1);
  auto g_alone = ProfileModel(*gan->generator, 4, {1, 32, 32}, 1);
  ASSERT_TRUE(d_alone.ok() && g_alone.ok());
  const double alone = Sum(g_alone->at("layers"), "activation_bytes_per_sample") +
                       Sum(d_alone->at("layers"), "activation_bytes_per_sample");
  EXPECT_GT(act, alone);
  // Batch norms: the discriminator synchronises three times a step.
  for (size_t i = 0; i < dl; ++i) {
    EXPECT_EQ(layers[gl + i].at("batch_norms").get<int>(),
              3 * d_alone->at("layers")[i].at("batch_norms").get<int>());
  }
}

TEST(GanProfileTest, ThePlannerMakesOnlyDataPlansWithOneMicroBatch) {
  auto j = ProfileGan(Small(4));
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  auto profile = scheduler::ModelProfileFromWorkerJson(*j);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  EXPECT_TRUE(profile->data_parallel_only);
  EXPECT_EQ(profile->max_micro_batches, 1);
  scheduler::ClusterSnapshot cluster;
  scheduler::Node node;
  node.name = "a";
  for (int i = 0; i < 3; ++i) {
    scheduler::Device d;
    d.index = i;
    d.type = "emulated";
    d.measured_as = "cpu";
    d.relative_speed = i == 0 ? 1.0 : 0.5;
    d.memory_bytes = int64_t{8} << 30;
    d.tflops = 1;
    node.devices.push_back(d);
  }
  cluster.nodes.push_back(node);
  scheduler::JobRequest request;
  request.kind = scheduler::JobKind::kTrain;
  request.global_batch = 12;
  auto plans = scheduler::MakePlans(cluster, *profile, request);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  for (const scheduler::Plan& p : plans->plans) {
    EXPECT_EQ(p.layout, scheduler::Layout::kData);
    EXPECT_EQ(p.micro_batches, 1);
    for (const scheduler::Replica& r : p.replicas) {
      ASSERT_EQ(r.stages.size(), 1u);
      EXPECT_EQ(r.stages[0].layer_end, static_cast<int>(profile->layers.size()));
    }
  }
  bool pipeline_reason = false;
  for (const scheduler::Rejection& r : plans->rejected) {
    pipeline_reason |= r.layout == scheduler::Layout::kPipeline &&
                       r.reason.find("cannot be split") != std::string::npos;
  }
  EXPECT_TRUE(pipeline_reason);
}

TEST(GanProfileTest, BadOptionsAreRefused) {
  GanProfileOptions o = Small(0);
  EXPECT_EQ(ProfileGan(o).status().code(), StatusCode::kInvalidArgument);
  o = Small(2);
  o.repeats = 0;
  EXPECT_EQ(ProfileGan(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::worker
