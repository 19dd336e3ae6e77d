#!/usr/bin/env bash
# Fuzz every network parser for a while: `fuzz/run.sh [seconds per target] [target...]`
# (default 30 s, all targets: parse = DTA both protocols, int = INT and telemetry reports,
# roce = RoCEv2 frames and CM MADs, translator = the translator's datagram handler end to end). Needs the nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`). Each corpus is seeded with every spec vector on every run.
set -euo pipefail
secs="${1:-30}"
shift || true
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2
    exit 1
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo +nightly fuzz list)
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    python3 - "$here/../spec/vectors" "corpus/$t" <<'PY'
import json, sys, pathlib
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for f in sorted(src.glob("*.json")):
    doc = json.loads(f.read_text())
    if not isinstance(doc, dict):
        continue
    for group, items in doc.items():
        if not isinstance(items, list):
            continue
        for i, v in enumerate(items):
            if isinstance(v, dict) and isinstance(v.get("hex"), str):
                try:
                    (dst / f"{f.stem}-{group}-{i}").write_bytes(bytes.fromhex(v["hex"]))
                except ValueError:
                    pass
PY
    echo "== fuzz $t for ${secs}s" >&2
    log="$(mktemp)"
    if ! cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -max_len=4096 >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "fuzz target $t failed (crash input saved under fuzz/artifacts/$t)" >&2
        exit 1
    fi
    grep -E "^Done [0-9]+ runs" "$log" >&2 || true
    rm -f "$log"
done
