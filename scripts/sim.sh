#!/usr/bin/env bash
# The InvisiFlow evaluation on ns-3 ([InvisiFlow §6]): builds sim/ (release), runs the sweep in
# parallel over the cores with a progress bar, then regenerates the plots and the results table
# (scripts/sim_plots.py -> docs/invisiflow/).
#
#   scripts/sim.sh                 the full sweep: 5 channels (with the no-telemetry baseline) x
#                                  loads 0.3..0.8 on FB_Hadoop, the load-imbalance and asymmetric
#                                  stress cases (loads 0.3 0.5 0.7 0.8), the second collector at 80 % load, WebSearch
#   scripts/sim.sh --quick         a reduced sweep (loads 0.3 0.5 0.7 0.8, stress cases at 0.7,
#                                  10 ms of traffic and 5 ms of drain)
#   scripts/sim.sh --scale paper   the same sweep on [InvisiFlow §6.1]'s fabric (144 servers,
#                                  100 Gbps): about 20 CPU-seconds per simulated ms, for a
#                                  bigger machine (results in target/invisiflow-paper)
#   options: --jobs N (default: cores), --traffic-ms MS, --drain-ms MS, --loads "0.3 0.5",
#            --stress-loads "0.7", --workloads DIR (flow-size CDFs, default sim/workloads
#            or $DTA_WORKLOADS), --filter REGEX (only runs whose name matches), --seed N,
#            --out DIR (default target/invisiflow), --plots DIR (default docs/invisiflow, and
#            OUT/plots at the paper's scale), --no-build, --no-stress, --plots-only,
#            --dta-profile debug|release, --no-cargo (link the existing target/<profile>/libdta.so)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

JOBS=$(nproc)
TRAFFIC_MS=30
DRAIN_MS=20
LOADS="0.3 0.4 0.5 0.6 0.7 0.8"
STRESS_LOADS="0.3 0.5 0.7 0.8"
SEED=1
OUT=$ROOT/target/invisiflow
WORKLOADS=${DTA_WORKLOADS:-$ROOT/sim/workloads}
FILTER=
BUILD=1
CARGO=1
DTA_PROFILE=release
RUN=1
STRESS=1
SCALE=small
OUT_SET=0
PLOTS=
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) LOADS="0.3 0.5 0.7 0.8"; STRESS_LOADS="0.7"; TRAFFIC_MS=10; DRAIN_MS=5 ;;
        --jobs) JOBS=$2; shift ;;
        --traffic-ms) TRAFFIC_MS=$2; shift ;;
        --drain-ms) DRAIN_MS=$2; shift ;;
        --loads) LOADS=$2; STRESS_LOADS=$2; shift ;;
        --stress-loads) STRESS_LOADS=$2; shift ;;
        --dta-profile) DTA_PROFILE=$2; shift ;;
        --no-cargo) CARGO=0 ;;
        --seed) SEED=$2; shift ;;
        --out) OUT=$2; OUT_SET=1; shift ;;
        --scale) SCALE=$2; shift ;;
        --plots) PLOTS=$2; shift ;;
        --workloads) WORKLOADS=$2; shift ;;
        --filter) FILTER=$2; shift ;;
        --no-build) BUILD=0 ;;
        --no-stress) STRESS=0 ;;
        --plots-only) BUILD=0; RUN=0 ;;
        -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "sim.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

case "$SCALE" in
    small) ;;
    paper) [ "$OUT_SET" = 1 ] || OUT=$ROOT/target/invisiflow-paper ;;
    *) echo "sim.sh: --scale small|paper" >&2; exit 2 ;;
esac
# The small scale's plots are the documented ones; another scale's go beside its runs.
if [ -z "$PLOTS" ]; then
    if [ "$SCALE" = small ]; then PLOTS=$ROOT/docs/invisiflow; else PLOTS=$OUT/plots; fi
fi

SIMDIR=$ROOT/sim
BUILDDIR=$ROOT/target/sim-release
BIN=$BUILDDIR/invisiflow-sim
CONFIG=$ROOT/examples/invisiflow.toml
HADOOP=$WORKLOADS/fb_hadoop_flow_size_cdf.txt
WEBSEARCH=$WORKLOADS/websearch_flow_size_cdf.txt
[ -f "$HADOOP" ] || { echo "sim.sh: no flow-size CDF at $HADOOP" >&2; exit 1; }

if [ "$BUILD" = 1 ]; then
    echo "== build (release)"
    # sim/CMakeLists.txt builds libdta with cargo (DTA_PROFILE); --no-cargo links the one in
    # target/$DTA_PROFILE as it is.
    cargo_flag=ON
    [ "$CARGO" = 1 ] || cargo_flag=OFF
    cmake -S "$SIMDIR" -B "$BUILDDIR" -DCMAKE_BUILD_TYPE=Release -DDTA_PROFILE="$DTA_PROFILE" \
        -DDTA_CARGO_BUILD=$cargo_flag >/dev/null
    cmake --build "$BUILDDIR" -j "$JOBS" --target invisiflow-sim >/dev/null
fi

mkdir -p "$OUT/runs"
# One line per run: name, then the simulator's arguments.
PLAN=$OUT/plan.txt
: >"$PLAN"
add() {
    if [ -z "$FILTER" ] || [[ ${1%% *} =~ $FILTER ]]; then echo "$* --scale $SCALE" >>"$PLAN"; fi
}
common="--traffic-ms $TRAFFIC_MS --drain-ms $DRAIN_MS --seed $SEED"
# In priority order (a sweep cut short keeps the default setting complete first).
for load in $LOADS; do
    for ch in none default_udp low_udp pull invisiflow; do
        add "default-$ch-$load --channel $ch --load $load --workload $HADOOP $common"
    done
