"""ApproSync from Python ([InvisiFlow §6.1] "Sources"): two switches count flows in Count-Min
sketches (``dta.ApproSync``), each sending a column whenever a counter of it diverges, through
``dta.reporter.Reporter`` into a Sketch-Merge store of ``sync = "approsync"`` run by the ``dta``
binary; ``dta query sketch`` with its defaults answers what the two sketches counted together."""

import pytest

from dta import ApproSync, Reporter

ROWS, COLUMNS, SKETCH_ID, EPOCH = 3, 256, 7, 1

STORE = f"""
[[store]]
name = "flowsync"
kind = "sketch-merge"
sketch_id = {SKETCH_ID}
sketch = "count-min"
rows = {ROWS}
columns = {COLUMNS}
reporters = 2
sync = "approsync"
"""


def flow(f):
    return bytes([10, 0, f >> 8, f & 0xFF])


def test_two_switches_sync_and_the_store_answers_their_union(tmp_path):
    from dta_stack import Stack
    stack = Stack(tmp_path, STORE)
    try:
        switches = [ApproSync(ROWS, COLUMNS, 1.0, SKETCH_ID, EPOCH) for _ in range(2)]
        union = ApproSync(ROWS, COLUMNS, 1.0, SKETCH_ID, EPOCH)  # never sent: the expectation
        sent = 0
        # One control port per address: the second reporter of this process runs without
        # flow control (binding it would be refused, naming this process).
        with Reporter("127.0.0.1", stack.port, reporter_id=1) as r1, \
                Reporter("127.0.0.1", stack.port, reporter_id=2, nack_port=None) as r2:
            reporters = [r1, r2]
            for i in range(3000):
                f = (i * i) % 200  # uneven flow sizes
                s = i % 2
                switches[s].update(flow(f), 1 + f % 3)
                union.update(flow(f), 1 + f % 3)
                if i % 100 == 99:
                    sent += switches[s].sync(reporters[s])
                    assert switches[s].due == 0
            # Divergence alone leaves the last growth of some counters unsent; a full resync
            # sends every column.
            for s, r in zip(switches, reporters):
                assert s.sync_all(r) == COLUMNS
                sent += COLUMNS
        stats = stack.stop_translator()
        assert stack.rejected(stats) == {}, stats
        assert stats["reports"]["sketch_merge"] == sent, stats
        for f in range(200):
            v = stack.query("sketch", "--store", "flowsync", "--key", f"10.0.{f >> 8}.{f & 0xFF}")
            assert v["estimate"] == union.estimate(flow(f)), (f, v)
            assert v["estimate"] >= sum(s.estimate(flow(f)) for s in switches) // 2, (f, v)
    finally:
        stack.close()


def test_a_send_that_raises_leaves_the_column_due():
    class Down:
        def sketch_merge(self, *args):
            raise OSError("network down")

        def flush(self):
            pass

    s = ApproSync(1, 8, 1.0, SKETCH_ID, EPOCH)
    assert s.update(b"flow") is True
    assert s.update(b"flow") is False  # already due
    with pytest.raises(OSError, match="network down"):
        s.sync(Down())
    assert s.due == 1

    class Up:
        def __init__(self):
            self.columns = []

        def sketch_merge(self, sketch_id, column, epoch, data):
            self.columns.append((sketch_id, column, epoch, bytes(data)))

        def flush(self):
            pass

    up = Up()
    assert s.sync(up) == 1
    ((sid, _, epoch, data),) = up.columns
    assert (sid, epoch, int.from_bytes(data, "big")) == (SKETCH_ID, EPOCH, 2)
    assert s.due == 0


@pytest.mark.parametrize("args, message", [
    ((17, 256, 1.0, 1, 1), "1..=16 rows"),
    ((3, 100, 1.0, 1, 1), "power-of-two"),
    ((3, 1 << 17, 1.0, 1, 1), "at most 65536"),
    ((3, 256, -1.0, 1, 1), "non-negative"),
    ((3, 256, float("nan"), 1, 1), "non-negative"),
])
def test_shapes_the_wire_cannot_carry_raise_with_a_message(args, message):
    with pytest.raises(ValueError, match=message):
        ApproSync(*args)


def test_a_key_must_be_bytes():
    with pytest.raises(ValueError, match="bytes-like"):
        ApproSync(3, 256, 1.0, 1, 1).update("10.0.0.1")
