#!/usr/bin/env python3
"""`dta int-sink` end to end over loopback (docs/benchmarks.md, "INT sink end to end: before and
after"): `dta pcap gen --flows 20000 --seed 42`, then per binary and rate a fresh sink, `dta pcap
replay` paced at each rate (and unpaced), and per run:

- reports lost: sent (the replay's count) - received (the sink's own `reports` counter), and
  the kernel's receive-buffer drops for the sink's port (/proc/net/udp `drops`, any binary);
- the sink's CPU-seconds per million reports: utime + stime of its process (/proc/PID/stat)
  from just before the replay to the end of its drain, over the reports sent;
- the ground truth: `dta int-sink check` of the flow records against the trace's truth and of
  every flow's path in the stores.

Runs alternate between the binaries (same machine state for both); medians over --runs.

    scripts/bench.sh --only int-e2e [--runs 3] [--rates 50000,200000,max] \
        [--bin after=target/release/dta] [--bin before=/tmp/dta-main] \
        [--bin after64=target/release/dta --extra "after64:recv_buffer = 67108864"]
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CONFIG = """region_dir = "regions"
listen = "127.0.0.1:{port}"
[sink]
int_udp_port = 5000
idle_timeout_ms = {idle_ms}
flow_capacity = 65536
{extra}
[[store]]
name = "paths"
kind = "key-write"
slots = 1048576
key_len = 13
data_len = 24
[[store]]
name = "latency"
kind = "postcarding"
chunks = 262144
hops = 5
key_len = 13
[[store]]
name = "events"
kind = "append"
lists = 8
capacity = 16384
entry_len = 32
batch = 16
[[store]]
name = "hist"
kind = "key-increment"
counters = 262144
key_len = 6
"""

TICK = os.sysconf("SC_CLK_TCK")


def free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 14 and 15 (utime, stime) are 12 and 13 after the command.
    return (int(fields[11]) + int(fields[12])) / TICK


def udp_drops(port):
    """Sum of the `drops` column of /proc/net/udp for sockets bound to `port`."""
    total = 0
    with open("/proc/net/udp") as f:
        next(f)
        for line in f:
            cols = line.split()
            if int(cols[1].split(":")[1], 16) == port:
                total += int(cols[-1])
    return total


def wait_bound(port, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sink exited: {proc.stderr.read()}")
        with open("/proc/net/udp") as f:
            if any(int(l.split()[1].split(":")[1], 16) == port for l in list(f)[1:]):
                return
        time.sleep(0.05)
    raise RuntimeError("sink did not bind")


def run_once(bin_path, checker, work, pcap, truth, rate, extra, new_cli):
    d = tempfile.mkdtemp(dir=work)
    port = free_udp_port()
    cfg = os.path.join(d, "int.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(port=port, idle_ms=600000, extra=extra if new_cli else ""))
    records = os.path.join(d, "records.jsonl")
    args = [bin_path, "int-sink", "--config", cfg]
    out = open(records, "w")
    if new_cli:
        args += ["--records", records]
        stdout = subprocess.DEVNULL
    else:
        args += ["--events"]
        stdout = out
    sink = subprocess.Popen(args, stdout=stdout, stderr=subprocess.PIPE, text=True)
    try:
        wait_bound(port, sink)
        time.sleep(0.2)
        cpu0 = cpu_seconds(sink.pid)
        rep = [bin_path, "pcap", "replay", "--to", f"127.0.0.1:{port}", pcap]
        if rate != "max":
            rep += ["--rate", str(rate)]
        r = subprocess.run(rep, capture_output=True, text=True, check=True)
        sent = json.loads(r.stdout)
        # Let the sink drain what is queued, then read its CPU time and the kernel's drops.
        time.sleep(0.5)
        cpu1 = cpu_seconds(sink.pid)
        drops = udp_drops(port)
        sink.send_signal(signal.SIGTERM)
        _, err = sink.communicate(timeout=120)
    finally:
        if sink.poll() is None:
            sink.kill()
        out.close()
    stats = json.loads(err[err.index("{\n"):].split("\nexported")[0])
    received = stats["reports"]
    chk = subprocess.run(
        [checker, "int-sink", "check", "--truth", truth, "--records", records,
         "--config", cfg, "--show", "3"],
        capture_output=True, text=True)
    try:
        c = json.loads(chk.stdout)
    except json.JSONDecodeError:
        c = {"ok": False, "flows_exact": 0, "paths_from_store": {}}
    subprocess.run(["rm", "-rf", d])
    return {
        "sent": sent["sent"],
        "rate": sent["sent"] / sent["seconds"],
        "received": received,
        "lost": sent["sent"] - received,
        "kernel_drops": drops,
        "cpu_s_per_m": (cpu1 - cpu0) / (sent["sent"] / 1e6),
        "exact": c.get("flows_exact", 0),
        "ok": c.get("ok", False),
        "paths": c.get("paths_from_store", {}).get("found_exact"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rates", default="50000,200000,500000,1000000,max")
    ap.add_argument("--flows", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--bin", action="append", default=[],
                    help="NAME=PATH of a dta binary (old CLI if it has no `int-sink --records`)")
    ap.add_argument("--extra", action="append", default=[],
                    help="NAME:LINE, a line for [sink] of binary NAME (new CLI only)")
    ap.add_argument("--work", default=os.environ.get("TMPDIR", "/tmp"))
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.bin] or [["after", "target/release/dta"]]
    checker = bins[0][1]
    for name, path in bins:
        if not os.path.exists(path):
            sys.exit(f"{name}: no binary at {path} (cargo build --release -p dta)")
    work = tempfile.mkdtemp(prefix="int-e2e-", dir=a.work)
    pcap = os.path.join(work, "trace.pcap")
    truth = os.path.join(work, "trace.json")
    g = subprocess.run([checker, "pcap", "gen", "--flows", str(a.flows), "--seed", str(a.seed),
                        "--out", pcap], capture_output=True, text=True, check=True)
    print(g.stderr.strip())
    new_cli = {}
    for name, path in bins:
        h = subprocess.run([path, "int-sink", "--help"], capture_output=True, text=True)
        new_cli[name] = "--records" in h.stdout
    rates = a.rates.split(",")
    print(f"uptime: {os.getloadavg()}")
    results = {}
    for run in range(a.runs):
        for rate in rates:
            for name, path in bins:
                extra = "\n".join(e.split(":", 1)[1] for e in a.extra
                                   if e.split(":", 1)[0] == name)
                r = run_once(path, checker, work, pcap, truth, rate, extra, new_cli[name])
                results.setdefault((rate, name), []).append(r)
                print(f"run {run} rate {rate} {name}: {json.dumps(r)}", flush=True)
    print(f"uptime: {os.getloadavg()}")
    print()
    print("| rate asked | binary | sent/s | lost (median, max) | kernel drops | CPU-s per M reports"
          " | flows exact | paths from store |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for rate in rates:
        for name, _ in bins:
            rs = results[(rate, name)]
            med = lambda k: statistics.median(r[k] for r in rs)
            print(f"| {rate} | {name} | {med('rate'):,.0f} | {med('lost'):,.0f}, "
                  f"{max(r['lost'] for r in rs):,} | {med('kernel_drops'):,.0f} | "
                  f"{med('cpu_s_per_m'):.2f} | {min(r['exact'] for r in rs):,} of {a.flows:,}"
                  f" | {min((r['paths'] or 0) for r in rs):,} |")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
