#include "common/hex.h"

namespace tessera {
namespace {

constexpr char kLowerDigits[] = "0123456789abcdef";
constexpr char kUpperDigits[] = "0123456789ABCDEF";

// The value of one hex digit, or -1.
int DigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string HexEncode(const unsigned char* data, size_t size, HexCase letter_case) {
  const char* digits = letter_case == HexCase::kUpper ? kUpperDigits : kLowerDigits;
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(digits[data[i] >> 4]);
    out.push_back(digits[data[i] & 0xf]);
  }
  return out;
}

std::string HexEncode(std::string_view bytes, HexCase letter_case) {
  return HexEncode(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), letter_case);
}

Result<std::string> HexDecode(std::string_view hex, const std::string& field) {
  if (hex.size() % 2 != 0) return InvalidArgument("must have an even number of hex digits", field);
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = DigitValue(hex[i]);
    const int lo = DigitValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgument("must hold hex digits only", field);
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

bool IsLowerHex(std::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace tessera
