"""dta.reporter.Reporter against a local UDP socket: the bytes received are the encoders'."""

import socket
import time

import pytest

import dta
from conftest import load_vectors
import dta.reporter as reporter_mod
from dta.reporter import Reporter, send_reports

DATA = bytes.fromhex("deadbeef")


@pytest.fixture
def sink():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(5)
    yield s
    s.close()


def recv_all(sock, n):
    return [sock.recv(65535) for _ in range(n)]


def no_more(sock):
    sock.settimeout(0.05)
    with pytest.raises(socket.timeout):
        sock.recv(65535)


def test_prototype_short_one_datagram_per_report(sink):
    port = sink.getsockname()[1]
    with Reporter("127.0.0.1", port, protocol="prototype") as r:
        assert r.key_write(0x0A000001, DATA, redundancy=2, immediate=True) == 11
        r.key_increment(7, 1500)
        r.append(3, DATA)
        r.postcard(0x0A000001, 2, 0x65)
        assert r.pending == 0
    got = recv_all(sink, 4)
    assert got == [
        dta.encode_prototype("key_write", key=0x0A000001, data=DATA, redundancy=2, immediate=True),
        dta.encode_prototype("key_increment", key=7, counter=1500,
                             redundancy=dta.DEFAULT_REDUNDANCY),
        dta.encode_prototype("append", list_id=3, data=DATA),
        dta.encode_prototype("postcarding", key=0x0A000001, hop=2, data=0x65),
    ]
    assert got[0] == bytes.fromhex("0180020a000001deadbeef")
    assert r.sent_datagrams == 4
    no_more(sink)


def test_prototype_long_seqnum_wraps_and_nack_resends(sink):
    port = sink.getsockname()[1]
    r = Reporter("127.0.0.1", port, protocol="prototype", base_header="long",
                 retransmittable=True, seq=254, nack_port=None, tail_probes=0)
    for i in range(4):
        r.append(i, DATA)
    got = recv_all(sink, 4)
    assert [dta.decode(g, "long")["header"]["seqnum"] for g in got] == [254, 255, 0, 1]
    assert all(dta.decode(g, "long")["header"]["retransmittable"] for g in got)
    # A NACK for seqnum 255 resends 255, 0 and 1 in order; with N clear nothing happens.
    assert r.handle_control(dta.encode_prototype_nack(255, False)) == 0
    assert r.handle_control(dta.encode_prototype_nack(255)) == 3
    assert recv_all(sink, 3) == got[1:]
    r.close()
    no_more(sink)


def test_prototype_retransmission_needs_long_header():
    with pytest.raises(ValueError, match="long"):
        Reporter(protocol="prototype", retransmittable=True)
    with pytest.raises(ValueError, match="native-protocol"):
        Reporter(protocol="prototype").sketch_merge(1, 0, 0, DATA)


def test_native_batches_until_full_then_flush(sink):
    port = sink.getsockname()[1]
    # Header 12 + three 12-byte appends fit in 48 bytes; the fourth starts a new datagram.
    r = Reporter("127.0.0.1", port, reporter_id=9, seq=0xFFFFFFFF, max_datagram=48,
                 priority="medium")
    for i in range(3):
        r.append(i, DATA)
    assert r.pending == 3
    assert r.sent_datagrams == 0
    r.append(3, DATA)  # does not fit: flushes the first three
    assert r.pending == 1
    first = sink.recv(65535)
    want = dta.NativeDatagram("medium", False, 9, 0xFFFFFFFF, 48)
    for i in range(3):
        want.append(i, DATA)
    assert first == bytes(want)
    assert r.flush() == 24
    assert r.flush() == 0
    second = dta.decode(sink.recv(65535))
    assert second["header"]["seq"] == 0  # wrapped
    assert second["header"]["reporter_id"] == 9
    assert second["reports"] == [{"opcode": "append", "immediate": False, "list_id": 3,
                                  "data": "deadbeef"}]
    r.close()
    no_more(sink)


