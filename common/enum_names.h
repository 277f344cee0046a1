// EnumNames: one constexpr table of {value, name} pairs per enum, and the
// generic lookups that every enum <-> name function of Tessera is built on
// (LayoutName / ParseLayout, JobStateName / ParseJobState, ...).
//
//   constexpr EnumName<Layout> kLayoutNames[] = {
//       {Layout::kAuto, "auto"}, {Layout::kData, "data"}, ...};
//   static_assert(IsValidNameTable(kLayoutNames));
//   std::string_view LayoutName(Layout l) { return NameOf(kLayoutNames, l, "auto"); }
//   std::optional<Layout> ParseLayout(std::string_view s) { return ParseName(kLayoutNames, s); }
//
// Contract:
//   - A table lists each value at most once and each name at most once, and
//     no name is empty; IsValidNameTable checks this at compile time.
//   - NameOf returns the name of the entry holding `value`, or `fallback`
//     ("unknown" unless given) when no entry does, e.g. a value cast from an
//     out-of-range integer or one the table leaves out on purpose.
//   - ParseName matches a name exactly (case-sensitive, no trimming) and
//     returns its value, or nullopt.
//   - ParseNameOrError is ParseName with an error: InvalidArgument
//     "must be a, b or c" (AcceptedNames, in table order) naming `field`.
//   - Unlike a switch, a table is not checked by -Wswitch: an enumerator added
//     later needs its entry added by hand.
//
// Ownership: a table is a constant array of its defining .cc (or header);
// names are string literals, so the string_views returned never dangle.
// Thread safety: pure functions over constant data.
#ifndef TESSERA_COMMON_ENUM_NAMES_H_
#define TESSERA_COMMON_ENUM_NAMES_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace tessera {

// One row of a name table: an enum value and its stable name.
template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// True when every value and every name of `table` appears once and no name is
// empty. Meant for static_assert beside the table.
template <typename E, std::size_t N>
constexpr bool IsValidNameTable(const EnumName<E> (&table)[N]) {
  for (std::size_t i = 0; i < N; ++i) {
    if (table[i].name.empty()) return false;
    for (std::size_t j = i + 1; j < N; ++j) {
      if (table[i].value == table[j].value || table[i].name == table[j].name) return false;
    }
  }
  return true;
}

// The name of `value`; `fallback` when the table has no entry for it.
template <typename E, std::size_t N>
constexpr std::string_view NameOf(const EnumName<E> (&table)[N], E value,
                                  std::string_view fallback = "unknown") {
  for (const EnumName<E>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return fallback;
}

// The value named exactly `text`; nullopt when no entry has that name.
template <typename E, std::size_t N>
constexpr std::optional<E> ParseName(const EnumName<E> (&table)[N], std::string_view text) {
  for (const EnumName<E>& entry : table) {
    if (entry.name == text) return entry.value;
  }
  return std::nullopt;
}

// The names of `table` in order, for an error message: "a", "a or b",
// "a, b or c".
template <typename E, std::size_t N>
std::string AcceptedNames(const EnumName<E> (&table)[N]) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += table[i].name;
  }
  return out;
}

// ParseName, or InvalidArgument("must be " + AcceptedNames(table), field).
template <typename E, std::size_t N>
Result<E> ParseNameOrError(const EnumName<E> (&table)[N], std::string_view text,
                           std::string field) {
  if (std::optional<E> value = ParseName(table, text)) return *value;
  return InvalidArgument("must be " + AcceptedNames(table), std::move(field));
}

}  // namespace tessera

#endif  // TESSERA_COMMON_ENUM_NAMES_H_
