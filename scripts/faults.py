#!/usr/bin/env python3
"""The cases of the fault-injection suite; run by scripts/faults.sh, which creates the network
namespaces and builds the binaries (see docs/testing.md, "Faults and overload").

    faults.py [loss] [budget] [many]        run cases (env: NS_R NS_F NS_T FAULTS_WORK FAULTS_BIN)
    faults.py sample URL OUT [PID]          (inside the translator's namespace) every 100 ms,
                                            append the translator's metrics and RSS to OUT
    faults.py plot SAMPLES PNG              applied rate by priority over time

Every case runs a collector and a translator (namespace T), dta-impair (F) and reporters (R),
then checks what the issue of the overload work asks ("Must show") and prints one row of the
results table: offered, applied, dropped by priority, spilled, re-injected, NACKs, time to
drain. Standard library only, but the plot needs matplotlib.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

R_IP, F_R_IP, F_T_IP, T_IP = "10.93.1.1", "10.93.1.2", "10.93.2.1", "10.93.2.2"
DTA_PORT = 40040
METRICS = "127.0.0.1:9464"
PRIORITIES = ("low", "medium", "high")

# ---------------------------------------------------------------------------------------------
# Metrics


def parse_metrics(text):
    """OpenMetrics text -> {(name, ((label, value), ...)): value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)', line)
        if not m:
            continue
        labels = tuple(sorted(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or "")))
        try:
            out[(m.group(1), labels)] = float(m.group(4))
        except ValueError:
            pass
    return out


def metric(sample, name, **labels):
    """Sum of the series of `name` (with or without `_total`) whose labels include `labels`;
    None when the translator exports no such metric."""
    found = None
    for (n, ls), v in sample.items():
        if n not in (name, name + "_total"):
            continue
        d = dict(ls)
        if all(d.get(k) == str(want) for k, want in labels.items()):
            found = (found or 0) + v
    return found


def sample_loop(url, out, pid=None):
    """Append one JSON line per 100 ms: time, metrics (as [name, labels, value]), RSS."""
    with open(out, "a", buffering=1) as f:
        while True:
            t = time.time()
            try:
                with urllib.request.urlopen(url, timeout=1) as r:
                    m = parse_metrics(r.read().decode())
            except OSError:
                m = None
            rss = rss_of(pid) if pid else None
            if m is not None:
                f.write(json.dumps({"t": t, "m": [[n, list(ls), v] for (n, ls), v in m.items()],
                                    "rss": rss}) + "\n")
            time.sleep(max(0.0, 0.1 - (time.time() - t)))


