#!/usr/bin/env bash
# The test suite: formatting, lints, Rust tests, the C and Python bindings against the shared
# spec vectors (ours and the independent ones), and a short fuzzing run of every network parser.
#
# Every step runs even when an earlier one fails; the last line is the summary, taken from the
# runners' own counts:   tests: N passed, N failed, N skipped
#   cargo   `test result:` lines; a test that skipped itself through `dta_testkit::skip!` is
#           reported by cargo as passed, so the lines of $DTA_SKIP_LOG move from passed to
#           skipped; `ignored` counts as skipped.
#   pytest  its summary line (passed / failed + errors / skipped + xfailed).
#   C       the unit binaries' `N checks, N failures` lines.
#   fuzz    fuzz/run.sh's `fuzz: N passed, N failed` (one test per target).
#   faults  scripts/faults.sh's `faults: N passed, N failed, N skipped` (one test per case).
# A step that fails without a count of its own (fmt, clippy, a build) adds 1 to failed.
# The exit status is non-zero when anything failed.
#
# CI=true sets DTA_REQUIRE_ALL=1: a test the README promises (XDP, network namespaces, Redis,
# fuzzing) that would skip here fails instead.
set -uo pipefail
cd "$(dirname "$0")/.."
setup_t0=$SECONDS
scripts/setup.sh || { echo "setup failed" >&2; echo "tests: 0 passed, 1 failed, 0 skipped"; exit 1; }
setup_s=$((SECONDS - setup_t0))

LOGS=target/test-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
SKIP_LOG=$PWD/$LOGS/skips
: >"$SKIP_LOG"
if [ "${CI:-}" = true ]; then
    export DTA_REQUIRE_ALL=1
fi
# One build of the workspace serves every step: the debug profile is given the test profile's
# optimisation (Cargo.toml), so the C library, the Python extension, the `dta` binary the
# round trips run and `cargo test` share their compiled crates. CI builds from a clean checkout
# once, so it writes no incremental state.
export CARGO_PROFILE_DEV_OPT_LEVEL=2
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL=0
fi
# Every Rust build of the suite links with mold where it is installed (scripts/setup.sh): over a
# hundred test binaries, the C library, the Python extension and the fuzz targets, which GNU ld
# spends minutes of the CI budget on. One RUSTFLAGS for every step, so they share one build.
if command -v mold >/dev/null 2>&1; then
    export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C link-arg=-fuse-ld=mold"
fi

failed_steps=()
step_times=("$setup_s s  setup (scripts/setup.sh)")
uncounted_failures=0
extra_skipped=0

# step NAME LOG COUNTED CMD...: run CMD, its output to the terminal and to $LOGS/LOG. COUNTED=1
# when the step's runner reports its own counts (a failure then shows in them).
step() {
    local name=$1 log=$2 counted=$3
    shift 3
    echo "== $name" >&2
    local t0=$SECONDS
    "$@" 2>&1 | tee "$LOGS/$log"
    local rc=${PIPESTATUS[0]}
    # Each step's wall time, for the CI budget (40 minutes on a 2-core machine).
    echo "== $name: $((SECONDS - t0)) s" >&2
    step_times+=("$((SECONDS - t0)) s  $name")
    if [ "$rc" -ne 0 ]; then
        failed_steps+=("$name (exit $rc)")
        if [ "$counted" = 0 ] || ! has_counts "$LOGS/$log"; then
            uncounted_failures=$((uncounted_failures + 1))
        fi
    fi
}

has_counts() {
    grep -Eq '^test result: |[0-9]+ (passed|failed|error)s? .*in [0-9.]+s|^[0-9]+ checks, [0-9]+ failures$|^fuzz: [0-9]+ passed, [0-9]+ failed$|^faults: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1"
}

step "cargo fmt" fmt.log 0 cargo fmt --all -- --check
step "architecture (docs/architecture.md against cargo metadata; import loops; file sizes)" architecture.log 0 \
    python3 scripts/check_architecture.py
# The rdma-core collector (dta-rnic's `rdma-core` feature, through `dta/rdma-core`) is linted
# and tested in the workspace's own runs: one build of the workspace with the feature, not a
# second one of its crates with other features. Skipped (counted) without rdma-core.
rnic_features=()
if pkg-config --exists libibverbs librdmacm 2>/dev/null; then
    rnic_features=(--features dta/rdma-core)
else
    echo "== rdma-core collector SKIPPED: libibverbs-dev / librdmacm-dev missing (DTA_RDMA_CORE=0?)" >&2
    extra_skipped=$((extra_skipped + 1))
