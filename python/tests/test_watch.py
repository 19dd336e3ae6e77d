"""Push notifications in Python: `dta.Watcher` iterates the notices of a region directory,
one per report the reporter flagged immediate, each exactly once, in order."""

import pathlib

import pytest

import dta
from dta.reporter import Reporter


@pytest.fixture
def stack(tmp_path):
    from dta_stack import Stack
    s = Stack(tmp_path)
    yield s
    s.close()


def test_watcher_yields_each_flagged_report_once(stack):
    regions = pathlib.Path(stack.config).parent / "regions"
    w = dta.Watcher(str(regions), timeout=2.0)
    keys = [bytes([10, 1, i >> 8, i & 0xFF]) for i in range(100)]
    with Reporter("127.0.0.1", stack.port) as r:
        for i, k in enumerate(keys):
            r.key_write(k, b"\x01\x02\x03\x04", immediate=i % 2 == 0)
        r.append(2, b"\x05\x06\x07\x08", immediate=True)
    # Stopped (SIGINT writes out everything, the Append batch included) before reading: the
    # watcher's 2 s without a notice then means there are no more, not a translator that a
    # loaded machine has not run yet.
    stats = stack.stop_translator()
    assert stack.rejected(stats) == {}
    got = list(w)
    assert w.missed == 0
    kw = [n for n in got if n["store"] == "kw"]
    assert [n["key"] for n in kw] == [k.hex() for k in keys[::2]]
    assert all(n["primitive"] == "key_write" and n["reports"] == 1 for n in kw)
    # The flagged Append entry is announced when its batch is written (the flush timer).
    ap = [n for n in got if n["store"] == "events"]
    assert [(n["list"], n["reports"]) for n in ap] == [(2, 1)]
    seqs = [n["seq"] for n in got]
    assert seqs == list(range(seqs[0], seqs[0] + len(got)))


def test_watcher_refuses_a_bad_timeout(tmp_path):
    with pytest.raises(ValueError, match="timeout"):
        dta.Watcher(str(tmp_path), timeout=-1.0)
