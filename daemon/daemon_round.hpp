// Round timing of the daemon (daemon_round.cpp): when a round is due, its jitter and its
// deadline. Pure functions, so tests can pin them down with a seed.
#pragma once

#include <random>

#include "daemon/core/types.hpp"

namespace fo {

// Results that arrive later than this after the round started count as missing.
inline core::Millis round_deadline(core::Millis interval) {
  return interval * 8 / 10;
}

// A random offset within +-5% of the interval, so groups and rounds do not fire in bursts.
inline core::Millis round_jitter(core::Millis interval, std::mt19937_64& rng) {
  const int64_t span = interval.count() / 20;
  if (span <= 0) return core::Millis(0);
  return core::Millis(std::uniform_int_distribution<int64_t>(-span, span)(rng));
}

}  // namespace fo
