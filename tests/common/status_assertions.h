// Assertions on a Status, for the tests of every module.
#ifndef TESSERA_TESTS_COMMON_STATUS_ASSERTIONS_H_
#define TESSERA_TESTS_COMMON_STATUS_ASSERTIONS_H_

#include <gtest/gtest.h>

#include <string_view>

#include "common/status.h"

namespace tessera::testing {

// Success when `status` is an invalid-argument error that names `field`
// (StatusCode::kInvalidArgument, status.field() == field); the failure says
// what it is instead.
inline ::testing::AssertionResult InvalidArgumentNaming(const Status& status,
                                                        std::string_view field) {
  if (status.code() == StatusCode::kInvalidArgument && status.field() == field) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "expected invalid_argument naming '" << field << "', got " << status.ToString();
}

}  // namespace tessera::testing

#endif  // TESSERA_TESTS_COMMON_STATUS_ASSERTIONS_H_
