#include "worker/data/image.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "worker/data/sample_images.h"

namespace tessera::worker {
namespace {

std::string TempPath(const std::string& name) {
  const std::string dir = testing::TempDir() + "/tessera_image_test";
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

Image Gradient(int64_t w, int64_t h, int64_t channels) {
  Image img = MakeImage(w, h, channels);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t c = 0; c < channels; ++c) {
        img.at(y, x, c) = static_cast<uint8_t>((x * 7 + y * 3 + c * 50) % 256);
      }
    }
  }
  return img;
}

TEST(ImageTest, PngRoundTripIsExact) {
  for (int64_t channels : {1, 3}) {
    const Image img = Gradient(13, 9, channels);
    const std::string path = TempPath("rt" + std::to_string(channels) + ".png");
    ASSERT_TRUE(WritePng(path, img).ok());
    auto back = ReadImage(path);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->width, 13);
    EXPECT_EQ(back->height, 9);
    EXPECT_EQ(back->channels, channels);
    EXPECT_EQ(back->pixels, img.pixels);
  }
}

TEST(ImageTest, JpegDecodesWhatLibjpegEncoded) {
  // Smooth content survives JPEG with small errors.
  Image img = MakeImage(32, 24, 3);
  for (int64_t y = 0; y < 24; ++y) {
    for (int64_t x = 0; x < 32; ++x) {
      img.at(y, x, 0) = static_cast<uint8_t>(200);
      img.at(y, x, 1) = static_cast<uint8_t>(4 * x);
      img.at(y, x, 2) = static_cast<uint8_t>(60 + 2 * y);
    }
  }
  const std::string path = TempPath("smooth.jpg");
  ASSERT_TRUE(WriteJpeg(path, img, 95).ok());
  auto back = ReadImage(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->width, 32);
  ASSERT_EQ(back->height, 24);
  ASSERT_EQ(back->channels, 3);
  double err = 0;
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    err += std::abs(static_cast<int>(img.pixels[i]) - static_cast<int>(back->pixels[i]));
  }
  EXPECT_LT(err / static_cast<double>(img.pixels.size()), 4.0);

  const Image gray = Gradient(16, 16, 1);
  ASSERT_TRUE(WriteJpeg(TempPath("gray.jpeg"), gray).ok());
  auto g = ReadImage(TempPath("gray.jpeg"));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->channels, 1);
}

TEST(ImageTest, CorruptFilesAreInvalidArgumentNamingThePath) {
  const Image img = GenerateSampleImage(1, 24, 9);
  const std::string good_png = TempPath("good.png");
  const std::string good_jpg = TempPath("good.jpg");
  ASSERT_TRUE(WritePng(good_png, img).ok());
  ASSERT_TRUE(WriteJpeg(good_jpg, img).ok());
  auto png = ReadFileBytes(good_png);
  auto jpg = ReadFileBytes(good_jpg);
  ASSERT_TRUE(png.ok());
  ASSERT_TRUE(jpg.ok());

  struct Case {
    std::string name;
    std::vector<uint8_t> bytes;
  };
  std::vector<uint8_t> truncated_png(png->begin(), png->begin() + png->size() / 2);
  std::vector<uint8_t> flipped_png = *png;
  for (size_t i = 40; i < flipped_png.size() && i < 80; ++i) flipped_png[i] ^= 0x5A;
  std::vector<uint8_t> bad_jpg(jpg->begin(), jpg->begin() + 4);
  bad_jpg.insert(bad_jpg.end(), 64, 0x00);
  const std::vector<Case> cases = {
      {"truncated.png", truncated_png},
      {"flipped.png", flipped_png},
      {"header-only.jpg", bad_jpg},
      {"text.png", {'h', 'e', 'l', 'l', 'o'}},
      {"empty.jpg", {}},
      {"magic-only.png", {0x89, 'P', 'N', 'G'}},
  };
  for (const Case& c : cases) {
    const std::string path = TempPath(c.name);
    WriteBytes(path, c.bytes);
    auto r = ReadImage(path);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
  }
  auto missing = ReadImage(TempPath("does-not-exist.png"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(ImageTest, WriteRejectsInconsistentImages) {
  Image bad = MakeImage(4, 4, 3);
  bad.pixels.pop_back();
  EXPECT_EQ(WritePng(TempPath("bad.png"), bad).code(), StatusCode::kInvalidArgument);
  Image two = MakeImage(4, 4, 1);
  two.channels = 2;
  EXPECT_EQ(WritePng(TempPath("bad2.png"), two).code(), StatusCode::kInvalidArgument);
}

TEST(SampleImagesTest, DeterministicColourfulAndLabelled) {
  const std::string a = testing::TempDir() + "/tessera_samples_a";
  const std::string b = testing::TempDir() + "/tessera_samples_b";
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
  auto pa = GenerateSampleImages(a, 7, 24, 42);
  auto pb = GenerateSampleImages(b, 7, 24, 42);
  ASSERT_TRUE(pa.ok());
  ASSERT_TRUE(pb.ok());
  ASSERT_EQ(pa->size(), 7u);
  for (size_t i = 0; i < pa->size(); ++i) {
    EXPECT_EQ(*ReadFileBytes((*pa)[i]), *ReadFileBytes((*pb)[i])) << (*pa)[i];
    const std::string file = std::filesystem::path((*pa)[i]).filename().string();
    EXPECT_EQ(SamplePatternLabel(file), static_cast<int>(i % SamplePatternNames().size())) << file;
    auto img = ReadImage((*pa)[i]);
    ASSERT_TRUE(img.ok());
    EXPECT_EQ(img->channels, 3);
    // Photo-like: real colour (channels differ) and not a flat fill.
    double chroma = 0;
    int lo = 255, hi = 0;
    for (int64_t y = 0; y < 24; ++y) {
      for (int64_t x = 0; x < 24; ++x) {
        chroma += std::abs(img->at(y, x, 0) - img->at(y, x, 2));
        lo = std::min<int>(lo, img->at(y, x, 1));
        hi = std::max<int>(hi, img->at(y, x, 1));
      }
    }
    EXPECT_GT(chroma / (24 * 24), 10.0) << file;
    EXPECT_GT(hi - lo, 20) << file;
  }
  EXPECT_NE(GenerateSampleImage(0, 16, 1).pixels, GenerateSampleImage(0, 16, 2).pixels);
  EXPECT_EQ(SamplePatternLabel("photo.png"), -1);
  EXPECT_FALSE(GenerateSampleImages(a, -1, 24, 1).ok());
}

}  // namespace
}  // namespace tessera::worker
