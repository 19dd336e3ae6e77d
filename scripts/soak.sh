#!/usr/bin/env bash
# The fault soak (scripts/soak.py, docs/benchmarks.md "Fault soak"): builds the release binary,
# then runs a mixed workload for SECONDS (default 180) with floods, a hung cluster peer, a
# filling disk (as root) and reloads, and checks that every high-priority report was applied
# exactly once and every other datagram is accounted for by reason. Not in CI.
#   scripts/soak.sh [--seconds N]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p dta >&2
exec python3 scripts/soak.py "$@"
