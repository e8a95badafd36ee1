#!/bin/bash
# The whole test suite, exactly as CI runs it: dependencies, formatting, a normal build with
# every test, then the same tests under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

echo "== clang-format"
files=$(git ls-files '*.cpp' '*.hpp' 2>/dev/null || find daemon probes actions ctl tests bench -name '*.[ch]pp')
clang-format --dry-run -Werror $files

echo "== build (RelWithDebInfo)"
./scripts/build.sh build
echo "== tests"
ctest --test-dir build --output-on-failure -j2 --timeout 300

echo "== build (ASan + UBSan)"
./scripts/build.sh build-asan -DFO_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
echo "== tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j2 --timeout 600