def test_native_every_primitive_and_nack_resend(sink):
    port = sink.getsockname()[1]
    key = bytes.fromhex("0a0000010a00000204d2005006")
    with Reporter("127.0.0.1", port, reporter_id=4, seq=10, retransmittable=True,
                  priority="high", nack_port=None, tail_probes=0, clock=lambda: 0) as r:
        r.key_write(key, DATA, redundancy=2)
        r.key_increment(key, 99, immediate=True)
        r.flush()
        r.postcard(key, 1, 0xCAFE, path_len=5)
        r.sketch_merge(3, 0, 1, bytes(16))
        r.flush()
        got = recv_all(sink, 2)
        d0, d1 = dta.decode(got[0]), dta.decode(got[1])
        assert (d0["header"]["seq"], d1["header"]["seq"]) == (10, 11)
        assert d0["header"]["retransmittable"] and d0["header"]["priority"] == "high"
        assert [x["opcode"] for x in d0["reports"] + d1["reports"]] == [
            "key_write", "key_increment", "postcarding", "sketch_merge"]
        assert d1["reports"][0] == {"opcode": "postcarding", "immediate": False,
                                    "key": key.hex(), "hop": 1, "path_len": 5, "value": 0xCAFE}
        # NACKs: another reporter's is ignored; ours resends exactly what it names.
        assert r.handle_control(dta.encode_native_nack(5, 10)) == 0
        assert r.handle_control(dta.encode_native_nack(4, 11)) == 1
        assert sink.recv(65535) == got[1]
        assert r.handle_control(dta.encode_native_nack(4, 10)) == 1, "10 alone, not 10..11"
        assert sink.recv(65535) == got[0]
        assert r.handle_control(dta.encode_native_nack(4, 10, missing=[11])) == 0, "held off"
        # A Sketch-Merge NACK names a column for the sketch sender: nothing resent.
        assert r.handle_control(dta.encode_native_nack(4, 11, (3, 0, 1))) == 0
        assert r.take_sketch_nack() == {"sketch_id": 3, "column": 0, "epoch": 1}
        assert r.take_sketch_nack() is None
        # Malformed: counted, never raised.
        assert r.handle_control(b"\x11\x00") == 0
        assert (r.stats["nacks"], r.stats["nacks_held_off"], r.stats["bad_nacks"]) == (4, 1, 2)
    no_more(sink)


def test_window_bounds_what_is_kept(sink):
    port = sink.getsockname()[1]
    r = Reporter("127.0.0.1", port, retransmittable=True, retransmit_buffer=2, nack_port=None,
                 tail_probes=0)
    for i in range(5):
        r.append(i, DATA)
        r.flush()
    recv_all(sink, 5)
    # Only 3 and 4 are kept: 2 is unrecoverable, 3 and 4 resent, 7 not sent yet.
    assert r.handle_control(dta.encode_native_nack(0, 2, missing=[3, 4, 7])) == 2
    assert [dta.decode(p)["header"]["seq"] for p in recv_all(sink, 2)] == [3, 4]
    assert r.stats["unrecoverable_nacks"] == 1
    r.close()


@pytest.mark.parametrize("protocol", ["native", "prototype"])
def test_send_reports_helper_matches_vectors(sink, protocol):
    port = sink.getsockname()[1]
    if protocol == "native":
        v = next(v for v in load_vectors("native.json")["vectors"] if len(v["reports"]) > 1)
        h = v["header"]
        n = send_reports(v["reports"], "127.0.0.1", port, reporter_id=h["reporter_id"],
                         seq=h["seq"], priority=h["priority"],
                         retransmittable=h["retransmittable"], nack_port=0)
        assert n == 1
        assert sink.recv(65535).hex() == v["hex"]
    else:
        vs = [v for v in load_vectors("prototype.json")["vectors"]
              if v["base_header"] == "short"]
        reports = [dict(v["report"], opcode=v["header"]["opcode"],
                        immediate=v["header"]["immediate"]) for v in vs]
        assert send_reports(reports, "127.0.0.1", port, protocol="prototype") == len(vs)
        assert [g.hex() for g in recv_all(sink, len(vs))] == [v["hex"] for v in vs]


def test_defaults_are_the_rust_constants():
    # The core exports the constants of dta-wire; the Reporter's defaults are them (the
    # loss and congestion defaults: test_reporter_vectors.py).
    import inspect
    assert (dta.DEFAULT_REDUNDANCY, dta.MAX_REDUNDANCY) == (2, 4)
    assert inspect.signature(Reporter).parameters["nack_port"].default == dta.NACK_PORT
    assert dta.DEFAULT_POSTCARD_VALUES == 1 << 18
    for m in (Reporter.key_write, Reporter.key_increment):
        assert inspect.signature(m).parameters["redundancy"].default == dta.DEFAULT_REDUNDANCY
    # A datagram built without a priority has the reporters' default one.
    d = dta.NativeDatagram()
    d.append(1, b"abcd")
    assert dta.decode(bytes(d))["header"]["priority"] == reporter_mod.DEFAULT_PRIORITY == "medium"


@pytest.mark.parametrize("protocol", ["native", "prototype"])
def test_invalid_arguments_raise_value_error_with_a_message(sink, protocol):
    port = sink.getsockname()[1]
    with Reporter("127.0.0.1", port, protocol=protocol) as r:
        for n in (0, dta.MAX_REDUNDANCY + 1, -1):
            with pytest.raises(ValueError, match="redundancy"):
                r.key_write(1, DATA, redundancy=n)
            with pytest.raises(ValueError, match="redundancy"):
                r.key_increment(1, 5, redundancy=n)
        if protocol == "native":
            for key in (b"", bytes(dta.MAX_KEY_LEN + 1)):
                with pytest.raises(ValueError, match="key"):
                    r.key_write(key, DATA)
        else:
            with pytest.raises(ValueError):
                r.key_write(1 << 32, DATA)
        assert r.pending == 0
    no_more(sink)


