// Section parsers of the config loader (internal); each reports into the shared ErrorSink.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "daemon/config/config.hpp"
#include "daemon/config/toml_reader.hpp"

namespace fo::config::detail {

inline constexpr std::size_t kMaxLocations = 64;
inline constexpr std::size_t kMaxGroups = 256;
inline constexpr std::size_t kMaxProbesPerSite = 32;
inline constexpr std::size_t kMaxStepsPerPhase = 32;

// `interval` is the group's interval when it was valid; interval-dependent checks are skipped
// otherwise so that one bad value does not cascade into several errors.
Site parse_site(const TableReader& group, const std::string& site_key,
                std::optional<core::Millis> interval);
std::vector<Step> parse_steps(const TableReader& group, core::Phase phase);
core::Policy parse_policy(const TableReader& group, std::optional<core::Millis> interval,
                          std::size_t group_locations);

}  // namespace fo::config::detail
