// Listing an infer job's input (real files in a temporary folder) and
// splitting it into chunks.
#include "daemon/controller/infer_input.h"

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
  auto items = ListInferInputs(root.string(), AnyPath);
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  EXPECT_EQ(*items, (std::vector<std::string>{"a.JPG", "b.png", "box1/c.jpeg", "box1/deep/d.png"}));
}

TEST(InferInputTest, ListFileSkipsBlanksAndComments) {
  testing::TempDir dir;
  fs::path list = dir.File("list.txt");
  const std::string other = dir.File("other/c.png");
  for (const char* item : {"box1/a.png", "box2/b.png", "other/c.png"}) Touch(dir.File(item));
  Touch(list, "# scans of 1931\nbox1/a.png\n\n  box2/b.png  \n" + other + "\n");
  auto items = ListInferInputs(list.string(), AnyPath);
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  EXPECT_EQ(*items, (std::vector<std::string>{"box1/a.png", "box2/b.png", other}));
}

TEST(InferInputTest, BadInputsNameTheDataset) {
  testing::TempDir dir;
  Touch(dir.File("empty/notes.txt"));
  Touch(dir.File("ok.png"));
  Touch(dir.File("escape.txt"), "ok.png\n../../etc/passwd\n");
  Touch(dir.File("gone.txt"), "ok.png\nnot-there.png\n");
  Touch(dir.File("blank.txt"), "# nothing\n\n");
  struct Case {
    std::string dataset;
    std::string message_part;
  } cases[] = {
      {dir.File("missing"), "neither a folder nor a list file"},
      {dir.File("empty"), "no images found"},
      {dir.File("escape.txt"), "line 2"},
      {dir.File("blank.txt"), "no images found"},
      {dir.File("gone.txt"), "line 2"},
  };
  for (const Case& c : cases) {
    auto items = ListInferInputs(c.dataset, AnyPath);
    ASSERT_FALSE(items.ok()) << c.dataset;
    EXPECT_EQ(items.status().code(), StatusCode::kInvalidArgument) << c.dataset;
    EXPECT_EQ(items.status().field(), "dataset");
    EXPECT_NE(items.status().message().find(c.message_part), std::string::npos)
        << items.status().message();
  }
}

// The reader's check: paths under `allowed` only.
InputPathCheck Under(const fs::path& allowed) {
  return [allowed](const std::string& path) -> Status {
    auto real = fs::weakly_canonical(path);
    if (real.string().starts_with(allowed.string() + "/") || real == allowed) return Status::Ok();
    return InvalidArgument("outside", "x");
  };
}

// Every refusal names the dataset and a line, and never quotes the line:
// a list file's content must not reach a message (or a log).
TEST(InferInputTest, TheReadCheckGuardsTheInputItsItemsAndLinks) {
  testing::TempDir dir;
  const fs::path root = dir.File("root");
  Touch(root / "a.png");
  Touch(root / "box/b.png");
  Touch(dir.File("secret/token.png"), "tsj_secret");
  fs::create_directories(root / "links");
  Touch(root / "links/ok.png");
  fs::create_symlink(dir.File("secret/token.png"), root / "links/escape.png");
  Touch(root / "in.txt", "a.png\nbox/b.png\n");
  Touch(root / "out.txt", "a.png\n" + dir.File("secret/token.png") + "\n");
  Touch(root / "rel.txt", "a.png\nsub-link/token.png\n");
  fs::create_symlink(dir.File("secret"), root / "sub-link");
  Touch(dir.File("outside.txt"), "a.png\n");

  struct Case {
    std::string name;
    fs::path dataset;
    std::string message_part;  // "": allowed
  } cases[] = {
      {"list_inside", root / "in.txt", ""},
      {"list_item_outside", root / "out.txt", "line 2 of"},
      {"list_item_through_symlinked_folder", root / "rel.txt", "line 2 of"},
      {"list_file_outside", dir.File("outside.txt"), "input "},
      {"folder_with_escaping_link", root / "links", "the link escape.png"},
  };
  for (const Case& c : cases) {
    auto items = ListInferInputs(c.dataset.string(), Under(root));
    if (c.message_part.empty()) {
      EXPECT_TRUE(items.ok()) << c.name << ": " << items.status().ToString();
      continue;
    }
    ASSERT_FALSE(items.ok()) << c.name;
    EXPECT_EQ(items.status().field(), "dataset") << c.name;
    EXPECT_NE(items.status().message().find(c.message_part), std::string::npos)
        << c.name << ": " << items.status().message();
    EXPECT_EQ(items.status().message().find("token.png"), std::string::npos)
        << c.name << " quotes the item: " << items.status().message();
  }
}

// A submission checks the input and its first items only: a bad item past
// them is left to the listing, which reads the whole input.
TEST(InferInputTest, TheHeadCheckStopsAfterItsItems) {
  testing::TempDir dir;
  Touch(dir.File("a.png"));
  Touch(dir.File("bad-third.txt"), "a.png\na.png\nnot-there.png\na.png\n");
  Touch(dir.File("bad-first.txt"), "# header\nnot-there.png\na.png\n");
  Touch(dir.File("blank.txt"), "# nothing\n");
  struct Case {
    std::string name;
    std::string dataset;
    int64_t max_items;
    std::string message_part;  // "": OK
  } cases[] = {
      {"bad_item_past_the_head", dir.File("bad-third.txt"), 2, ""},
      {"bad_item_at_the_head_end", dir.File("bad-third.txt"), 3, "line 3 of"},
      {"bad_item_first", dir.File("bad-first.txt"), 1, "line 2 of"},
      {"no_items", dir.File("blank.txt"), 5, "no images found"},
      {"missing", dir.File("missing.txt"), 5, "neither a folder nor a list file"},
      {"folder", dir.path().string(), 1, ""},
  };
  for (const Case& c : cases) {
    Status st = CheckInferInputHead(c.dataset, AnyPath, c.max_items);
    if (c.message_part.empty()) {
      EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
      continue;
    }
    EXPECT_EQ(st.field(), "dataset") << c.name << ": " << st.ToString();
    EXPECT_NE(st.message().find(c.message_part), std::string::npos)
        << c.name << ": " << st.message();
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
