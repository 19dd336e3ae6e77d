#!/usr/bin/env bash
# Reproduce the papers' evaluation figures on this machine (docs/figures.md): the `figures`
# benchmark (crates/engines/dta-int/benches/figures.rs) measures and writes one CSV per figure, then
# scripts/figures.py plots each beside the paper's numbers and prints the medians.
#
#   scripts/figures.sh                      # full: docs/figures/*.png (about 10 minutes here)
#   scripts/figures.sh --quick              # CI-sized runs, every plot, into target/figures/png
#   scripts/figures.sh --only fig12,int6    # some figures (fig10..fig16, int3, int6)
#   scripts/figures.sh --out DIR            # CSV files in DIR, plots in DIR/png
#   scripts/figures.sh --runs 5             # runs per point (medians; default 5, quick 1)
#
# The plots need matplotlib (Debian's python3-matplotlib, installed by scripts/setup.sh), hence
# the system interpreter, as scripts/faults.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
out=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1; args+=(--quick); shift ;;
        --out) out=$2; shift 2 ;;
        --only|--runs|--dir) args+=("$1" "$2"); shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "figures.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
target=${CARGO_TARGET_DIR:-target}
if [ -z "$out" ]; then
    if [ $quick = 1 ]; then out=$target/figures; else out=$target/figures-full; fi
fi
# The full run's plots are the documentation's; a quick or redirected run keeps its own.
png=$out/png
[ $quick = 0 ] && [ "$out" = "$target/figures-full" ] && png=docs/figures
# cargo runs a benchmark in its package's directory: give it an absolute path.
out=$(realpath -m "$out")

PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
if ! "$PY" -c 'import matplotlib' 2>/dev/null; then
    echo "figures.sh: $PY has no matplotlib (apt-get install python3-matplotlib)" >&2
    exit 1
fi

mkdir -p "$out"
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "args: ${args[*]:-}"
} > "$out/env.txt"
# A quick run checks the pipeline (CSV -> PNG), not the figures' values: it is built with the
# test profile, as `cargo test` builds the workspace, so CI compiles it once.
profile=()
[ $quick = 1 ] && profile=(--profile test)
cargo bench -q "${profile[@]}" -p dta-int --bench figures -- --out "$out" "${args[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/env.txt"
"$PY" scripts/figures.py "$out" "$png" | tee "$out/summary.txt"
cat "$out/env.txt"
