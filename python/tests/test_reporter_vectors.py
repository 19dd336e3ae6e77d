"""dta.reporter.Reporter plays spec/vectors/reporter.json (the scenarios the Rust and C
reporters play too): scripted sends and translator datagrams at scripted times, and exactly
the datagrams the vectors expect go out. Its defaults are the vectors' (the Rust crate's)."""

import inspect
import socket

import pytest

import dta
from conftest import load_vectors
from dta import reporter as rep

VECTORS = load_vectors("reporter.json")


def seqs(sink, prototype, wait=0.03):
    """Sequence numbers of every datagram on ``sink``, waiting up to ``wait`` seconds for
    each (0: only those already there)."""
    sink.settimeout(wait or None)
    sink.setblocking(wait > 0)
    if wait:
        sink.settimeout(wait)
    out = []
    while True:
        try:
            p = sink.recv(65535)
        except (BlockingIOError, socket.timeout):
            return out
        out.append(p[1] if prototype else int.from_bytes(p[8:12], "big"))


@pytest.mark.parametrize("sc", VECTORS["scenarios"], ids=lambda s: s["name"])
def test_scenario(sc):
    r = sc["reporter"]
    prototype = r["protocol"] == "prototype"
    now = [0]
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    opts = dict(protocol=r["protocol"], reporter_id=r["reporter_id"], priority=r["priority"],
                retransmittable=r["retransmittable"], nack_port=None, clock=lambda: now[0],
                retransmit_buffer=max(r["retransmit_buffer"], 1))
    if prototype:
        opts["base_header"] = "long"
    rp = dta.Reporter("127.0.0.1", sink.getsockname()[1], **opts)
    try:
        for i, step in enumerate(sc["steps"]):
            now[0] = step["t_ms"]
            if "send" in step:
                got = []
                for k in range(step["send"]):
                    rp.append(1, k.to_bytes(4, "big"))
                    rp.flush()
                    got += seqs(sink, prototype, 0)
                got += seqs(sink, prototype)
                assert got == step["sent"], f"step {i}"
            else:
                rp.handle_control(bytes.fromhex(step["receive"]))
                assert seqs(sink, prototype) == step["resent"], f"step {i}"
        assert {k: rp.stats[k] for k in sc["stats"]} == sc["stats"]
    finally:
        rp._sent.clear()  # no tail probe: the scenario ends where the vectors do
        rp.close()
        sink.close()


def test_defaults_are_the_vectors():
    d = VECTORS["defaults"]
    assert (rep.DEFAULT_PRIORITY, rep.DEFAULT_RETRANSMIT_BUFFER, rep.DEFAULT_TAIL_PROBES,
            rep.DEFAULT_TAIL_PROBE_INTERVAL_MS, rep.DEFAULT_NACK_HOLDOFF_MS) == (
        d["priority"], d["retransmit_buffer"], d["tail_probes"], d["tail_probe_interval_ms"],
        d["nack_holdoff_ms"])
    params = inspect.signature(dta.Reporter).parameters
    assert params["priority"].default == d["priority"]
    assert params["retransmit_buffer"].default == d["retransmit_buffer"]
    assert params["tail_probes"].default == d["tail_probes"]
    assert params["tail_probe_interval_ms"].default == d["tail_probe_interval_ms"]
    assert params["nack_holdoff_ms"].default == d["nack_holdoff_ms"]
