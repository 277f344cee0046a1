#include "worker/data/image.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <csetjmp>
#include <jpeglib.h>
#include <png.h>
// clang-format on

#include <cstring>
#include <iterator>

#include "common/file_system.h"

namespace tessera::worker {
namespace {

Status ValidateImage(const Image& image, const std::string& path) {
  if (image.width <= 0 || image.height <= 0 || (image.channels != 1 && image.channels != 3)) {
    return InvalidArgument("cannot write " + path +
                           ": image must be non-empty with 1 or 3 channels");
  }
  if (image.pixels.size() != static_cast<size_t>(image.width * image.height * image.channels)) {
    return InvalidArgument("cannot write " + path + ": pixel buffer size does not match");
  }
  return Status::Ok();
}

// libjpeg error manager that longjmps back to the decoder instead of exit().
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void JpegSilence(j_common_ptr) {}

// libjpeg's error manager, reporting through `err` (message cleared): what
// cinfo.err takes before the decoder's or the encoder's setjmp.
jpeg_error_mgr* UseJpegError(JpegError* err) {
  jpeg_error_mgr* mgr = jpeg_std_error(&err->mgr);
  err->mgr.error_exit = JpegErrorExit;
  err->mgr.output_message = JpegSilence;
  err->message[0] = '\0';
  return mgr;
}

// Only trivially destructible locals live in this frame, so longjmp is safe.
// Returns false with `err->message` set on failure. `out` is owned by the caller.
bool DecodeJpegRaw(const uint8_t* data, size_t size, JpegError* err, Image* out) {
  jpeg_decompress_struct cinfo;
  cinfo.err = UseJpegError(err);
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (static_cast<uint64_t>(cinfo.image_width) * cinfo.image_height > (uint64_t{1} << 28)) {
    std::snprintf(err->message, sizeof(err->message), "dimensions %ux%u out of range",
                  cinfo.image_width, cinfo.image_height);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  out->width = cinfo.output_width;
  out->height = cinfo.output_height;
  out->channels = cinfo.output_components;
  out->pixels.resize(static_cast<size_t>(out->width * out->height * out->channels));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->pixels.data() +
                   static_cast<size_t>(cinfo.output_scanline) * out->width * out->channels;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

bool EncodeJpegRaw(FILE* file, const Image* image, int quality, JpegError* err) {
  jpeg_compress_struct cinfo;
  cinfo.err = UseJpegError(err);
  if (setjmp(err->jump)) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, file);
  cinfo.image_width = static_cast<JDIMENSION>(image->width);
  cinfo.image_height = static_cast<JDIMENSION>(image->height);
  cinfo.input_components = static_cast<int>(image->channels);
  cinfo.in_color_space = image->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row =
        const_cast<JSAMPROW>(image->pixels.data() + static_cast<size_t>(cinfo.next_scanline) *
                                                        image->width * image->channels);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

bool HasPrefix(const std::vector<uint8_t>& bytes, std::initializer_list<uint8_t> magic) {
  if (bytes.size() < magic.size()) return false;
  return std::equal(magic.begin(), magic.end(), bytes.begin());
}

}  // namespace

Image MakeImage(int64_t width, int64_t height, int64_t channels) {
  Image image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  image.pixels.assign(static_cast<size_t>(width * height * channels), 0);
  return image;
}

Result<std::vector<uint8_t>> ReadFileBytes(const std::string& path) {
  Result<std::string> text = FileSystem::Default()->ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return NotFound("cannot open " + path);
    return Internal("error reading " + path + ": " + text.status().message());
  }
  return std::vector<uint8_t>(text->begin(), text->end());
}

Result<Image> ReadImage(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path));
  if (HasPrefix(bytes, {0x89, 'P', 'N', 'G'})) return DecodePng(bytes, path);
  if (HasPrefix(bytes, {0xFF, 0xD8})) return DecodeJpeg(bytes, path);
  return InvalidArgument(path + ": not a PNG or JPEG file", "path");
}

Result<Image> DecodePng(const std::vector<uint8_t>& bytes, const std::string& name) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) {
    return InvalidArgument(name + ": corrupt PNG: " + png.message, "path");
  }
  const bool color = (png.format & PNG_FORMAT_FLAG_COLOR) != 0;
  png.format = color ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  Image image;
  image.width = png.width;
  image.height = png.height;
  image.channels = color ? 3 : 1;
  if (image.width <= 0 || image.height <= 0 || image.width * image.height > (int64_t{1} << 28)) {
    png_image_free(&png);
    return InvalidArgument(name + ": PNG dimensions out of range", "path");
  }
  image.pixels.resize(PNG_IMAGE_SIZE(png));
  png_color white{255, 255, 255};
  if (!png_image_finish_read(&png, &white, image.pixels.data(), 0, nullptr)) {
    const std::string message = png.message;
    png_image_free(&png);
    return InvalidArgument(name + ": corrupt PNG: " + message, "path");
  }
  return image;
}

Result<Image> DecodeJpeg(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (bytes.empty()) return InvalidArgument(name + ": empty JPEG", "path");
  JpegError err;
  Image image;
  if (!DecodeJpegRaw(bytes.data(), bytes.size(), &err, &image)) {
    return InvalidArgument(name + ": corrupt JPEG: " + err.message, "path");
  }
  if (image.channels != 1 && image.channels != 3) {
    return InvalidArgument(name + ": unsupported JPEG channel count", "path");
  }
  return image;
}

Status WritePng(const std::string& path, const Image& image) {
  TESSERA_RETURN_IF_ERROR(ValidateImage(image, path));
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  if (!png_image_write_to_file(&png, path.c_str(), 0, image.pixels.data(), 0, nullptr)) {
    return Internal("writing " + path + ": " + png.message);
  }
  return Status::Ok();
}

Status WriteJpeg(const std::string& path, const Image& image, int quality) {
  TESSERA_RETURN_IF_ERROR(ValidateImage(image, path));
  if (quality < 1 || quality > 100)
    return InvalidArgument("quality must be in [1, 100]", "quality");
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return Internal("cannot open " + path + " for writing");
  JpegError err;
  const bool ok = EncodeJpegRaw(file, &image, quality, &err);
  const bool closed = std::fclose(file) == 0;
  if (!ok) return Internal("writing " + path + ": " + err.message);
  if (!closed) return Internal("closing " + path);
  return Status::Ok();
}

}  // namespace tessera::worker
