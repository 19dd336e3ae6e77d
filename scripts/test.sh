#!/usr/bin/env bash
# The test suite: formatting, lints, Rust tests, the C and Python bindings against the shared
# spec vectors, and a short fuzzing run of every network parser when a nightly toolchain exists.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== cargo fmt" >&2
cargo fmt --all -- --check
echo "== cargo clippy" >&2
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test" >&2
cargo test --workspace --quiet 2>&1 | tee target/cargo-test.log
if pkg-config --exists libibverbs librdmacm 2>/dev/null; then
    echo "== rdma-core collector (dta-rnic --features rdma-core: build, clippy, tests; no RDMA device needed)" >&2
    cargo clippy -p dta-rnic -p dta --features rdma-core --all-targets --quiet -- -D warnings
    cargo test -p dta-rnic --features rdma-core --quiet 2>&1 | tee target/rnic-test.log
else
    echo "== rdma-core collector skipped: libibverbs-dev / librdmacm-dev missing (DTA_RDMA_CORE=0?)" >&2
fi
echo "== benchmarks, smoke mode (each runs a moment; no timing is checked)" >&2
scripts/bench.sh --smoke >target/bench-smoke.log
echo "== C and Python bindings" >&2
scripts/test-bindings.sh 2>&1 | tee target/bindings-test.log
echo "== spec cross-checks (scapy reads our RoCEv2 frames and agrees on the ICRC)" >&2
.venv/bin/python -m pytest -q spec/tests 2>&1 | tee target/spec-test.log
if [ -x fuzz/run.sh ] && rustup toolchain list 2>/dev/null | grep -q nightly; then
    cargo fuzz --version >/dev/null 2>&1 || cargo install --quiet --locked cargo-fuzz
    echo "== fuzz (short)" >&2
    fuzz/run.sh "${DTA_FUZZ_SECONDS:-15}"
else
    echo "== fuzz skipped: no nightly toolchain (cargo-fuzz needs one); the proptest robustness tests ran" >&2
fi
rust=$(grep -Eo 'test result: ok\. [0-9]+ passed' target/cargo-test.log | awk '{s+=$4} END {print s+0}')
py=$(cat target/bindings-test.log target/spec-test.log | grep -Eo '^[0-9]+ passed in' | awk '{s+=$1} END {print s+0}')
echo "rust ${rust}, C/Python/spec ${py}"
echo "tests: $((rust + py)) passed, 0 failed"
