// Quantities as people write them in config files, flags and URLs: whole
// numbers ("1024"), byte sizes ("16GiB"), bandwidths ("100Mbit", "12.5MB/s")
// and durations ("2ms").
// The agent's inventory file and tesserad's Slurm config read them.
// Thread safety: pure functions.
#ifndef TESSERA_COMMON_QUANTITIES_H_
#define TESSERA_COMMON_QUANTITIES_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

// "1024", "-3" -> that integer: decimal digits (an optional '-') making up
// the whole text; nullopt for anything else, or outside int64_t.
std::optional<int64_t> ParseWholeNumber(std::string_view text);

// "80GiB", "16G", "512MiB", "1024" -> bytes. Decimal (KB, MB, GB, TB) and
// binary (K, M, G, T, KiB, MiB, GiB, TiB) units; K/M/G/T alone are binary.
std::optional<int64_t> ParseByteSize(std::string_view text);

// "100Mbit", "1Gbit/s", "12.5MB", "1GiB/s", "1.25e9" -> bytes per second
// (units as in the format above, case-insensitive); nullopt unless a finite
// number > 0.
std::optional<double> ParseBandwidth(std::string_view text);

// "2ms", "250us", "0.5s", "0", "1e-3" -> seconds (s, ms, us, ns; a plain
// number is seconds); nullopt unless a finite number >= 0.
std::optional<double> ParseDuration(std::string_view text);

}  // namespace tessera

#endif  // TESSERA_COMMON_QUANTITIES_H_
