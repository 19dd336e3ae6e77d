#!/usr/bin/env python3
"""End to end over loopback, two `dta` binaries side by side (docs/benchmarks.md, "One node:
before and after"): for each binary in turn, a collector and a translator from the same
configuration, then `dta report` (native Key-Write, 32 reports a datagram) unpaced and paced;
the translator's reports applied, its CPU time (user + system, /proc/PID/stat), and the
reports lost. Rounds alternate the binaries; each figure is the median over the rounds, with
the load average printed beside it.

    python3 scripts/e2e_ab.py --bin before=/tmp/old-target/release/dta \\
        --bin after=target/release/dta --runs 5
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time


def free_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def bound(port):
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                if int(line.split()[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def cpu_seconds(pid):
    """User + system CPU time of process `pid` (its threads included), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(dta, rate, count, base):
    """One run of `dta` (a binary path): (applied, translator CPU seconds, sent)."""
    d = tempfile.mkdtemp(dir=base)
    port = free_port(socket.SOCK_DGRAM)
    cfg = os.path.join(d, "dta.toml")
    with open(cfg, "w") as f:
        f.write(f'region_dir = "{d}/r"\n[collector]\nhttp = ""\n[translator]\n'
                f'listen = "127.0.0.1:{port}"\nthreads = 1\n'
                '[[store]]\nname = "kw"\nkind = "key-write"\nslots = 4194304\nkey_len = 4\n'
                'data_len = 4\nredundancy = 2\n')
    col = subprocess.Popen([dta, "collector", "--config", cfg], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    end = time.monotonic() + 30
    while not os.path.exists(f"{d}/r/kw.region") and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.2)
    tr = subprocess.Popen([dta, "translator", "--json", "--stats-interval", "0", "--config", cfg],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    end = time.monotonic() + 30
    while not bound(port) and time.monotonic() < end:
        time.sleep(0.02)
    args = [dta, "report", "--to", f"127.0.0.1:{port}", "-p", "kw", "--count", str(count),
            "--batch", "32", "--keys", "1000000", "-q", "--json"]
    if rate:
        args += ["--rate", str(rate)]
    rep = subprocess.run(args, capture_output=True, text=True)
    sent = json.loads(rep.stdout)["reports"]
    time.sleep(1.0)
    cpu = cpu_seconds(tr.pid)
    tr.send_signal(signal.SIGTERM)
    out, _ = tr.communicate(timeout=120)
    st = json.loads(out)
    applied = st["reports"]["key_write"] - sum(st["rejected"].values())
    col.send_signal(signal.SIGTERM)
    col.wait(timeout=60)
    shutil.rmtree(d, ignore_errors=True)
    return applied, cpu, sent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--count", type=int, default=4_000_000)
    ap.add_argument("--rates", default="0,2000000", help="reports/s, 0 = unpaced")
    ap.add_argument("--dir", default="/dev/shm")
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.bin]
    rates = [int(r) for r in a.rates.split(",")]
    res = {(n, r): [] for n, _ in bins for r in rates}
    loads = []
    for _ in range(a.runs):
        for r in rates:
            for n, path in bins:
                applied, cpu, sent = one(path, r, a.count, a.dir)
                res[(n, r)].append((applied, cpu, sent))
                loads.append(os.getloadavg()[0])
    print(f"load average (1 min) during the runs: min {min(loads):.2f}, "
          f"median {statistics.median(loads):.2f}, max {max(loads):.2f}")
    print("| binary | offered | applied of sent (median) | lost | translator CPU s | "
          "M reports applied per CPU-s |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for r in rates:
        for n, _ in bins:
            v = res[(n, r)]
            applied = statistics.median(x[0] for x in v)
            sent = statistics.median(x[2] for x in v)
            cpu = statistics.median(x[1] for x in v)
            per = statistics.median(x[0] / x[1] / 1e6 for x in v)
            lost = statistics.median(1 - x[0] / x[2] for x in v)
            print(f"| {n} | {'unpaced' if r == 0 else f'{r / 1e6:g} M/s'} | "
                  f"{applied:,.0f} of {sent:,.0f} | {lost:.1%} | {cpu:.2f} | {per:.2f} |")


if __name__ == "__main__":
    main()
