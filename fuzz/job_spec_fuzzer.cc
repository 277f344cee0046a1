// libFuzzer target: arbitrary bytes -> JSON -> JobSpecFromJson ->
// ValidateJobSpec. Checks that nothing crashes or throws, that every error
// names a field, and that an accepted spec survives ToJson -> FromJson
// unchanged and still validates.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "api/http_status.h"
#include "api/job_spec_validation.h"
#include "api/types.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tessera::api::Json;
  std::string text(reinterpret_cast<const char*>(data), size);
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  auto spec = tessera::api::JobSpecFromJson(j);
  if (!spec.ok()) {
    (void)tessera::api::ErrorBody(spec.status());
    return 0;
  }
  tessera::Status st = tessera::api::ValidateJobSpec(*spec);
  if (!st.ok()) {
    if (st.field().empty()) std::abort();  // every validation error names a field
    if (st.code() != tessera::StatusCode::kInvalidArgument) std::abort();
    (void)tessera::api::ErrorBody(st);
    return 0;
  }
  std::string wire = tessera::api::DumpJson(tessera::api::ToJson(*spec));
  auto again = tessera::api::JobSpecFromJson(Json::parse(wire));
  if (!again.ok() || !(*again == *spec)) std::abort();
  if (!tessera::api::ValidateJobSpec(*again).ok()) std::abort();
  return 0;
}
