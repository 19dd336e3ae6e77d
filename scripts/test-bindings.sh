#!/usr/bin/env bash
# Build and test the C header-only reporter (c/) and the Python package `dta` (python/) against
# the shared spec vectors. Needs only Rust and Python 3 on a Debian machine: missing Debian
# packages and the .venv (maturin, pytest) are installed by scripts/setup.sh. Exits non-zero on
# any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv
LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT

if ! command -v make >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1 \
    || ! "$VENV/bin/python" -c 'import pytest' >/dev/null 2>&1 \
    || [ ! -x "$VENV/bin/maturin" ]; then
    if [ -x scripts/setup.sh ]; then
        scripts/setup.sh
    else
        [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.5,<2" "pytest>=7"
    fi
fi

echo "== C: build (gcc$(command -v clang >/dev/null 2>&1 && echo ', clang'); -Wall -Wextra -Werror -std=c99 -pedantic) and unit tests" >&2
make -s -C c all
make -s -C c unit

echo "== Python: build the dta package (maturin develop into .venv)" >&2
(cd python && VIRTUAL_ENV=$VENV PATH=$VENV/bin:$PATH maturin develop --quiet >/dev/null)

# The round trips (c/tests/test_roundtrip.py, python/tests/test_reporter.py) run the `dta`
# binary: build it where python/tests/dta_stack.py looks for it.
echo "== cargo build -p dta (the binary the round-trip tests run)" >&2
if command -v cargo >/dev/null 2>&1; then
    cargo build -q -p dta
    export DTA_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/dta
else
    echo "no cargo: the round-trip tests will be skipped (counted below)" >&2
fi

# -rs lists every skip with its reason; skips are counted, never reported as passes.
echo "== pytest c/tests (C header vs spec vectors, C example round trip)" >&2
(cd c && "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider tests) | tee "$LOG/c" | tail -n 8
echo "== pytest python/tests" >&2
(cd python && "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider tests) | tee "$LOG/py" | tail -n 8

# pytest's summary line ("3 passed, 2 skipped in ..."): the count before WORD, 0 if absent.
count() {
    local n
    n=$(grep -Eo "[0-9]+ $1" "$2" | awk '{print $1}' | tail -n1) || true
    echo "${n:-0}"
}
echo "bindings: C $(count passed "$LOG/c") passed, $(count skipped "$LOG/c") skipped;" \
    "Python $(count passed "$LOG/py") passed, $(count skipped "$LOG/py") skipped; 0 failed"
