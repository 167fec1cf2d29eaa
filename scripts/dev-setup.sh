#!/usr/bin/env bash
# Install wakeful with its test extra, plus the few Debian tools the test suite uses.
# Safe to run again; used by the README's test command and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'

# strace traces the compiler step in the build confinement tests (build.md §6 row 26).
if ! command -v strace >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null) \
    || echo "dev-setup: could not install strace; the compile-trace test will be skipped" >&2
fi
# chromium: the dashboard's browser tests drive Debian's build through Playwright (interfaces.md §6, §8);
# `playwright install` is never run (no browser download).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "dev-setup: could not install chromium; the dashboard browser tests will be skipped" >&2
fi
echo "dev-setup: done"
