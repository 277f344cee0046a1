// ParseIntList: "1,4,16" -> {1, 4, 16}, the thread-count lists the C++ benchmarks
// take on their command lines. std::stoi's exceptions pass on (a bad list ends the
// benchmark with its message).
#ifndef TESSERA_BENCH_LIB_INT_LIST_H_
#define TESSERA_BENCH_LIB_INT_LIST_H_

#include <sstream>
#include <string>
#include <vector>

namespace tessera::bench {

inline std::vector<int> ParseIntList(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace tessera::bench

#endif  // TESSERA_BENCH_LIB_INT_LIST_H_
