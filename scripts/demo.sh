#!/usr/bin/env bash
# Install everything, build dta, and run the demo: collector, translator and reporters on
# loopback (embedded configuration, every primitive, both wire protocols), then queries.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --quiet -p dta
exec target/release/dta demo "$@"