fi
step "cargo clippy" clippy.log 0 cargo clippy --workspace --all-targets "${rnic_features[@]}" --quiet -- -D warnings
# The bindings first: they install the `dta` Python package into .venv, which the many-collectors
# namespace test (crates/front/dta/tests/cluster_netns.rs) queries through.
step "C and Python bindings" bindings-test.log 1 scripts/test-bindings.sh
step "cargo test" cargo-test.log 1 env DTA_SKIP_LOG="$SKIP_LOG" cargo test --workspace --no-fail-fast "${rnic_features[@]}" --quiet
# The InvisiFlow simulation's smoke run: ns-3 with the real DTA collector linked in through the
# C ABI; "N checks, N failures". Skipped (counted) without ns-3.
if command -v cmake >/dev/null 2>&1 && command -v g++ >/dev/null 2>&1 \
    && dpkg -s libns3-dev >/dev/null 2>&1; then
    step "InvisiFlow simulation, smoke run (scripts/sim-smoke.sh)" sim-smoke.log 1 scripts/sim-smoke.sh
else
    echo "== InvisiFlow smoke run SKIPPED: libns3-dev, cmake or g++ missing (DTA_NS3=0?)" >&2
    extra_skipped=$((extra_skipped + 1))
fi
step "benchmarks, smoke mode (each runs a moment; no timing is checked)" bench-smoke.log 0 \
    scripts/bench.sh --smoke
# Loss, duplication, reordering and overload through an impairment forwarder in network
# namespaces; "faults: N passed, N failed, N skipped", one test per case (skipped unless root).
step "fault injection (scripts/faults.sh)" faults.log 1 scripts/faults.sh
step "spec cross-checks (scapy; independent vectors)" spec-test.log 1 \
    .venv/bin/python -m pytest -q -p no:cacheprovider spec/tests
# The papers' figures in quick mode, two of them end to end (benchmark CSV -> PNG): the script
# and its plotter cannot rot (scripts/tests/test_figures.py; docs/figures.md).
step "figures, quick (scripts/figures.sh)" figures-test.log 1 \
    .venv/bin/python -m pytest -q -rs -p no:cacheprovider scripts/tests

# Fuzzing: every target of fuzz/Cargo.toml (fuzz/run.sh reads the list there, so new targets
# are included), DTA_FUZZ_BUDGET seconds in all (default 70: 10 s a target, the least it
# gives one, which keeps the suite inside CI's 40 minutes; a longer run is
# `fuzz/run.sh --budget N`) plus the build. It prints "fuzz: N passed, N failed", one test per
# target.
if [ -x fuzz/run.sh ] && rustup toolchain list 2>/dev/null | grep -q '^nightly' \
    && cargo +nightly fuzz --version >/dev/null 2>&1; then
    step "fuzz (every target, ${DTA_FUZZ_BUDGET:-70} s in all)" fuzz.log 1 \
        fuzz/run.sh --budget "${DTA_FUZZ_BUDGET:-70}"
elif [ "${DTA_REQUIRE_ALL:-}" = 1 ]; then
    echo "== fuzz FAILED: no nightly toolchain or cargo-fuzz (scripts/setup.sh installs both)" >&2
    failed_steps+=("fuzz (nightly / cargo-fuzz missing)")
    uncounted_failures=$((uncounted_failures + 1))
else
    echo "== fuzz SKIPPED: no nightly toolchain or cargo-fuzz (scripts/setup.sh installs both in CI or with DTA_FUZZ=1)" >&2
    extra_skipped=$((extra_skipped + 1))
fi

# Counting: scripts/test-summary.sh reads the logs and prints "P F S".
read -r passed failed skipped < <(scripts/test-summary.sh "$LOGS" "$SKIP_LOG")
failed=$((failed + uncounted_failures))
skipped=$((skipped + extra_skipped))

if [ -s "$SKIP_LOG" ]; then
    echo "== skipped tests (dta_testkit::skip!):" >&2
    sed 's/^/   /' "$SKIP_LOG" >&2
fi
echo "== step times:" >&2
printf '   %s\n' "${step_times[@]}" >&2
if [ ${#failed_steps[@]} -gt 0 ]; then
    echo "== failed steps:" >&2
    printf '   %s\n' "${failed_steps[@]}" >&2
fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ ${#failed_steps[@]} -eq 0 ] && [ "$failed" -eq 0 ]
