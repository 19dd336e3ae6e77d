#!/usr/bin/env bash
# Fuzz every network parser for a while:
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]   (default 30 s each, every target)
#   fuzz/run.sh --budget TOTAL_SECONDS             (every target, TOTAL split evenly, >= 10 s each)
#   fuzz/run.sh --list                             (the targets, one a line)
# The targets are the `[[bin]]` entries of fuzz/Cargo.toml, so a target added there is fuzzed
# without touching this script. Needs the nightly toolchain and cargo-fuzz (scripts/setup.sh
# installs both in CI). Each corpus is seeded with every spec vector on every run. Every target
# runs even when one fails; the exit status is non-zero when any failed, and one line
# `fuzz: N passed, N failed` ends the output.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

# The `name` of every [[bin]] section of Cargo.toml.
list_targets() {
    awk '
        /^\[\[bin\]\]/ { inbin = 1; next }
        /^\[/ { inbin = 0 }
        inbin && /^name *= *"/ { s = $0; sub(/^name *= *"/, "", s); sub(/".*$/, "", s); print s }
    ' Cargo.toml
}

mapfile -t all < <(list_targets)
[ ${#all[@]} -gt 0 ] || { echo "fuzz/run.sh: no [[bin]] targets in fuzz/Cargo.toml" >&2; exit 1; }

case "${1:-}" in
--list)
    printf '%s\n' "${all[@]}"
    exit 0
    ;;
--budget)
    total="${2:?--budget needs a number of seconds}"
    secs=$((total / ${#all[@]}))
    [ "$secs" -ge 10 ] || secs=10
    targets=("${all[@]}")
    ;;
*)
    secs="${1:-30}"
    shift || true
    targets=("$@")
    [ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
    ;;
esac

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz or the nightly toolchain is missing (scripts/setup.sh installs both)" >&2
    exit 1
fi

passed=0
failed=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    python3 - "$here/../spec/vectors" "corpus/$t" <<'PY'
import json, sys, pathlib
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for f in sorted(src.rglob("*.json")):
    doc = json.loads(f.read_text())
    if not isinstance(doc, dict):
        continue
    for group, items in doc.items():
        if not isinstance(items, list):
            continue
        for i, v in enumerate(items):
            if isinstance(v, dict) and isinstance(v.get("hex"), str):
                try:
                    name = f"{f.parent.name}-{f.stem}-{group}-{i}"
                    (dst / name).write_bytes(bytes.fromhex(v["hex"]))
                except ValueError:
                    pass
PY
    if [ "$t" = http ]; then
        # First byte: the route (see fuzz_targets/http.rs); the rest: the query string.
        printf '\x00key=42&redundancy=2&threshold=1' >"corpus/$t/seed-kw"
        printf '\x01key=10.0.0.1&redundancy=8' >"corpus/$t/seed-ki"
        printf '\x02key=0x0000002a&values=1024' >"corpus/$t/seed-pc"
        printf '\x03list=1&tail=0&max=65536' >"corpus/$t/seed-list"
        printf '\x04key=1.2.3.4:1-5.6.7.8:2/6' >"corpus/$t/seed-sketch"
        printf '\x05kw' >"corpus/$t/seed-store"
    fi
    echo "== fuzz $t for ${secs}s" >&2
    log="$(mktemp)"
    # -timeout: an input that takes longer than 10 s is a failure (a hang), not 20 minutes of
    # libFuzzer's default waiting.
    if cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -timeout=10 -max_len=4096 \
        -malloc_limit_mb=512 >"$log" 2>&1; then
        passed=$((passed + 1))
        grep -E "^Done [0-9]+ runs" "$log" >&2 || true
    else
        failed=$((failed + 1))
        tail -n 40 "$log" >&2
        echo "fuzz target $t failed (crash input saved under fuzz/artifacts/$t)" >&2
    fi
    rm -f "$log"
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
