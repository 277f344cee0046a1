// Hex: bytes as hexadecimal text and back, the one encoder every module uses
// (token secrets, digests, fingerprints, checkpoint hashes, percent escapes).
//
// Encoding writes two digits per byte, high nibble first, lower-case unless
// asked otherwise. Decoding accepts either case.
//
// Thread safety: pure functions.
#ifndef TESSERA_COMMON_HEX_H_
#define TESSERA_COMMON_HEX_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tessera {

enum class HexCase { kLower, kUpper };

// "\x0f\xa0" -> "0fa0" ("0FA0" with HexCase::kUpper).
std::string HexEncode(std::string_view bytes, HexCase letter_case = HexCase::kLower);
// REQUIRES: `data` points to `size` bytes (or size == 0).
std::string HexEncode(const unsigned char* data, size_t size,
                      HexCase letter_case = HexCase::kLower);

// "0fA0" -> "\x0f\xa0". kInvalidArgument naming `field` when the length is
// odd or a character is not a hex digit.
Result<std::string> HexDecode(std::string_view hex, const std::string& field = {});

// Whether every character of `text` is one of 0-9a-f (what HexEncode writes
// by default); true for "".
bool IsLowerHex(std::string_view text);

}  // namespace tessera

#endif  // TESSERA_COMMON_HEX_H_
