#!/usr/bin/env bash
# Longer runs of the VM front fuzz harness (vm.md §9.2; tests/support/vm_fuzz.py): S8, S11, S12 over mutated
# ELF names, section headers and spans, in warm-cache sequences. Uses atheris if installed
# (pip install -e '.[fuzz]'), else hypothesis. Found cases land in tests/corpus/vm_fuzz/ (replayed by the suite).
#
#   scripts/fuzz.sh [SECONDS] [RUNS] [--driver atheris|hypothesis|random] [--seed N] [--corpus DIR]
#   scripts/fuzz.sh 600            # ten minutes
#   scripts/fuzz.sh 0 20000        # 20,000 cases, no time limit
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-300}"
runs="${2:-0}"
shift $(( $# > 2 ? 2 : $# ))
if [ "$seconds" = 0 ]; then seconds=31536000; fi
export PYTHONPATH="${PYTHONPATH:-$PWD/src}"  # this checkout's code unless the caller names another tree
exec python3 scripts/fuzz_vm.py --seconds "$seconds" --runs "$runs" "$@"
