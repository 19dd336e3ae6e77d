"""Encoders refuse what the wire cannot carry, with a ValueError naming the reason, and leave
a native datagram unchanged."""

import pytest

import dta

KEY = bytes.fromhex("0a000001")
DATA = bytes.fromhex("deadbeef")


@pytest.mark.parametrize("kwargs,reason", [
    (dict(opcode="key_write", key=1, data=b"\x00" * 8), "bad_data_len"),
    (dict(opcode="key_write", key=1, data=DATA, redundancy=0), "bad_redundancy"),
    (dict(opcode="key_write", key=1, data=DATA, redundancy=5), "bad_redundancy"),
    (dict(opcode="key_write", key=1, data=DATA, redundancy=300), "bad_redundancy"),
    (dict(opcode="key_write", key=b"\x01\x02", data=DATA), "bad_key_len"),
    (dict(opcode="key_increment", key=1, counter=1, redundancy=9), "bad_redundancy"),
    (dict(opcode="append", list_id=1, data=b"\x00" * 8), "bad_data_len"),
    (dict(opcode="sketch_merge", key=1, data=DATA), "unknown_opcode"),
])
def test_prototype_encode_errors(kwargs, reason):
    with pytest.raises(dta.WireError) as e:
        dta.encode_prototype(**kwargs)
    assert e.value.reason == reason
    assert str(e.value).startswith(reason)


def test_prototype_argument_errors():
    with pytest.raises(ValueError, match="short base header"):
        dta.encode_prototype("append", list_id=1, data=DATA, seqnum=3)
    with pytest.raises(ValueError, match="short base header"):
        dta.encode_prototype("append", list_id=1, data=DATA, retransmittable=True)
    with pytest.raises(ValueError, match="needs `key`"):
        dta.encode_prototype("key_write", data=DATA)
    with pytest.raises(ValueError, match="unknown opcode"):
        dta.encode_prototype("key_read", key=1, data=DATA)
    with pytest.raises(ValueError, match="base_header"):
        dta.encode_prototype("append", list_id=1, data=DATA, base_header="medium")
    with pytest.raises(ValueError, match="bytes-like"):
        dta.encode_prototype("append", list_id=1, data="deadbeef")


def test_prototype_key_forms_agree():
    a = dta.encode_prototype("key_write", key=0x0A000001, data=DATA, base_header="long",
                             seqnum=9, retransmittable=True, immediate=True, redundancy=2)
    b = dta.encode_prototype("key_write", key=KEY, data=DATA, base_header="long",
                             seqnum=9, retransmittable=True, immediate=True, redundancy=2)
    assert a == b == bytes.fromhex("0109c0" "02" "0a000001" "deadbeef")


@pytest.mark.parametrize("call,reason", [
    (lambda d: d.key_write(b"", DATA), "bad_key_len"),
    (lambda d: d.key_write(b"k" * 17, DATA), "bad_key_len"),
    (lambda d: d.key_write(KEY, b"abc"), "bad_data_len"),
    (lambda d: d.key_write(KEY, b"a" * 65), "bad_data_len"),
    (lambda d: d.key_write(KEY, DATA, redundancy=5), "bad_redundancy"),
    (lambda d: d.key_increment(KEY, 1, redundancy=0), "bad_redundancy"),
    (lambda d: d.append(1, b"ab"), "bad_data_len"),
    (lambda d: d.postcard(b"", 1, 2), "bad_key_len"),
    (lambda d: d.sketch_merge(1, 2, 3, b"x" * 65), "bad_data_len"),
])
def test_native_builder_errors_leave_datagram_unchanged(call, reason):
    d = dta.NativeDatagram(reporter_id=5, seq=6)
    d.append(7, DATA)
    before = bytes(d)
    with pytest.raises(dta.WireError) as e:
        call(d)
    assert e.value.reason == reason
    assert d.count == 1
    assert bytes(d) == before


def test_native_datagram_fills_up():
    d = dta.NativeDatagram(capacity=12 + 3 * 12)  # room for exactly three 12-byte appends
    for i in range(3):
        assert d.append(i, DATA) == 12
    assert d.remaining == 0
    with pytest.raises(dta.DatagramFull):
        d.append(3, DATA)
    # An invalid report is a WireError even when the datagram is full.
    with pytest.raises(dta.WireError):
        d.append(3, b"x")
    assert d.count == 3
    decoded = dta.decode(bytes(d))
    assert [r["list_id"] for r in decoded["reports"]] == [0, 1, 2]


def test_native_datagram_255_report_limit():
    d = dta.NativeDatagram(capacity=65507)
    for i in range(255):
        d.key_increment(bytes([i]), i)
    with pytest.raises(dta.DatagramFull, match="255"):
        d.key_increment(b"\x00", 1)
    decoded = dta.decode(bytes(d))
    assert decoded["header"]["count"] == 255
    assert decoded["reports"][254] == {"opcode": "key_increment", "immediate": False,
                                       "redundancy": 1, "key": "fe", "counter": 254}


def test_native_datagram_empty_and_clear():
    d = dta.NativeDatagram(priority="high", reporter_id=1, seq=41)
    with pytest.raises(dta.WireError) as e:
        bytes(d)
    assert e.value.reason == "bad_count"
    d.key_write(7, DATA)  # an int key is sent as its 4 big-endian bytes
    assert dta.decode(bytes(d))["reports"][0]["key"] == "00000007"
    d.clear(seq=42)
    assert d.count == 0 and len(d) == 12 and d.seq == 42
    d.append(1, DATA)
    h = dta.decode(bytes(d))["header"]
    assert (h["seq"], h["priority"], h["count"]) == (42, "high", 1)


def test_native_datagram_argument_errors():
    with pytest.raises(ValueError, match="priority"):
        dta.NativeDatagram(priority="urgent")
    with pytest.raises(ValueError, match="capacity"):
        dta.NativeDatagram(capacity=8)
    with pytest.raises(ValueError, match="needs `key`"):
        dta.NativeDatagram().add({"opcode": "key_write", "data": "deadbeef"})
    with pytest.raises(ValueError, match="not valid hex"):
        dta.NativeDatagram().add({"opcode": "append", "list_id": 1, "data": "xyz0"})
    with pytest.raises(OverflowError):
        dta.NativeDatagram().append(1 << 32, DATA)


def test_native_report_len():
    assert dta.native_report_len("key_write", 13, 20) == 4 + 13 + 20
    assert dta.native_report_len("postcarding", 4, 4) == 4 + 4 + 6
    assert dta.native_report_len("sketch_merge", 0, 64) == 4 + 8 + 64
    with pytest.raises(dta.WireError) as e:
        dta.native_report_len("append", 4, 4)
    assert e.value.reason == "bad_key_len"
