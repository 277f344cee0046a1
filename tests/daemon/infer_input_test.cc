// Listing an infer job's input (real files in a temporary folder) and
// splitting it into chunks.
#include "daemon/infer_input.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

namespace fs = std::filesystem;

void Touch(const fs::path& path, const std::string& text = "x") {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(InferInputTest, FolderListsImagesRecursivelyInByteOrder) {
  testing::TempDir dir;
  fs::path root = dir.File("scans");
  for (std::string name : {"b.png", "a.JPG", "box1/c.jpeg", "box1/deep/d.png", "notes.txt",
                           ".hidden.png", ".tmp/e.png", "box1/.f.png.tmp"}) {
    Touch(root / name);
  }
  auto items = ListInferInputs(root.string());
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  EXPECT_EQ(*items, (std::vector<std::string>{"a.JPG", "b.png", "box1/c.jpeg", "box1/deep/d.png"}));
}

TEST(InferInputTest, ListFileSkipsBlanksAndComments) {
  testing::TempDir dir;
  fs::path list = dir.File("list.txt");
  Touch(list, "# scans of 1931\nbox1/a.png\n\n  box2/b.png  \n/srv/other/c.png\n");
  auto items = ListInferInputs(list.string());
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  EXPECT_EQ(*items, (std::vector<std::string>{"box1/a.png", "box2/b.png", "/srv/other/c.png"}));
}

TEST(InferInputTest, BadInputsNameTheDataset) {
  testing::TempDir dir;
  Touch(dir.File("empty/notes.txt"));
  Touch(dir.File("escape.txt"), "ok.png\n../../etc/passwd\n");
  Touch(dir.File("blank.txt"), "# nothing\n\n");
  struct Case {
    std::string dataset;
    std::string message_part;
  } cases[] = {
      {dir.File("missing"), "neither a folder nor a list file"},
      {dir.File("empty"), "no images found"},
      {dir.File("escape.txt"), "line 2"},
      {dir.File("blank.txt"), "no images found"},
  };
  for (const Case& c : cases) {
    auto items = ListInferInputs(c.dataset);
    ASSERT_FALSE(items.ok()) << c.dataset;
    EXPECT_EQ(items.status().code(), StatusCode::kInvalidArgument) << c.dataset;
    EXPECT_EQ(items.status().field(), "dataset");
    EXPECT_NE(items.status().message().find(c.message_part), std::string::npos)
        << items.status().message();
  }
}

TEST(InferInputTest, SplitIntoChunksKeepsOrderAndSizes) {
  struct Case {
    int items;
    int64_t size;
    std::vector<size_t> sizes;
  } cases[] = {
      {0, 4, {}}, {1, 4, {1}}, {8, 4, {4, 4}}, {9, 4, {4, 4, 1}}, {3, 1, {1, 1, 1}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> items;
    for (int i = 0; i < c.items; ++i) items.push_back(std::to_string(i));
    auto chunks = SplitIntoChunks(items, c.size);
    std::vector<size_t> sizes;
    std::vector<std::string> flat;
    for (const auto& chunk : chunks) {
      sizes.push_back(chunk.size());
      flat.insert(flat.end(), chunk.begin(), chunk.end());
    }
    EXPECT_EQ(sizes, c.sizes) << c.items << " by " << c.size;
    EXPECT_EQ(flat, items);
  }
}

}  // namespace
}  // namespace tessera::daemon
