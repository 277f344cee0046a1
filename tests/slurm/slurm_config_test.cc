// The `slurm:` block of tesserad's config.
#include "slurm/slurm_config.h"

#include <gtest/gtest.h>

namespace tessera::slurm {
namespace {

constexpr char kGood[] = R"yaml(
port: 8080
slurm:
  url: http://127.0.0.1:6820
  user: tessera
  token_file: /etc/tessera/slurm.jwt
  partition: gpu
  poll_interval_ms: 250
  gpu_types:
    a100: {tflops: 19.5, memory: 80GiB}
    t4: {tflops: 0.05, relative_speed: 0.5, memory: 1GiB, emulated: true}
)yaml";

TEST(SlurmConfigTest, ReadsTheBlock) {
  auto c = ParseSlurmConfig(kGood);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->has_value());
  const SlurmConfig& s = **c;
  EXPECT_EQ(s.url, "http://127.0.0.1:6820");
  EXPECT_EQ(s.user, "tessera");
  EXPECT_EQ(s.partition, "gpu");
  EXPECT_EQ(s.poll_interval_ms, 250);
  ASSERT_EQ(s.gpu_types.size(), 2u);
  EXPECT_DOUBLE_EQ(s.gpu_types.at("a100").tflops, 19.5);
  EXPECT_EQ(s.gpu_types.at("a100").memory_bytes, int64_t{80} << 30);
  EXPECT_FALSE(s.gpu_types.at("a100").emulated);
  EXPECT_TRUE(s.gpu_types.at("t4").emulated);
  EXPECT_DOUBLE_EQ(s.gpu_types.at("t4").relative_speed, 0.5);
}

TEST(SlurmConfigTest, NoBlockNoPool) {
  auto c = ParseSlurmConfig("port: 8080\n");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
}

TEST(SlurmConfigTest, NamesTheBadField) {
  const std::string base =
      "slurm:\n  url: http://h:1\n  user: u\n  token_file: /t\n  gpu_types:\n"
      "    a100: {tflops: 1, memory: 1GiB}\n";
  struct Case {
    std::string yaml;
    std::string field;
  };
  const Case cases[] = {
      {"slurm: 3\n", "slurm"},
      {base + "  colour: blue\n", "slurm.colour"},
      {"slurm:\n  url: https://h:1\n  user: u\n  token_file: /t\n", "slurm.url"},
      {"slurm:\n  url: http://h\n  user: u\n  token_file: /t\n", "slurm.url"},
      {"slurm:\n  url: http://h:1\n  token_file: /t\n  gpu_types: {a: {tflops: 1, memory: 1GiB}}\n",
       "slurm.user"},
      {"slurm:\n  url: http://h:1\n  user: u\n  gpu_types: {a: {tflops: 1, memory: 1GiB}}\n",
       "slurm.token_file"},
      {"slurm:\n  url: http://h:1\n  user: u\n  token_file: /t\n", "slurm.gpu_types"},
      {"slurm:\n  gpu_types: {a100: {tflops: 1}}\n", "slurm.gpu_types.a100.memory"},
      {"slurm:\n  gpu_types: {a100: {tflops: -1, memory: 1GiB}}\n", "slurm.gpu_types.a100.tflops"},
      {"slurm:\n  gpu_types: {a100: {memory: lots}}\n", "slurm.gpu_types.a100.memory"},
      {"slurm:\n  gpu_types: {a100: {memory: 1GiB}}\n", "slurm.gpu_types.a100.tflops"},
      {"slurm:\n  gpu_types: {a100: {memory: 1GiB, relative_speed: 0.5}}\n",
       "slurm.gpu_types.a100.tflops"},
      {"slurm:\n  gpu_types: {a100: {memory: 1GiB, tflops: 1, colour: red}}\n",
       "slurm.gpu_types.a100.colour"},
      {base + "  poll_interval_ms: 1\n", "slurm.poll_interval_ms"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    auto r = ParseSlurmConfig(c.yaml);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), c.field);
  }
}

}  // namespace
}  // namespace tessera::slurm
