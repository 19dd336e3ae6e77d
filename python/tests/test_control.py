"""Control messages (NACKs, congestion notices) are obeyed only from the translator the reporter
sends to, and, with a control key, only with a valid authenticator whose counter was not seen,
bound to the life the reporter announced in its hello (docs/security.md); everything else
changes nothing and is counted by reason."""

import socket

import pytest

import dta

KEY = bytes.fromhex("00112233445566778899aabbccddeeff")


def pause():
    """A notice pausing reporter 1's low and medium priority for a minute."""
    return dta.encode_notice(1, 60_000, 0, 0)


@pytest.fixture
def translator():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    yield s
    s.close()


def reporter(translator, **kw):
    host, port = translator.getsockname()
    return dta.Reporter(host, port, reporter_id=1, priority="low", nack_port=0, **kw)


def deliver(r, sender, msg):
    sender.sendto(msg, r.nack_addr)
    assert r.poll_nacks(5.0) == 1


def sends(r):
    before = r.stats["suppressed"]
    r.key_write(b"\x01\x02\x03\x04", b"\x05\x06\x07\x08")
    r.flush()
    return r.stats["suppressed"] == before


def test_only_the_translator_is_obeyed(translator):
    forger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    forger.bind(("127.0.0.9", 0))
    with reporter(translator) as r:
        deliver(r, forger, pause())
        assert r.stats["control_wrong_source"] == 1
        assert r.stats["notices"] == 0
        assert sends(r)
        deliver(r, translator, pause())
        assert r.stats["notices"] == 1
        assert not sends(r)
    forger.close()


def test_with_a_key_only_authenticated_fresh_messages_are_obeyed(translator):
    with reporter(translator, control_key=KEY.hex()) as r:
        deliver(r, translator, pause())
        assert r.stats["control_unauthenticated"] == 1
        with pytest.warns(RuntimeWarning, match="failed its authenticator"):
            deliver(r, translator, dta.seal_control(pause(), bytes(16), 10))
        assert r.stats["control_bad_authenticator"] == 1
        good = dta.seal_control(pause(), KEY, 12, r.life)
        deliver(r, translator, good)
        assert r.stats["notices"] == 1
        deliver(r, translator, good)
        assert r.stats["control_replayed"] == 1
        deliver(r, translator, dta.seal_control(pause(), KEY, 100, r.life))
        deliver(r, translator, dta.seal_control(pause(), KEY, 99, r.life))
        assert r.stats["notices"] == 3
        deliver(r, translator, dta.seal_control(pause(), KEY, 30, r.life))
        assert r.stats["control_replayed"] == 2


def test_a_new_reporter_obeys_nothing_recorded_in_an_earlier_life(translator):
    """Recorded from a keyed translator and replayed to a reporter started afterwards (same id,
    same key): bound to the earlier life (stale) or to none (unbound), so not obeyed; the
    reporter's hello is what the translator binds to."""
    import time
    translator.settimeout(5)
    first = reporter(translator, control_key=KEY)
    hello, _ = translator.recvfrom(64)
    message, _ = dta.open_control(hello, KEY)
    assert dta.decode_hello(message) == {"reporter_id": 1, "life": first.life}
    recorded = [dta.seal_control(pause(), KEY, 1000 + i, first.life) for i in range(2)]
    recorded.append(dta.seal_control(pause(), KEY, 1002))
    first.close()
    with reporter(translator, control_key=KEY) as r:
        assert r.life is not None and r.life != first.life
        translator.recvfrom(64)
        deliver(r, translator, recorded[0])
        deliver(r, translator, recorded[1])
        assert r.stats["control_stale_life"] == 2
        time.sleep(0.15)
        deliver(r, translator, recorded[2])
        assert r.stats["control_unbound"] == 1
        assert r.stats["notices"] == 0
        assert r.stats["hellos"] == 2, "a message bound to no life asks for another hello"
        again, _ = translator.recvfrom(64)
        assert dta.decode_hello(dta.open_control(again, KEY)[0])["life"] == r.life
        assert sends(r)


def test_the_mac_is_the_rust_one():
    message, counter = dta.open_control(dta.seal_control(pause(), KEY, 7), KEY)
    assert (message, counter) == (pause(), 7)
    with pytest.raises(dta.WireError) as e:
        dta.open_control(pause(), KEY)
    assert e.value.reason == "unauthenticated"
    bound = dta.seal_control(pause(), KEY, 8, 0xFEED)
    assert dta.open_control(bound, KEY, 0xFEED) == (pause(), 8)
    for life, reason in ((0xBEEF, "stale_life"), (None, None)):
        if reason is None:
            assert dta.open_control(bound, KEY)[1] == 8
            continue
        with pytest.raises(dta.WireError) as e:
            dta.open_control(bound, KEY, life)
        assert e.value.reason == reason
    with pytest.raises(dta.WireError) as e:
        dta.open_control(dta.seal_control(pause(), KEY, 9), KEY, 0xFEED)
    assert e.value.reason == "unbound"


def test_a_control_port_held_by_another_process_is_refused_naming_it(translator):
    """Flow control is on or refused: the port and the process holding it are named, and
    nack_port=None is the explicit way to run without."""
    import subprocess
    import sys
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
         "s.bind(('0.0.0.0',0))\nprint(s.getsockname()[1],flush=True)\ntime.sleep(30)"],
        stdout=subprocess.PIPE, text=True)
    try:
        port = int(holder.stdout.readline())
        host, tport = translator.getsockname()
        with pytest.raises(OSError, match=rf"control port {port} .* process {holder.pid}"):
            dta.Reporter(host, tport, reporter_id=1, nack_port=port)
        r = dta.Reporter(host, tport, reporter_id=1, nack_port=None)
        assert r.nack_addr is None
        r.close()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_a_key_mismatch_is_said_once_and_counted(translator):
    r = reporter(translator, control_key=KEY)
    other = bytes(range(16))
    sealed = [dta.seal_control(pause(), other, c) for c in (1, 2, 3)]
    with pytest.warns(RuntimeWarning, match="control key the translator's"):
        deliver(r, translator, sealed[0])
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        deliver(r, translator, sealed[1])
        deliver(r, translator, sealed[2])
    assert r.stats["control_bad_authenticator"] == 3
    assert r.stats["notices"] == 0
    r.close()
