// failoverctl's views: turns control-protocol replies into aligned tables and sentences.
// Pure functions of (JSON, now) so tests can feed canned replies. Odd replies never throw:
// a missing or mistyped field shows as "?".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace fo::ctl {

using Row = std::vector<std::string>;

// Columns separated by two spaces, padded to the widest cell (counted in code points); the last
// column is not padded. Control characters in cells are replaced so replies cannot move the
// cursor or break rows.
std::string render_table(const Row& headers, const std::vector<Row>& rows);

// "2026-11-30T10:00:00Z" (UTC). Values outside years 1970..9999 print as the raw number.
std::string format_utc(int64_t ms);
// "2026-11-30T10:00:00Z (5m ago)"; without the age when now_ms is 0.
std::string format_time(int64_t ms, int64_t now_ms);

// Health of one site: "5/6" (healthy/reporting), "unknown (1/6)" (reporting/configured) when
// too few locations report, "?" when the fields are missing.
std::string site_health(const nlohmann::json& site);

// `status` reply arguments: a header line, the group table, then per group its locations.
std::string render_status(const nlohmann::json& arguments, int64_t now_ms);
// `history` reply arguments: whichever of transitions/actions/rounds/commands it holds.
std::string render_history(const nlohmann::json& arguments, int64_t now_ms);
// `version` reply arguments together with failoverctl's own version.
std::string render_version(const nlohmann::json& arguments, std::string_view client_version);

// What a disruptive verb will do, shown before asking for confirmation. `plan` is the `plan`
// reply's arguments for failover/failback; hold and release have no plan (pass null).
std::string describe_change(std::string_view verb, std::string_view group,
                            const nlohmann::json& plan, bool force);

}  // namespace fo::ctl
