#!/usr/bin/env bash
# Build and test the C header-only reporter (c/) and the Python package `dta-telemetry` (import
# name `dta`, python/) against the shared spec vectors. Needs only Rust and Python 3 on a Debian
# machine: missing Debian packages and the .venv (maturin, pytest) are installed by
# scripts/setup.sh. Every step runs
# even when an earlier one fails (the runners' counts are what scripts/test-summary.sh reads:
# the C unit binaries' `N checks, N failures` and pytest's summary lines); exits non-zero on any
# failure.
set -uo pipefail
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
failed=()
# Every build of the C library builds the `dta` binary in the same cargo run (c/Makefile
# CARGO_PACKAGES): one feature resolution, one build of the crates they share (the
# `cargo build -p dta` below then finds it current).
export CARGO_PACKAGES="-p dta"
make -s -C c all || failed+=("C build")
# Each unit binary prints "N checks, N failures" (all run even when one fails).
make -s -C c unit || failed+=("C unit")

echo "== Python: build the dta-telemetry package (import name dta; maturin develop into .venv)" >&2
# The distribution was called `dta` before it became `dta-telemetry`: a .venv holding the old
# one would have two distributions owning the same files.
if "$VENV/bin/python" -m pip show dta >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip uninstall --quiet --yes dta >/dev/null 2>&1 || true
fi
(cd python && VIRTUAL_ENV=$VENV PATH=$VENV/bin:$PATH maturin develop --quiet >/dev/null) \
    || failed+=("maturin develop")

# The round trips (c/tests/test_roundtrip.py, python/tests/test_reporter.py) run the `dta`
# binary: build it where python/tests/dta_stack.py looks for it.
echo "== cargo build -p dta (the binary the round-trip tests run)" >&2
if command -v cargo >/dev/null 2>&1; then
    cargo build -q -p dta || failed+=("cargo build -p dta")
    export DTA_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/dta
else
    echo "no cargo: the round-trip tests will be skipped (counted)" >&2
fi

echo "== pytest c/tests (C header vs spec vectors, C example round trip)" >&2
(cd c && "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider tests) | tee "$LOG/c" | tail -n 3
[ "${PIPESTATUS[0]}" -eq 0 ] || failed+=("pytest c/tests")
echo "== pytest python/tests" >&2
(cd python && "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider tests) | tee "$LOG/py" | tail -n 3
[ "${PIPESTATUS[0]}" -eq 0 ] || failed+=("pytest python/tests")

if [ ${#failed[@]} -gt 0 ]; then
    printf 'bindings: FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