def rss_of(pid):
    """{'VmRSS': bytes, 'RssAnon': bytes, ...} of a process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            st = {}
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                    st[k] = int(v.split()[0]) * 1024
            return st
    except OSError:
        return None


def load_samples(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    j = json.loads(line)
                except ValueError:
                    continue  # a line being written
                j["m"] = {(n, tuple(tuple(x) for x in ls)): v for n, ls, v in j["m"]}
                rows.append(j)
    except OSError:
        pass
    return rows

def udp_bound_in(pid, port):
    """Whether a UDP socket of process `pid`'s network namespace is bound to `port` (the
    kernel's socket tables as /proc/PID/net shows them; nothing is bound to probe it)."""
    for table in ("udp", "udp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[9] != "0":
                return True
    return False


# The reporters' NACK port (dta_wire::NACK_PORT): one reporter of a namespace can have it.
NACK_PORT = 40044


def hold_nack_port(p):
    """Wait until reporter `p` has bound the NACK port (or has finished), so the next reporter
    runs without one however slowly `p` started."""
    deadline = time.time() + START_WAIT
    while p.poll() is None and not udp_bound_in(p.pid, NACK_PORT):
        if time.time() > deadline:
            raise CaseError("the retransmittable reporter did not bind the NACK port")
        time.sleep(0.02)


# How long a process of a case gets to come up: far beyond an idle machine's, for a loaded one.
START_WAIT = 60

# ---------------------------------------------------------------------------------------------
# The stack of one case


class Stack:
    """Collector and translator in T, dta-impair in F, for one case; reporters run in R."""

    def __init__(self, name, translator_extra, impair_args, stores):
        self.name = name
        self.ns_r, self.ns_f, self.ns_t = os.environ["NS_R"], os.environ["NS_F"], os.environ["NS_T"]
        self.bin = os.environ.get("FAULTS_BIN", "target/release")
        self.dir = os.path.join(os.environ["FAULTS_WORK"], name)
        os.makedirs(self.dir, exist_ok=True)
        self.cfg = os.path.join(self.dir, "dta.toml")
        self.regions = os.path.join(self.dir, "regions")
        self.samples = os.path.join(self.dir, "samples.jsonl")
        self.counts = os.path.join(self.dir, "impair.json")
        with open(self.cfg, "w") as f:
            f.write(f"region_dir = '{self.regions}'\n[collector]\nhttp = ''\n"
                    f"[translator]\nlisten = '{T_IP}:{DTA_PORT}'\nallow = ['10.93.2.0/24']\n")
            f.write(translator_extra)
            f.write(stores)
        self.impair_args = impair_args
        self.procs = []

    def exe(self, name):
        return os.path.join(self.bin, name)

    def spawn(self, ns, args, out=None, err=None):
        p = subprocess.Popen(["ip", "netns", "exec", ns] + args,
                             stdout=out or subprocess.DEVNULL, stderr=err or subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def log(self, what):
        return open(os.path.join(self.dir, what + ".log"), "w")

    def start(self):
        self.collector = self.spawn(self.ns_t, [self.exe("dta"), "collector", "--config", self.cfg],
                                    err=self.log("collector"))
        deadline = time.time() + START_WAIT
        while not (os.path.isdir(self.regions) and any(n.endswith(".region") for n in os.listdir(self.regions))):
            if time.time() > deadline or self.collector.poll() is not None:
                raise CaseError(f"the collector did not create the regions (see {self.dir}/collector.log)")
            time.sleep(0.05)
        time.sleep(0.3)
        self.tr_out = open(os.path.join(self.dir, "translator.json"), "w")
        self.translator = self.spawn(self.ns_t, [self.exe("dta"), "translator", "--config", self.cfg,
                                                 "--stats-interval", "0", "--json", "--metrics", METRICS],
                                     out=self.tr_out, err=self.log("translator"))
        self.impair = self.spawn(self.ns_f, [self.exe("dta-impair"), "--listen", f"{F_R_IP}:{DTA_PORT}",
                                             "--to", f"{T_IP}:{DTA_PORT}", "--bind", f"{F_T_IP}:0",
                                             "--counts", self.counts] + self.impair_args,
                                 out=subprocess.DEVNULL, err=self.log("impair"))
        self.sampler = self.spawn(self.ns_t, [sys.executable, os.path.abspath(__file__), "sample",
                                              f"http://{METRICS}/metrics", self.samples,
                                              str(self.translator.pid)], err=self.log("sampler"))
        # Up: its metrics answer and it says it listens (the metrics server starts first).
        deadline = time.time() + START_WAIT
        tr_log = os.path.join(self.dir, "translator.log")
        while not (load_samples(self.samples) and "translator on udp://" in open(tr_log).read()):
            if time.time() > deadline or self.translator.poll() is not None:
                raise CaseError(f"the translator did not come up (see {tr_log})")
            time.sleep(0.1)
        self.base_rss = (load_samples(self.samples)[-1].get("rss") or {}).get("RssAnon")
        # The forwarder listens before any reporter sends (what it has not bound yet is lost).
        while not udp_bound_in(self.impair.pid, DTA_PORT):
            if time.time() > deadline or self.impair.poll() is not None:
                raise CaseError(f"dta-impair did not come up (see {self.dir}/impair.log)")
            time.sleep(0.05)

    def report(self, args, wait=True):
        """`dta report` in R towards the forwarder; returns the process (or its JSON stats)."""
        p = subprocess.Popen(["ip", "netns", "exec", self.ns_r, self.exe("dta"), "report",
                              "--to", f"{F_R_IP}:{DTA_PORT}", "--json", "--quiet"] + args,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return finish_report(p) if wait else p

    def last(self):
        s = load_samples(self.samples)
        return s[-1] if s else None

    def wait_drained(self, since, quiet=1.0, limit=60.0):
        """Wait until the translator applied nothing new and its spill is empty for `quiet`
        seconds; returns the seconds from `since` to the last change (time to drain)."""
        last_change, prev = time.time(), None
        deadline = time.time() + limit
        while time.time() < deadline:
            time.sleep(0.1)
            s = self.last()
            if s is None:
                continue
            applied = metric(s["m"], "dta_translator_reports") or 0
            spill = metric(s["m"], "dta_translator_spill_bytes") or 0
            key = (applied, spill)
            if key != prev:
                prev, last_change = key, s["t"]
            elif spill == 0 and time.time() - last_change >= quiet:
                return max(0.0, last_change - since)
        raise CaseError(f"the translator did not drain within {limit:.0f} s")

    def stop(self):
        """Stop everything; returns (translator stats JSON, forwarder counts JSON, samples)."""
        stats = counts = None
        for p, sig in ((self.impair, signal.SIGTERM), (self.translator, signal.SIGTERM)):
            if p.poll() is None:
                p.send_signal(sig)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.tr_out.close()
        try:
            with open(os.path.join(self.dir, "translator.json")) as f:
                stats = json.load(f)
        except (OSError, ValueError):
            pass
        try:
            with open(self.counts) as f:
                counts = json.load(f)
        except (OSError, ValueError):
            pass
        self.kill_all()
        return stats, counts, load_samples(self.samples)

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


class CaseError(Exception):
    pass


def seconds(d):
    """A serialized Duration ({"secs", "nanos"}) in seconds."""
    return d["secs"] + d["nanos"] / 1e9 if isinstance(d, dict) else float(d)


def finish_report(p):
    out, err = p.communicate()
    if p.returncode != 0:
        raise CaseError(f"dta report failed ({p.returncode}): {err.strip()[-400:]}")
    try:
        return json.loads(out)
    except ValueError:
        raise CaseError(f"dta report printed no JSON: {out[-200:]!r} {err[-200:]!r}")


KI_STORE = """
[[store]]
name = 'counters'
kind = 'key-increment'
counters = 1048576
key_len = 4
redundancy = 2

[[store]]
name = 'kw'
kind = 'key-write'
slots = 1048576
key_len = 4
data_len = 4
redundancy = 2
"""

# ---------------------------------------------------------------------------------------------
# Checks and the results table


class Case:
    def __init__(self, name):
        self.name = name
        self.checks = []  # (ok, text)
        self.row = {}

    def check(self, ok, text):
        self.checks.append((bool(ok), text))
        print(f"  [{'ok' if ok else 'FAIL'}] {text}", file=sys.stderr)

    def counter(self, value, what, ok, text):
        """Check `ok(value)` saying `text(value)`; a counter the translator does not export
        (None) fails saying so."""
        if value is None:
            self.check(False, f"the translator exports {what}")
        else:
            self.check(ok(value), text(value))

    @property
    def ok(self):
        return bool(self.checks) and all(ok for ok, _ in self.checks)


def by_priority(sample, name):
    return {p: metric(sample, name, priority=p) for p in PRIORITIES}


def fill_row(case, stack_stats, final, counts, offered, drain):
    m = final["m"] if final else {}
    case.row = {
        "offered": offered,
        "applied": {p: metric(m, "dta_translator_overload_admitted", priority=p) for p in PRIORITIES},
        "dropped": {p: metric(m, "dta_translator_overload_dropped", priority=p) for p in PRIORITIES},
        "wire_dropped": (counts or {}).get("forward", {}).get("dropped"),
        "spilled": metric(m, "dta_translator_spilled"),
        "reinjected": metric(m, "dta_translator_reinjected"),
        "nacks": metric(m, "dta_translator_nacks"),
        "drain_s": drain,
    }


def ki_check(case, stack, runs, keys):
    args = [stack.exe("dta-faults"), "check-ki", "--region", os.path.join(stack.regions, "counters.region"),
            "--keys", str(keys)]
    for seed, count in runs:
        args += ["--run", f"{seed}:{count}"]
    p = subprocess.run(args, capture_output=True, text=True)
    try:
        r = json.loads(p.stdout)
    except ValueError:
        case.check(False, f"dta-faults check-ki answered: {p.stderr.strip()[-300:]}")
        return
    case.check(r["exact"] == r["keys"],
               f"Key-Increment sums exact: {r['exact']} of {r['keys']} keys "
               f"({r['stored_total']} of {r['expected_total']} counted; under {r['under']}, "
               f"over {r['over']}{', e.g. ' + str(r['mismatches'][:3]) if r['mismatches'] else ''})")


# ---------------------------------------------------------------------------------------------
# Case 1: loss, duplication and reordering


def case_loss():
    case = Case("loss")
    keys, count, rate, batch = 2000, 40000, 20000, 8
    stack = Stack("loss",
                  "nack_interval_ms = 5\nresync_after_ms = 500\n",
                  ["--loss", "5", "--duplicate", "2", "--reorder", "3", "--reorder-by", "4", "--seed", "5"],
                  KI_STORE)
    try:
        stack.start()
        hi = stack.report(["-p", "ki", "--priority", "high", "--retransmittable", "--keys", str(keys),
                           "--count", str(count), "--rate", str(rate), "--batch", str(batch),
                           "--reporter-id", "11", "--seed", "11"], wait=False)
        # The high reporter owns the control port (one per address); the low one runs without
        # flow control, said explicitly (a reporter that cannot bind it is refused otherwise).
        hold_nack_port(hi)
        lo = stack.report(["-p", "kw", "--priority", "low", "--no-flow-control", "--keys", str(keys),
                           "--count", str(count),
                           "--rate", str(rate), "--batch", str(batch), "--reporter-id", "12",
                           "--seed", "12"], wait=False)
        hi, lo = finish_report(hi), finish_report(lo)
        end = time.time()
        drain = stack.wait_drained(end, quiet=1.0)
        time.sleep(2.0)  # the tracker gives up on the low space's last gaps (resync_after_ms)
        stats, counts, samples = stack.stop()
    except CaseError as e:
        case.check(False, str(e))
        stack.kill_all()
        return case
    final = samples[-1] if samples else None
    m = final["m"] if final else {}
    fwd = (counts or {}).get("forward", {})
    ki_check(case, stack, [(11, count)], keys)
    lost = by_priority(m, "dta_translator_lost")
    dups = by_priority(m, "dta_translator_duplicates")
    dropped_low = fwd.get("dropped", {}).get("low", 0)
    tail_low = fwd.get("dropped_tail", {}).get("low", 0)
    case.check(dropped_low > 0 and fwd.get("dropped", {}).get("high", 0) > 0,
               f"the forwarder dropped datagrams of both priorities "
               f"(low {dropped_low}, high {fwd.get('dropped', {}).get('high')})")
    # Datagrams the translator's classifier shed never reach the tracker: lost there too.
    shed_low = metric(m, "dta_translator_shed", priority="low") or 0
    case.counter(lost["low"], "lost{priority=low}",
                 lambda v: v == dropped_low - tail_low + shed_low,
                 lambda v: f"low loss counted by the translator {v:.0f} = datagrams the forwarder "
                           f"dropped {dropped_low} - after the last one sent {tail_low}"
                           f" + shed by the translator {shed_low:.0f}")
    want = fwd.get("duplicated", {}).get("low", 0)
    case.counter(dups["low"], "duplicates{priority=low}", lambda v: v == want,
                 lambda v: f"low duplicates counted {v:.0f} = duplicated by the forwarder {want}")
    case.counter(metric(m, "dta_translator_unrecovered"), "unrecovered", lambda v: v == 0,
                 lambda v: f"no high datagram unrecovered ({v:.0f})")
    case.check(hi["retransmissions"] > 0, f"the high reporter resent {hi['retransmissions']} datagrams "
                                          f"on {hi['nacks']} NACKs")
    fill_row(case, stats, final, counts, {"high": hi["reports"], "low": lo["reports"]}, drain)
    return case

# ---------------------------------------------------------------------------------------------
# Case 2: a write budget of half the offered rate


def case_budget():
    case = Case("budget")
    keys, secs, batch = 2000, 6, 8
    hi_rate, lo_rate = 8000, 4000  # reports/s; 2 memory operations each (N = 2)
    offered_writes = 2 * (hi_rate + lo_rate)
    budget = offered_writes // 2
    spill_memory = 4 << 20
    stack = Stack("budget",
                  f"\n[translator.flow_control]\nwrite_budget = {budget}\nburst = {budget // 10}\n"
                  f"min_budget = {budget // 2}\nspill_memory = {spill_memory}\n",
                  [],
                  KI_STORE)
    hi_count, lo_count = hi_rate * secs, lo_rate * secs
    try:
        stack.start()
        hi = stack.report(["-p", "ki", "--priority", "high", "--retransmittable", "--keys", str(keys),
                           "--count", str(hi_count), "--rate", str(hi_rate), "--batch", str(batch),
                           "--reporter-id", "21", "--seed", "21"], wait=False)
        hold_nack_port(hi)  # and the low reporter runs without flow control, as in case 1
        lo = stack.report(["-p", "kw", "--priority", "low", "--no-flow-control", "--keys", str(keys),
                           "--count", str(lo_count),
                           "--rate", str(lo_rate), "--batch", str(batch), "--reporter-id", "22",
                           "--seed", "22"], wait=False)
        hi, lo = finish_report(hi), finish_report(lo)
        end = time.time()
        drain = stack.wait_drained(end, quiet=1.0)
        stats, counts, samples = stack.stop()
    except CaseError as e:
        case.check(False, str(e))
        stack.kill_all()
        return case
    final = samples[-1] if samples else None
    m = final["m"] if final else {}
    ki_check(case, stack, [(21, hi_count)], keys)
    reinj = metric(m, "dta_translator_reinjected")
    case.counter(metric(m, "dta_translator_spilled"), "spilled",
                 lambda v: v > 0 and reinj == v,
                 lambda v: f"high datagrams spilled {v:.0f} and all re-injected ({reinj})")
    dropped = by_priority(m, "dta_translator_overload_dropped")
    admitted = by_priority(m, "dta_translator_overload_admitted")
    case.counter(dropped["low"], "overload_dropped{priority=low}", lambda v: v > 0,
                 lambda v: f"low dropped under the budget and counted ({v:.0f} datagrams)")
    shed_low = metric(m, "dta_translator_shed", priority="low") or 0
    if dropped["low"] is not None:
        case.counter(admitted["low"], "overload_admitted{priority=low}",
                     lambda v: v + dropped["low"] + shed_low == lo["datagrams"],
                     lambda v: f"every low datagram admitted or counted dropped: {v:.0f} + "
                               f"{dropped['low']:.0f} + shed {shed_low:.0f} = {lo['datagrams']} sent")
    case.counter(dropped["high"], "overload_dropped{priority=high}", lambda v: v == 0,
                 lambda v: f"no high datagram dropped ({v:.0f})")
    # No NACK storm: with no loss on the wire, NACKs can only follow kernel drops at the
    # translator; bound them at 2 % of the high datagrams (+5) per second of the run.
    run_s = max(seconds(hi["elapsed"]), 1e-3)
    bound = 0.02 * hi["datagrams"] / run_s + 5
    case.counter(metric(m, "dta_translator_nacks"), "nacks", lambda v: v / run_s <= bound,
                 lambda v: f"no NACK storm: {v / run_s:.1f} NACKs/s <= {bound:.1f}")
    # Memory: anonymous RSS (the regions are shared file mappings, not counted) stays within the
    # configured spill plus the documented 32 MiB above what the translator held at start.
    rss = [s["rss"]["RssAnon"] for s in samples if s.get("rss")]
    if rss and stack.base_rss is not None:
        peak = max(rss)
        limit = stack.base_rss + spill_memory + (32 << 20)
        case.check(peak <= limit, f"translator anonymous RSS peak {peak / 2**20:.1f} MiB <= start "
                                  f"{stack.base_rss / 2**20:.1f} + spill {spill_memory / 2**20:.0f} + 32 MiB")
    else:
        case.check(False, "translator RSS sampled")
    fill_row(case, stats, final, counts, {"high": hi["reports"], "low": lo["reports"]}, drain)
    case.samples = stack.samples
    return case

# ---------------------------------------------------------------------------------------------
# Case 3: 65 536 reporters, 256 datagrams in flight each, 1 % loss


def case_many():
    case = Case("many")
    reporters = int(os.environ.get("FAULTS_REPORTERS", 65536))
    in_flight = int(os.environ.get("FAULTS_IN_FLIGHT", 256))
    # Datagrams per reporter: 16 keeps the case near 40 s on the 2-core VM (1 M datagrams at
    # the rate below, which the path sustains without kernel drops with room to spare on a
    # loaded machine, where the forwarder, reporters and translator share 2 cores with other
    # work); 256 fills every ring.
    datagrams = int(os.environ.get("FAULTS_DATAGRAMS", 16))
    rate = int(os.environ.get("FAULTS_MANY_RATE", 30000))
    keys = 1000  # few enough that no two keys share both Count-Min counters (2^20 of them)
    stack = Stack("many",
                  "nack_interval_ms = 10\nresync_after_ms = 4000\nrecv_buffer = 33554432\n",
                  ["--loss", "1", "--seed", "9", "--recv-buffer", str(32 << 20)],
                  KI_STORE)
    try:
        stack.start()
        r = stack.report(["-p", "ki", "--priority", "high", "--retransmittable", "--keys", str(keys),
                          "--reporters", str(reporters), "--in-flight", str(in_flight),
                          # 65 536 runs end at once: at 1 % loss a last datagram and both
                          # default probes are all lost in about 6 % of the cases' runs; with 4
                          # the chance is 65 536 x 1e-10.
                          "--tail-probes", "4",
                          "--datagrams", str(datagrams),
                          "--rate", str(rate), "--reporter-id", "100000", "--seed", "31"])
        end = time.time()
        drain = stack.wait_drained(end, quiet=1.5, limit=120)
        stats, counts, samples = stack.stop()
    except CaseError as e:
        case.check(False, str(e))
        stack.kill_all()
        return case
    final = samples[-1] if samples else None
    m = final["m"] if final else {}
    fwd = (counts or {}).get("forward", {})
    dropped_hi = fwd.get("dropped", {}).get("high", 0)
    case.check(dropped_hi > 0, f"the forwarder dropped {dropped_hi} high datagrams")
    applied = metric(m, "dta_translator_reports") or 0
    head = fwd.get("dropped_head", {}).get("high", 0)
    tail = fwd.get("dropped_tail", {}).get("high", 0)
    case.check(applied == r["reports"],
               f"every report applied once: {applied:.0f} of {r['reports']} (the forwarder dropped "
               f"{head} reporters' first datagrams before any got through, NACKed from 0; "
               f"{tail} last datagrams with every tail probe, which no receiver can see)")
    case.counter(metric(m, "dta_translator_unrecovered"), "unrecovered", lambda v: v == 0,
                 lambda v: f"every lost datagram recovered (unrecovered {v:.0f}; "
                           f"{r['retransmissions']} resent on {r['nacks']} NACKs)")
    ki_check(case, stack, [(31, r["reports"])], keys)
    case.counter(metric(m, "dta_translator_tracker_evictions"), "tracker_evictions",
                 lambda v: v == 0, lambda v: f"no tracker eviction ({v:.0f})")
    tb = metric(m, "dta_translator_tracker_bytes")
    case.counter(tb, "tracker_bytes", lambda v: v > 0,
                 lambda v: f"tracker_bytes {v:.0f} ({v / 2**20:.1f} MiB) for {reporters} reporters "
                           f"x {datagrams} datagrams ({in_flight} kept each); "
                           f"{seconds(r['elapsed']):.1f} s to send")
    if tb is not None:
        case.row_extra = (f"tracker {tb / 2**20:.1f} MiB for {reporters} reporters, {datagrams} "
                          f"datagrams each ({in_flight} kept)")
    fill_row(case, stats, final, counts, {"high": r["reports"]}, drain)
    return case

# ---------------------------------------------------------------------------------------------


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, dict):
        return "/".join(fmt(v.get(p)) for p in PRIORITIES if p in v)
    if isinstance(v, float):
        return f"{v:.2f}" if v < 100 and v != int(v) else f"{v:.0f}"
    return str(v)


def table(cases):
    """One row per case. Offered: reports the reporters sent; the other counts are datagrams:
    admitted and dropped by the translator's flow control, dropped by the forwarder, spilled,
    re-injected, NACKs sent by the translator; drain: seconds from the reporters' end until
    nothing more was applied."""
    cols = ["case", "result", "offered reports h/l", "admitted l/m/h", "dropped l/m/h", "wire dropped l/m/h",
            "spilled", "re-injected", "NACKs", "drain s"]
    rows = []
    for c in cases:
        r = c.row
        off = r.get("offered", {})
        rows.append([c.name, "pass" if c.ok else "FAIL",
                     "/".join(str(off.get(p, "-")) for p in ("high", "low")),
                     fmt(r.get("applied")), fmt(r.get("dropped")),
                     fmt({p: (r.get("wire_dropped") or {}).get(p) for p in PRIORITIES}),
                     fmt(r.get("spilled")), fmt(r.get("reinjected")), fmt(r.get("nacks")),
                     fmt(r.get("drain_s"))])
    w = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
    for line in [cols] + rows:
        print("  ".join(str(x).ljust(n) for x, n in zip(line, w)))
    for c in cases:
        if getattr(c, "row_extra", None):
            print(f"{c.name}: {c.row_extra}")


def plot(samples_path, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = load_samples(samples_path)
    if len(rows) < 2:
        raise SystemExit(f"{samples_path}: fewer than 2 samples")
    t0 = rows[0]["t"]
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    series = [(f"admitted {p}", "dta_translator_overload_admitted", {"priority": p}) for p in PRIORITIES]
    series += [("re-injected (high)", "dta_translator_reinjected", {}),
               ("dropped low", "dta_translator_overload_dropped", {"priority": "low"})]
    for label, name, labels in series:
        xs, ys = [], []
        for a, b in zip(rows, rows[1:]):
            va, vb = metric(a["m"], name, **labels), metric(b["m"], name, **labels)
            if va is None or vb is None or b["t"] <= a["t"]:
                continue
            xs.append(b["t"] - t0)
            ys.append((vb - va) / (b["t"] - a["t"]))
        if xs and any(ys):
            ax.plot(xs, ys, label=label, linewidth=1.2)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("datagrams / s")
    ax.set_title("Translator under a write budget of half the offered rate (100 ms samples)")
    spill = [(r["t"] - t0, metric(r["m"], "dta_translator_spill_bytes")) for r in rows]
    spill = [(x, y) for x, y in spill if y is not None]
    if spill:
        ax2 = ax.twinx()
        ax2.plot([x for x, _ in spill], [y / 1024 for _, y in spill], color="grey", linestyle=":",
                 label="spill (KiB)")
        ax2.set_ylabel("spill (KiB)")
        ax2.legend(loc="upper right", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(png) or ".", exist_ok=True)
    fig.savefig(png)


CASES = {"loss": case_loss, "budget": case_budget, "many": case_many}


def main(argv):
    if argv and argv[0] == "sample":
        sample_loop(argv[1], argv[2], int(argv[3]) if len(argv) > 3 else None)
        return 0
    if argv and argv[0] == "plot":
        plot(argv[1], argv[2])
        return 0
    names = argv or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"faults: unknown case(s) {unknown}; known: {list(CASES)}", file=sys.stderr)
        print(f"faults: 0 passed, {len(names)} failed, 0 skipped")
        return 1
    done = []
    for n in names:
        print(f"== case {n}", file=sys.stderr)
        t = time.time()
        c = CASES[n]()
        print(f"   {n}: {'pass' if c.ok else 'FAIL'} in {time.time() - t:.1f} s", file=sys.stderr)
        done.append(c)
        png = os.environ.get("FAULTS_PLOT")
        if n == "budget" and png and getattr(c, "samples", None):
            try:
                plot(c.samples, png)
                print(f"   plot: {png}", file=sys.stderr)
            except Exception as e:  # the plot is a by-product; its failure fails nothing
                print(f"   plot SKIPPED: {e}", file=sys.stderr)
    table(done)
    passed = sum(c.ok for c in done)
    print(f"faults: {passed} passed, {len(done) - passed} failed, 0 skipped")
    return 0 if passed == len(done) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
