#!/usr/bin/env python3
"""`dta int-sink` end to end over loopback (docs/benchmarks.md, "INT sink end to end: before and
after"): `dta pcap gen --flows 20000 --seed 42`, then per binary and rate a fresh sink, `dta pcap
replay` paced at each rate (and unpaced), and per run:

- reports lost: sent (the replay's count) - received (the sink's own `reports` counter), and
  the kernel's receive-buffer drops for the sink's port (/proc/net/udp `drops`, any binary);
- the sink's CPU-seconds per million reports: utime + stime of its process (/proc/PID/stat)
  from just before the replay to the end of its drain, over the reports sent;
- the ground truth: `dta int-sink check` of the flow records against the trace's truth and of
  every flow's path in the stores;
- with AF_XDP, the frames each receive queue's socket read (`queues`), and for a run whose flows
  are not exact, the AF_XDP program's counters (`program`: which reports it passed up).

Runs alternate between the binaries (same machine state for both); medians over --runs.

With --netns (root), the sink runs in a network namespace and the replay in another, joined by a
veth pair the script creates (and deletes); --xdp NAME runs binary NAME's sink with the INT XDP
fast path on its veth (`--xdp IFACE --xdp-generic`), and its CPU time is the process's plus the
program's run time (the sink's final stats, `xdp.run_time_ns`), both reported; --af-xdp NAME
runs binary NAME's sink with AF_XDP receive on its veth (`--af-xdp IFACE`, native XDP), its CPU
time the process's plus the redirect program's; --args 'NAME:ARGS' gives binary NAME's sink more
arguments, `{dev}` the sink's veth (`--args 'both:--xdp {dev} --af-xdp {dev}'`); --queues N
gives the veth N queues; --known replays the trace once into each fresh sink before the measured
replay, so every flow is known to it (and to its fast path); with --netns the XDP program's time
is the kernel's BPF statistics of the program on the veth between the two CPU readings; --idle SECS
waits SECS after each measured replay and reports the sink's CPU milliseconds per second over them
(process + XDP program: what its timers and drains cost with its flows and nothing sent); --floor adds,
in every round, the machine's floor: the same replay into an XDP program that only drops the
frames (`bpf/xdp_drop.bpf.c`, native mode on the same veth), its run time per million frames
(the kernel's BPF statistics, read through the program's descriptor).

    scripts/bench.sh --only int-e2e [--runs 3] [--rates 50000,200000,max] \
        [--bin after=target/release/dta] [--bin before=/tmp/dta-main] \
        [--bin after64=target/release/dta --extra "after64:recv_buffer = 67108864"]
"""

