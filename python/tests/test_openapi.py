"""The HTTP API against its OpenAPI documents (schemas/openapi/), checked by schemathesis, a
property-based tester we did not write: it reads the document each server serves at
/openapi.json, generates requests from it (valid and invalid), and checks every answer: no server
error, every status and content type documented, every body matching its schema, invalid requests
refused. Run against a collector (examples/dta.toml's stores, plus an INT sink's stores served
read-only beside it, named as the package names them) and against the INT sink's and the
translator's metrics endpoints, each fed a replayed INT trace or reports first.

Left out: `/notifications` (a stream that never ends) and one check, with the reason in
schemathesis.toml (the settings file this passes)."""
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from dta_stack import REPO, _free_port, _replace, _wait_for, dta_binary, udp_port_bound

SCHEMATHESIS = pathlib.Path(sys.executable).parent / "schemathesis"
CONFIG = pathlib.Path(__file__).parent / "schemathesis.toml"


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read()


def answers(url):
    try:
        return get(url)[0] == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """{"collector": base URL, "int-sink": ..., "translator": ...}, all running."""
    if not SCHEMATHESIS.exists():
        pytest.skip(f"SKIPPED: no {SCHEMATHESIS} (scripts/setup.sh installs schemathesis)")
    tmp = tmp_path_factory.mktemp("openapi")
    binary = dta_binary()
    procs = []

    def start(*args):
        p = subprocess.Popen([binary, *args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        procs.append(p)
        return p

    try:
        # The INT sink of the example (its stores named int_*), fed a trace; it keeps running.
        int_regions = tmp / "int-regions"
        int_port = _free_port(socket.SOCK_DGRAM)
        int_metrics = _free_port(socket.SOCK_STREAM)
        text = (REPO / "examples" / "int-sink.toml").read_text()
        text = _replace(text, 'region_dir = "int-regions"', f'region_dir = "{int_regions}"')
        text = _replace(text, "127.0.0.1:32766", f"127.0.0.1:{int_port}")
        text = _replace(text, "queue_occupancy = 300,", "queue_occupancy = 1,")
        (tmp / "int.toml").write_text(text)
        gen = subprocess.run([binary, "pcap", "gen", "--flows", "12", "--seed", "5",
                              "--out", tmp / "trace.pcap"], capture_output=True, timeout=120)
        assert gen.returncode == 0, gen.stderr
        start("int-sink", "--config", tmp / "int.toml", "--metrics", str(int_metrics))
        _wait_for("the INT sink's port", lambda: udp_port_bound(int_port))
        rep = subprocess.run([binary, "pcap", "replay", "--to", f"127.0.0.1:{int_port}",
                              tmp / "trace.pcap"], capture_output=True, timeout=120)
        assert rep.returncode == 0, rep.stderr

        # The collector of the example configuration, serving the INT stores read-only too.
        regions = tmp / "regions"
        http = _free_port(socket.SOCK_STREAM)
        tr_metrics = _free_port(socket.SOCK_STREAM)
        udp = _free_port(socket.SOCK_DGRAM)
        text = (REPO / "examples" / "dta.toml").read_text()
        text = _replace(text, 'region_dir = "dta-regions"', f'region_dir = "{regions}"')
        text = _replace(text, "127.0.0.1:40040", f"127.0.0.1:{udp}")
        text = _replace(text, "127.0.0.1:40080", f"127.0.0.1:{http}")
        text = _replace(text, "[collector]\n",
                        f'[collector]\nserve_read_only = ["{int_regions}"]\n')
        (tmp / "dta.toml").write_text(text)
        start("collector", "--config", tmp / "dta.toml")
        _wait_for("the collector's API", lambda: answers(f"http://127.0.0.1:{http}/readyz"))
        start("translator", "--config", tmp / "dta.toml", "--metrics", str(tr_metrics))
        _wait_for("the translator's port", lambda: udp_port_bound(udp))
        # Reports of every primitive, so the stores hold data.
        rep = subprocess.run([binary, "report", "--to", f"127.0.0.1:{udp}", "--count", "200",
                              "--primitive", "key-write"], capture_output=True, timeout=120)
        assert rep.returncode == 0, rep.stderr
        urls = {"collector": f"http://127.0.0.1:{http}",
                "int-sink": f"http://127.0.0.1:{int_metrics}",
                "translator": f"http://127.0.0.1:{tr_metrics}"}
        for u in urls.values():
            _wait_for(f"{u}/openapi.json", lambda u=u: answers(f"{u}/openapi.json"))
        yield urls, tmp
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def schemathesis(base, report_dir, examples):
    r = subprocess.run(
        [SCHEMATHESIS, "--config-file", str(CONFIG), "run", f"{base}/openapi.json",
         "--checks", "all", "--exclude-checks", "positive_data_acceptance",
         "--exclude-path", "/notifications",
         "--max-examples", str(examples), "--seed", os.environ.get("DTA_OPENAPI_SEED", "1"),
         "--workers", "2",
         "--report", "junit", "--report-dir", str(report_dir)],
        # Its cache (.schemathesis/) goes beside the reports, not into the checkout.
        capture_output=True, text=True, timeout=900, cwd=report_dir.parent)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    summary = re.search(r"(\d+) generated, (\d+) passed", r.stdout)
    assert summary, r.stdout[-3000:]
    return int(summary.group(1))


@pytest.mark.parametrize("server", ["collector", "int-sink", "translator"])
def test_schemathesis_finds_no_server_error_and_no_answer_off_the_document(servers, server):
    urls, tmp = servers
    # A deeper run: DTA_OPENAPI_EXAMPLES=500 DTA_OPENAPI_SEED=7 pytest python/tests/test_openapi.py
    examples = int(os.environ.get("DTA_OPENAPI_EXAMPLES", "40"))
    generated = schemathesis(urls[server], tmp / f"report-{server}", examples)
    assert generated > 0


def test_each_server_serves_its_own_document(servers):
    urls, _ = servers
    docs = {k: json.loads(get(f"{u}/openapi.json")[1]) for k, u in urls.items()}
    assert "/query/kw/{name}" in docs["collector"]["paths"]
    for k in ("int-sink", "translator"):
        assert set(docs[k]["paths"]) == {"/metrics", "/healthz", "/readyz", "/openapi.json"}
    shipped = json.loads((REPO / "schemas" / "openapi" / "collector.json").read_text())
    assert docs["collector"] == shipped
