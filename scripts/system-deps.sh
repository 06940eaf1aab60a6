#!/usr/bin/env bash
# Debian packages: `system-deps.sh grade` for grading (bubblewrap, the grading sandbox;
# pocl-opencl-icd, Debian's PoCL with LLVM 15, an OpenCL CPU device that builds on CPUs
# newer than the LLVM of PyPI's PoCL, a Zen 5 for one); `system-deps.sh test` adds what
# the full test suite uses (redis-server, the scaled-out task queue; chromium, browser tests; npm,
# which installs axe-core for the accessibility tests when no npm is on PATH).
# As root with apt: installs what is missing. Otherwise: names what is missing
# and exits 0; the tests that need a missing package skip with that reason
# (except under CI=true, where tests/conftest.py turns those skips into failures),
# and `grade doctor` says what grading lacks.
set -uo pipefail
want=(bubblewrap pocl-opencl-icd)
[ "${1:-test}" = test ] && want+=(redis-server chromium)
[ "${1:-test}" = test ] && ! command -v npm >/dev/null && want+=(npm)
missing=()
for pkg in "${want[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian packages: ${missing[*]}" >&2
    for attempt in 1 2 3; do  # a mirror that hiccups once does not fail the suite
        if apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
            exit 0
        fi
        echo "apt-get failed (attempt $attempt of 3)" >&2
        sleep $((attempt * 5))
    done
    exit 1
fi
echo "not installed: ${missing[*]} (apt-get install ${missing[*]}); the tests that need them will skip" >&2
exit 0
