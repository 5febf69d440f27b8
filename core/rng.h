// Counter-based random numbers: every value is a pure function of (seed, stream, counter), so
// generation is identical whatever the thread count or the order in which rows are produced.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace ip {

IP_HOST_DEVICE std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Hash of a seed and up to three coordinates.
IP_HOST_DEVICE std::uint64_t hash_key(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0) {
  std::uint64_t h = splitmix64(seed ^ 0x6A09E667F3BCC909ull);
  h = splitmix64(h ^ a);
  h = splitmix64(h ^ (b + 0x3C6EF372FE94F82Bull));
  h = splitmix64(h ^ (c + 0xA54FF53A5F1D36F1ull));
  return h;
}

// A small sequential generator seeded from a hash key; used for one row or one decision at a time.
class Rng {
 public:
  explicit Rng(std::uint64_t key) : state_(key) {}
  std::uint64_t next() { return splitmix64(state_++); }
  // Uniform in [0, 1), 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
  // Standard normal by Box-Muller (both values used).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = uniform();
    const double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double th = 6.283185307179586 * u2;
    spare_ = r * std::sin(th);
    has_spare_ = true;
    return r * std::cos(th);
  }

 private:
  std::uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace ip
