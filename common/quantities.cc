#include "common/quantities.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <string>

namespace tessera {
namespace {

// A number (decimal, optionally with an exponent) and the unit after it,
// lower-cased, without spaces around either; nullopt for anything else.
struct NumberWithUnit {
  double number = 0;
  std::string unit;
};
std::optional<NumberWithUnit> SplitNumber(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                               text[end] == '.' || text[end] == 'e' || text[end] == 'E' ||
                               ((text[end] == '+' || text[end] == '-') && end > 0 &&
                                (text[end - 1] == 'e' || text[end - 1] == 'E')))) {
    ++end;
  }
  // "1e" would read "1" and leave "e": back off an exponent with no digits.
  while (end > 0 && !std::isdigit(static_cast<unsigned char>(text[end - 1])) &&
         text[end - 1] != '.') {
    --end;
  }
  if (end == 0 || (!std::isdigit(static_cast<unsigned char>(text[0])) && text[0] != '.')) {
    return std::nullopt;
  }
  NumberWithUnit out;
  try {
    size_t used = 0;
    out.number = std::stod(std::string(text.substr(0, end)), &used);
    if (used != end) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!std::isfinite(out.number)) return std::nullopt;
  std::string_view rest = text.substr(end);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) {
    rest.remove_prefix(1);
  }
  for (char c : rest) {
    if (std::isspace(static_cast<unsigned char>(c))) return std::nullopt;
    out.unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

// The factor of a unit prefix: "" 1, k/m/g/t decimal (1000^n) or, where
// `bare_is_binary`, binary; "ki"/"mi"/.. always binary (1024^n). nullopt for
// anything else.
std::optional<double> PrefixFactor(std::string_view prefix, bool bare_is_binary) {
  if (prefix.empty()) return 1.0;
  static constexpr std::string_view kPrefixes = "kmgt";
  const auto pos = kPrefixes.find(prefix[0]);
  if (pos == std::string_view::npos) return std::nullopt;
  const std::string_view rest = prefix.substr(1);
  if (!rest.empty() && rest != "i") return std::nullopt;
  const double base = rest == "i" || bare_is_binary ? 1024 : 1000;
  return std::pow(base, static_cast<double>(pos + 1));
}

}  // namespace

std::optional<int64_t> ParseWholeNumber(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::optional<double> ParseBandwidth(std::string_view text) {
  auto n = SplitNumber(text);
  if (!n) return std::nullopt;
  std::string_view unit = n->unit;
  if (unit.ends_with("/s")) unit.remove_suffix(2);
  std::optional<double> factor;
  if (unit.ends_with("bit")) {
    // Bit units: Kbit, Mbit, .. decimal; Kibit, Mibit, .. binary.
    factor = PrefixFactor(unit.substr(0, unit.size() - 3), /*bare_is_binary=*/false);
    if (factor) *factor /= 8;
  } else if (unit.empty() || unit == "b") {
    factor = 1.0;
  } else if (unit.size() == 2 && unit[1] == 'b') {
    factor = PrefixFactor(unit.substr(0, 1), /*bare_is_binary=*/false);  // KB, MB: decimal
  } else {
    if (unit.ends_with("ib")) unit.remove_suffix(1);       // KiB -> Ki
    factor = PrefixFactor(unit, /*bare_is_binary=*/true);  // K, Ki: binary
  }
  if (!factor) return std::nullopt;
  const double bytes_per_s = n->number * *factor;
  if (!(bytes_per_s > 0) || !std::isfinite(bytes_per_s)) return std::nullopt;
  return bytes_per_s;
}

std::optional<double> ParseDuration(std::string_view text) {
  auto n = SplitNumber(text);
  if (!n) return std::nullopt;
  double scale = 0;
  if (n->unit.empty() || n->unit == "s") {
    scale = 1;
  } else if (n->unit == "ms") {
    scale = 1e-3;
  } else if (n->unit == "us") {
    scale = 1e-6;
  } else if (n->unit == "ns") {
    scale = 1e-9;
  } else {
    return std::nullopt;
  }
  const double seconds = n->number * scale;
  if (!(seconds >= 0) || !std::isfinite(seconds)) return std::nullopt;
  return seconds;
}

std::optional<int64_t> ParseByteSize(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t start = i;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == start) return std::nullopt;
  double number = 0;
  try {
    size_t used = 0;
    number = std::stod(std::string(text.substr(start, i - start)), &used);
    if (used != i - start) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  std::string unit;
  for (; i < text.size(); ++i) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) break;
    unit.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(text[i]))));
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i != text.size()) return std::nullopt;
  double scale = 1;
  if (unit.empty() || unit == "B") {
    scale = 1;
  } else {
    static constexpr std::string_view kPrefixes = "KMGT";
    auto pos = kPrefixes.find(unit[0]);
    if (pos == std::string_view::npos) return std::nullopt;
    std::string rest = unit.substr(1);
    double base = 0;
    if (rest.empty() || rest == "I" || rest == "IB") {
      base = 1024;
    } else if (rest == "B") {
      base = 1000;
    } else {
      return std::nullopt;
    }
    scale = std::pow(base, static_cast<double>(pos + 1));
  }
  double bytes = number * scale;
  if (bytes > static_cast<double>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  // Plain byte counts must be whole.
  if (unit.empty() && number != std::floor(number)) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

}  // namespace tessera
