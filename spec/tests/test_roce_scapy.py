"""Cross-check spec/vectors/roce.json against scapy's RoCE layer (scapy.contrib.roce).

For every valid vector, scapy must dissect the frame to the same Ethernet, IPv4, UDP, BTH and
AETH fields as ours, and must compute the same invariant CRC: rebuilding the frame in scapy from
our fields with the lengths, the IP checksum and the ICRC left for scapy to compute must give
exactly our bytes. Invalid vectors whose defect is the ICRC must not survive a scapy rebuild.

Run: .venv/bin/python -m pytest spec/tests
"""

import json
import pathlib
import struct

import pytest
from scapy.compat import raw
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

VECTORS = json.loads(
    (pathlib.Path(__file__).resolve().parents[1] / "vectors" / "roce.json").read_text()
)

OPCODES = {
    "rc_rdma_write_first": 0x06,
    "rc_rdma_write_middle": 0x07,
    "rc_rdma_write_last": 0x08,
    "rc_rdma_write_last_with_immediate": 0x09,
    "rc_rdma_write_only": 0x0A,
    "rc_rdma_write_only_with_immediate": 0x0B,
    "rc_acknowledge": 0x11,
    "rc_atomic_acknowledge": 0x12,
    "rc_fetch_add": 0x14,
    "ud_send_only": 0x64,
    "cnp": 0x81,
}

SYNDROME_TYPE = {"ack": 0, "rnr_nak": 1, "nak": 3}
NAK_CODES = ["psn_sequence_error", "invalid_request", "remote_access_error",
             "remote_operational_error", "invalid_rd_request"]


def syndrome_byte(a):
    kind = a["syndrome"]
    value = {"ack": lambda: a["credits"], "rnr_nak": lambda: a["timer"],
             "nak": lambda: NAK_CODES.index(a["code"])}[kind]()
    return SYNDROME_TYPE[kind] << 5 | value


def ext_bytes(f):
    """The extension headers of a frame, encoded independently of the Rust emitter (IBA order:
    DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt)."""
    out = b""
    if f["deth"]:
        out += struct.pack(">IB", f["deth"]["qkey"], 0) + f["deth"]["src_qp"].to_bytes(3, "big")
    if f["reth"]:
        r = f["reth"]
        out += struct.pack(">QII", r["va"], r["rkey"], r["dma_len"])
    if f["atomic_eth"]:
        a = f["atomic_eth"]
        out += struct.pack(">QIQQ", a["va"], a["rkey"], a["swap_add"], a["compare"])
    if f["aeth"]:
        out += bytes([syndrome_byte(f["aeth"])]) + f["aeth"]["msn"].to_bytes(3, "big")
    if f["atomic_ack_eth"]:
        out += struct.pack(">Q", f["atomic_ack_eth"]["original"])
    if f["immdt"] is not None:
        out += struct.pack(">I", f["immdt"])
    return out


def scapy_frame(f):
    """Build the frame in scapy from our fields; lengths, IP checksum and ICRC left as None."""
    ip = f["ip"]
    b = f["bth"]
    payload = bytes.fromhex(f["payload"])
    pad = (4 - len(payload) % 4) % 4
    bth_kwargs = dict(opcode=OPCODES[b["opcode"]], solicited=int(b["solicited"]),
                      migreq=int(b["migreq"]), padcount=pad, version=0, pkey=b["pkey"],
                      fecn=int(b["fecn"]), becn=int(b["becn"]), dqpn=b["dest_qp"],
                      ackreq=int(b["ack_req"]), psn=b["psn"], icrc=None)
    rest = ext_bytes(f) + payload + b"\0" * pad
    if b["opcode"] == "rc_acknowledge":
        # scapy binds AETH to the ACK opcode: build it as a layer.
        a = f["aeth"]
        layers = BTH(**bth_kwargs) / AETH(syndrome=syndrome_byte(a), msn=a["msn"])
    else:
        layers = BTH(**bth_kwargs) / Raw(rest)
    return (Ether(dst=f["eth"]["dst"], src=f["eth"]["src"])
            / IP(src=ip["src"], dst=ip["dst"], tos=ip["dscp_ecn"], id=ip["ident"],
                 flags="DF" if ip["dont_fragment"] else 0, ttl=ip["ttl"])
            / UDP(sport=f["udp"]["src_port"], dport=4791, chksum=f["udp"]["checksum"])
            / layers)


