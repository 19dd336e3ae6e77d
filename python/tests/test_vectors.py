"""The native module against the shared spec vectors: every valid vector encodes byte-exactly
from its fields and decodes back to them; every invalid vector is rejected with its reason.
The vectors of spec/vectors/independent (names starting with "ind_"), built from the
specification rather than by the Rust emitters, are run alongside."""

import pytest

import dta
from conftest import load_vectors

PROTOTYPE = load_vectors("prototype.json")
NATIVE = load_vectors("native.json")
INVALID = load_vectors("invalid.json")
IND_PROTOTYPE = load_vectors("independent/prototype.json")
IND_NATIVE = load_vectors("independent/native.json")
ALL_PROTOTYPE = PROTOTYPE["vectors"] + IND_PROTOTYPE["vectors"]
ALL_NATIVE = NATIVE["vectors"] + IND_NATIVE["vectors"]


def encode_prototype_vector(v):
    h, r = v["header"], v["report"]
    fields = dict(r)
    if "data" in fields and isinstance(fields["data"], str):
        fields["data"] = bytes.fromhex(fields["data"])
    return dta.encode_prototype(
        h["opcode"], base_header=v["base_header"], immediate=h["immediate"],
        seqnum=h["seqnum"], retransmittable=h["retransmittable"], **fields)


@pytest.mark.parametrize("v", ALL_PROTOTYPE, ids=lambda v: v["name"])
def test_prototype_encodes_byte_exactly(v):
    assert encode_prototype_vector(v).hex() == v["hex"]


@pytest.mark.parametrize("v", ALL_PROTOTYPE, ids=lambda v: v["name"])
def test_prototype_decodes_to_fields(v):
    d = dta.decode(bytes.fromhex(v["hex"]), base_header=v["base_header"])
    assert d["protocol"] == "prototype"
    assert d["base_header"] == v["base_header"]
    assert d["length"] == len(v["hex"]) // 2
    assert d["header"] == v["header"]
    assert d["report"] == v["report"]


def _native_build(v, via):
    h = v["header"]
    d = dta.NativeDatagram(priority=h["priority"], retransmittable=h["retransmittable"],
                           reporter_id=h["reporter_id"], seq=h["seq"], capacity=65507)
    for r in v["reports"]:
        if via == "dict":
            d.add(r)
            continue
        op, imm = r["opcode"], r["immediate"]
        if op == "key_write":
            d.key_write(bytes.fromhex(r["key"]), bytes.fromhex(r["data"]),
                        redundancy=r["redundancy"], immediate=imm)
        elif op == "key_increment":
            d.key_increment(bytes.fromhex(r["key"]), r["counter"], redundancy=r["redundancy"],
                            immediate=imm)
        elif op == "append":
            d.append(r["list_id"], bytes.fromhex(r["data"]), immediate=imm)
        elif op == "postcarding":
            d.postcard(bytes.fromhex(r["key"]), r["hop"], r["value"], path_len=r["path_len"],
                       immediate=imm)
        elif op == "sketch_merge":
            d.sketch_merge(r["sketch_id"], r["column"], r["epoch"], bytes.fromhex(r["data"]),
                           immediate=imm)
        else:
            raise AssertionError(op)
    assert d.count == len(v["reports"])
    assert len(d) == len(v["hex"]) // 2
    return bytes(d)


@pytest.mark.parametrize("via", ["methods", "dict"])
@pytest.mark.parametrize("v", ALL_NATIVE, ids=lambda v: v["name"])
def test_native_encodes_byte_exactly(v, via):
    assert _native_build(v, via).hex() == v["hex"]


@pytest.mark.parametrize("v", ALL_NATIVE, ids=lambda v: v["name"])
def test_native_decodes_to_fields(v):
    d = dta.decode(bytes.fromhex(v["hex"]))
    assert d["protocol"] == "native"
    h = d["header"]
    assert h["kind"] == "reports"
    assert h["count"] == len(v["reports"])
    for k, want in v["header"].items():
        assert h[k] == want, k
    assert d["reports"] == v["reports"]


