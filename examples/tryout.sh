#!/usr/bin/env bash
# A try-out of the examples together, started and stopped by one command (docs/walkthrough.md):
#
#   examples/tryout.sh            # Ctrl-C stops every service it started
#
# - the INT sink of examples/int-sink.toml (telemetry reports on UDP 32766, metrics on 9465);
# - the collector and the translator of examples/dta.toml with the lines it suggests for an INT
#   sink beside it uncommented: the collector serves the sink's regions read-only and the
#   console shows the sink's and the translator's counters (HTTP and console on 40080,
#   translator on UDP 40040, its metrics on 9464);
# - a generated INT trace (`dta pcap gen`) with a congestion episode at switch 301, replayed
#   into the sink, and a little Key-Write traffic into the translator.
#
# Everything (the two configurations, the regions, the trace and its ground truth, the logs) is
# kept in $TRYOUT (default /tmp/dta-tryout), emptied at start. $DTA is the binary (default
# target/release/dta, built when missing); TRYOUT_SECONDS=N stops after N seconds.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
dta=${DTA:-$root/target/release/dta}
dir=${TRYOUT:-/tmp/dta-tryout}

if [ ! -x "$dta" ]; then
    echo "tryout: building $dta (cargo build --release -p dta)" >&2
    (cd "$root" && cargo build --release --quiet -p dta)
fi

# A port another process holds would make a service fail later; say so now.
for port in 40080 9464 9465; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "tryout: TCP port $port is in use (another try-out or dta demo?): stop it first" >&2
        exit 1
    fi
done

rm -rf "$dir"
mkdir -p "$dir"
cp "$here/int-sink.toml" "$dir/int-sink.toml"
sed -e 's|^# translator_metrics = |translator_metrics = |' \
    -e 's|^# int_sink_metrics = |int_sink_metrics = |' \
    -e 's|^# serve_read_only = |serve_read_only = |' \
    "$here/dta.toml" >"$dir/dta.toml"

pids=()
stop() {
    trap - INT TERM EXIT
    for p in "${pids[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    echo "tryout: stopped; the regions, the trace and the logs stay in $dir" >&2
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_tcp PORT WHAT: until something listens on PORT (at most 30 s).
wait_tcp() {
    for _ in $(seq 300); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "tryout: $2 did not start (its log: $dir/$3.log)" >&2
    tail -n 5 "$dir/$3.log" >&2 || true
    exit 1
}

# The INT sink first: the collector serves the regions it creates.
"$dta" int-sink --config "$dir/int-sink.toml" --metrics 9465 >"$dir/int-sink.log" 2>&1 &
pids+=($!)
wait_tcp 9465 "the INT sink" int-sink
"$dta" collector --config "$dir/dta.toml" >"$dir/collector.log" 2>&1 &
pids+=($!)
wait_tcp 40080 "the collector" collector
"$dta" translator --config "$dir/dta.toml" --metrics 9464 >"$dir/translator.log" 2>&1 &
pids+=($!)
wait_tcp 9464 "the translator" translator

# 400 flows through 20 switches; from 2 ms into the trace for 3 ms, switch 301's hop latency
# and queue occupancy are 25 times their usual (the ground truth, trace.json, records it).
"$dta" pcap gen --flows 400 --seed 7 --episode 301:2ms:3ms:25 --out "$dir/trace.pcap" \
    2>>"$dir/tryout.log"
"$dta" pcap replay --rate 20000 --to 127.0.0.1:32766 "$dir/trace.pcap" >"$dir/replay.json" \
    2>>"$dir/tryout.log"
"$dta" report --primitive kw --rate 20000 --count 20000 >>"$dir/tryout.log" 2>&1

cat <<EOF
tryout: running (services: $dir/*.log; trace: $dir/trace.pcap, ground truth $dir/trace.json)
  console   http://127.0.0.1:40080/console/   ("INT: the network now")
  queries   dta query int network --config $dir/int-sink.toml
            curl -s 'http://127.0.0.1:40080/int/episodes/int_events'
  Ctrl-C stops the INT sink, the collector and the translator.
EOF
if [ -n "${TRYOUT_SECONDS:-}" ]; then
    sleep "$TRYOUT_SECONDS"
else
    wait -n "${pids[@]}" || true
    echo "tryout: a service stopped by itself (see $dir/*.log)" >&2
fi
