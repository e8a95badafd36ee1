#!/bin/bash
# Installs everything failoverd needs to build, test and run its demo, from Debian 12 packages.
# Idempotent; run as root.
set -euo pipefail

PACKAGES=(
  # toolchain
  g++ cmake ninja-build pkg-config clang-format
  # libraries
  libcurl4-openssl-dev libsqlite3-dev libtomlplusplus-dev libspdlog-dev libsystemd-dev
  libcli11-dev nlohmann-json3-dev catch2 libmicrohttpd-dev
  # probe kinds: dns (ldns), postgres (libpq); libssl-dev: libcrypto HMAC for the dns step's TSIG
  libldns-dev libpq-dev libssl-dev
  # demo and tests
  python3 sqlite3 curl procps prometheus
  # real servers for the dns, postgres and mTLS http probe tests
  bind9 bind9-dnsutils postgresql-15 openssl
  # the dns step tests: PowerDNS with its sqlite3 backend and HTTP API
  pdns-server pdns-backend-sqlite3
  # systemd step tests: a private bus for the stand-in manager
  dbus-daemon
  # bench/probe_vs_blackbox.sh: target web server and the exporter we compare against (the
  # script runs both by hand; apt's policy-rc.d keeps them stopped)
  nginx prometheus-blackbox-exporter
  # packaging checks (tests/packaging): unit analysis, .deb build and lint, man pages, completion
  systemd dpkg-dev lintian file man-db bash-completion adduser passwd
  # failoverctl timeline --svg tests validate the SVG with xmllint
  libxml2-utils
  # network-namespace testbed (tests/netns): fault injection with nft and iptables
  nftables iptables iproute2
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
