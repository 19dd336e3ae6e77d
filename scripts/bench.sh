#!/usr/bin/env bash
# Run every benchmark of the suite once with a short default duration and print their tables
# (docs/benchmarks.md records the figures). Each benchmark measures its own baseline in the same
# run; figures are medians.
#
#   scripts/bench.sh                 # default: 256 MiB stores, 2 M reports per run, 5 runs
#   scripts/bench.sh --smoke         # a moment each (CI: checks they still work)
#   scripts/bench.sh --gib 4         # the >= 4 GiB Key-Write / Key-Increment regions
#   scripts/bench.sh --only apply,query --runs 3
#   scripts/bench.sh --only netns --secs 3 --runs 3   # root: namespaces, veth, XDP
#   scripts/bench.sh --only overload --runs 3         # 2x overload, receive-side shedding
#   scripts/bench.sh --only int --runs 5              # INT ingest in process (dta-int)
#   scripts/bench.sh --only apply,hashmap --runs 3 --cpu-time   # apply path; rates over CPU time
#   scripts/bench.sh --only apply --prims kw --gib 4 --dir /dev/hugepages   # one 4 GiB store
#   scripts/bench.sh --only e2e-raw --runs 3          # root: raw sender, translator CPU time
#   scripts/bench.sh --only e2e-raw --only e2e --recv-gather-us 0   # ... without the receive gather
#   scripts/bench.sh --only apply,e2e --prims kw,ki,ap --runs 5 --cpu-time   # e2e per CPU-second too
#   scripts/bench.sh --only figures --quick           # the papers' figures (scripts/figures.sh)
#   scripts/bench.sh --only int-e2e --runs 3          # dta int-sink end to end over loopback
#   scripts/bench.sh --only cluster --runs 3          # 1, 2, 3 collectors: apply and query rates
#   scripts/bench.sh --only marple --quick            # Fig. 7b: Marple switches per collector
#
# Sections: 1 apply, 2 cuckoo (alias hashmap: DTA store sized for the keys vs a hash map at
# matched memory), 3 query, 4 e2e (loopback UDP), 5 refs (valgrind cachegrind),
# 6 scaling, 7 tracker. The XDP translator's figures (section 4, kernel half) come from crates/engines/dta-xdp.
set -euo pipefail
cd "$(dirname "$0")/.."
# `--only netns` (alone): end to end over a veth pair across two namespaces, XDP translator
# against a drop-only XDP program and the userspace translator (root; docs/benchmarks.md §4).
if [ "${1:-}" = "--only" ] && [ "${2:-}" = "netns" ]; then
    shift 2
    exec cargo bench -q -p dta-xdp --bench netns -- "$@"
fi
# `--only e2e-raw` (alone): `dta report --raw` (sendmmsg, and the PACKET_MMAP TX ring on several
# threads) alone into a drop-only XDP program, then into `dta translator --threads 1|2` across a
# veth pair: the translator's reports per second of its own CPU time (root; docs/benchmarks.md,
# "Sender and end to end: before and after").
if [ "${1:-}" = "--only" ] && [ "${2:-}" = "e2e-raw" ]; then
    shift 2
    exec cargo bench -q -p dta --bench e2e_raw -- "$@"
fi
# `--only overload` (alone): loopback UDP at twice the sustainable rate, with and without the
# first-stage classifier, by priority (docs/benchmarks.md, "Overload: receive-side shedding").
if [ "${1:-}" = "--only" ] && [ "${2:-}" = "overload" ]; then
    shift 2
    exec cargo bench -q -p dta-translator --bench overload -- "$@"
fi
# `--only int-e2e` (alone): `dta int-sink` over loopback, `dta pcap replay` of a 20 000-flow trace
# at paced rates and unpaced: reports lost, CPU-seconds per million, flow records against the
# trace's ground truth (docs/benchmarks.md, "INT sink end to end: before and after"). Add
# `--bin before=PATH` for a binary built from another commit; `--netns --bin xdp=PATH --xdp xdp`
# for the INT XDP fast path (root; docs/benchmarks.md, "INT per-report cost").
if [ "${1:-}" = "--only" ] && [ "${2:-}" = "int-e2e" ]; then
    shift 2
    cargo build -q --release -p dta
    exec python3 scripts/int_e2e.py --bin after=target/release/dta "$@"
fi
# `--only int` (alone): INT ingest in process, parser alone, the INT sink per core (per-report
# writes, per-flush deltas, receive batches) and two sink threads (docs/benchmarks.md, "INT
# ingest in process: before and after"). --runs N and --packets N set its runs and reports.
if [ "${1:-}" = "--only" ] && [ "${2:-}" = "int" ]; then
    shift 2
    while [ $# -gt 0 ]; do
        case "$1" in
            --runs) export DTA_BENCH_RUNS="$2"; shift 2 ;;
            --packets) export DTA_BENCH_PACKETS="$2"; shift 2 ;;
            *) echo "--only int takes --runs N and --packets N" >&2; exit 2 ;;
        esac
    done
    exec cargo bench -q -p dta-int --bench ingest
fi
# `--only cluster` (alone): 1, 2 and 3 shared-memory collectors on loopback behind one
# `dta translator --cluster`, `dta report --cluster` and `/cluster/batch` queries: aggregate
# apply and query rates (docs/benchmarks.md, "Many collectors"). Add `--bin PATH` for another
# binary.
if [ "${1:-}" = "--only" ] && [ "${2:-}" = "cluster" ]; then
    shift 2
    cargo build -q --release -p dta
    exec python3 scripts/cluster_bench.py "$@"
fi
# `--only marple` (alone): [DTA §6.1] Fig. 7b in spirit, Marple switches one collector supports
# before loss, DTA against the hash-map collector; plots docs/figures/fig7b_marple.png
# (scripts/marple_fig7b.py; --quick, --secs S, --flows N, --max-switches N).
if [ "${1:-}" = "--only" ] && [ "${2:-}" = "marple" ]; then
    shift 2
    PY=python3
    [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
    exec "$PY" scripts/marple_fig7b.py "$@"
fi
# `--only figures` (alone): the papers' evaluation figures, reproduced (scripts/figures.sh,
# docs/figures.md); the remaining arguments are figures.sh's (--quick, --only fig12,...).
if [ "${1:-}" = "--only" ] && [ "${2:-}" = "figures" ]; then
    shift 2
    exec scripts/figures.sh "$@"
fi
# A smoke run checks that every benchmark still runs, not how fast: it is built with the test
# profile (optimised, as `cargo test` builds the workspace), so CI compiles the workspace once.
profile=()
for a in "$@"; do
    [ "$a" = "--smoke" ] && profile=(--profile test)
done
exec cargo bench -q "${profile[@]}" -p dta-translator --bench suite -- "$@"
