#include "api/entrypoint_kind.h"

namespace tessera::api {

std::string_view EntrypointPrefix(EntrypointKind kind) {
  switch (kind) {
    case EntrypointKind::kBuiltin:
      return "builtin:";
    case EntrypointKind::kCommand:
      return "cmd:";
    case EntrypointKind::kModel:
      return "model:";
    case EntrypointKind::kUnknown:
      break;
  }
  return "";
}

EntrypointKind EntrypointKindOf(std::string_view name) {
  for (EntrypointKind kind :
       {EntrypointKind::kBuiltin, EntrypointKind::kCommand, EntrypointKind::kModel}) {
    if (name.starts_with(EntrypointPrefix(kind))) return kind;
  }
  return EntrypointKind::kUnknown;
}

std::string_view EntrypointId(std::string_view name) {
  return name.substr(EntrypointPrefix(EntrypointKindOf(name)).size());
}

bool HasCommandPath(EntrypointKind kind) {
  return kind == EntrypointKind::kCommand || kind == EntrypointKind::kModel;
}

}  // namespace tessera::api
