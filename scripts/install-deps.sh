#!/bin/bash
# Installs everything failoverd needs to build, test and run its demo, from Debian 12 packages.
# Idempotent; run as root.
set -euo pipefail

PACKAGES=(
  # toolchain
  g++ cmake ninja-build pkg-config clang-format
  # libraries
  libcurl4-openssl-dev libsqlite3-dev libtomlplusplus-dev libspdlog-dev libsystemd-dev
  libcli11-dev nlohmann-json3-dev catch2
  # demo and tests
  python3 sqlite3 curl procps
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
