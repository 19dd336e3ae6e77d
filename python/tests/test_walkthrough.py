"""docs/walkthrough.md runs as written: `examples/tryout.sh` starts the examples together and
replays a generated trace with a congestion episode at a switch; then every command of the page
(shell and Python) runs verbatim, and its answers are checked against the trace's ground truth
(trace.json): the congested switch comes first, its episode starts at the right time at the
right switch, the worst flow of the window is the ground truth's, and every switch's p50 and p99
are within the stated relative error (by the CLI, over HTTP and from Python).

The page's paths and ports are fixed (/tmp/dta-tryout; 40080, 40040, 32766, 9464, 9465): the
test runs the page, not a variant of it. Skipped without a `dta` binary.
"""

import json
import math
import os
import re
import signal
import subprocess
import time
import urllib.request

import pytest

from dta_stack import REPO, dta_binary

DOC = REPO / "docs" / "walkthrough.md"
TRYOUT = "/tmp/dta-tryout"


def blocks(lang):
    """The fenced blocks of `lang` in the page, in order."""
    text = DOC.read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def quantile(values, q):
    """The sample of rank ceil(q n) (1-based) of sorted `values`, as the sink's quantiles are
    defined."""
    return values[min(len(values), max(1, math.ceil(len(values) * q))) - 1]


def within(got, values, q, err, slack):
    """Whether `got` is within `err` (relative) of a sample of `values` (sorted) whose rank is
    within `slack` of quantile `q`'s."""
    rank = min(len(values), max(1, math.ceil(len(values) * q)))
    near = values[max(0, rank - 1 - slack):min(len(values), rank + slack)]
    return any(abs(got - v) <= err * v + 0.5 for v in near)


