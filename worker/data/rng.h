// Small deterministic random numbers for data pipelines: the same seeds give
// the same numbers on every platform (unlike std:: distributions).
//
// Thread safety: an Rng is a value; do not share one between threads.
#ifndef TESSERA_WORKER_DATA_RNG_H_
#define TESSERA_WORKER_DATA_RNG_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numbers>

namespace tessera::worker {

// SplitMix64 finaliser.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Order-sensitive combination of several values into one seed.
inline uint64_t MixSeeds(std::initializer_list<uint64_t> values) {
  uint64_t h = 0x6A09E667F3BCC909ull;
  for (uint64_t v : values) h = Mix64(h ^ Mix64(v));
  return h;
}

// xoshiro256** seeded through SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_) {
      seed += 0x9E3779B97F4A7C15ull;
      s = Mix64(seed);
    }
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n). REQUIRES: n > 0. (Modulo; bias < n / 2^64.)
  uint64_t Below(uint64_t n) { return Next() % n; }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Standard normal (Box-Muller).
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = Uniform();
    while (u1 <= 0.0) u1 = Uniform();
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_DATA_RNG_H_