@pytest.mark.parametrize("v", VECTORS["vectors"], ids=lambda v: v["name"])
def test_scapy_dissects_our_fields(v):
    wire = bytes.fromhex(v["hex"])
    f = v["frame"]
    p = Ether(wire)
    assert p.dst == f["eth"]["dst"] and p.src == f["eth"]["src"]
    ip = p[IP]
    assert (ip.src, ip.dst, ip.tos, ip.id, ip.ttl) == (
        f["ip"]["src"], f["ip"]["dst"], f["ip"]["dscp_ecn"], f["ip"]["ident"], f["ip"]["ttl"])
    assert bool(ip.flags.DF) == f["ip"]["dont_fragment"]
    assert ip.len == len(wire) - 14
    udp = p[UDP]
    assert (udp.sport, udp.dport, udp.chksum, udp.len) == (
        f["udp"]["src_port"], 4791, f["udp"]["checksum"], len(wire) - 34)
    bth = p[BTH]
    b = f["bth"]
    assert bth.opcode == OPCODES[b["opcode"]]
    assert (bth.solicited, bth.migreq, bth.padcount, bth.version, bth.pkey) == (
        b["solicited"], b["migreq"], b["pad_cnt"], 0, b["pkey"])
    assert (bth.fecn, bth.becn, bth.dqpn, bth.ackreq, bth.psn) == (
        b["fecn"], b["becn"], b["dest_qp"], b["ack_req"], b["psn"])
    # scapy reads the ICRC trailer as a big-endian integer; ours is the little-endian u32.
    assert struct.unpack("<I", struct.pack(">I", bth.icrc))[0] == v["icrc"]
    if AETH in p:
        assert p[AETH].syndrome == syndrome_byte(f["aeth"])
        assert p[AETH].msn == f["aeth"]["msn"]
        rest = b""
    else:
        rest = raw(bth.payload)
    # What follows the BTH (the ICRC is a trailer scapy strips) is our extension headers,
    # payload and zero padding.
    if AETH not in p:
        payload = bytes.fromhex(f["payload"])
        assert rest == ext_bytes(f) + payload + b"\0" * b["pad_cnt"]


@pytest.mark.parametrize("v", VECTORS["vectors"], ids=lambda v: v["name"])
def test_scapy_recomputes_our_icrc(v):
    wire = bytes.fromhex(v["hex"])
    # Re-dissected, with only the ICRC cleared.
    p = Ether(wire)
    p[BTH].icrc = None
    assert raw(p) == wire
    # Built from our JSON fields, scapy computing lengths, IP checksum and ICRC.
    assert raw(scapy_frame(v["frame"])) == wire


@pytest.mark.parametrize(
    "v", [v for v in VECTORS["invalid"] if v["error"] == "bad_icrc"], ids=lambda v: v["name"])
def test_scapy_rejects_our_bad_icrc(v):
    wire = bytes.fromhex(v["hex"])
    p = Ether(wire)
    p[BTH].icrc = None
    assert raw(p) != wire
    assert raw(p)[:-4] == wire[:-4]


def test_coverage():
    names = {v["frame"]["bth"]["opcode"] for v in VECTORS["vectors"]}
    assert set(OPCODES) <= names
    pads = {v["frame"]["bth"]["pad_cnt"] for v in VECTORS["vectors"]}
    assert pads == {0, 1, 2, 3}
    cms = {v["frame"]["cm"]["attribute"] for v in VECTORS["vectors"] if "cm" in v["frame"]}
    assert {"req", "rep"} <= cms
