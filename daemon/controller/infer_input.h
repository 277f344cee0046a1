// InferInput: what an infer job reads, listed and split into chunks.
//
// Purpose: the controller lists a job's input once, before its first
// attempt, and stores it as chunks (Store::InsertChunks) that ranks lease.
// - A folder: every image file below it (.png, .jpg, .jpeg, any case),
//   recursively, as paths relative to the folder, in byte order. Hidden
//   entries (names starting with '.') are skipped, so a worker's temporary
//   files never become inputs.
// - A list file: one path per line; blank lines and lines starting with '#'
//   are skipped; relative paths are relative to the list file's folder.
// An item may not contain a ".." component (outputs are written under the
// job's output folder at the item's relative path).
//
// Where the job may read (daemon/data_roots.h): `may_read` is asked about the
// input itself before it is opened, about every item of a list file (as an
// absolute path) and about every symlink found in a folder; an item must
// also be an existing regular file. A refused item fails the listing naming
// its line, never quoting it: a list file's content reaches no log or
// message.
//
// Errors: kInvalidArgument naming "dataset" for a missing or unreadable
// input, an input without images, or a bad line (with its number).
// Thread safety: pure functions over the filesystem; no lock needed (call
// them outside the controller's lock: a large input takes a while).
#ifndef TESSERA_DAEMON_CONTROLLER_INFER_INPUT_H_
#define TESSERA_DAEMON_CONTROLLER_INFER_INPUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tessera::daemon {

// OK when the job may read `path` (absolute); else an error (its field is
// replaced by "dataset").
using InputPathCheck = std::function<Status(const std::string& path)>;

// An InputPathCheck that allows everything (tools and tests that list an
// input of their own).
Status AnyPath(const std::string& path);

Result<std::vector<std::string>> ListInferInputs(const std::string& dataset,
                                                 const InputPathCheck& may_read);

// ListInferInputs without holding the list: each item is handed to `emit`
// as it is found, with the same checks and errors (an error from `emit`
// stops the listing and is returned). Memory stays bounded by the folder
// depth, however many items there are. Order: a list file's order; a
// folder's items as the directory walk meets them (not sorted).
Status ForEachInferInput(const std::string& dataset, const InputPathCheck& may_read,
                         const std::function<Status(std::string item)>& emit);

// ForEachInferInput's checks of the input and of its first `max_items` items
// only, holding none of them: what a submission can afford to check at once
// (a bad item among them is a 400 rather than a failed job); the listing
// checks every item. OK for an input with at least one item that passes.
// REQUIRES: max_items >= 1.
Status CheckInferInputHead(const std::string& dataset, const InputPathCheck& may_read,
                           int64_t max_items);

// Consecutive chunks of at most `chunk_size` items, in order.
// REQUIRES: chunk_size >= 1.
std::vector<std::vector<std::string>> SplitIntoChunks(const std::vector<std::string>& items,
                                                      int64_t chunk_size);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_INFER_INPUT_H_
