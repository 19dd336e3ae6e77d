#!/usr/bin/env bash
# Fuzz dta_wire::parse for a while (default 30 s): `fuzz/run.sh [seconds]`.
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). The corpus is seeded
# with the spec vectors (spec/vectors/*.json) on every run.
set -euo pipefail
secs="${1:-30}"
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2
    exit 1
fi
mkdir -p corpus/parse
python3 - "$here/../spec/vectors" corpus/parse <<'PY'
import json, sys, pathlib
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for f in sorted(src.glob("*.json")):
    doc = json.loads(f.read_text())
    for group in ("vectors", "nacks"):
        for v in doc.get(group, []):
            (dst / f"{f.stem}-{v['name']}").write_bytes(bytes.fromhex(v["hex"]))
PY
exec cargo +nightly fuzz run parse -- -max_total_time="$secs" -max_len=2048
