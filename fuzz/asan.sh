#!/usr/bin/env bash
# Build sp-scan's C extensions with AddressSanitizer + UndefinedBehaviorSanitizer in a scratch copy
# of the tree (the normal in-place build is left alone) and run the test suite against them.
#
#   fuzz/asan.sh                          # whole suite
#   fuzz/asan.sh tests/test_properties.py # any pytest arguments
#   SP_SCAN_FUZZ_EXAMPLES=2000 fuzz/asan.sh tests/test_properties.py
#   fuzz/asan.sh --replay tests/test_native.py  # then run every saved fuzz input (fuzz/corpus/) once
#
# Env: PYTHON (default: python on PATH, e.g. an activated venv with the dev extra),
#      SP_SCAN_ASAN_DIR (scratch dir; default: a new mktemp dir, removed on exit).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$ROOT/setup.py" ] && [ -d "$ROOT/sp_scan/native" ] || { echo "asan.sh: run it as fuzz/asan.sh from an sp-scan tree" >&2; exit 2; }
PYTHON=${PYTHON:-python}
if [ -n "${SP_SCAN_ASAN_DIR:-}" ]; then
    WORK=$SP_SCAN_ASAN_DIR
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d /tmp/sp-scan-asan.XXXXXX)
    trap 'rm -rf "$WORK"' EXIT
fi

REPLAY=
if [ "${1:-}" = "--replay" ]; then
    REPLAY=1
    shift
fi

tar -C "$ROOT" --exclude=.git --exclude=.venv --exclude=build --exclude='*.so' \
    --exclude=__pycache__ --exclude=.hypothesis -cf - . | tar -C "$WORK" -xf -
cd "$WORK"

SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CC=${CC:-gcc} CFLAGS="$SAN -g -O1" LDFLAGS="$SAN" "$PYTHON" setup.py -q build_ext --inplace >/dev/null

for so in sp_scan/native/_*.so; do
    # grep reads all of nm's output (no -q): under pipefail, nm killed by SIGPIPE would fail the check
    nm -D "$so" | grep __asan_report >/dev/null || { echo "asan.sh: $so is not instrumented" >&2; exit 1; }
done

export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
# Python leaks by design (detect_leaks=0); any single allocation over 1 GiB is reported as an error,
# so a hostile count that reaches malloc shows up even when the allocation would succeed.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:max_allocation_size_mb=1024"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export PYTHONMALLOC=malloc   # Python objects in malloc'd blocks, so reads past a bytes buffer are caught
export PYTHONPATH="$WORK"
unset SP_SCAN_BACKEND

"$PYTHON" -c "import sp_scan.native as n; assert n.ENABLED, 'native extension did not load'"
start=$(date +%s)
"$PYTHON" -m pytest -q -p no:cacheprovider "${@:-tests}"
echo "asan.sh: sanitized test run took $(( $(date +%s) - start )) s" >&2
if [ -n "$REPLAY" ]; then
    # Each target's test_one called directly: libFuzzer does not run here (gcc's libasan breaks its coverage).
    "$PYTHON" fuzz/replay.py
fi
