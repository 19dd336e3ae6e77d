"""Region queries from Python over regions created and written through dta-store.

Where the layout is specified in docs/architecture.md ("Hashing"), the tests check the bytes in
the region file against an independent Python implementation of the hash functions, so a
Key-Write written via dta-store is found exactly where the contract says."""

import math
import struct
import zlib

import pytest
import xxhash

import dta

M64 = (1 << 64) - 1


def fnv1a64(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & M64
    return h


def fmix64(k):
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M64
    k ^= k >> 33
    return k


def fmix32(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def native_index(key, n, count):
    return fmix64(fnv1a64(key) ^ ((0x9E3779B97F4A7C15 * (n + 1)) & M64)) & (count - 1)


def rotl64(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def native_slot_check(key, slot):
    """The native Key-Write slot check of docs/regions.md ("Native check"): seed = fmix64(
    fnv1a64(key) ^ 0x165667B19E3779F9); for each LE u64 word w of the slot with its check field
    and padding zero, h = rotl64((h ^ w) * 0x9E3779B97F4A7C15, 29); then h = fmix64(h) and the
    check is (h ^ (h >> 32)) mod 2^32. The Postcarding chunk check (§2.3) is the same over the
    chunk's slots, the last word zero-padded."""
    return seeded_check(fmix64(fnv1a64(key) ^ 0x165667B19E3779F9), slot)


def seeded_check(h, slot):
    """The slot check from the key's seed `h` (native: above; xxh3: the high half of the key's
    XXH3-128)."""
    for i in range(0, len(slot), 8):
        w = int.from_bytes(slot[i:i + 8], "little")
        h = rotl64(((h ^ w) * 0x9E3779B97F4A7C15) & M64, 29)
    h = fmix64(h)
    return (h ^ (h >> 32)) & 0xFFFFFFFF


def xxh3_halves(key):
    """(low, high) 64-bit halves of the key's XXH3-128, from the xxHash library itself."""
    h = xxhash.xxh3_128_intdigest(key)
    return h & M64, h >> 64


def xxh3_index(key, n, count):
    """docs/regions.md, the xxh3 scheme: (low + n·high) mod count."""
    lo, hi = xxh3_halves(key)
    return (lo + n * hi) & M64 & (count - 1)


def answer(d):
    """A query answer without its confidence (checked separately)."""
    d = dict(d)
    # The copies read, on every Key-Write answer (checked by the tests that care).
    d.pop("redundancy", None)
    c = d.pop("confidence")
    assert set(c) == {"load", "p_overwritten", "p_wrong"}
    assert 0.0 <= c["p_wrong"] <= c["p_overwritten"] <= 1.0
    return d


def prototype_index(key, n, count):
    return zlib.crc32(key[::-1] + bytes([n])) & (count - 1)


@pytest.fixture
def kw_proto(tmp_path):
    return dta.Region.create(tmp_path / "kw.region", "kw4",
                             {"kind": "key_write", "slots": 1024, "key_len": 4, "data_len": 4,
                              "hash": "prototype"})


def test_create_header_and_reopen(tmp_path, kw_proto):
    h = kw_proto.header
    assert h["name"] == "kw4" and h["kind"] == "key_write" and kw_proto.kind == "key_write"
    # The prototype hash only because the fixture asks for it; N defaults to 2.
    assert h["hash"] == "prototype"
    assert h["spec"] == {"kind": "key_write", "slots": 1024, "key_len": 4, "data_len": 4,
                         "hash": "prototype", "redundancy": 2}
    assert h["header_len"] == 4096 and h["data_offset"] >= 4096
    assert h["data_len"] >= 1024 * 8
    assert kw_proto.writable
    ro = dta.Region(tmp_path / "kw.region")
    assert not ro.writable and ro.header == h


def test_key_write_written_via_store_is_queried_and_where_the_contract_says(tmp_path, kw_proto):
    key, data = bytes.fromhex("0a000001"), b"\xde\xad\xbe\xef"
    kw_proto.apply_key_write(key, data, redundancy=2)
    kw_proto.flush()
    ro = dta.Region(tmp_path / "kw.region")
    assert answer(ro.key_write(key, redundancy=2)) == {"status": "found", "data": data,
                                                       "votes": 2}
    # Without a redundancy the query reads the store's N from its header.
    assert answer(ro.key_write(key)) == {"status": "found", "data": data, "votes": 2}
    # The answer says how many copies it read and how many agreed.
    assert (ro.key_write(key)["redundancy"], ro.key_write(key)["votes"]) == (2, 2)
    assert (ro.key_write(key, redundancy=1)["redundancy"], ro.key_write(key, redundancy=1)["votes"]) == (1, 1)
    assert answer(ro.key_write(bytes.fromhex("0a000002"), redundancy=2)) == {"status": "empty",
                                                                             "data": None}
    # How sure: 2 copies written into 1024 slots.
    assert ro.tally == {"writes": 2, "added": 0}
    c = ro.key_write(bytes.fromhex("0a000002"))["confidence"]
    assert c["load"] == 2 / 1024
    assert math.isclose(c["p_overwritten"], (1 - math.exp(-2 / 1024)) ** 2)
    # Independent check of the prototype layout: slot n at crc32(key_le ‖ n) & (slots-1),
    # holding crc32(key_le) little-endian then the data, in 8-byte slots.
    raw = (tmp_path / "kw.region").read_bytes()
    base = ro.header["data_offset"]
    for n in range(2):
        at = base + prototype_index(key, n, 1024) * 8
        assert raw[at:at + 8] == struct.pack("<I", zlib.crc32(key[::-1])) + data


def test_key_write_ambiguous_and_threshold(kw_proto):
    key = bytes.fromhex("0a000001")
    kw_proto.apply_key_write(key, b"AAAA", redundancy=2)
    # Overwrite copy 0 only (redundancy 1 writes slot 0): two values with one vote each.
    kw_proto.apply_key_write(key, b"BBBB", redundancy=1)
    r = kw_proto.key_write(key, redundancy=2)
    assert r["status"] == "ambiguous" and r["data"] is None
    assert sorted(r["candidates"]) == [(b"AAAA", 1), (b"BBBB", 1)]
    kw_proto.apply_key_write(key, b"BBBB", redundancy=2)
    assert kw_proto.key_write(key, redundancy=2, threshold=2)["votes"] == 2
    # A threshold above the copies read could never be met: an error, not an "ambiguous".
    with pytest.raises(dta.RegionError) as e:
        kw_proto.key_write(key, redundancy=2, threshold=3)
    assert e.value.reason == "bad_threshold"


def test_native_key_write_layout(tmp_path):
    r = dta.Region.create(tmp_path / "kwn", "kw_flow",
                          {"kind": "key_write", "slots": 256, "key_len": 13, "data_len": 20,
                           "redundancy": 3})
    assert r.header["hash"] == "native"
    key = bytes.fromhex("0a0000010a00000204d2005006")
    data = bytes(range(20))
    r.apply_key_write(key, data, redundancy=3)
    assert answer(r.key_write(key, redundancy=3)) == {"status": "found", "data": data,
                                                      "votes": 3}
    raw = (tmp_path / "kwn").read_bytes()
    slot_len = (4 + 20 + 7) // 8 * 8
    want = native_slot_check(key, bytes(4) + data + bytes(slot_len - 24))
    for n in range(3):
        at = r.header["data_offset"] + native_index(key, n, 256) * slot_len
        # The check word covers key and data, computed as documented.
        assert raw[at:at + 4] == struct.pack("<I", want)
        assert raw[at + 4:at + 24] == data
        assert raw[at + 24:at + slot_len] == bytes(slot_len - 24)
    # Another key or other data gives another check.
    assert native_slot_check(key[:-1] + b"\x07", bytes(4) + data + bytes(4)) != want
    assert native_slot_check(key, bytes(5) + data[1:] + bytes(4)) != want


def test_xxh3_key_write_and_key_increment_layout(tmp_path):
    """The xxh3 scheme: every index and the check's seed from one XXH3-128 of the key, checked
    against the xxHash library for the key lengths of its three short-input branches."""
    for key_len in (3, 4, 8, 13, 16):
        key = bytes(range(7, 7 + key_len))
        kw = dta.Region.create(tmp_path / f"kwx{key_len}", f"kwx{key_len}",
                               {"kind": "key_write", "slots": 1024, "key_len": key_len,
                                "data_len": 4, "hash": "xxh3", "redundancy": 4})
        assert kw.header["hash"] == "xxh3"
        data = b"\x11\x22\x33\x44"
        kw.apply_key_write(key, data, redundancy=4)
        assert answer(kw.key_write(key, redundancy=4)) == {"status": "found", "data": data,
                                                           "votes": 4}
        raw = (tmp_path / f"kwx{key_len}").read_bytes()
        want = seeded_check(xxh3_halves(key)[1], bytes(4) + data)
        for n in range(4):
            at = kw.header["data_offset"] + xxh3_index(key, n, 1024) * 8
            assert raw[at:at + 4] == struct.pack("<I", want), (key_len, n)
            assert raw[at + 4:at + 8] == data
        ki = dta.Region.create(tmp_path / f"kix{key_len}", f"kix{key_len}",
                               {"kind": "key_increment", "counters": 4096,
                                "key_len": key_len, "hash": "xxh3", "redundancy": 2})
        ki.apply_key_increment(key, 77, redundancy=2)
        assert ki.key_increment(key, 2) == 77
        raw = (tmp_path / f"kix{key_len}").read_bytes()
        for n in range(2):
            at = ki.header["data_offset"] + xxh3_index(key, n, 4096) * 8
            assert struct.unpack_from("<Q", raw, at)[0] == 77, (key_len, n)


def test_queries_the_store_cannot_answer_raise_value_error(tmp_path, kw_proto):
    # A key of the wrong length, or an N beyond the store's, is an error, never "empty".
    for bad in (b"\x01\x02", b"\x01\x02\x03\x04\x05"):
        with pytest.raises(ValueError) as e:
            kw_proto.key_write(bad)
        assert e.value.reason == "bad_key_len"
    with pytest.raises(ValueError) as e:
        kw_proto.key_write(b"\x01\x02\x03\x04", redundancy=3)
    assert e.value.reason == "bad_redundancy"
    ki = dta.Region.create(tmp_path / "ki3", "ki3", {"kind": "key_increment", "counters": 64,
                                                     "key_len": 4, "redundancy": 3})
    assert ki.header["spec"]["redundancy"] == 3
    ki.apply_key_increment(b"\x00\x00\x00\x01", 5)
    assert ki.key_increment(b"\x00\x00\x00\x01") == 5
    # The count-min bound from the store's total and width: e·N/counters·total, rounded up.
    b = ki.key_increment_bound()
    assert b["total"] == 5 and ki.tally == {"writes": 3, "added": 5}
    assert b["error"] == math.ceil(math.e * 3 / 64 * 5)
    assert math.isclose(b["delta"], math.exp(-3))
    with pytest.raises(ValueError) as e:
        ki.key_increment(b"\x00\x01")
    assert e.value.reason == "bad_key_len"
    with pytest.raises(ValueError) as e:
        ki.key_increment(b"\x00\x00\x00\x01", 4)
    assert e.value.reason == "bad_redundancy"
    with pytest.raises(dta.RegionError) as e:
        ki.apply_key_increment(b"\x00\x00\x00\x01", 5, redundancy=2)
    assert e.value.reason == "redundancy_mismatch"


def test_store_rejections_name_the_reason(tmp_path, kw_proto):
    with pytest.raises(dta.RegionError) as e:
        kw_proto.apply_key_write(b"\x01\x02", b"abcd")
    assert e.value.reason == "bad_key_len"
    with pytest.raises(dta.RegionError) as e:
        kw_proto.apply_key_write(b"\x01\x02\x03\x04", b"abcdef")
    assert e.value.reason == "bad_data_len"
    with pytest.raises(dta.RegionError) as e:
        kw_proto.key_increment(b"\x01\x02\x03\x04", 1)
    assert e.value.reason == "wrong_kind"
    with pytest.raises(dta.RegionError) as e:
        dta.Region(tmp_path / "kw.region").apply_key_write(b"\x01\x02\x03\x04", b"abcd")
    assert e.value.reason == "read_only"
    with pytest.raises(dta.RegionError) as e:
        dta.Region.create(tmp_path / "bad", "x", {"kind": "key_write", "slots": 1000,
                                                   "key_len": 4, "data_len": 4})
    assert e.value.reason == "bad_spec"
    with pytest.raises(dta.RegionError) as e:
        dta.Region.create(tmp_path / "bad2", "x", {"kind": "key_write", "slotz": 1})
    assert e.value.reason == "bad_spec"
    # Same path, different store: refused unless force.
    with pytest.raises(dta.RegionError) as e:
        dta.Region.create(tmp_path / "kw.region", "other",
                          {"kind": "key_increment", "counters": 64, "key_len": 4})
    assert e.value.reason == "spec_mismatch"
    with pytest.raises(FileNotFoundError):
        dta.Region(tmp_path / "missing")
    (tmp_path / "junk").write_bytes(b"x" * 8192)
    with pytest.raises(dta.RegionError) as e:
        dta.Region(tmp_path / "junk")
    assert e.value.reason == "bad_magic"


def test_key_increment(tmp_path):
    r = dta.Region.create(tmp_path / "ki", "ki", {"kind": "key_increment", "counters": 1024,
                                                  "key_len": 4})
    key = b"\x00\x00\x00\x07"
    for _ in range(3):
        r.apply_key_increment(key, 1500, redundancy=2)
    assert r.key_increment(key, 2) == 4500
    assert r.key_increment(b"\x00\x00\x00\x08", 2) == 0
    # Counters are little-endian u64s at the native index (8 bytes each).
    raw = (tmp_path / "ki").read_bytes()
    at = r.header["data_offset"] + native_index(key, 1, 1024) * 8
    assert struct.unpack_from("<Q", raw, at)[0] == 4500


def test_key_increment_windows(tmp_path):
    """A store with time windows counts into the window of the wall clock; the answer names
    the windows it read; what it cannot answer is an error (docs/regions.md, windows)."""
    r = dta.Region.create(tmp_path / "w", "hist", {"kind": "key_increment", "counters": 1024,
                                                   "key_len": 6, "windows": 4,
                                                   "window_ms": 60000})
    assert r.header["spec"]["windows"] == 4 and r.header["spec"]["window_ms"] == 60000
    key = b"\x00\x00\x00\x01\x02\x03"
    with pytest.raises(ValueError, match="nothing has been written"):
        r.key_increment_window(key)
    r.apply_key_increment(key, 7)
    r.apply_key_increment(key, 5)
    a = r.key_increment_window(key)
    assert a["count"] == 12
    [w] = a["windows"]
    assert w["end_ms"] - w["start_ms"] == 60000 and w["open"]
    assert r.windows() == a["windows"]
    assert r.key_increment_window(key, "all")["count"] == 12
    assert r.key_increment_window(key, "last:5m")["count"] == 12
    assert r.key_increment_window(key, f"at:{w['start_ms']}")["count"] == 12
    assert r.key_increment(key) == 12
    with pytest.raises(ValueError, match="expected current, all"):
        r.key_increment_window(key, "yesterday")
    with pytest.raises(ValueError, match="no window of this store matches"):
        r.key_increment_window(key, f"at:{w['start_ms'] - 1}")
    c = dta.Region.create(tmp_path / "c", "c", {"kind": "key_increment", "counters": 64,
                                                "key_len": 6})
    with pytest.raises(ValueError, match="keeps no windows"):
        c.key_increment_window(key)
    assert c.key_increment_window(key, "all") == {"count": 0, "windows": []}
    with pytest.raises(ValueError, match="windows = 1"):
        dta.Region.create(tmp_path / "b", "b", {"kind": "key_increment", "counters": 64,
                                                "key_len": 6, "windows": 1,
                                                "window_ms": 1000})


def test_postcard(tmp_path):
    r = dta.Region.create(tmp_path / "pc", "pc", {"kind": "postcarding", "chunks": 1024,
                                                  "hops": 5, "key_len": 4})
    key = bytes.fromhex("c0a80001")
    r.apply_postcard(key, [3, 17, 42])
    assert answer(r.postcard(key, 100)) == {"status": "found", "path": [3, 17, 42]}
    # The chunk bytes (docs/regions.md §2.3): slot i = postcard_checksum(h, i) ^ g(v_i), blanks
    # after the path, then the u32 check over key and slots; copy j at chunk native_index(key, j).
    h = fnv1a64(key)
    slots = b"".join(
        struct.pack("<I", (fmix64(h ^ 0xC2B2AE3D27D4EB4F ^ i) & 0xFFFFFFFF) ^ fmix32(v))
        for i, v in enumerate([3, 17, 42, 0xFFFFFFFF, 0xFFFFFFFF]))
    chunk = slots + struct.pack("<I", native_slot_check(key, slots))
    raw = (tmp_path / "pc").read_bytes()
    copies = r.header["spec"]["redundancy"]
    assert copies >= 1
    for j in range(copies):
        at = r.header["data_offset"] + native_index(key, j, 1024) * len(chunk)
        assert raw[at:at + len(chunk)] == chunk
    assert r.postcard(key, range(100))["path"] == [3, 17, 42]
    assert r.postcard(key, [3, 17, 42, 99])["path"] == [3, 17, 42]
    # A value set without the reported values cannot decode the chunk.
    assert r.postcard(key, [1, 2])["status"] == "empty"
    assert answer(r.postcard(bytes.fromhex("c0a80002"), 100)) == {"status": "empty",
                                                                  "path": None}
    with pytest.raises(dta.RegionError) as e:
        r.apply_postcard(key, [1, 2, 3, 4, 5, 6])
    assert e.value.reason == "bad_hop"


def test_list_poll(tmp_path):
    r = dta.Region.create(tmp_path / "ap", "ap", {"kind": "append", "lists": 4, "capacity": 8,
                                                  "entry_len": 4, "batch": 2})
    entries = [struct.pack(">I", i) for i in range(6)]
    r.apply_append(2, 0, b"".join(entries[:4]))
    got = r.list_poll(2)
    assert got == {"entries": entries[:4], "missed": 0, "tail": 4, "record": "raw"}
    r.apply_append(2, 4, b"".join(entries[4:]))
    assert r.list_poll(2, tail=got["tail"]) == {"entries": entries[4:], "missed": 0, "tail": 6,
                                                "record": "raw"}
    assert r.list_poll(2, tail=6)["entries"] == []
    assert r.list_poll(1)["entries"] == []
    # Two shards split the indices between them.
    assert r.list_poll(2, shard=1, shards=2)["entries"] == entries[1::2]
    # Lapping the 8-entry ring: the oldest entries are reported missed.
    more = [struct.pack(">I", 100 + i) for i in range(8)]
    r.apply_append(2, 6, b"".join(more))
    lapped = r.list_poll(2, tail=0)
    assert lapped["missed"] > 0
    assert lapped["entries"] == more[-len(lapped["entries"]):]
    assert lapped["tail"] == 14
    with pytest.raises(dta.RegionError) as e:
        r.list_poll(4)
    assert e.value.reason == "bad_list_id"


def test_sketch_count_min(tmp_path):
    rows, cols = 4, 64
    r = dta.Region.create(tmp_path / "cm", "cm", {"kind": "sketch_merge", "sketch_id": 1,
                                                  "sketch": "count_min", "rows": rows,
                                                  "columns": cols, "reporters": 2})
    key = b"flow-1"
    # Nothing merged yet: an error, not an estimate of 0.
    with pytest.raises(dta.RegionError) as e:
        r.sketch_estimate(key)
    assert e.value.reason == "not_merged"
    # A merged sketch where every cell is 100, except the key's cell in each row (7, 5, 9, 6).
    want = [7, 5, 9, 6]
    cells = [[100] * rows for _ in range(cols)]
    for row, v in enumerate(want):
        cells[native_index(key, row, cols)][row] = v
    r.apply_sketch_columns(0, 3, 2, [v for col in cells for v in col])
    assert r.sketch_estimate(key) == min(want)
    assert r.sketch_estimate(key, epoch=3) == min(want)
    assert r.sketch_estimate(key, epoch=4) is None
    assert r.sketch_columns() == [(3, 2)] * cols
    with pytest.raises(dta.RegionError) as e:
        r.sketch_cardinality()
    assert e.value.reason == "wrong_kind"


def test_sketch_hyperloglog(tmp_path):
    r = dta.Region.create(tmp_path / "hll", "hll", {"kind": "sketch_merge", "sketch_id": 2,
                                                    "sketch": "hyper_log_log", "registers": 64,
                                                    "registers_per_column": 16,
                                                    "reporters": 1})
    # Nothing merged yet: an error, not a cardinality of 0.
    with pytest.raises(dta.RegionError, match="not_merged"):
        r.sketch_cardinality()
    regs = [1] * 8 + [0] * 56
    r.apply_sketch_columns(0, 1, 1, regs)
    # Small-range correction (linear counting): m ln(m / zeros).
    assert r.sketch_cardinality() == pytest.approx(64 * math.log(64 / 56))
