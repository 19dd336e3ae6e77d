#!/usr/bin/env bash
# The InvisiFlow simulation's smoke run (sim/src/smoke.cc; docs/embedding.md): build sim/ with
# CMake against Debian's ns-3 and the C ABI (libdta, cargo's debug profile, which the test
# script has built already), run 1.5 ms of simulated telemetry of the four applications into
# real DTA stores, and check what the stores answer against the ground truth. The smoke binary
# prints "N checks, N failures" (counted by scripts/test-summary.sh). Without ns-3 it prints
# "SKIPPED" and exits 3 (scripts/test.sh counts that as skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1 \
    || ! dpkg -s libns3-dev >/dev/null 2>&1; then
    echo "SKIPPED: ns-3 smoke run: libns3-dev, cmake or g++ missing (scripts/setup.sh installs them; DTA_NS3=0?)" >&2
    exit 3
fi
BUILD=${DTA_SIM_BUILD:-sim/build-smoke}
# libdta built with `-p dta` in the same cargo run, as scripts/test-bindings.sh builds it (one
# feature resolution: the suite's build of it is current).
cmake -S sim -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDTA_PROFILE=debug -DDTA_CARGO_PACKAGES="-p dta" >/dev/null
cmake --build "$BUILD" --target dta-smoke -j "$(nproc)" -- --no-print-directory >/dev/null
"$BUILD/dta-smoke" --config=sim/smoke.toml
# The InvisiFlow simulation proper (docs/invisiflow.md): 2 ms of DCTCP traffic and telemetry
# over the InvisiFlow channel into examples/invisiflow.toml's stores, whose answers are checked
# against the simulator's ground truth ("N checks, N failures").
cmake --build "$BUILD" --target invisiflow-sim -j "$(nproc)" -- --no-print-directory >/dev/null
regions=$(mktemp -d)
trap 'rm -rf "$regions"' EXIT
"$BUILD/invisiflow-sim" --channel invisiflow --load 0.6 \
    --workload sim/workloads/fb_hadoop_flow_size_cdf.txt --traffic-ms 2 --drain-ms 1 \
    --dta-config examples/invisiflow.toml --dta-regions "$regions" --check
# The paper's fabric ([InvisiFlow §6.1]: 144 servers, 33 switches, 100 Gbps) into the same
# stores, 0.5 ms of traffic: the configuration fits it and the stores answer what was delivered.
mkdir "$regions/paper"
"$BUILD/invisiflow-sim" --scale paper --channel invisiflow --load 0.6 \
    --workload sim/workloads/fb_hadoop_flow_size_cdf.txt --traffic-ms 0.5 --drain-ms 0.5 \
    --dta-config examples/invisiflow.toml --dta-regions "$regions/paper" --check
# Hostile command lines: each is refused with a message naming the option and exit status 2
# (never an abort, never a run with a garbage value).
checks=0 failures=0
for bad in "--theta -1" "--theta nan" "--load abc" "--load 0.5x" "--seed-period-us 0" \
           "--traffic-ms 1e9" "--collectors 3" "--ecn-k 2.5" "--telem-buf-bytes" "--bogus" \
           "--scale huge" "--seed 0"; do
    checks=$((checks + 1))
    set +e
    # shellcheck disable=SC2086
    err=$("$BUILD/invisiflow-sim" $bad --workload sim/workloads/fb_hadoop_flow_size_cdf.txt 2>&1 >/dev/null)
    rc=$?
    set -e
    opt=${bad%% *}
    if [ "$rc" -eq 2 ] && grep -q -- "error: .*${opt}" <<<"$err"; then
        printf 'check invisiflow-sim %-28s refused: %s\n' "$bad" "$(head -1 <<<"$err")"
    else
        failures=$((failures + 1))
        printf 'check invisiflow-sim %-28s FAILED (exit %s): %s\n' "$bad" "$rc" "$(head -1 <<<"$err")"
    fi
done
echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
