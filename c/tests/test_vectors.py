"""Byte-exact checks of the C header (c/include/dta/reporter.h) against the shared spec
vectors (spec/vectors/*.json, and spec/vectors/independent/*.json, built from the
specification rather than by the Rust emitters), through the small CLI c/tests/encode_vector.c.

Every prototype and native vector is encoded from its fields and compared with its hex;
every NACK vector is parsed and compared with its fields; invalid NACK-shaped inputs are
rejected with the reason the vectors name. Binaries are built with `make` (gcc, and clang
when present), and each available compiler's binary is tested.
"""

import json
import pathlib
import shutil
import subprocess

import pytest

C_DIR = pathlib.Path(__file__).resolve().parents[1]
REPO = C_DIR.parent
VECTORS = REPO / "spec" / "vectors"


def _load(name):
    with open(VECTORS / name) as f:
        return json.load(f)


PROTOTYPE = _load("prototype.json")
NATIVE = _load("native.json")
INVALID = _load("invalid.json")
IND_PROTOTYPE = _load("independent/prototype.json")
IND_NATIVE = _load("independent/native.json")
# Every valid vector, ours and the independent ones (whose names start with "ind_").
ALL_PROTOTYPE = PROTOTYPE["vectors"] + IND_PROTOTYPE["vectors"]
ALL_NATIVE = NATIVE["vectors"] + IND_NATIVE["vectors"]
ALL_PROTOTYPE_NACKS = PROTOTYPE["nacks"] + IND_PROTOTYPE["nacks"]
ALL_NATIVE_NACKS = NATIVE["nacks"] + IND_NATIVE["nacks"]


COMPILERS = ["gcc"] + (["clang"] if shutil.which("clang") else [])


@pytest.fixture(scope="session", params=COMPILERS)
def encoder(request):
    subprocess.run(["make", "-s", "-C", str(C_DIR), "all"], check=True)
    name = "encode_vector" if request.param == "gcc" else "encode_vector-clang"
    path = C_DIR / "build" / name
    assert path.exists(), f"make did not build {path}"
    return str(path)


def run(binary, *args):
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True)


def encode(binary, *args):
    p = run(binary, *args)
    assert p.returncode == 0, f"encode_vector {' '.join(map(str, args))}: {p.stderr}"
    return p.stdout.strip()


def prototype_args(v):
    h, r = v["header"], v["report"]
    op = h["opcode"]
    args = ["proto", v["base_header"], op, int(h["immediate"]), h["seqnum"] or 0,
            int(h["retransmittable"])]
    if op == "key_write":
        args += [r["redundancy"], r["key"], r["data"]]
    elif op == "key_increment":
        args += [r["redundancy"], r["key"], r["counter"]]
    elif op == "append":
        args += [r["list_id"], r["data"]]
    elif op == "postcarding":
        args += [r["key"], r["hop"], r["data"]]
    else:
        raise AssertionError(f"unknown prototype opcode {op}")
    return args


def native_args(v):
    h = v["header"]
    args = ["native", h["priority"], int(h["retransmittable"]), h["reporter_id"], h["seq"]]
    for r in v["reports"]:
        op, imm = r["opcode"], int(r["immediate"])
        if op == "key_write":
            args += [op, imm, r["redundancy"], r["key"], r["data"]]
        elif op == "key_increment":
            args += [op, imm, r["redundancy"], r["key"], r["counter"]]
        elif op == "append":
            args += [op, imm, r["list_id"], r["data"]]
        elif op == "postcarding":
            args += [op, imm, r["key"], r["hop"], r["path_len"], r["value"]]
        elif op == "sketch_merge":
            args += [op, imm, r["sketch_id"], r["column"], r["epoch"], r["data"]]
        else:
            raise AssertionError(f"unknown native opcode {op}")
    return args


def test_vector_files_are_not_empty():
    assert len(PROTOTYPE["vectors"]) >= 8 and PROTOTYPE["nacks"]
    assert len(NATIVE["vectors"]) >= 5 and NATIVE["nacks"]
    # Every opcode of both protocols is covered by the vectors this file runs.
    assert {v["header"]["opcode"] for v in PROTOTYPE["vectors"]} == {
        "key_write", "key_increment", "append", "postcarding"}
    assert {r["opcode"] for v in NATIVE["vectors"] for r in v["reports"]} == {
        "key_write", "key_increment", "append", "postcarding", "sketch_merge"}
    assert {(v["base_header"], v["header"]["opcode"]) for v in IND_PROTOTYPE["vectors"]} == {
        (f, op) for f in ("short", "long")
        for op in ("key_write", "key_increment", "append", "postcarding")}
    assert {r["opcode"] for v in IND_NATIVE["vectors"] for r in v["reports"]} == {
        "key_write", "key_increment", "append", "postcarding", "sketch_merge"}


@pytest.mark.parametrize("v", ALL_PROTOTYPE, ids=lambda v: v["name"])
def test_prototype_vector(encoder, v):
    assert encode(encoder, *prototype_args(v)) == v["hex"]


@pytest.mark.parametrize("v", ALL_NATIVE, ids=lambda v: v["name"])
def test_native_vector(encoder, v):
    assert encode(encoder, *native_args(v)) == v["hex"]


@pytest.mark.parametrize("v", ALL_PROTOTYPE_NACKS, ids=lambda v: v["name"])
def test_prototype_nack(encoder, v):
    want = f"seqnum={v['seqnum']} nack={int(v['nack'])}"
    assert encode(encoder, "proto-nack", v["hex"]) == want