done
if [ "$STRESS" = 1 ]; then
    # Table 3: a second collector at 80 % load, default and asymmetric topologies.
    add "collectors2-invisiflow-0.8 --channel invisiflow --load 0.8 --workload $HADOOP --collectors 2 $common"
    add "asymmetric-invisiflow-0.8 --channel invisiflow --load 0.8 --workload $HADOOP --asymmetric $common"
    add "collectors2asym-invisiflow-0.8 --channel invisiflow --load 0.8 --workload $HADOOP --collectors 2 --asymmetric $common"
    # Five times the load-imbalance reports (every 10 us): the telemetry share of the links into
    # the collector's rack nearer the paper's, for the FCT dilation of default priority. The
    # baseline without telemetry is default-none-0.8 (no telemetry: the same run).
    for ch in default_udp low_udp invisiflow; do
        add "volume5x-$ch-0.8 --channel $ch --load 0.8 --workload $HADOOP --load-report-us 10 $common"
    done
    # Two and four times the telemetry buffer ([InvisiFlow §6.3] Fig. 10 in part).
    add "buffer2x-invisiflow-0.8 --channel invisiflow --load 0.8 --workload $HADOOP --telem-buf-bytes 34000 $common"
    add "buffer4x-invisiflow-0.8 --channel invisiflow --load 0.8 --workload $HADOOP --telem-buf-bytes 68000 $common"
    # DCTCP's marking threshold unscaled: the paper's K = 65 packets (7.8 us of queue at
    # 100 Gbps, 78 us at 10 Gbps) instead of the default 7.
    for load in 0.7 0.8; do
        for ch in none default_udp low_udp pull invisiflow; do
            add "ecnk65-$ch-$load --channel $ch --load $load --workload $HADOOP --ecn-k 65 $common"
        done
    done
    # More seeds (other flows, other arrivals) at 80 % for the FCT comparison, whose per-run mean
    # moves with a few large flows.
    for seed in 2 3 4; do
        for ch in none default_udp low_udp invisiflow; do
            add "seed$seed-$ch-0.8 --channel $ch --load 0.8 --workload $HADOOP --traffic-ms $TRAFFIC_MS --drain-ms $DRAIN_MS --seed $seed"
        done
    done
    # The seed-rate shortcut: every switch port seeding every 0.25 us instead of 1 us.
    add "seeds4x-invisiflow-0.8 --channel invisiflow --load 0.8 --workload $HADOOP --seed-period-us 0.25 $common"
    for load in $STRESS_LOADS; do
        for scen in imbalance asymmetric; do
            for ch in none low_udp pull invisiflow; do
                [ "$scen-$ch-$load" = asymmetric-invisiflow-0.8 ] && continue
                add "$scen-$ch-$load --channel $ch --load $load --workload $HADOOP --$scen $common"
            done
        done
        for ch in none low_udp invisiflow; do
            add "websearch-$ch-$load --channel $ch --load $load --workload $WEBSEARCH $common"
        done
    done
    # Two more seeds for the stress cases at 70 %, where one run's outcome turns on a few bursts
    # into the collector's pod.
    for seed in 2 3; do
        for scen in imbalance asymmetric; do
            for ch in low_udp invisiflow; do
                add "seed$seed-$scen-$ch-0.7 --channel $ch --load 0.7 --workload $HADOOP --$scen --traffic-ms $TRAFFIC_MS --drain-ms $DRAIN_MS --seed $seed"
            done
        done
    done
fi

run_one() {
    # $1 = the plan line. Each run gets its own copy of the DTA configuration (own region files).
    local name args dir
    name=${1%% *}
    args=${1#* }
    [ -s "$OUT/runs/$name.json" ] && return 0
    dir=$OUT/regions/$name
    rm -rf "$dir" && mkdir -p "$dir"
    # shellcheck disable=SC2086
    if "$BIN" $args --dta-config "$CONFIG" --dta-regions "$dir" --out "$OUT/runs/$name.json.tmp" \
        2>"$OUT/runs/$name.log"; then
        mv "$OUT/runs/$name.json.tmp" "$OUT/runs/$name.json"
    else
        echo "run $name failed (see $OUT/runs/$name.log)" >>"$OUT/failures.txt"
    fi
    rm -rf "$dir"
}
export -f run_one
export OUT BIN CONFIG

if [ "$RUN" = 1 ]; then
    total=$(wc -l <"$PLAN")
    rm -f "$OUT/failures.txt"
    echo "== $total runs, $JOBS in parallel, output in $OUT/runs"
    start=$(date +%s)
    tr '\n' '\0' <"$PLAN" | xargs -0 -P "$JOBS" -I{} bash -c 'run_one "$1"' _ {} &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        done_n=0
        while IFS= read -r line; do
            [ -s "$OUT/runs/${line%% *}.json" ] && done_n=$((done_n + 1))
        done <"$PLAN"
        width=40
        fill=$((done_n * width / total))
        printf '\r[%-*s] %d/%d  %ds' "$width" "$(printf '%*s' "$fill" '' | tr ' ' '#')" \
            "$done_n" "$total" "$(($(date +%s) - start))"
        sleep 2
    done
    wait "$pid" || true
    echo
    if [ -s "$OUT/failures.txt" ]; then
        cat "$OUT/failures.txt" >&2
    fi
fi

echo "== plots"
mkdir -p "$PLOTS"
/usr/bin/python3 "$ROOT/scripts/sim_plots.py" --runs "$OUT/runs" --out "$PLOTS"
