// ProgressView: how the CLI shows an infer job's progress.
//
// FormatInferenceProgress renders api::InferenceProgress as text lines:
//   images   6400 / 10000  64.0%  [###################-----------]
//   speed    812.5 images/s  eta 4.4 s
//   rank 0   a:0   3200 images   410.2 images/s
// The bar is drawn only for a terminal (a pipe gets the plain numbers).
// Thread safety: pure functions.
#ifndef TESSERA_CLI_PROGRESS_VIEW_H_
#define TESSERA_CLI_PROGRESS_VIEW_H_

#include <string>

#include "api/lease_protocol.h"

namespace tessera::cli {

// "[####------]": `width` cells, filled in proportion to done / total.
std::string ProgressBar(int64_t done, int64_t total, int width);

// "4.4 s", "12 min 5 s", "3 h 20 min", or "unknown" for a negative value.
std::string FormatDuration(double seconds);

// Every line ends with '\n'.
std::string FormatInferenceProgress(const api::InferenceProgress& p, bool terminal);

// One line without '\n' for a live view: images, percent, rate, eta (and
// the bar on a terminal).
std::string InferenceProgressLine(const api::InferenceProgress& p, bool terminal);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_PROGRESS_VIEW_H_
