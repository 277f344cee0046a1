// Table cells from the API's JSON, as the CLI's commands print them: a
// member as text or a number, byte sizes and measured speeds in readable
// units, and aligned tables (cli/text_table.h).
//
// Thread safety: pure functions.
#ifndef TESSERA_CLI_OUTPUT_FORMAT_H_
#define TESSERA_CLI_OUTPUT_FORMAT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "api/types.h"

namespace tessera::cli {

// `j[key]` as a cell: a string as is, another value as JSON, "" when absent
// or null.
std::string Str(const api::Json& j, const char* key);

// `j[key]` as an integer; 0 when absent or not a number.
int64_t Int(const api::Json& j, const char* key);

// Bytes in GiB with one decimal: "79.6 GiB".
std::string FormatBytes(int64_t bytes);

// A measured speed in the unit that shows it (emulated devices measure the
// CPU they run on): "312.0 TFLOPS", "41.3 GFLOPS", "850.0 MFLOPS"; "-" when
// not measured.
std::string FormatFlops(double tflops);

// Prints rows as a table with aligned columns; the first row is the header.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_OUTPUT_FORMAT_H_
