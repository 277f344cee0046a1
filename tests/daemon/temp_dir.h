// TempDir for the daemon's tests: the one in tests/common (a fresh folder
// under the system temp folder, removed with its contents on destruction),
// named in the daemon's test namespace.
#ifndef TESSERA_TESTS_DAEMON_TEMP_DIR_H_
#define TESSERA_TESTS_DAEMON_TEMP_DIR_H_

#include "tests/common/temp_dir.h"

namespace tessera::daemon::testing {

using ::tessera::testing::TempDir;

}  // namespace tessera::daemon::testing

#endif  // TESSERA_TESTS_DAEMON_TEMP_DIR_H_
