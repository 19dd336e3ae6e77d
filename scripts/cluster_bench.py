#!/usr/bin/env python3
"""Many collectors on this machine (docs/benchmarks.md, "Many collectors"): for 1, 2 and 3
shared-memory collectors on loopback, one `dta translator --cluster` process serving all of
them (one translator thread each) and `dta report --cluster` sending Key-Write reports that the
map spreads over them:

- aggregate apply rate: reports the translators applied (their own counters) over the reporter's
  sending time, unpaced;
- query rate: `GET /cluster/batch/kw/kw?keys=...` (1000 keys a request, owners asked in
  parallel) on the first collector, requests for --query-secs, keys answered per second.

Medians over --runs; the 1-collector run is the same-run baseline of the ratios.

    scripts/bench.sh --only cluster [--runs 3] [--count 1000000] [--bin target/release/dta]
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
import urllib.request

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "dta.toml")


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait(pred, what, secs=60):
    end = time.time() + secs
    while not pred():
        if time.time() > end:
            raise SystemExit(f"timed out: {what}")
        time.sleep(0.05)


def run(binary, n, count, query_secs, tmp):
    names = [f"c{i}" for i in range(n)]
    http = {c: free_port() for c in names}
    udp = {c: free_port(socket.SOCK_DGRAM) for c in names}
    text = "version = 1\n"
    for c in names:
        text += (f'[[collector]]\nname = "{c}"\ntranslator = "127.0.0.1:{udp[c]}"\n'
                 f'http = "127.0.0.1:{http[c]}"\nregion_dir = "{tmp}/{c}"\nmode = "shm"\n')
    text += '[[store]]\nname = "kw"\nkind = "key-write"\nkey_len = 4\n'
    mp = os.path.join(tmp, "map.toml")
    with open(mp, "w") as f:
        f.write(text)
    example = open(EXAMPLE).read()
    procs = []
    try:
        for c in names:
            cfg = os.path.join(tmp, f"{c}.toml")
            with open(cfg, "w") as f:
                f.write(example.replace("127.0.0.1:40080", f"127.0.0.1:{http[c]}"))
            procs.append(subprocess.Popen(
                [binary, "collector", "--config", cfg, "--region-dir", f"{tmp}/{c}",
                 "--cluster", mp, "--name", c], stderr=subprocess.DEVNULL))
            wait(lambda: os.path.exists(f"{tmp}/{c}/kw.region"), "regions")

            def up(port=http[c]):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    return True
                except OSError:
                    return False
            wait(up, "collector HTTP")
        t = subprocess.Popen([binary, "translator", "--json", "--stats-interval", "0",
                              "--config", os.path.join(tmp, "c0.toml"), "--cluster", mp,
                              "--collectors", ",".join(names)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

        def bound(port):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.bind(("127.0.0.1", port))
                return False
            except OSError:
                return True
            finally:
                s.close()
        for c in names:
            wait(lambda p=udp[c]: bound(p), "translator port")
        out = subprocess.run([binary, "report", "--cluster", mp, "-p", "kw", "-c", str(count),
                              "--keys", "1000000", "-q", "--json", "--senders", "1"],
                             capture_output=True, text=True, check=True)
        sent = json.loads(out.stdout)
        time.sleep(0.3)
        t.send_signal(signal.SIGINT)
        stats = json.loads(t.communicate()[0])
        applied = sum(stats[c]["reports"]["key_write"] for c in names)
        secs = sent["elapsed"]["secs"] + sent["elapsed"]["nanos"] / 1e9
        apply_rate = applied / secs
        keys = ",".join(str(k) for k in range(1000))
        url = f"http://127.0.0.1:{http['c0']}/cluster/batch/kw/kw?keys={keys}"
        answered, t0 = 0, time.time()
        while time.time() - t0 < query_secs:
            with urllib.request.urlopen(url, timeout=30) as r:
                a = json.loads(r.read())["answers"]
            answered += len(a)
        query_rate = answered / (time.time() - t0)
        return apply_rate, applied / max(1, sent["reports"]), query_rate
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--query-secs", type=float, default=3.0)
    ap.add_argument("--collectors", default="1,2,3")
    ap.add_argument("--bin", default="target/release/dta")
    a = ap.parse_args()
    ns = [int(x) for x in a.collectors.split(",")]
    res = {n: [] for n in ns}
    for _ in range(a.runs):
        for n in ns:  # alternate: every count sees the same machine state
            with tempfile.TemporaryDirectory() as tmp:
                res[n].append(run(a.bin, n, a.count, a.query_secs, tmp))
    base = None
    print(f"{'collectors':>10} {'apply/s':>12} {'applied':>8} {'ratio':>6} {'keys queried/s':>15}"
          f" {'ratio':>6}")
    for n in ns:
        ap_ = statistics.median(r[0] for r in res[n])
        frac = statistics.median(r[1] for r in res[n])
        q = statistics.median(r[2] for r in res[n])
        if base is None:
            base = (ap_, q)
        print(f"{n:>10} {ap_:>12.0f} {frac:>8.3f} {ap_ / base[0]:>6.2f} {q:>15.0f}"
              f" {q / base[1]:>6.2f}")
    print(f"runs {a.runs}, {a.count} Key-Write reports per run, medians; "
          f"load: {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