@pytest.fixture(scope="module")
def tryout():
    """examples/tryout.sh running as the page says; stopped (Ctrl-C) at the end."""
    binary = dta_binary()
    env = dict(os.environ, DTA=str(binary), PATH=f"{binary.parent}:{os.environ['PATH']}")
    env.pop("TRYOUT", None)
    [start] = [b for b in blocks("sh") if "tryout.sh" in b]
    p = subprocess.Popen(["bash", "-c", start], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    out = []
    try:
        end = time.monotonic() + 300
        while time.monotonic() < end:
            line = p.stdout.readline()
            if not line:
                pytest.fail("examples/tryout.sh ended before running:\n" + "".join(out))
            out.append(line)
            if line.startswith("tryout: running"):
                break
        else:
            pytest.fail("examples/tryout.sh did not start in 300 s:\n" + "".join(out))
        truth = json.load(open(f"{TRYOUT}/trace.json"))
        replay = json.load(open(f"{TRYOUT}/replay.json"))
        yield env, truth, replay
    finally:
        # Ctrl-C, as the page says: the script stops what it started.
        os.killpg(p.pid, signal.SIGINT)
        try:
            rest, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rest, _ = p.communicate()
        assert "tryout: stopped" in rest, "".join(out) + rest


def run(env, block):
    """A shell block of the page, as written; its output as JSON."""
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{block}\n{r.stderr}"
    return json.loads(r.stdout)


def the_block(starting):
    [b] = [b for b in blocks("sh") if b.startswith(starting)]
    return b


def per_switch(truth):
    """Every switch's hop latency samples (sorted), from the ground truth's frames."""
    out = {}
    for fr in truth["frames"]:
        for node, lat, _queue, _util in fr["hops"]:
            out.setdefault(node, []).append(lat)
    for v in out.values():
        v.sort()
    return out


def worst_flow(truth):
    """The flows by path latency as the sink summarises a flow: the sum over its hops of the
    hop's mean latency (highest first), with their values."""
    sums = {}
    for fr in truth["frames"]:
        s = sums.setdefault(fr["flow"], {})
        for i, h in enumerate(fr["hops"]):
            a = s.setdefault(i, [0, 0])
            a[0] += h[1]
            a[1] += 1
    ranked = sorted(((sum(t / n for t, n in s.values()), f) for f, s in sums.items()), reverse=True)
    return [(truth["flows"][f]["flow"], v) for v, f in ranked]


def test_the_walkthrough_answers_as_the_ground_truth_says(tryout):
    env, truth, replay = tryout
    [episode] = truth["episodes"]
    congested = episode["node_id"]
    # The flows are summarised when idle (1 s in the example): wait for the last.
    deadline = time.monotonic() + 60
    while True:
        net = run(env, the_block("dta query int network --config /tmp/dta-tryout/int-sink.toml --window last:15m"))
        if net["flows"] == len(truth["flows"]) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    flows = run(env, the_block("dta query int flows"))

    # Which switch is congested: by the CLI and over HTTP, the episode's switch first.
    assert net["rank"] == "hop_latency:p99"
    assert net["switches"][0]["node_id"] == congested, net["switches"][:3]
    err = net["relative_error"]
    assert 0 < err <= 0.02
    samples = per_switch(truth)
    assert {s["node_id"] for s in net["switches"]} == set(samples)
    day = run(env, the_block("dta query int network --config /tmp/dta-tryout/int-sink.toml --window last:24h"))
    assert day["store"] == "int_hist_day" and net["store"] == "int_hist"
    # The same samples (each store's own key collisions aside): the same switch first.
    assert day["switches"][0]["node_id"] == congested
    assert {s["node_id"] for s in day["switches"]} == set(samples)
    assert all(w["end_ms"] - w["start_ms"] == 3_600_000 for w in day["windows"])
    by_http = run(env, the_block("curl -s 'http://127.0.0.1:40080/int/network"))
    assert by_http["rank"] == "queue_occupancy:over:300"
    assert by_http["switches"][0]["node_id"] == congested
    assert by_http["switches"][0]["score"] > 0.1
    # No other queue is above 300 (a sample of 300 counted by its bucket's midpoint may be).
    assert all(s["score"] < 0.01 for s in by_http["switches"][1:]), by_http["switches"][:3]

    # Every switch's p50 and p99 within the stated error (the store's counters, Count-Min,
    # may count a sample more: its uncertain samples widen the ranks compared).
    for s in net["switches"]:
        v = samples[s["node_id"]]
        h = run(env, the_block("dta query int histogram").replace("--node 301", f"--node {s['node_id']}"))
        slack = h["total"] - len(v) + h["uncertain"]
        assert h["total"] >= len(v)
        for q, got in ((0.5, s["latency_p50"]), (0.99, s["latency_p99"])):
            assert within(got, v, q, err, slack), (s, q, quantile(v, q), slack)
        assert (h["quantiles"]["p50"], h["quantiles"]["p99"]) == (s["latency_p50"], s["latency_p99"])
    # Over HTTP, the same quantiles.
    with urllib.request.urlopen("http://127.0.0.1:40080/int/network?window=last:15m") as r:
        over_http = json.load(r)
    quantiles = lambda n: [(s["node_id"], s["latency_p50"], s["latency_p99"], s["queue_p50"], s["queue_p99"])
                           for s in n["switches"]]
    assert quantiles(over_http) == quantiles(net)

    # Its episode: at its switch, starting when the replay sent the episode's first frame.
    eps = run(env, the_block("dta query int episodes"))
    mine = [e for e in eps["episodes"] if e["node_id"] == congested]
    assert len(mine) == 1, eps["episodes"]
    rate = 20_000
    want_ms = replay["started_ms"] + episode["first_frame"] * 1000 / rate
    got_ms = mine[0]["start_ns"] / 1e6
    assert abs(got_ms - want_ms) < 500, (got_ms, want_ms)
    assert mine[0]["peak"] == episode["peak_hop_latency"]
    assert mine[0]["flows"] <= episode["flows"]
    rows = run(env, the_block("curl -s 'http://127.0.0.1:40080/int/events"))
    assert rows["events"] and all(e["node_id"] == congested for e in rows["events"])

    # The worst flow of the window is the ground truth's (its value as the sink sums it).
    truth_worst = worst_flow(truth)
    top = flows["flows"][0]
    assert top["flow"] == truth_worst[0][0], (top, truth_worst[:2])
    assert abs(top["path_latency"] - truth_worst[0][1]) <= 1

    # The Python of the page, as written: the same ranking.
    [code] = blocks("python")
    scope = {}
    exec(compile(code, str(DOC), "exec"), scope)
    assert scope["net"]["switches"][0]["node_id"] == congested
    assert [s["node_id"] for s in scope["net"]["switches"]] == [s["node_id"] for s in net["switches"]]

    # Nothing is lost, and the processes say so.
    peers = run(env, the_block("curl -s 'http://127.0.0.1:40080/console/peers'"))
    names = {p["name"]: p for p in peers["peers"]}
    assert names["int-sink"]["reachable"] and names["translator"]["reachable"], peers
    sent = replay["sent"]
    reports = sum(v for n, v in names["int-sink"]["samples"]
                  if n.startswith("dta_int_telemetry_reports_total"))
    assert reports == sent, (reports, sent)
    for name in ("int-sink", "translator"):
        health = names[name]["health"]
        assert [h for h in health if h["bad"]] == [], health
        assert any(h["what"] in ("ingest", "int") and h["value"] > 0 for h in health), health
