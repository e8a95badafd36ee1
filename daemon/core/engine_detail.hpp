// Small helpers shared by the engine's translation units. Internal to daemon/core.
#pragma once

#include <cstdio>
#include <string>

namespace fo::core::detail {

// 0.5 -> "50%", 0.833 -> "83%", 1 -> "100%".
inline std::string pct(double ratio) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", ratio * 100.0);
  return buf;
}

}  // namespace fo::core::detail
