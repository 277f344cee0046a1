#include "api/http_status.h"

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

using Json = nlohmann::json;

struct StatusRow {
  StatusCode code;
  int http;
};

TEST(HttpStatusForTest, MapsEveryCode) {
  const StatusRow rows[] = {
      {StatusCode::kOk, 200},
      {StatusCode::kInvalidArgument, 400},
      {StatusCode::kUnauthenticated, 401},
      {StatusCode::kPermissionDenied, 403},
      {StatusCode::kNotFound, 404},
      {StatusCode::kAlreadyExists, 409},
      {StatusCode::kFailedPrecondition, 409},
      {StatusCode::kPayloadTooLarge, 413},
      {StatusCode::kResourceExhausted, 429},
      {StatusCode::kUnimplemented, 501},
      {StatusCode::kUnavailable, 503},
      {StatusCode::kDeadlineExceeded, 504},
      {StatusCode::kInternal, 500},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(HttpStatusFor(row.code), row.http) << StatusCodeName(row.code);
  }
}

TEST(ErrorBodyTest, NamesCodeMessageAndField) {
  Json j = Json::parse(ErrorBody(InvalidArgument("must be positive", "global_batch")));
  EXPECT_EQ(j["error"]["code"], "invalid_argument");
  EXPECT_EQ(j["error"]["message"], "must be positive");
  EXPECT_EQ(j["error"]["field"], "global_batch");
}

TEST(ErrorBodyTest, OmitsEmptyField) {
  Json j = Json::parse(ErrorBody(NotFound("no job 7")));
  EXPECT_EQ(j["error"]["code"], "not_found");
  EXPECT_FALSE(j["error"].contains("field"));
}

TEST(ErrorBodyTest, InvalidUtf8InMessageDoesNotThrow) {
  std::string body = ErrorBody(InvalidArgument(std::string("bad \xff byte"), "name"));
  EXPECT_TRUE(Json::accept(body));
}

TEST(StatusFromErrorBodyTest, RoundTrips) {
  Status st = InvalidArgument("must be positive", "steps");
  EXPECT_EQ(StatusFromErrorBody(400, ErrorBody(st)), st);
  Status denied = PermissionDenied("not your job");
  EXPECT_EQ(StatusFromErrorBody(403, ErrorBody(denied)), denied);
}

TEST(StatusFromErrorBodyTest, NonJsonBodyUsesHttpStatus) {
  Status st = StatusFromErrorBody(503, "upstream down");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "upstream down");
  EXPECT_EQ(StatusFromErrorBody(418, "").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::api
