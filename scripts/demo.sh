#!/usr/bin/env bash
# Install what the demo needs (a C toolchain: scripts/setup.sh --demo), build dta, and run the demo: collector, translator and reporters on
# loopback (embedded configuration, every primitive, both wire protocols), then queries.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --demo
cargo build --release --quiet -p dta
exec target/release/dta demo "$@"
