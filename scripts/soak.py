#!/usr/bin/env python3
"""The fault soak (docs/benchmarks.md "Fault soak"): minutes of a mixed workload against one
translator and two collectors of a cluster, while the machine is abused the ways operators
meet in production, then the promises checked:

* a paced high-priority, retransmittable Key-Increment stream (one key, so its count is exact:
  reports applied times the key's counter value) must be applied whole and exactly once;
* two unpaced low-priority floods and a paced medium stream: every datagram a reporter sent is
  accounted for by the translator, applied or counted by reason (kernel drops by priority,
  shed, duplicates, rejects);
* meanwhile: the configuration is rewritten every few seconds (a rule toggled), once truncated
  to nothing and put back (the running rule must stay), SIGHUP sent; the second collector is
  stopped (SIGSTOP, a hung peer) for a while and cluster queries must still answer the healthy
  owner's keys within one deadline; the spill file's filesystem is filled (root: a tmpfs the
  soak mounts), then freed.

Run by scripts/soak.sh (builds the release binary first). Prints one JSON summary; exit 1 when
a promise broke. Not part of CI: it takes minutes.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def counter_of(key):
    """The load generator's counter value for a Key-Increment key (dta_reporter::keys)."""
    return 1 + fnv1a64(key) % 16


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def ready(port):
    """The HTTP status of /readyz on `port`."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def port_bound(port):
    """Whether a UDP socket is bound on `port` (the kernel's socket table)."""
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as f:
                for line in f.readlines()[1:]:
                    local = line.split()[1]
                    if int(local.rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def free_port(kind):
    import socket
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Soak:
    def __init__(self, dta, seconds, work):
        self.dta = dta
        self.seconds = seconds
        self.work = work
        self.procs = []
        self.events = []
        self.mounted = None

    def log(self, what, **kw):
        e = {"t": round(time.monotonic() - self.t0, 1), "event": what, **kw}
        self.events.append(e)
        print(json.dumps(e), file=sys.stderr, flush=True)

    def spawn(self, args, **kw):
        p = subprocess.Popen([self.dta] + args, stdout=subprocess.PIPE,
                             stderr=kw.pop("stderr", subprocess.PIPE), text=True, **kw)
        self.procs.append(p)
        return p

    def setup(self):
        w = self.work
        # The regions and the spill file on a filesystem of their own (root: a 48 MiB tmpfs),
        # which the soak fills while the translator writes.
        self.spill_dir = os.path.join(w, "fs")
        os.makedirs(self.spill_dir)
        if os.geteuid() == 0:
            ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "dta-soak",
                                 self.spill_dir]).returncode == 0
            self.mounted = self.spill_dir if ok else None
        self.port = free_port(2)  # SOCK_DGRAM
        self.http = [free_port(1), free_port(1)]
        self.metrics = free_port(1)
        self.cfg = os.path.join(w, "dta.toml")
        self.base = (
            f'region_dir = "{self.spill_dir}/regions"\n[collector]\n'
            f'http = "127.0.0.1:{self.http[0]}"\n[translator]\nlisten = "127.0.0.1:{self.port}"\nthreads = 1\nclassifier = true\n'
            '[translator.flow_control]\nwrite_budget = 400000\nburst = 65536\nmin_budget = 10000\n'
            f'spill_memory = 65536\nspill_file = "{self.spill_dir}/spill"\n'
            'spill_file_bytes = 67108864\n'
            '[[store]]\nname = "hp"\nkind = "key-increment"\ncounters = 65536\nkey_len = 4\nredundancy = 2\n'
            '[[store]]\nname = "kw"\nkind = "key-write"\nslots = 1048576\nkey_len = 4\n'
            'data_len = 4\nredundancy = 2\n'
            '[[store]]\nname = "ev"\nkind = "append"\nlists = 4\ncapacity = 65536\nentry_len = 4\nbatch = 16\n'
        )
        self.rule = ('\n[[translator.rules]]\nname = "drop-events"\nprimitive = "append"\n'
                     'store = "ev"\naction = "drop"\n')
        self.write_config(True)
        # The second collector, a peer of the cluster.
        self.peer_dir = os.path.join(w, "peer")
        os.makedirs(self.peer_dir)
        self.peer_cfg = os.path.join(self.peer_dir, "dta.toml")
        with open(self.peer_cfg, "w") as f:
            f.write(f'region_dir = "regions"\n[collector]\nhttp = "127.0.0.1:{self.http[1]}"\n'
                    '[[store]]\nname = "kw"\nkind = "key-write"\nslots = 4096\nkey_len = 4\n'
                    'data_len = 4\nredundancy = 2\n')
        self.map = os.path.join(w, "cluster.toml")
        with open(self.map, "w") as f:
            f.write("version = 1\n")
            for i, h in enumerate(self.http):
                f.write(f'[[collector]]\nname = "c{i}"\nmode = "shm"\n'
                        f'translator = "127.0.0.1:{free_port(2)}"\nhttp = "127.0.0.1:{h}"\n')
            f.write('[[store]]\nname = "kw"\nkind = "key-write"\nkey_len = 4\n')

    def write_config(self, with_rule, text=None):
        tmp = self.cfg + ".tmp"
        with open(tmp, "w") as f:
            f.write(text if text is not None else self.base + (self.rule if with_rule else ""))
        os.replace(tmp, self.cfg)

    def start(self):
        self.collectors = [
            self.spawn(["collector", "--config", self.cfg, "--cluster", self.map, "--name", "c0"]),
            self.spawn(["collector", "--config", self.peer_cfg, "--cluster", self.map,
                        "--name", "c1"]),
        ]
        for h in self.http:
            self.wait(lambda h=h: urllib.request.urlopen(f"http://127.0.0.1:{h}/readyz",
                                                         timeout=2).status == 200, "collectors")
        self.translator = self.spawn(
            ["translator", "--json", "--stats-interval", "0", "--metrics", str(self.metrics),
             "--config", self.cfg], stderr=subprocess.PIPE)
        self.wait(lambda: scrape(self.metrics) is not None, "translator")

    def wait(self, f, what, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if f():
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.1)
        raise SystemExit(f"soak: {what} did not come up")

    def reporters(self):
        to = f"127.0.0.1:{self.port}"
        d = str(self.seconds)
        self.high = self.spawn(["report", "--to", to, "-p", "ki", "--keys", "1", "--priority",
                                "high", "--retransmittable", "--rate", "20000", "--duration", d,
                                "--reporter-id", "100", "--json", "-q"])
        # The translator answers every reporter of an address on one control port (40044): the
        # high-priority reporter holds it; the others run without flow control, said explicitly
        # (a reporter that cannot bind it is refused otherwise).
        self.wait(lambda: port_bound(40044), "the high-priority reporter's NACK port")
        self.medium = self.spawn(["report", "--to", to, "-p", "kw", "--priority", "medium",
                                  "--rate", "50000", "--duration", d, "--reporter-id", "200",
                                  "--no-flow-control", "--json", "-q"])
        self.floods = [self.spawn(["report", "--to", to, "-p", "kw", "--priority", "low",
                                   "--duration", d, "--reporter-id", str(300 + i),
                                   "--no-flow-control", "--json", "-q"]) for i in range(2)]
        self.appends = self.spawn(["report", "--to", to, "-p", "append", "--priority", "medium",
                                   "--rate", "5000", "--duration", d, "--reporter-id", "400",
                                   "--lists", "4", "--no-flow-control", "--json", "-q"])

    def cluster_query(self):
        keys = ",".join(str(k) for k in range(16))
        t = time.monotonic()
        r = subprocess.run([self.dta, "query", "kw", "--store", "kw", "--key", keys,
                            "--cluster", self.map], capture_output=True, text=True)
        took = time.monotonic() - t
        lines = r.stdout.splitlines()
        return took, r.returncode, lines

    def faults(self):
        """The faults, spread over the run."""
        end = self.t0 + self.seconds
        plan = [
            (0.15, "truncate"), (0.2, "restore"), (0.3, "fill"), (0.45, "hang"),
            (0.5, "query_hung"), (0.6, "resume"), (0.65, "free"), (0.75, "query_ok"),
        ]
        toggle = True
        next_reload = self.t0 + 5
        results = {}
        for frac, what in plan:
            at = self.t0 + frac * self.seconds
            while time.monotonic() < at:
                if time.monotonic() >= next_reload:
                    # A rule toggled off and on every 5 s (SIGHUP too).
                    toggle = not toggle
                    self.write_config(True if toggle else False)
                    self.translator.send_signal(signal.SIGHUP)
                    next_reload += 5
                time.sleep(0.05)
            if what == "truncate":
                self.write_config(True, text="")
                self.translator.send_signal(signal.SIGHUP)
            elif what == "restore":
                self.write_config(True)
                toggle = True
            elif what == "fill" and self.mounted:
                with open(os.path.join(self.mounted, "filler"), "wb") as f:
                    try:
                        while True:
                            f.write(b"\0" * (1 << 16))
                    except OSError:
                        pass
                time.sleep(1)
                results["full"] = {
                    "free_bytes": shutil.disk_usage(self.mounted).free,
                    "collector_ready": ready(self.http[0]),
                    "translator_ready": ready(self.metrics),
                }
            elif what == "free" and self.mounted:
                os.unlink(os.path.join(self.mounted, "filler"))
            elif what == "hang":
                self.collectors[1].send_signal(signal.SIGSTOP)
            elif what == "resume":
                self.collectors[1].send_signal(signal.SIGCONT)
            elif what.startswith("query"):
                took, code, lines = self.cluster_query()
                results[what] = {"seconds": round(took, 2), "exit": code,
                                 "answered": sum(1 for l in lines if "error:" not in l),
                                 "errors": [l for l in lines if "error:" in l][:2],
                                 "keys": len(lines)}
            self.log(what)
        while time.monotonic() < end:
            time.sleep(0.1)
        return results

    def finish(self):
        out = {}
        for name, p in [("high", self.high), ("medium", self.medium),
                        ("appends", self.appends)] + [
                (f"flood{i}", f) for i, f in enumerate(self.floods)]:
            so, se = p.communicate(timeout=300)
            try:
                out[name] = json.loads(so)
            except ValueError:
                raise SystemExit(f"soak: reporter {name} failed ({p.returncode}): {se}")
        time.sleep(2)  # what the sockets hold is read
        m = scrape(self.metrics)
        self.translator.send_signal(signal.SIGTERM)
        so, se = self.translator.communicate(timeout=120)
        st = json.loads(so)
        kq = subprocess.run([self.dta, "query", "ki", "--config", self.cfg, "--store", "hp",
                             "--key", "0", "--json"], capture_output=True, text=True)
        count = json.loads(kq.stdout)["count"]
        return out, m, st, count, se

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=30)
                except Exception:  # noqa: BLE001
                    p.kill()
        if self.mounted:
            subprocess.run(["umount", "-l", self.mounted])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=180)
    ap.add_argument("--dta", default=os.path.join(ROOT, "target", "release", "dta"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dta-soak-")
    s = Soak(a.dta, a.seconds, work)
    broken = []
    try:
        s.setup()
        s.start()
        s.t0 = time.monotonic()
        s.reporters()
        queries = s.faults()
        reporters, metrics, st, count, stderr = s.finish()
    finally:
        s.stop_all()
    # 1. High priority: whole and exactly once.
    c0 = counter_of(bytes(4))
    sent = reporters["high"]["reports"]
    applied = count // c0 if count % c0 == 0 else count / c0
    if count != sent * c0:
        broken.append(f"high priority: {sent} reports sent, count {count} = {applied} x {c0}")
    # 2. Every other datagram accounted for, by priority.
    pr = {"low": 0, "medium": 0}
    for k in ("flood0", "flood1"):
        pr["low"] += reporters[k]["datagrams"]
    pr["medium"] += reporters["medium"]["datagrams"] + reporters["appends"]["datagrams"]
    accounts = {}
    for p, n in pr.items():
        kernel = metrics.get(f'dta_translator_kernel_drops_total{{priority="{p}"}}', 0)
        got = st["priority"][p] + st["shed"][p] + kernel
        accounts[p] = {"sent": n, "received": st["priority"][p], "shed": st["shed"][p],
                       "kernel_drops": int(kernel), "unaccounted": int(n - got)}
        if n != got:
            broken.append(f"{p}: {n} sent, {int(got)} accounted for")
    # 3. The hung peer cost its own keys only, within one deadline.
    q = queries.get("query_hung")
    if q and (q["seconds"] > 12 or q["answered"] == 0 or q["keys"] != 16):
        broken.append(f"cluster query with a hung peer: {q}")
    # 4. A full filesystem under allocated regions changes nothing.
    full = queries.get("full")
    if full and (full["collector_ready"] != 200 or full["translator_ready"] != 200):
        broken.append(f"not ready with the filesystem full: {full}")
    # 5. The running rule survived the truncated file: events were dropped throughout.
    if st["rules"]["dropped"] == 0:
        broken.append("the drop rule did not run")
    load = os.getloadavg()
    summary = {
        "seconds": a.seconds, "load_average": [round(x, 2) for x in load],
        "high": {"sent": sent, "applied": applied, "retransmissions":
                 reporters["high"].get("retransmissions"), "nack_slowdowns":
                 reporters["high"].get("nack_slowdowns")},
        "filesystem_full": full if full else "not root: no filesystem of its own to fill",
        "accounts": accounts, "cluster_queries": queries,
        "translator": {"nacks_sent": st["nacks_sent"], "nacks_over_budget":
                       st["nacks_over_budget"], "spill_file_errors":
                       st["flow_control"].get("spill_file_errors"),
                       "rules": st["rules"], "rejected": {k: v for k, v in
                                                          st["rejected"].items() if v}},
        "spill_file_warnings_logged": stderr.count("spill file"),
        "broken": broken,
    }
    print(json.dumps(summary, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
