// Byte counts as people read them in reasons and tables.
// Thread safety: pure function.
#ifndef TESSERA_SCHEDULER_BYTE_SIZE_H_
#define TESSERA_SCHEDULER_BYTE_SIZE_H_

#include <string>

namespace tessera::scheduler {

// Decimal units with the precision a reason needs: "1.5 GB", "12.3 MB", "640 kB",
// "512 B". A small device's "0.0 GB" must never hide its size.
std::string FormatBytes(double bytes);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_BYTE_SIZE_H_
