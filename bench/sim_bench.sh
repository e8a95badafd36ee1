#!/usr/bin/env bash
# Simulation benchmark: generates 1, 7 and 30 days of 10 s rounds x 6 locations (both sites,
# and 30 days of the primary only), runs run_simulate on each through sim_bench and prints a
# Markdown table of wall time, CPU time and max RSS. See bench/README.md.
#   bench/sim_bench.sh [BUILD_DIR]        (default: build-bench next to this folder)
# Environment: BUILD_TYPE (default RelWithDebInfo, the project default), RUNS (default 3; the
# fastest run by CPU time is reported).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench}
RUNS=${RUNS:-3}

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DFO_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" --target sim_bench sim_timeline_gen >/dev/null

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

echo "machine: $(nproc) CPU(s), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| timeline | rows | file | wall s | CPU s | max RSS | events out |"
echo "|---|---|---|---|---|---|---|"

run() {  # days sites
  local days=$1 sites=$2 csv="$T/$1d-$2.csv"
  "$BUILD/bench/sim_timeline_gen" --days "$days" --sites "$sites" --out "$csv" 2>"$T/gen.txt"
  local rows
  rows=$(sed -n 's/.*, \([0-9]*\) rows.*/\1/p' "$T/gen.txt")
  local best="" line
  for _ in $(seq "$RUNS"); do
    "$BUILD/bench/sim_bench" --config "$ROOT/bench/sim_bench.toml" --timeline "$csv" 2>"$T/run.txt"
    line=$(grep '^sim_bench:' "$T/run.txt")
    cpu=$(sed -n 's/.*cpu_s=\([0-9.]*\).*/\1/p' <<<"$line")
    if [[ -z $best ]] || awk "BEGIN{exit !($cpu < $(sed -n 's/.*cpu_s=\([0-9.]*\).*/\1/p' <<<"$best"))}"; then
      best=$line
    fi
  done
  local wall rss lines mb
  wall=$(sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p' <<<"$best")
  cpu=$(sed -n 's/.*cpu_s=\([0-9.]*\).*/\1/p' <<<"$best")
  rss=$(sed -n 's/.*maxrss_kib=\([0-9]*\).*/\1/p' <<<"$best")
  lines=$(sed -n 's/.*out_lines=\([0-9]*\).*/\1/p' <<<"$best")
  mb=$(awk "BEGIN{printf \"%.1f MB\", $(stat -c %s "$csv")/1e6}")
  printf '| %s days, %s | %s | %s | %s | %s | %s | %s |\n' "$days" "$sites" "$rows" "$mb" "$wall" \
    "$cpu" "$(awk "BEGIN{printf \"%.1f MiB\", $rss/1024}")" "$lines"
  rm -f "$csv"
}

run 1 both
run 7 both
run 30 both
run 30 primary
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
