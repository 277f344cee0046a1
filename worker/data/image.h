// Image: 8-bit pixels in HWC order, and PNG / JPEG reading and writing.
//
// Decoding never crashes on bad input: a corrupt or truncated file is
// kInvalidArgument whose message names the path; a missing file is
// kNotFound. PNG uses libpng's simplified API (no longjmp into C++ frames);
// JPEG uses libjpeg with an error manager that returns instead of exiting.
// 16-bit PNGs are reduced to 8 bits, palettes expanded, alpha composited
// onto white. Channels after decoding: 1 (gray) or 3 (RGB).
//
// Thread safety: free functions, safe to call concurrently.
#ifndef TESSERA_WORKER_DATA_IMAGE_H_
#define TESSERA_WORKER_DATA_IMAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tessera::worker {

struct Image {
  int64_t width = 0;
  int64_t height = 0;
  int64_t channels = 0;         // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // height * width * channels, row-major HWC

  uint8_t at(int64_t y, int64_t x, int64_t c) const {
    return pixels[static_cast<size_t>((y * width + x) * channels + c)];
  }
  uint8_t& at(int64_t y, int64_t x, int64_t c) {
    return pixels[static_cast<size_t>((y * width + x) * channels + c)];
  }
};

// An all-zero image. REQUIRES: width, height > 0; channels 1 or 3.
Image MakeImage(int64_t width, int64_t height, int64_t channels);

// Reads a PNG or JPEG file, chosen by its first bytes (not the extension).
Result<Image> ReadImage(const std::string& path);

// `name` is used in error messages (usually the path).
Result<Image> DecodePng(const std::vector<uint8_t>& bytes, const std::string& name);
Result<Image> DecodeJpeg(const std::vector<uint8_t>& bytes, const std::string& name);

// Writes atomically enough for tests and samples (direct write).
// kInvalidArgument for an inconsistent Image; kInternal for I/O failures.
Status WritePng(const std::string& path, const Image& image);
// quality in [1, 100].
Status WriteJpeg(const std::string& path, const Image& image, int quality = 90);

// Whole file as bytes; kNotFound if it cannot be opened.
Result<std::vector<uint8_t>> ReadFileBytes(const std::string& path);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_DATA_IMAGE_H_
