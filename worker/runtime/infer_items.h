// The items of an inference run and where their outputs go.
//
// Items are image paths: relative to the input folder (or to the list
// file's folder), or absolute. Each item's output lands under the output
// folder at the item's path, with ".png" / ".json" appended unless the item
// already ends so ("a/1.png" -> "a/1.png", "a/1.jpg" -> "a/1.jpg.png"), so
// different inputs never share an output.
//
// Thread safety: plain functions of their arguments and the filesystem.
#ifndef TESSERA_WORKER_RUNTIME_INFER_ITEMS_H_
#define TESSERA_WORKER_RUNTIME_INFER_ITEMS_H_

#include <string>
#include <vector>

#include "common/status.h"

namespace tessera::worker {

// Folder `data` (recursive, *.png|*.jpg|*.jpeg in any case, sorted, '/'
// separated paths relative to it; hidden files and anything under
// `exclude_dir` skipped) or a list file (one path per line, blank lines and
// '#' comments skipped, kept as written). kInvalidArgument (field "data")
// when `data` is missing or unreadable, or holds no image.
Result<std::vector<std::string>> ListInputItems(const std::string& data,
                                                const std::string& exclude_dir = {});

// The folder relative items are resolved against: `data` itself when it is
// a folder, else the list file's folder.
std::string DataRoot(const std::string& data);

// Output path of `item` (see the file comment). Absolute items under
// `data_root` map as relative ones; other absolute items keep their whole
// path under `output_dir`. kInvalidArgument for an item that would leave
// `output_dir` ("../x") or is empty.
Result<std::string> OutputPathFor(const std::string& output_dir, const std::string& data_root,
                                  const std::string& item, const std::string& extension);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_INFER_ITEMS_H_
