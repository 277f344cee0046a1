// TextTable: rows of cells as aligned plain-text columns, the CLI's table
// format (two spaces between columns, no trailing spaces, first row is the
// header). Widths count bytes, so cells should be ASCII.
// Thread safety: pure function.
#ifndef TESSERA_CLI_TEXT_TABLE_H_
#define TESSERA_CLI_TEXT_TABLE_H_

#include <string>
#include <vector>

namespace tessera::cli {

// Every line ends with '\n'.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_TEXT_TABLE_H_
