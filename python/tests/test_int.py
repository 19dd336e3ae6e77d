"""The INT queries from Python answer what the CLI and the HTTP API answer for the same question.

An INT sink from examples/int-sink.toml (free port, temporary region directory) receives a trace
`dta pcap gen` wrote; once it has stopped, a collector over the same directory serves the HTTP
API, and `dta.int_*` read the regions themselves. No key is known in advance: the flows are found
by the questions an operator asks (the worst flows, the congested switch, recent events).
"""

import json
import pathlib
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import dta
from dta_stack import REPO, _free_port, _replace, _wait_for, dta_binary, udp_port_bound

EXAMPLE = REPO / "examples" / "int-sink.toml"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """(region dir, HTTP address, cli(args) -> JSON, http(path) -> (status, JSON))."""
    tmp = tmp_path_factory.mktemp("int")
    binary = dta_binary()
    regions = tmp / "regions"
    port = _free_port(socket.SOCK_DGRAM)
    http = f"127.0.0.1:{_free_port(socket.SOCK_STREAM)}"
    text = EXAMPLE.read_text()
    text = _replace(text, 'region_dir = "int-regions"', f'region_dir = "{regions}"')
    text = _replace(text, "127.0.0.1:32766", f"127.0.0.1:{port}")
    # Every queue occupancy above 1 is an event.
    text = _replace(text, "queue_occupancy = 300,", "queue_occupancy = 1,")
    config = tmp / "int.toml"
    config.write_text(text)
    # The collector serving the same regions: the sink's stores, its own HTTP address.
    stores = text[text.index("[[store]]"):]
    served = tmp / "collector.toml"
    served.write_text(f'region_dir = "{regions}"\n[collector]\nhttp = "{http}"\n{stores}')
    gen = subprocess.run([binary, "pcap", "gen", "--flows", "12", "--seed", "7",
                          "--out", tmp / "trace.pcap"], capture_output=True, timeout=120)
    assert gen.returncode == 0, gen.stderr
    sink = subprocess.Popen([binary, "int-sink", "--config", config],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [sink]
    try:
        _wait_for("the sink's port", lambda: udp_port_bound(port))
        rep = subprocess.run([binary, "pcap", "replay", "--to", f"127.0.0.1:{port}",
                              tmp / "trace.pcap"], capture_output=True, timeout=120)
        assert rep.returncode == 0, rep.stderr
        time.sleep(0.3)
        sink.send_signal(signal.SIGTERM)
        assert sink.wait(timeout=60) == 0
        collector = subprocess.Popen([binary, "collector", "--config", served],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(collector)

        def get(path):
            try:
                with urllib.request.urlopen(f"http://{http}{path}", timeout=10) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        def healthy():
            try:
                with urllib.request.urlopen(f"http://{http}/healthz", timeout=10) as r:
                    return r.status == 200
            except OSError:
                return False

        _wait_for("the collector's API", healthy)

        def cli(*args):
            p = subprocess.run([binary, "query", "int", *args, "--region-dir", regions],
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stderr
            return json.loads(p.stdout)

        truth = json.loads((tmp / "trace.json").read_text())
        yield regions, cli, get, truth, config
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def region(regions, name):
    return dta.Region(regions / f"{name}.region")


def test_worst_flows_agree(replayed):
    regions, cli, get, truth, _ = replayed
    events, paths = region(regions, "int_events"), region(regions, "int_paths")
    page = dta.int_flows(events, paths=paths, top="latency", max=100)
    assert page["complete"] and page["more"] == 0
    py = page["flows"]
    assert len(py) == len(truth["flows"])
    assert page == cli("flows", "--store", "int_events", "--paths", "int_paths", "--top", "latency",
                       "--max", "100")
    status, body = get("/int/flows/int_events?paths=int_paths&top=latency&max=100")
    assert status == 200 and body == page
    latencies = [f["path_latency"] for f in py]
    assert latencies == sorted(latencies, reverse=True)
    # Each flow's path is the one the trace took, found without knowing a key beforehand.
    by_flow = {f["flow"]: f for f in py}
    for f in truth["flows"]:
        assert by_flow[f["flow"]]["path"] == f["path"], f["flow"]
    # Searched by a switch on the worst flow's path, and by port.
    node = py[0]["path"][0]
    through = dta.int_flows(events, paths=paths, node=node, max=100)["flows"]
    assert through and all(node in f["path"] for f in through)
    port = int(py[0]["flow"].split("-")[1].split(":")[1].split("/")[0])
    on_port = dta.int_flows(events, port=port, max=100)["flows"]
    assert py[0]["flow"] in [f["flow"] for f in on_port]


def test_network_and_histogram_agree(replayed):
    regions, cli, get, _, _ = replayed
    events, paths, hist = (region(regions, n) for n in ("int_events", "int_paths", "int_hist"))
    # Every window held: the current one may have just begun (the example's are 10 s wide).
    net = dta.int_network(events, paths, hist, window="all")
    assert net == cli("network", "--window", "all")
    status, body = get("/int/network?window=all")
    assert status == 200 and body == net
    assert net["switches"] and net["links"]
    assert net["windows"] and net["windows"][-1]["open"]
    worst = net["switches"][0]["node_id"]
    h = dta.int_histogram(hist, worst, metric="queue_occupancy", window="all")
    assert h == cli("histogram", "--store", "int_hist", "--node", str(worst), "--window", "all")
    assert h["total"] == net["switches"][0]["queue_samples"] > 0
    status, body = get(f"/int/histogram/int_hist?node={worst}&window=all")
    assert status == 200 and body == h


def test_recent_events_agree(replayed):
    regions, cli, get, _, _ = replayed
    events = region(regions, "int_events")
    page = dta.int_events(events, max=30)
    py = page["events"]
    assert py
    since = int(time.time() * 1000) - 5 * 60 * 1000
    last5 = dta.int_events(events, since_ms=since, max=30)
    assert last5["events"] == py
    assert page == cli("events", "--store", "int_events", "--max", "30")
    status, body = get("/int/events/int_events?max=30")
    assert status == 200 and body == page
    times = [e["time_ns"] for e in py]
    assert times == sorted(times, reverse=True)
    node = py[0]["node_id"]
    at = dta.int_events(events, node=node, max=4096)
    assert all(e["node_id"] == node for e in at["events"])
    # The pages after the first hold the rest, each event once, as the cursor says.
    if not page["complete"]:
        rest = dta.int_events(events, max=30, before=page["next"])
        seen = {(e["kind"], e["seq"]) for e in py}
        assert all((e["kind"], e["seq"]) not in seen for e in rest["events"])
    with pytest.raises(dta.RegionError, match="cursor"):
        dta.int_events(events, before="hop_latency")


def test_episodes_and_the_worst_of_a_window_agree(replayed):
    """Episodes and each flow's worst summary since a time: the same from Python, the CLI and
    HTTP; an episode's rows are the events of its switch and kind between its start and end."""
    regions, cli, get, _, _ = replayed
    events, paths = region(regions, "int_events"), region(regions, "int_paths")
    since = int(time.time() * 1000) - 15 * 60 * 1000
    # Every queue above 1 is an event here: queue episodes at every switch.
    py = dta.int_episodes(events, since_ms=since, kinds=["queue_occupancy"], max=4096)
    assert py["complete"] and py["episodes"]
    by_cli = cli("episodes", "--store", "int_events", "--since-ms", str(since), "--kind",
                 "queue_occupancy", "--max", "4096")
    status, by_http = get(f"/int/episodes/int_events?since_ms={since}&kind=queue_occupancy&max=4096")
    assert status == 200
    for other in (by_cli, by_http):
        assert other["episodes"] == py["episodes"]
        assert [(s["node_id"], s["events"]) for s in other["series"]] == \
            [(s["node_id"], s["events"]) for s in py["series"]]
    ep = py["episodes"][0]
    rows = dta.int_events(events, kinds=["queue_occupancy"], node=ep["node_id"],
                          since_ms=ep["start_ns"] // 1_000_000, until_ms=ep["end_ns"] // 1_000_000,
                          max=4096)
    assert rows["complete"]
    assert len(rows["events"]) >= ep["count"]
    assert all(ep["start_ns"] // 1_000_000 * 1_000_000 <= e["time_ns"] <= ep["end_ns"] // 1_000_000 * 1_000_000 + 999_999
               for e in rows["events"])
    assert max(e["value"] for e in rows["events"]) >= ep["peak"]
    assert py["more"] == 0
    assert sum(s["events"] for s in py["series"]) == sum(e["count"] for e in py["episodes"])
    worst = dta.int_flows(events, paths=paths, top="worst", since_ms=since, max=100)
    assert worst == cli("flows", "--store", "int_events", "--paths", "int_paths", "--top", "worst",
                        "--since-ms", str(since), "--max", "100")
    status, body = get(f"/int/flows/int_events?paths=int_paths&top=worst&since_ms={since}&max=100")
    assert status == 200 and body == worst
    latest = {f["flow"]: f["path_latency"] for f in
              dta.int_flows(events, top="latency", since_ms=since, max=100)["flows"]}
    assert all(f["path_latency"] >= latest[f["flow"]] for f in worst["flows"])


def test_the_path_of_a_found_flow(replayed):
    regions, cli, get, truth, _ = replayed
    paths = region(regions, "int_paths")
    flow = truth["flows"][0]["flow"]
    p = dta.int_path(paths, flow)
    assert p["status"] == "found" and p["path"] == truth["flows"][0]["path"]
    assert p == cli("path", "--store", "int_paths", "--flow", flow)
    # The flow over time: every summary of it, newest first, as the CLI and HTTP give them.
    events = region(regions, "int_events")
    over = dta.int_flows(events, flow=flow, max=100)
    assert over["flows"] and all(f["flow"] == flow for f in over["flows"])
    assert over == cli("flows", "--store", "int_events", "--flow", flow, "--max", "100")
    status, body = get(f"/int/flows/int_events?flow={flow}&max=100")
    assert status == 200 and body == over


def test_questions_that_cannot_be_answered_raise(replayed):
    regions, _, get, _, _ = replayed
    events, hist = region(regions, "int_events"), region(regions, "int_hist")
    with pytest.raises(dta.RegionError, match="no window of this store matches"):
        dta.int_histogram(hist, 1, window="at:1000")
    with pytest.raises(dta.RegionError, match="expected recent, latency, worst"):
        dta.int_flows(events, top="best")
    paths = region(regions, "int_paths")
    for bad in ("latency:p99", "hop_latency:p98", "hop_latency:over:x", ""):
        with pytest.raises(dta.RegionError, match="rank") as e:
            dta.int_network(events, paths, hist, rank=bad)
        assert e.value.reason == "bad_rank"
    for gap in (0, 86_400_001):
        with pytest.raises(dta.RegionError, match="gap_ms") as e:
            dta.int_episodes(events, gap_ms=gap)
        assert e.value.reason == "bad_gap"
    with pytest.raises(dta.RegionError, match="max"):
        dta.int_episodes(events, max=4097)
    # Per-port questions of a store that keeps switches only: refused, in Python and over HTTP.
    with pytest.raises(dta.RegionError, match="no per-port histograms"):
        dta.int_histogram(hist, 101, port=1)
    get = replayed[2]
    status, body = get("/int/histogram/int_hist?node=101&port=1")
    assert status == 400 and "no per-port histograms" in body["error"], body
    with pytest.raises(dta.RegionError, match="unknown event kind"):
        dta.int_episodes(events, kinds=["flood"])
    with pytest.raises(dta.RegionError, match="unknown event kind"):
        dta.int_events(events, kinds=["flood"])
    with pytest.raises(dta.RegionError, match="not a key-increment|not a Key-Increment"):
        dta.int_histogram(events, 1)
    with pytest.raises(dta.RegionError, match="switch filter needs the paths store"):
        dta.int_flows(events, node=1)
    with pytest.raises(dta.RegionError, match="max"):
        dta.int_events(events, max=0)


def test_the_documented_example_runs_verbatim(replayed, tmp_path, monkeypatch):
    """docs/int-sink.md's Python example, run as written beside an `int-regions` directory."""
    regions, *_ = replayed
    text = (REPO / "docs" / "int-sink.md").read_text()
    start = text.index("```python\nimport time\nimport dta\n") + len("```python\n")
    code = text[start:text.index("```", start)]
    (tmp_path / "int-regions").symlink_to(regions)
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(code, "docs/int-sink.md", "exec"), scope)
    assert scope["worst"] and scope["p"]["status"] == "found"
    assert scope["net"]["switches"]


def test_event_entries_read_back_decoded_everywhere(replayed):
    """An Append store of record layout `int-event`: its entries decoded alike by HTTP, the CLI
    and Python (the flow summaries' list, and an event list)."""
    regions, cli, get, truth, _ = replayed
    events = region(regions, "int_events")
    binary = dta_binary()
    for lst, kind in ((8, "flow_summary"), (1, "event")):
        py = events.list_poll(lst, 0, 4096)
        assert py["record"] == "int-event"
        status, body = get(f"/query/list/int_events?list={lst}&tail=0&max=4096")
        assert status == 200 and body["record"] == "int-event"
        assert body["decoded"] == py["decoded"]
        assert body["entries"] == [e.hex() for e in py["entries"]]
        p = subprocess.run([binary, "query", "list", "--store", "int_events", "--region-dir", regions,
                            "--list", str(lst), "--tail", "0", "--max", "4096", "--json"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["decoded"] == py["decoded"]
        assert py["decoded"] and all(d["type"] == kind for d in py["decoded"])
    flows = {d["flow"] for d in events.list_poll(8, 0, 4096)["decoded"]}
    assert flows == {f["flow"] for f in truth["flows"]}


def test_int_queries_take_the_configuration_as_the_other_queries_do(replayed):
    """`dta query int ... --config` reads the stores of the configuration's region directory,
    an INT sink's configuration or a collector's, as `--region-dir` does."""
    regions, cli, _, _, config = replayed
    binary = dta_binary()
    for cfg in (config, config.parent / "collector.toml"):
        p = subprocess.run([binary, "query", "int", "network", "--window", "all", "--config", cfg],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == cli("network", "--window", "all")
    p = subprocess.run([binary, "query", "int", "events", "--store", "nope", "--config", config],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "the stores are: int_events, int_hist, int_hist_day, int_latency, int_paths" in p.stderr
