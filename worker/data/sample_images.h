// Synthetic, photo-like sample images, so that training, tests and demos
// need nothing downloaded. Deterministic: the same (count, size, seed) gives
// byte-identical files.
//
// Each image is one of SamplePatternNames() (chosen round-robin, so classes
// are balanced): sky/ground gradients, shaded discs, stripes, checkers,
// smooth blobs and rings, each with its own family of colours (so the
// colour is predictable from structure: colorization has a real signal) and
// a little per-pixel texture noise. File names are
// "sample-<index:05>-<pattern>.png"; SamplePatternLabel() recovers the class.
//
// Thread safety: free functions; concurrent calls must use different dirs.
#ifndef TESSERA_WORKER_DATA_SAMPLE_IMAGES_H_
#define TESSERA_WORKER_DATA_SAMPLE_IMAGES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "worker/data/image.h"

namespace tessera::worker {

const std::vector<std::string>& SamplePatternNames();

// Index in SamplePatternNames() of the pattern named in `file_name`
// ("...-<pattern>.<ext>"), or -1.
int SamplePatternLabel(std::string_view file_name);

// One RGB image of `pattern` (an index into SamplePatternNames()).
// REQUIRES: size >= 4, 0 <= pattern < SamplePatternNames().size().
Image GenerateSampleImage(int pattern, int64_t size, uint64_t seed);

// Creates `dir` if needed and writes `count` PNGs; returns their paths in
// index order. kInvalidArgument for count < 0 or size < 4; kInternal for I/O.
Result<std::vector<std::string>> GenerateSampleImages(const std::string& dir, int64_t count,
                                                      int64_t size, uint64_t seed);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_DATA_SAMPLE_IMAGES_H_
