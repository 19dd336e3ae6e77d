#!/usr/bin/env bash
# The fault-injection suite (docs/testing.md "Faults and overload"): reporters, an impairment
# forwarder and the translator in three network namespaces joined by two veth pairs,
#
#   reporters (R) 10.93.1.1 ── 10.93.1.2 dta-impair (F) 10.93.2.1 ── 10.93.2.2 translator (T)
#
# then the cases of scripts/faults.py: loss + duplication + reordering, a write budget of half
# the offered load, and 65 536 reporters with retransmission through 1 % loss. The forwarder is
# a userspace program (dta-impair) because this kernel has no sch_netem.
#
#   scripts/faults.sh                 # every case
#   scripts/faults.sh loss budget     # some cases (loss, budget, many)
#   FAULTS_PLOT=docs/img/overload.png scripts/faults.sh budget   # also plot the budget case
#   FAULTS_KEEP=1 scripts/faults.sh loss   # keep the logs, samples and regions (in /dev/shm)
#   FAULTS_BIN=/some/dir scripts/faults.sh  # binaries built elsewhere (no build here)
#
# The last line counts the cases: "faults: N passed, N failed, N skipped". Not root or no `ip`:
# every case is skipped (counted), never passed; with DTA_REQUIRE_ALL=1 (CI) that is a failure.
# Exit status non-zero when a case failed.
set -uo pipefail
cd "$(dirname "$0")/.."

CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=(loss budget many)

skip_all() {
    if [ "${DTA_REQUIRE_ALL:-}" = 1 ]; then
        echo "faults: FAILED: $1 (DTA_REQUIRE_ALL=1)" >&2
        echo "faults: 0 passed, ${#CASES[@]} failed, 0 skipped"
        exit 1
    fi
    echo "faults: SKIPPED: $1" >&2
    echo "faults: 0 passed, 0 failed, ${#CASES[@]} skipped"
    exit 0
}
[ "$(id -u)" -eq 0 ] || skip_all "needs root to create network namespaces"
command -v ip >/dev/null 2>&1 || skip_all "needs iproute2 \`ip\`"

# FAULTS_BIN=DIR: run the binaries in DIR as they are (no build). Otherwise they are built with
# the test profile (optimized, like the binaries `cargo test` runs, into target/debug: after
# scripts/test.sh's cargo step only dta-faults is left to build).
if [ -z "${FAULTS_BIN:-}" ]; then
    echo "faults: building dta and dta-faults (test profile)" >&2
    if ! CARGO_INCREMENTAL=0 cargo build --profile test --quiet -p dta -p dta-faults; then
        echo "faults: build failed" >&2
        echo "faults: 0 passed, ${#CASES[@]} failed, 0 skipped"
        exit 1
    fi
    FAULTS_BIN=target/debug
fi

id=$$
NS_R=dtafr$id NS_F=dtaff$id NS_T=dtaft$id
WORK=$(mktemp -d /dev/shm/dta-faults.XXXXXX)
cleanup() {
    # Processes of the cases run inside the namespaces; scripts/faults.py stops its own, this
    # removes what a crash may have left: every process still in one of our namespaces.
    for ns in "$NS_R" "$NS_F" "$NS_T"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null; done
    done
    sleep 0.2
    for ns in "$NS_R" "$NS_F" "$NS_T"; do ip netns del "$ns" 2>/dev/null; done
    if [ "${FAULTS_KEEP:-0}" = 1 ]; then
        echo "faults: logs, configurations, samples and regions kept in $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

netns_up() {
    set -e
    for ns in "$NS_R" "$NS_F" "$NS_T"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
    done
    ip link add "vr$id" netns "$NS_R" type veth peer name "vfr$id" netns "$NS_F"
    ip link add "vft$id" netns "$NS_F" type veth peer name "vt$id" netns "$NS_T"
    ip -n "$NS_R" addr add 10.93.1.1/24 dev "vr$id"
    ip -n "$NS_F" addr add 10.93.1.2/24 dev "vfr$id"
    ip -n "$NS_F" addr add 10.93.2.1/24 dev "vft$id"
    ip -n "$NS_T" addr add 10.93.2.2/24 dev "vt$id"
    ip -n "$NS_R" link set "vr$id" up
    ip -n "$NS_F" link set "vfr$id" up
    ip -n "$NS_F" link set "vft$id" up
    ip -n "$NS_T" link set "vt$id" up
    set +e
}
if ! (netns_up); then
    echo "faults: creating the namespaces failed" >&2
    echo "faults: 0 passed, ${#CASES[@]} failed, 0 skipped"
    exit 1
fi

# scripts/faults.py needs only the standard library; the plot uses Debian's python3-matplotlib
# (scripts/setup.sh installs it), hence the system interpreter.
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
NS_R=$NS_R NS_F=$NS_F NS_T=$NS_T FAULTS_WORK=$WORK FAULTS_BIN=$FAULTS_BIN \
    "$PY" scripts/faults.py "${CASES[@]}"
