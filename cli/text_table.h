// TextTable: rows of cells as aligned plain-text columns, the CLI's table
// format (two spaces between columns, no trailing spaces, first row is the
// header). Widths count bytes, so cells should be ASCII.
// Thread safety: pure function.
#ifndef TESSERA_CLI_TEXT_TABLE_H_
#define TESSERA_CLI_TEXT_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::cli {

// Every line ends with '\n'.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// A time cell: "2026-11-24 08:59:19Z" (UTC) for milliseconds since the epoch; "-" when
// unix_ms <= 0 (unknown).
std::string FormatUtc(int64_t unix_ms);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_TEXT_TABLE_H_
