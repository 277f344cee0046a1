// DataRoots: the folders whose data jobs may read and write.
//
// Purpose: tesserad's config names roots (`data_roots`, daemon/daemon_config.h),
// each readable or writable, e.g. a shared archive `/srv/archive/shared`
// (read) and a folder per user `/srv/archive/{user}` (write). A job's
// `dataset` and `checkpoint` must lie under a root its owner may read (a
// writable root is readable too), its `output` under a root its owner may
// write, and so must every item of a list file (daemon/controller/infer_input.h).
//
// Resolution: a path must be absolute and free of ".." components; its
// longest existing prefix is resolved with realpath(3) (every symlink
// followed), the rest appended, and the result must equal a root or lie
// below it, the root being resolved the same way. So a symlink inside a root
// that points out of it is refused like the path it points to. A root that
// does not exist (yet) grants nothing.
//
// `{user}` in a root stands for one path component: the owner's user name
// for users; for admins any name, so admins may use every user's root (and
// every shared one). A user name that is not a valid path component ("",
// ".", "..", or with '/') matches no `{user}` root.
//
// Without any root (a config from before data roots): admins may name any
// path (the old behaviour) and users none: their jobs that name a dataset,
// output or checkpoint are refused, saying that no data roots are
// configured; tesserad warns about it at start.
//
// What this does not do: a path checked here can be swapped (for a symlink)
// before a worker opens it, and workers of train jobs read their dataset
// folder themselves. The account a worker runs as (`run_as`) is what the
// kernel enforces; roots keep honest mistakes and the controller's own reads
// (list files) in bounds.
//
// Errors: kInvalidArgument naming the caller's field; messages never quote
// what a path resolves to.
// Thread safety: immutable after construction; const methods are safe to
// call concurrently. They touch the filesystem (realpath, stat).
#ifndef TESSERA_DAEMON_DATA_ROOTS_H_
#define TESSERA_DAEMON_DATA_ROOTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tessera::daemon {

struct DataRoot {
  std::string path;  // absolute; may contain "{user}" as one whole component
  bool writable = false;

  friend bool operator==(const DataRoot&, const DataRoot&) = default;
};

// Checks a configured root: absolute, no "..", "{user}" only as a whole
// component. Errors name `field`.
Status ValidateDataRoot(const DataRoot& root, std::string_view field);

enum class DataAccess { kRead, kWrite };

// Who is asking: a job's owner and whether they hold the admin role.
struct DataUser {
  std::string name;
  bool admin = false;
};

class DataRoots {
 public:
  // REQUIRES: every root passed ValidateDataRoot.
  explicit DataRoots(std::vector<DataRoot> roots = {});

  bool configured() const { return !roots_.empty(); }
  const std::vector<DataRoot>& roots() const { return roots_; }

  // The resolved form of `path` when `who` may use it with `access`.
  // must_exist: the path itself must exist (an input), else only its
  // parents are resolved (an output folder made later). Without roots:
  // admins get the path as given, users kInvalidArgument.
  Result<std::string> Check(std::string_view path, const DataUser& who, DataAccess access,
                            bool must_exist, std::string_view field) const;

 private:
  std::vector<DataRoot> roots_;
};

// realpath(3) of `path`'s longest existing prefix with the rest appended;
// kInvalidArgument naming `field` for a relative path or one with "..",
// or (must_exist) a path that does not exist.
Result<std::string> ResolvePath(std::string_view path, bool must_exist, std::string_view field);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_DATA_ROOTS_H_
