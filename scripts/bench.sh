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
#   scripts/bench.sh --only int-e2e --runs 3          # dta int-sink end to end over loopback
#
# Sections: 1 apply, 2 cuckoo, 3 query, 4 e2e (loopback UDP), 5 refs (valgrind cachegrind),
# 6 scaling, 7 tracker. The XDP translator's figures (section 4, kernel half) come from crates/dta-xdp.
set -euo pipefail
cd "$(dirname "$0")/.."
# `--only netns` (alone): end to end over a veth pair across two namespaces, XDP translator
# against a drop-only XDP program and the userspace translator (root; docs/benchmarks.md §4).
if [ "${1:-}" = "--only" ] && [ "${2:-}" = "netns" ]; then
    shift 2
    exec cargo bench -q -p dta-xdp --bench netns -- "$@"
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
# `--bin before=PATH` for a binary built from another commit.
if [ "${1:-}" = "--only" ] && [ "${2:-}" = "int-e2e" ]; then
    shift 2
    cargo build -q --release -p dta
    exec python3 scripts/int_e2e.py --bin after=target/release/dta "$@"
fi
exec cargo bench -q -p dta-translator --bench suite -- "$@"
