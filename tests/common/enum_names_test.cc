#include "common/enum_names.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

namespace tessera {
namespace {

enum class Color { kRed, kGreen, kBlue, kUnlisted };

constexpr EnumName<Color> kColorNames[] = {
    {Color::kRed, "red"},
    {Color::kGreen, "green"},
    {Color::kBlue, "blue"},
};
static_assert(IsValidNameTable(kColorNames));

// The lookups are constexpr: a name can be checked at compile time.
static_assert(NameOf(kColorNames, Color::kBlue) == "blue");
static_assert(ParseName(kColorNames, "green") == Color::kGreen);
static_assert(!ParseName(kColorNames, "purple").has_value());

constexpr EnumName<Color> kRepeatedValue[] = {{Color::kRed, "red"}, {Color::kRed, "rouge"}};
constexpr EnumName<Color> kRepeatedName[] = {{Color::kRed, "red"}, {Color::kGreen, "red"}};
constexpr EnumName<Color> kEmptyName[] = {{Color::kRed, "red"}, {Color::kGreen, ""}};
static_assert(!IsValidNameTable(kRepeatedValue));
static_assert(!IsValidNameTable(kRepeatedName));
static_assert(!IsValidNameTable(kEmptyName));

// Plain integers (an ABI's codes) work as keys too.
constexpr EnumName<int> kCodeNames[] = {{0, "zero"}, {10, "ten"}};
static_assert(IsValidNameTable(kCodeNames));

struct NameRow {
  Color value;
  std::string_view name;  // as NameOf returns it with the default fallback
};

TEST(NameOf, Table) {
  const NameRow rows[] = {
      {Color::kRed, "red"},
      {Color::kGreen, "green"},
      {Color::kBlue, "blue"},
      {Color::kUnlisted, "unknown"},
      {static_cast<Color>(42), "unknown"},
  };
  for (const NameRow& row : rows) {
    EXPECT_EQ(NameOf(kColorNames, row.value), row.name) << static_cast<int>(row.value);
  }
}

TEST(NameOf, FallbackIsTheCallersChoice) {
  EXPECT_EQ(NameOf(kColorNames, Color::kUnlisted, "red"), "red");
  EXPECT_EQ(NameOf(kColorNames, static_cast<Color>(-1), ""), "");
  EXPECT_EQ(NameOf(kColorNames, Color::kGreen, "red"), "green");
}

TEST(NameOf, IntegerKeys) {
  EXPECT_EQ(NameOf(kCodeNames, 10, ""), "ten");
  EXPECT_EQ(NameOf(kCodeNames, 5, ""), "");
}

struct ParseRow {
  std::string_view text;
  std::optional<Color> value;  // nullopt: refused
};

TEST(ParseName, Table) {
  const ParseRow rows[] = {
      {"red", Color::kRed},
      {"green", Color::kGreen},
      {"blue", Color::kBlue},
      {"unknown", std::nullopt},  // the fallback name is no name
      {"", std::nullopt},
      {"Red", std::nullopt},  // case-sensitive
      {" red", std::nullopt},
      {"red ", std::nullopt},
      {"re", std::nullopt},
      {"redd", std::nullopt},
      {std::string_view("red\0", 4), std::nullopt},
  };
  for (const ParseRow& row : rows) {
    EXPECT_EQ(ParseName(kColorNames, row.text), row.value) << "'" << row.text << "'";
  }
}

TEST(ParseName, RoundTripsEveryEntry) {
  for (const EnumName<Color>& entry : kColorNames) {
    EXPECT_EQ(ParseName(kColorNames, NameOf(kColorNames, entry.value)), entry.value) << entry.name;
  }
}

TEST(AcceptedNames, ListsTheNamesInTableOrder) {
  constexpr EnumName<Color> kOne[] = {{Color::kRed, "red"}};
  constexpr EnumName<Color> kTwo[] = {{Color::kRed, "red"}, {Color::kGreen, "green"}};
  EXPECT_EQ(AcceptedNames(kOne), "red");
  EXPECT_EQ(AcceptedNames(kTwo), "red or green");
  EXPECT_EQ(AcceptedNames(kColorNames), "red, green or blue");
}

TEST(ParseNameOrError, ValueOrAnErrorNamingTheAcceptedValues) {
  Result<Color> ok = ParseNameOrError(kColorNames, "blue", "color");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, Color::kBlue);

  Result<Color> bad = ParseNameOrError(kColorNames, "purple", "items[2].color");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status(), InvalidArgument("must be red, green or blue", "items[2].color"));
}

}  // namespace
}  // namespace tessera