def test_every_opcode_is_covered():
    assert {v["header"]["opcode"] for v in PROTOTYPE["vectors"]} == {
        "key_write", "key_increment", "append", "postcarding"}
    assert {r["opcode"] for v in NATIVE["vectors"] for r in v["reports"]} == {
        "key_write", "key_increment", "append", "postcarding", "sketch_merge"}
    assert {(v["base_header"], v["header"]["opcode"]) for v in IND_PROTOTYPE["vectors"]} == {
        (f, op) for f in ("short", "long")
        for op in ("key_write", "key_increment", "append", "postcarding")}
    assert {r["opcode"] for v in IND_NATIVE["vectors"] for r in v["reports"]} == {
        "key_write", "key_increment", "append", "postcarding", "sketch_merge"}


@pytest.mark.parametrize("v", PROTOTYPE["nacks"] + IND_PROTOTYPE["nacks"], ids=lambda v: v["name"])
def test_prototype_nacks(v):
    b = bytes.fromhex(v["hex"])
    assert dta.decode_prototype_nack(b) == {"seqnum": v["seqnum"], "nack": v["nack"]}
    # Reserved bits are sent as 0, so re-encoding reproduces the vector.
    assert dta.encode_prototype_nack(v["seqnum"], v["nack"]) == b


@pytest.mark.parametrize("v", NATIVE["nacks"] + IND_NATIVE["nacks"], ids=lambda v: v["name"])
def test_native_nacks(v):
    b = bytes.fromhex(v["hex"])
    want = {"reporter_id": v["reporter_id"], "seq": v["seq"], "sketch": v["sketch"],
            "missing": v["missing"]}
    assert dta.decode_native_nack(b) == want
    assert dta.decode(b)["nack"] == want
    s = v["sketch"]
    sketch = None if s is None else (s["sketch_id"], s["column"], s["epoch"])
    assert dta.encode_native_nack(v["reporter_id"], v["seq"], sketch, v["missing"]) == b


def test_native_nack_bitmap_is_bounded():
    with pytest.raises(ValueError, match="not 1..=64 after seq"):
        dta.encode_native_nack(1, 10, None, [75])
    with pytest.raises(ValueError, match="not 1..=64 after seq"):
        dta.encode_native_nack(1, 10, None, [10])


@pytest.mark.parametrize("v", NATIVE["hellos"] + IND_NATIVE["hellos"], ids=lambda v: v["name"])
def test_hellos(v):
    b = bytes.fromhex(v["hex"])
    want = {"reporter_id": v["reporter_id"], "life": v["life"]}
    assert dta.decode_hello(b) == want
    assert dta.decode(b)["hello"] == want
    assert dta.decode(b)["header"]["kind"] == "hello"
    assert dta.encode_hello(v["reporter_id"], v["life"]) == b


@pytest.mark.parametrize("v", NATIVE["sealed"] + IND_NATIVE["sealed"], ids=lambda v: v["name"])
def test_sealed_control_messages(v):
    key, message = bytes.fromhex(v["key"]), bytes.fromhex(v["message"])
    assert dta.seal_control(message, key, v["counter"], v["life"]).hex() == v["hex"]
    assert dta.open_control(bytes.fromhex(v["hex"]), key, v["life"]) == (message, v["counter"])


@pytest.mark.parametrize("v", NATIVE["notices"] + IND_NATIVE["notices"], ids=lambda v: v["name"])
def test_notices(v):
    b = bytes.fromhex(v["hex"])
    want = {k: v[k] for k in ("reporter_id", "hold_ms", "low_rate", "medium_rate")}
    assert dta.decode_notice(b) == want
    assert dta.decode(b)["notice"] == want
    assert dta.decode(b)["header"]["kind"] == "notice"
    assert dta.encode_notice(*(v[k] for k in ("reporter_id", "hold_ms", "low_rate",
                                              "medium_rate"))) == b


@pytest.mark.parametrize("v", INVALID["vectors"], ids=lambda v: v["name"])
def test_invalid_vectors_raise_their_reason(v):
    with pytest.raises(ValueError) as e:
        dta.decode(bytes.fromhex(v["hex"]), base_header=v["base_header"] or "short")
    assert isinstance(e.value, dta.WireError)
    assert e.value.reason == v["error"]
    assert str(e.value).startswith(v["error"] + ":")
    assert v["error"] in dta.ERROR_REASONS
