#include "api/entrypoint_kind.h"

#include "common/enum_names.h"

namespace tessera::api {

// kUnknown has no prefix: EntrypointPrefix gives "" for it.
constexpr EnumName<EntrypointKind> kEntrypointPrefixes[] = {
    {EntrypointKind::kBuiltin, "builtin:"},
    {EntrypointKind::kCommand, "cmd:"},
    {EntrypointKind::kModel, "model:"},
};
static_assert(IsValidNameTable(kEntrypointPrefixes));

std::string_view EntrypointPrefix(EntrypointKind kind) {
  return NameOf(kEntrypointPrefixes, kind, "");
}

EntrypointKind EntrypointKindOf(std::string_view name) {
  for (const auto& [kind, prefix] : kEntrypointPrefixes) {
    if (name.starts_with(prefix)) return kind;
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
