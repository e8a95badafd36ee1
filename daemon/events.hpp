// Stable journald MESSAGE_IDs, one per event kind. The operator-facing explanations live in
// packaging/failoverd.catalog; these values are a contract and never change.
#pragma once

#include <string_view>

namespace fo::events {

inline constexpr std::string_view kTransition = "75eddf3295aa42f2a0519656338e97f4";
inline constexpr std::string_view kWarm = "286e1736d8c249a5a67fc3d04ec08e74";
inline constexpr std::string_view kFailoverStarted = "c9d600d565b246a392d5898a392b3e8d";
inline constexpr std::string_view kFailoverFinished = "300daa781c314beabc3e395e89ae9c43";
inline constexpr std::string_view kFailoverFailed = "62e4cab335904a29918b344c9d983355";
inline constexpr std::string_view kFailbackStarted = "69c534ff76904405a5d37edf83087059";
inline constexpr std::string_view kFailbackFinished = "c100dcab741440cc9ff79296e6e6c666";
inline constexpr std::string_view kFailbackFailed = "b8316fff56a84d308e71a0bdbe795868";
inline constexpr std::string_view kHeld = "0f970dd04aa04df092a9038a0eb5c592";
inline constexpr std::string_view kActionFailed = "dbdf1d51241b47be8aa8f0377ebb91cb";
inline constexpr std::string_view kConfigReloaded = "0e19109e431c4e84a2046c0533f10e0d";
inline constexpr std::string_view kConfigRejected = "e66ecd7a751d4d0bb23eb63c45b4f2e9";
inline constexpr std::string_view kAlert = "e542b9d02a0c481cadcb11cb6aa88427";
inline constexpr std::string_view kCool = "54b34c82771e4b6e844161ef319da554";
inline constexpr std::string_view kReconcileDrift = "c8acfe6f6a574a59989a2734ee11115e";

}  // namespace fo::events