@pytest.mark.parametrize("v", ALL_NATIVE_NACKS, ids=lambda v: v["name"])
def test_native_nack(encoder, v):
    s = v["sketch"]
    sketch = "none" if s is None else f"{s['sketch_id']},{s['column']},{s['epoch']}"
    bitmap = 0
    for m in v["missing"]:
        bitmap |= 1 << ((m - v["seq"] - 1) % (1 << 32))
    want = f"reporter_id={v['reporter_id']} seq={v['seq']} sketch={sketch} missing={bitmap:016x}"
    assert encode(encoder, "native-nack", v["hex"]) == want


ALL_NOTICES = NATIVE["notices"] + IND_NATIVE["notices"]


@pytest.mark.parametrize("v", ALL_NOTICES, ids=lambda v: v["name"])
def test_notice(encoder, v):
    want = (f"reporter_id={v['reporter_id']} hold_ms={v['hold_ms']} low_rate={v['low_rate']} "
            f"medium_rate={v['medium_rate']}")
    assert encode(encoder, "notice", v["hex"]) == want


@pytest.mark.parametrize("v", NATIVE["hellos"] + IND_NATIVE["hellos"], ids=lambda v: v["name"])
def test_hello(encoder, v):
    assert encode(encoder, "hello", v["hex"]) == f"reporter_id={v['reporter_id']} life={v['life']}"


@pytest.mark.parametrize("v", NATIVE["sealed"] + IND_NATIVE["sealed"], ids=lambda v: v["name"])
def test_sealed(encoder, v):
    life = "-" if v["life"] is None else v["life"]
    assert encode(encoder, "seal", v["key"], v["message"], v["counter"], life) == v["hex"]
    assert encode(encoder, "open", v["key"], v["hex"], life) == (
        f"message={v['message']}\ncounter={v['counter']}")
    if v["life"] is not None:
        p = run(encoder, "open", v["key"], v["hex"], v["life"] ^ 1)
        assert (p.returncode, p.stderr.strip()) == (2, "error: stale_life")
    else:
        p = run(encoder, "open", v["key"], v["hex"], 1)
        assert (p.returncode, p.stderr.strip()) == (2, "error: unbound")


INVALID_NOTICES = [v for v in INVALID["vectors"] if v["name"].startswith("native_notice_")]


@pytest.mark.parametrize("v", INVALID_NOTICES, ids=lambda v: v["name"])
def test_invalid_notice(encoder, v):
    p = run(encoder, "notice", v["hex"])
    assert p.returncode == 2, p.stdout
    assert p.stderr.strip() == f"error: {v['error']}"


def test_notice_is_not_a_nack(encoder):
    p = run(encoder, "native-nack", ALL_NOTICES[0]["hex"])
    assert p.stderr.strip() == "error: unknown_kind"
    p = run(encoder, "notice", ALL_NATIVE_NACKS[0]["hex"])
    assert p.stderr.strip() == "error: unknown_kind"


def _nack_shaped(v):
    """Invalid native inputs the C NACK parser must also reject: kind 1, or a header cut short."""
    if v["protocol"] != "native":
        return False
    b = bytes.fromhex(v["hex"])
    return len(b) >= 1 and (b[0] & 0x0F) == 1


INVALID_NACKS = [v for v in INVALID["vectors"] if _nack_shaped(v)]


@pytest.mark.skipif(not INVALID_NACKS, reason="no invalid NACK vectors")
@pytest.mark.parametrize("v", INVALID_NACKS, ids=lambda v: v["name"])
def test_invalid_native_nack(encoder, v):
    p = run(encoder, "native-nack", v["hex"])
    assert p.returncode == 2, p.stdout
    assert p.stderr.strip() == f"error: {v['error']}"


def test_native_nack_rejects_reports_datagram(encoder):
    # A valid report datagram (kind 0) is not a NACK.
    p = run(encoder, "native-nack", NATIVE["vectors"][0]["hex"])
    assert p.returncode == 2
    assert p.stderr.strip() == "error: unknown_kind"


def test_prototype_nack_length(encoder):
    assert run(encoder, "proto-nack", "07").stderr.strip() == "error: truncated"
    assert run(encoder, "proto-nack", "078000").stderr.strip() == "error: trailing_bytes"


@pytest.mark.parametrize("args,reason", [
    (["proto", "short", "key_write", 0, 0, 0, 1, 1, "deadbe"], "out_of_range"),       # 3 bytes
    (["proto", "short", "key_write", 0, 0, 0, 5, 1, "deadbeef"], "out_of_range"),     # redundancy 5
    (["proto", "short", "key_write", 0, 3, 0, 1, 1, "deadbeef"], "out_of_range"),     # seqnum, short
    (["native", "low", 0, 1, 1, "key_write", 0, 1, "", "deadbeef"], "out_of_range"),  # empty key
    (["native", "low", 0, 1, 1, "key_write", 0, 1, "00" * 17, "deadbeef"], "out_of_range"),
    (["native", "low", 0, 1, 1, "append", 0, 1, "00" * 65], "out_of_range"),
    (["native", "low", 0, 1, 1, "key_increment", 0, 0, "01", 1], "out_of_range"),
])
def test_out_of_range_fields_are_refused(encoder, args, reason):
    p = run(encoder, *args)
    assert p.returncode == 2
    assert p.stderr.strip() == f"error: {reason}"