import argparse
import ctypes
import glob
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
listen = "{host}:{port}"
[sink]
int_udp_port = 5000
idle_timeout_ms = {idle_ms}
flow_capacity = 65536
# Log2 histograms in every run: what the XDP fast path counts (it refuses others), so the
# runs with and without it do the same work.
histogram = {{ kind = "log2" }}
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
record = "int-event"
batch = 16
[[store]]
name = "hist"
kind = "key-increment"
counters = 262144
key_len = 6
"""

TICK = os.sysconf("SC_CLK_TCK")


class Netns:
    """Two namespaces joined by a veth pair: the sink's (10.91.0.1) and the sender's."""

    def __init__(self, queues=1):
        tag = os.getpid() % 100000
        self.sink, self.sender = f"dtae2es{tag}", f"dtae2ec{tag}"
        self.dev_sink, self.dev_sender = f"ve2es{tag}", f"ve2ec{tag}"
        self.host = "10.91.0.1"
        ip = lambda *a: subprocess.run(["ip", *a], check=True)
        ip("netns", "add", self.sink)
        ip("netns", "add", self.sender)
        q = str(queues)
        ip("link", "add", self.dev_sink, "numtxqueues", q, "numrxqueues", q, "netns", self.sink,
           "type", "veth", "peer", "name", self.dev_sender, "numtxqueues", q, "numrxqueues", q,
           "netns", self.sender)
        for ns, dev, addr in [(self.sink, self.dev_sink, "10.91.0.1/24"),
                              (self.sender, self.dev_sender, "10.91.0.2/24")]:
            ip("-n", ns, "addr", "add", addr, "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def close(self):
        for ns in (self.sink, self.sender):
            subprocess.run(["ip", "netns", "del", ns])


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


def proc_net_udp(ns):
    """The lines of /proc/net/udp (of namespace `ns`, if given) after the header."""
    if ns is None:
        with open("/proc/net/udp") as f:
            return f.read().splitlines()[1:]
    r = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/udp"],
                       capture_output=True, text=True, check=True)
    return r.stdout.splitlines()[1:]


def udp_drops(port, ns=None):
    """Sum of the `drops` column of /proc/net/udp for sockets bound to `port`."""
    total = 0
    for line in proc_net_udp(ns):
        cols = line.split()
        if int(cols[1].split(":")[1], 16) == port:
            total += int(cols[-1])
    return total


def wait_bound(port, proc, ns=None, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sink exited: {proc.stderr.read()}")
        if any(int(l.split()[1].split(":")[1], 16) == port for l in proc_net_udp(ns)):
            return
        time.sleep(0.05)
    raise RuntimeError("sink did not bind")


def drop_program():
    """The compiled drop-only XDP program (built by crates/engines/dta-xdp's build script)."""
    found = sorted(glob.glob("target/release/build/dta-xdp-*/out/xdp_drop.o"),
                   key=os.path.getmtime)
    if not found:
        sys.exit("--floor: no xdp_drop.o (cargo build --release -p dta builds it)")
    return found[-1]


def prog_run_time(prog_id):
    """(run_time_ns, run_cnt) of BPF program `prog_id`: BPF_PROG_GET_FD_BY_ID, then the
    descriptor's fdinfo (kernel.bpf_stats_enabled must be 1)."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint8 * 128)()
    ctypes.c_uint32.from_buffer(attr, 0).value = prog_id
    SYS_bpf, BPF_PROG_GET_FD_BY_ID = 321, 13
    fd = libc.syscall(SYS_bpf, BPF_PROG_GET_FD_BY_ID, attr, 128)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "BPF_PROG_GET_FD_BY_ID")
    try:
        info = dict(l.split(":\t", 1) for l in open(f"/proc/self/fdinfo/{fd}").read().splitlines()
                    if ":\t" in l)
        return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))
    finally:
        os.close(fd)


def xdp_time(net):
    """(run_time_ns, run_cnt) of the XDP program on the sink's veth; (0, 0) without one."""
    if net is None:
        return 0, 0
    link = subprocess.run(["ip", "-n", net.sink, "-d", "-j", "link", "show", net.dev_sink],
                          capture_output=True, text=True, check=True)
    x = json.loads(link.stdout)[0].get("xdp")
    if not x or "prog" not in x:
        return 0, 0
    return prog_run_time(x["prog"]["id"])


def floor_once(net, pcap, rate, bin_path):
    """The replay into the drop-only program on the sink's veth: its CPU-s per million frames."""
    obj = drop_program()
    # The program drops ARP too: the sender gets the sink's address for good first.
    link = subprocess.run(["ip", "-n", net.sink, "-j", "link", "show", net.dev_sink],
                          capture_output=True, text=True, check=True)
    mac = json.loads(link.stdout)[0]["address"]
    subprocess.run(["ip", "-n", net.sender, "neigh", "replace", net.host, "lladdr", mac, "dev",
                    net.dev_sender, "nud", "permanent"], check=True)
    subprocess.run(["ip", "-n", net.sink, "link", "set", "dev", net.dev_sink, "xdpdrv", "obj",
                    obj, "sec", "xdp"], check=True)
    try:
        link = subprocess.run(["ip", "-n", net.sink, "-d", "-j", "link", "show", net.dev_sink],
                              capture_output=True, text=True, check=True)
        prog_id = json.loads(link.stdout)[0]["xdp"]["prog"]["id"]
        t0, c0 = prog_run_time(prog_id)
        rep = ["ip", "netns", "exec", net.sender, bin_path, "pcap", "replay", "--to",
               f"{net.host}:9", pcap]
        if rate != "max":
            rep += ["--rate", str(rate)]
        r = subprocess.run(rep, capture_output=True, text=True, check=True)
        sent = json.loads(r.stdout)["sent"]
        t1, c1 = prog_run_time(prog_id)
    finally:
        subprocess.run(["ip", "-n", net.sink, "link", "set", "dev", net.dev_sink, "xdpdrv",
                        "off"])
    return {"sent": sent, "dropped": c1 - c0, "cpu_s_per_m": (t1 - t0) / 1e9 / (sent / 1e6)}


def run_once(bin_path, checker, work, pcap, truth, rate, extra, new_cli, net=None, xdp=False,
             af_xdp=False, more=(), known=False, idle=0.0):
    d = tempfile.mkdtemp(dir=work)
    port = free_udp_port()
    cfg = os.path.join(d, "int.toml")
    host = net.host if net else "127.0.0.1"
    if net:
        extra = "\n".join(l for l in [extra, 'allow = ["10.91.0.0/24"]'] if l)
    with open(cfg, "w") as f:
        f.write(CONFIG.format(host=host, port=port, idle_ms=600000,
                              extra=extra if new_cli else ""))
    records = os.path.join(d, "records.jsonl")
    ns_sink = ["ip", "netns", "exec", net.sink] if net else []
    ns_sender = ["ip", "netns", "exec", net.sender] if net else []
    args = ns_sink + [bin_path, "int-sink", "--config", cfg]
    if xdp:
        args += ["--xdp", net.dev_sink, "--xdp-generic"]
    if af_xdp:
        args += ["--af-xdp", net.dev_sink]
    args += [m.replace("{dev}", net.dev_sink if net else "lo") for m in more]
    out = open(records, "w")
    if new_cli:
        args += ["--records", records]
        stdout = subprocess.DEVNULL
    else:
        args += ["--events"]
        stdout = out
    sink = subprocess.Popen(args, stdout=stdout, stderr=subprocess.PIPE, text=True)
    try:
        wait_bound(port, sink, net.sink if net else None)
        time.sleep(0.2)
        rep = ns_sender + [bin_path, "pcap", "replay", "--to", f"{host}:{port}", pcap]
        if rate != "max":
            rep += ["--rate", str(rate)]
        warm = 0
        if known:
            # The same trace once before: every flow is known when the measured replay starts.
            w = subprocess.run(rep, capture_output=True, text=True, check=True)
            warm = json.loads(w.stdout)["sent"]
            time.sleep(1.0)
        cpu0 = cpu_seconds(sink.pid)
        x0, _ = xdp_time(net)
        r = subprocess.run(rep, capture_output=True, text=True, check=True)
        sent = json.loads(r.stdout)
        # Let the sink drain what is queued, then read its CPU time and the kernel's drops.
        time.sleep(0.5)
        cpu1 = cpu_seconds(sink.pid)
        x1, _ = xdp_time(net)
        idle_cpu = None
        if idle > 0:
            # Nothing sent for `idle` seconds: what the sink costs with its flows and no work.
            time.sleep(idle)
            x2, _ = xdp_time(net)
            idle_cpu = cpu_seconds(sink.pid) - cpu1 + (x2 - x1) / 1e9
        drops = udp_drops(port, net.sink if net else None)
        sink.send_signal(signal.SIGTERM)
        _, err = sink.communicate(timeout=120)
    finally:
        if sink.poll() is None:
            sink.kill()
        out.close()
    stats = json.loads(err[err.index("{\n"):].split("\nexported")[0])
    received = stats["reports"] - warm
    # The XDP program's run time between the two CPU readings (its veth carries nothing but
    # this sink's reports).
    xdp_s = (x1 - x0) / 1e9
    # The truth is of one replay: with --known every flow's record holds two, so it is not
    # checked (the tests check the modes' exactness).
    c = {"ok": None, "flows_exact": None, "paths_from_store": {}}
    if not known:
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
        "xdp_s_per_m": xdp_s / (sent["sent"] / 1e6),
        "fast": stats.get("fast_path_reports", 0),
        "idle_ms_per_s": None if idle_cpu is None else idle_cpu / idle * 1000,
        "exact": c.get("flows_exact"),
        "ok": c.get("ok", False),
        "paths": c.get("paths_from_store", {}).get("found_exact"),
        # With AF_XDP: the frames each receive queue's socket read.
        "queues": [q.get("frames") for q in stats.get("af_xdp", {}).get("sockets", [])],
        "program": stats.get("af_xdp", {}).get("program") if not c.get("ok", True) else None,
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
    ap.add_argument("--netns", action="store_true",
                    help="sink and sender in two network namespaces joined by a veth pair")
    ap.add_argument("--xdp", action="append", default=[],
                    help="NAME: run binary NAME's sink with the INT XDP fast path (--netns)")
    ap.add_argument("--af-xdp", action="append", default=[],
                    help="NAME: run binary NAME's sink with AF_XDP receive (--netns)")
    ap.add_argument("--args", action="append", default=[],
                    help="NAME:ARGS, more arguments for binary NAME's sink ({dev}: its veth)")
    ap.add_argument("--queues", type=int, default=1, help="receive queues of the veth (--netns)")
    ap.add_argument("--known", action="store_true",
                    help="replay the trace once into each sink before the measured replay")
    ap.add_argument("--idle", type=float, default=0.0,
                    help="after each measured replay, SECS of nothing sent: the sink's CPU "
                         "milliseconds per second then (process + XDP), printed below the table")
    ap.add_argument("--floor", action="store_true",
                    help="each round, the replay into a drop-only XDP program too (--netns)")
    a = ap.parse_args()
    if a.floor and not a.netns:
        sys.exit("--floor needs --netns (the drop program goes on the sink's veth)")
    if (a.xdp or a.af_xdp) and not a.netns:
        sys.exit("--xdp and --af-xdp need --netns (the program goes on the sink's veth)")
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
    net = Netns(a.queues) if a.netns else None
    print(f"uptime: {os.getloadavg()}")
    results = {}
    floors = {}
    if a.netns:
        subprocess.run(["sysctl", "-q", "-w", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        for run in range(a.runs):
            for rate in rates:
                for name, path in bins:
                    extra = "\n".join(e.split(":", 1)[1] for e in a.extra
                                       if e.split(":", 1)[0] == name)
                    more = [w for m in a.args if m.split(":", 1)[0] == name
                            for w in m.split(":", 1)[1].split()]
                    r = run_once(path, checker, work, pcap, truth, rate, extra, new_cli[name],
                                 net, name in a.xdp, name in a.af_xdp, more, a.known,
                                 a.idle)
                    results.setdefault((rate, name), []).append(r)
                    print(f"run {run} rate {rate} {name}: {json.dumps(r)}", flush=True)
                if a.floor:
                    f = floor_once(net, pcap, rate, checker)
                    floors.setdefault(rate, []).append(f)
                    print(f"run {run} rate {rate} floor: {json.dumps(f)}", flush=True)
    finally:
        if net:
            net.close()
    print(f"uptime: {os.getloadavg()}")
    print()
    print("| rate asked | binary | sent/s | lost (median, max) | kernel drops | CPU-s per M reports"
          " (process + XDP = total) | reports taken in XDP | flows exact | paths from store |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for rate in rates:
        for name, _ in bins:
            rs = results[(rate, name)]
            med = lambda k: statistics.median(r[k] for r in rs)
            total = statistics.median(r["cpu_s_per_m"] + r["xdp_s_per_m"] for r in rs)
            print(f"| {rate} | {name} | {med('rate'):,.0f} | {med('lost'):,.0f}, "
                  f"{max(r['lost'] for r in rs):,} | {med('kernel_drops'):,.0f} | "
                  f"{med('cpu_s_per_m'):.2f} + {med('xdp_s_per_m'):.3f} = {total:.2f} | "
                  f"{med('fast'):,.0f} | " + (
                      "not checked (--known) | - |" if a.known else
                      f"{min(r['exact'] for r in rs):,} of {a.flows:,}"
                      f" | {min((r['paths'] or 0) for r in rs):,} |"))
        if rate in floors:
            fs = floors[rate]
            print(f"| {rate} | floor: XDP drop only | - | - | - | 0 + "
                  f"{statistics.median(f['cpu_s_per_m'] for f in fs):.3f} | "
                  f"{statistics.median(f['dropped'] for f in fs):,.0f} dropped | - | - |")
    if a.idle > 0:
        print()
        print(f"| rate asked | binary | idle CPU ms per second after the replay ({a.idle:g} s):"
              " median (range) |")
        print("| --- | --- | --- |")
        for rate in rates:
            for name, _ in bins:
                v = sorted(r["idle_ms_per_s"] for r in results[(rate, name)])
                print(f"| {rate} | {name} | {statistics.median(v):.1f} ({v[0]:.1f}-{v[-1]:.1f}) |")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
