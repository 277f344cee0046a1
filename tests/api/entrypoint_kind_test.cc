// EntrypointKindOf / EntrypointId: the one reading of an entrypoint's prefix.
#include "api/entrypoint_kind.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera::api {
namespace {

struct Row {
  const char* name;
  EntrypointKind kind;
  const char* id;
  bool command_path;
};

class EntrypointKindTest : public ::testing::TestWithParam<Row> {};

TEST_P(EntrypointKindTest, PrefixGivesKindAndId) {
  const Row& row = GetParam();
  EXPECT_EQ(EntrypointKindOf(row.name), row.kind);
  EXPECT_EQ(EntrypointId(row.name), row.id);
  EXPECT_EQ(HasCommandPath(EntrypointKindOf(row.name)), row.command_path);
  if (row.kind != EntrypointKind::kUnknown) {
    EXPECT_EQ(std::string(EntrypointPrefix(row.kind)) + row.id, row.name);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Names, EntrypointKindTest,
    ::testing::Values(Row{"builtin:colorize-unet", EntrypointKind::kBuiltin, "colorize-unet",
                          false},
                      Row{"cmd:train-ddp", EntrypointKind::kCommand, "train-ddp", true},
                      Row{"model:lab-unet", EntrypointKind::kModel, "lab-unet", true},
                      Row{"model:", EntrypointKind::kModel, "", true},
                      Row{"models:x", EntrypointKind::kUnknown, "models:x", false},
                      Row{"Model:x", EntrypointKind::kUnknown, "Model:x", false},
                      Row{"shell:rm", EntrypointKind::kUnknown, "shell:rm", false},
                      Row{"colorize", EntrypointKind::kUnknown, "colorize", false},
                      Row{"", EntrypointKind::kUnknown, "", false}),
    [](const ::testing::TestParamInfo<Row>& info) { return "row" + std::to_string(info.index); });

TEST(EntrypointPrefixTest, UnknownHasNone) {
  EXPECT_EQ(EntrypointPrefix(EntrypointKind::kUnknown), "");
}

}  // namespace
}  // namespace tessera::api