@pytest.fixture
def stack(tmp_path):
    from dta_stack import Stack
    s = Stack(tmp_path)
    yield s
    s.close()


def test_reporter_with_defaults_reads_back_with_default_queries(stack):
    # Every primitive, default options, into the example configuration's stores.
    with Reporter("127.0.0.1", stack.port) as r:
        r.key_write(bytes([10, 0, 0, 9]), DATA)
        r.key_increment(bytes([10, 0, 0, 9]), 7)
        r.append(3, DATA)
        for hop in range(5):
            r.postcard(bytes([10, 0, 0, 9]), hop, 200 + hop, path_len=5)
    stats = stack.stop_translator()
    assert stack.rejected(stats) == {}
    v = stack.query("kw", "--store", "kw", "--key", "10.0.0.9")
    assert (v["status"], v["data"]) == ("found", DATA.hex()), v
    v = stack.query("list", "--store", "events", "--list", "3")
    assert v["entries"] == [DATA.hex()], v
    v = stack.query("postcard", "--store", "paths", "--key", "10.0.0.9")
    assert (v["status"], v["path"]) == ("found", [200, 201, 202, 203, 204]), v
    v = stack.query("ki", "--store", "counters", "--key", "10.0.0.9")
    assert v["count"] == 7, v


def test_tail_probe_recovers_a_lost_last_datagram(stack):
    # A proxy in front of the translator loses the first copy of the last datagram (seq 2).
    # Nothing follows it, so the translator sees no gap to NACK; the tail probe resends it,
    # the translator applies it once (the second probe is a duplicate it drops).
    import threading
    proxy = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    proxy.bind(("127.0.0.1", 0))
    proxy.settimeout(0.2)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    seen, stop = [], threading.Event()

    def forward():
        while not stop.is_set():
            try:
                p = proxy.recv(65535)
            except socket.timeout:
                continue
            seq = int.from_bytes(p[8:12], "big")
            seen.append(seq)
            if seq == 2 and seen.count(2) == 1:
                continue  # lost
            out.sendto(p, ("127.0.0.1", stack.port))

    t = threading.Thread(target=forward)
    t.start()
    try:
        r = Reporter("127.0.0.1", proxy.getsockname()[1], reporter_id=21, priority="high",
                     retransmittable=True, nack_port=0)
        for _ in range(3):
            r.key_increment(bytes([10, 0, 0, 21]), 5)
            r.flush()
        r.close()
        assert r.stats["tail_probes"] == 2
        # The five copies are in the proxy's socket (loopback delivers as it sends); wait until
        # its thread, however late it runs, has forwarded them.
        end = time.monotonic() + 60
        while len(seen) < 5 and time.monotonic() < end:
            time.sleep(0.02)
    finally:
        stop.set()
        t.join()
        proxy.close()
        out.close()
    assert seen == [0, 1, 2, 2, 2], seen
    stats = stack.stop_translator()
    assert stack.rejected(stats) == {}
    v = stack.query("ki", "--store", "counters", "--key", "10.0.0.21")
    assert v["count"] == 15, v  # 3 x 5: the lost one recovered, the repeat not applied


def test_notice_pauses_low_priority_then_is_lifted(stack):
    # The translator's congestion notice, sent here by the test to the reporter's NACK port:
    # low priority is paused (suppressed, counted, no sequence number used), then lifted.
    # The reporter obeys control messages only from its translator's address or the ones it
    # is told about; the test's socket is one of them.
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind(("127.0.0.1", 0))
    r = Reporter("127.0.0.1", stack.port, reporter_id=22, priority="low", nack_port=0,
                 control_from=[tx.getsockname()])
    to = ("127.0.0.1", r.nack_addr[1])
    entries = [bytes([0, 0, 0, i]) for i in range(9)]
    for e in entries[:2]:
        r.append(3, e)
        r.flush()
    tx.sendto(dta.encode_notice(22, 60_000, 0, 0xFFFFFFFF), to)
    assert r.poll_nacks(2.0) == 1
    for e in entries[2:7]:
        r.append(3, e)
        assert r.flush() == 0
    assert (r.stats["suppressed"], r.stats["suppressed_reports"], r.next_seq) == (5, 5, 2)
    tx.sendto(dta.encode_notice(22, 0, 0, 0), to)
    assert r.poll_nacks(2.0) == 1
    for e in entries[7:]:
        r.append(3, e)
        assert r.flush() > 0
    r.close()
    tx.close()
    assert (r.stats["notices"], r.stats["datagrams"], r.next_seq) == (2, 4, 4)
    stats = stack.stop_translator()
    assert stack.rejected(stats) == {}
    v = stack.query("list", "--store", "events", "--list", "3")
    assert v["entries"] == [e.hex() for e in entries[:2] + entries[7:]], v
