#!/usr/bin/env python3
"""Independent spec vectors: DTA prototype and native datagrams, INT v2.1 frames and
Telemetry Report v2.0 payloads built field by field from the specifications with
``struct.pack``, without importing any of this repository's code.

The vectors in ``spec/vectors/*.json`` are produced by the Rust emitters, so a mistake shared
by an emitter and its parser would go unnoticed there. These are written from the documents
instead: [DTA wire] (docs/protocol.md) for the DTA headers, [INT v2.1] and [TR v2.0] for INT
and telemetry reports, [RFC 791] / [RFC 768] / [RFC 1071] for the frame around INT.

Output: ``spec/vectors/independent/{prototype,native,int}.json``, in the schemas of
``spec/vectors/{prototype,native,int}.json`` (``spec/README.md``), so every reader of those
files reads these too. ``python3 spec/tools/independent_vectors.py [--check] [OUT_DIR]``;
``--check`` compares with the committed files instead of writing (exit 1 on a difference).
"""

import json
import pathlib
import struct
import sys

# ---------------------------------------------------------------------------------------------
# DTA prototype protocol [DTA wire] "Prototype protocol"
# ---------------------------------------------------------------------------------------------

# [DTA wire] "Prototype protocol": opcodes of the base header.
PROTO_OPCODES = {"key_write": 0x01, "append": 0x02, "key_increment": 0x03, "postcarding": 0x04}
FLAG_I = 0x80  # [DTA wire] base header flags byte: bit 7 = immediate
FLAG_R = 0x40  # [DTA wire] base header flags byte: bit 6 = retransmittable (long format only)


def proto_base(opcode, fmt, immediate, seqnum=None, retransmittable=False):
    """[DTA wire] base header: short = opcode u8 | flags u8; long = opcode | seqnum | flags."""
    flags = (FLAG_I if immediate else 0) | (FLAG_R if retransmittable else 0)
    if fmt == "short":
        assert seqnum is None and not retransmittable
        return struct.pack("!BB", PROTO_OPCODES[opcode], flags)
    return struct.pack("!BBB", PROTO_OPCODES[opcode], seqnum, flags)


def proto_body(opcode, r):
    """[DTA wire] "Prototype sub-headers, bit by bit"."""
    if opcode == "key_write":
        # redundancy u8 | key u32 | data (4, 12 or 28 bytes)
        return struct.pack("!BI", r["redundancy"], r["key"]) + bytes.fromhex(r["data"])
    if opcode == "key_increment":
        # redundancy u8 | key u32 | counter u64
        return struct.pack("!BIQ", r["redundancy"], r["key"], r["counter"])
    if opcode == "append":
        # list_id u32 | data (4 bytes)
        return struct.pack("!I", r["list_id"]) + bytes.fromhex(r["data"])
    # postcarding: key u32 | hop u8 | data u32 (the hop's value)
    return struct.pack("!IBI", r["key"], r["hop"], r["data"])


def proto_vector(name, fmt, opcode, report, immediate=False, seqnum=None, retransmittable=False):
    raw = proto_base(opcode, fmt, immediate, seqnum, retransmittable) + proto_body(opcode, report)
    return {
        "name": name,
        "base_header": fmt,
        "hex": raw.hex(),
        "header": {
            "opcode": opcode,
            "immediate": immediate,
            "seqnum": seqnum,
            "retransmittable": retransmittable,
        },
        "report": report,
    }


def proto_nack(name, seqnum, nack):
    """[DTA wire] prototype NACK: seqnum u8 | N:1 | reserved:7."""
    raw = struct.pack("!BB", seqnum, 0x80 if nack else 0)
    return {"name": name, "hex": raw.hex(), "seqnum": seqnum, "nack": nack}


def prototype_file():
    v = []
    for fmt, seq in (("short", None), ("long", 0x11)):
        long_ = fmt == "long"
        for width, data in ((4, "a1b2c3d4"), (12, bytes(range(0x30, 0x3C)).hex()),
                            (28, bytes(range(0x60, 0x7C)).hex())):
            v.append(proto_vector(
                f"ind_key_write_{fmt}_{width}", fmt, "key_write",
                {"redundancy": {4: 1, 12: 2, 28: 4}[width], "key": 0xC0000201,
                 "data": data},
                immediate=width == 4, seqnum=seq, retransmittable=long_ and width != 12))
        v.append(proto_vector(
            f"ind_key_increment_{fmt}", fmt, "key_increment",
            {"redundancy": 3, "key": 0x0A0B0C0D, "counter": 0x0102030405060708},
            immediate=long_, seqnum=seq and seq + 1, retransmittable=False))
        v.append(proto_vector(
            f"ind_append_{fmt}", fmt, "append", {"list_id": 0x00010203, "data": "cafef00d"},
            immediate=not long_, seqnum=seq and seq + 2, retransmittable=long_))
        v.append(proto_vector(
            f"ind_postcarding_{fmt}", fmt, "postcarding",
            {"key": 0xAC100001, "hop": 3, "data": 0x00123456},
            immediate=long_, seqnum=seq and 0xFE, retransmittable=long_))
    nacks = [proto_nack("ind_nack_set", 0x42, True), proto_nack("ind_nack_clear", 0x99, False)]
    return {"generator": GENERATOR, "vectors": v, "nacks": nacks}


# ---------------------------------------------------------------------------------------------
# DTA native protocol, version 1 [DTA wire] "Native protocol, version 1"
# ---------------------------------------------------------------------------------------------

NATIVE_OPCODES = {"key_write": 1, "append": 2, "key_increment": 3, "postcarding": 4,
                  "sketch_merge": 5}
PRIORITIES = {"low": 0, "medium": 1, "high": 2}  # [DTA wire] "Datagram header": Pri


def native_header(kind, priority, retransmittable, count, reporter_id, seq):
    """[DTA wire] "Datagram header (12 bytes)": version:4 kind:4 | Pri:2 R:1 reserved:5 |
    count u8 | reserved u8 | reporter id u32 | sequence number u32."""
    return struct.pack("!BBBBII", 1 << 4 | kind,
                       PRIORITIES[priority] << 6 | (0x20 if retransmittable else 0),
                       count, 0, reporter_id, seq)


def native_report(r):
    """[DTA wire] "Report (kind 0)": opcode u8 | I:1 reserved:5 red:2 | key_len u8 |
    data_len u8, then the body of "Native report bodies, bit by bit"."""
    op = r["opcode"]
    red = r.get("redundancy", 1) - 1  # red = redundancy - 1; 0 for opcodes without redundancy
    flags = (0x80 if r["immediate"] else 0) | red
    if op == "key_write":
        key, body = bytes.fromhex(r["key"]), bytes.fromhex(r["data"])
        return struct.pack("!BBBB", 1, flags, len(key), len(body)) + key + body
    if op == "key_increment":
        key = bytes.fromhex(r["key"])  # data_len = 8: the u64 counter
        return struct.pack("!BBBB", 3, flags, len(key), 8) + key + struct.pack("!Q", r["counter"])
    if op == "append":
        data = bytes.fromhex(r["data"])  # key_len = 0; list_id u32 then data
        return struct.pack("!BBBBI", 2, flags, 0, len(data), r["list_id"]) + data
    if op == "postcarding":
        key = bytes.fromhex(r["key"])  # data_len = 4; key, hop u8, path_len u8, value u32
        return (struct.pack("!BBBB", 4, flags, len(key), 4) + key
                + struct.pack("!BBI", r["hop"], r["path_len"], r["value"]))
    data = bytes.fromhex(r["data"])  # sketch_merge: key_len = 0; sketch_id u16, column u16,
    return (struct.pack("!BBBB", 5, flags, 0, len(data))  # epoch u32, then the column
            + struct.pack("!HHI", r["sketch_id"], r["column"], r["epoch"]) + data)


def native_vector(name, priority, retransmittable, reporter_id, seq, reports):
    raw = native_header(0, priority, retransmittable, len(reports), reporter_id, seq)
    raw += b"".join(native_report(r) for r in reports)
    return {
        "name": name,
        "hex": raw.hex(),
        "header": {"priority": priority, "retransmittable": retransmittable,
                   "reporter_id": reporter_id, "seq": seq},
        "reports": reports,
    }


def native_nack(name, reporter_id, seq, sketch, missing=()):
    """[DTA wire] "NACK (kind 1)": the header with kind 1, Pri 0, R 0, count 0, 1 or 2, then
    sketch_id u16 | column u16 | epoch u32 when count = 1, or the missing bitmap u64 when
    count = 2 (bit i set: seq + 1 + i is missing too)."""
    count = 1 if sketch is not None else 2 if missing else 0
    raw = native_header(1, "low", False, count, reporter_id, seq)
    if sketch is not None:
        raw += struct.pack("!HHI", sketch["sketch_id"], sketch["column"], sketch["epoch"])
    elif missing:
        bitmap = 0
        for m in missing:
            bitmap |= 1 << ((m - seq - 1) % (1 << 32))
        raw += struct.pack("!Q", bitmap)
    return {"name": name, "hex": raw.hex(), "reporter_id": reporter_id, "seq": seq,
            "sketch": sketch, "missing": list(missing)}


def native_notice(name, reporter_id, hold_ms, low_rate, medium_rate):
    """[DTA wire] "Congestion notice (kind 2)": the header with kind 2, Pri 0, R 0, count 1,
    seq 0, then hold_ms u32 | low_rate u32 | medium_rate u32."""
    raw = native_header(2, "low", False, 1, reporter_id, 0)
    raw += struct.pack("!III", hold_ms, low_rate, medium_rate)
    return {"name": name, "hex": raw.hex(), "reporter_id": reporter_id, "hold_ms": hold_ms,
            "low_rate": low_rate, "medium_rate": medium_rate}


def native_hello(name, reporter_id, life):
    """[DTA wire] "Hello (kind 3)": the header with kind 3, Pri 2 (high), R 0, count 0, seq 0,
    then the reporter's life, u64."""
    raw = native_header(3, "high", False, 0, reporter_id, 0) + struct.pack("!Q", life)
    return {"name": name, "hex": raw.hex(), "reporter_id": reporter_id, "life": life}


_M64 = (1 << 64) - 1


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash24(key, msg):
    """SipHash-2-4 as [SipHash] §2 defines it (written from the paper, not from our code):
    k0, k1 little-endian halves of the key; the message in little-endian 64-bit words, the
    last one padded with zeros and the length mod 256 in its top byte; 2 rounds per word, 4 at
    the end."""
    k0, k1 = struct.unpack("<QQ", key)
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rounds(n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & _M64; v[1] = _rotl(v[1], 13); v[1] ^= v[0]  # noqa: E702
            v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & _M64; v[3] = _rotl(v[3], 16); v[3] ^= v[2]  # noqa: E702
            v[0] = (v[0] + v[3]) & _M64; v[3] = _rotl(v[3], 21); v[3] ^= v[0]  # noqa: E702
            v[2] = (v[2] + v[1]) & _M64; v[1] = _rotl(v[1], 17); v[1] ^= v[2]  # noqa: E702
            v[2] = _rotl(v[2], 32)

    full = len(msg) - len(msg) % 8
    words = [struct.unpack("<Q", msg[i:i + 8])[0] for i in range(0, full, 8)]
    words.append(int.from_bytes(msg[full:] + bytes(7 - len(msg) % 8) + bytes([len(msg) & 0xFF]),
                                "little"))
    for m in words:
        v[3] ^= m
        rounds(2)
        v[0] ^= m
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


# [SipHash] Appendix A: key 00..0f, message 00..0e.
assert siphash24(bytes(range(16)), bytes(range(15))) == 0xA129CA6149BE45E5


def sealed(name, key, message, counter, life=None):
    """[DTA wire] "Authenticated NACKs and notices": the A bit (0x10 of byte 1) set, then the
    counter u64; with a life the L bit (0x08) too and the life u64 after the counter; then the
    tag, SipHash-2-4 under the key of everything before it, u64 big-endian."""
    raw = bytearray(message)
    raw[1] |= 0x10 | (0x08 if life is not None else 0)
    raw += struct.pack("!Q", counter)
    if life is not None:
        raw += struct.pack("!Q", life)
    raw += struct.pack("!Q", siphash24(key, bytes(raw)))
    return {"name": name, "key": key.hex(), "message": message.hex(), "counter": counter,
            "life": life, "hex": bytes(raw).hex()}


FIVE_TUPLE = "c0a80001" "c0a80002" "1f90" "01bb" "11"  # 192.168.0.1 -> .2, UDP 8080 -> 443


def native_file():
    kw = {"opcode": "key_write", "immediate": True, "redundancy": 3, "key": FIVE_TUPLE,
          "data": bytes(range(0x80, 0x90)).hex()}
    ki = {"opcode": "key_increment", "immediate": False, "redundancy": 4,
          "key": "00112233445566778899aabbccddeeff", "counter": 0xFEDCBA9876543210}
    ap = {"opcode": "append", "immediate": False, "list_id": 0x01020304,
          "data": bytes(range(0xC0, 0xC0 + 64)).hex()}
    pc = {"opcode": "postcarding", "immediate": True, "key": "07", "hop": 2, "path_len": 5,
          "value": 0xDEADBEEF}
    sm = {"opcode": "sketch_merge", "immediate": False, "sketch_id": 0x0102, "column": 0x0304,
          "epoch": 0x05060708, "data": "0000000100000002"}
    v = [
        native_vector("ind_key_write", "high", True, 0x0A000001, 1, [kw]),
        native_vector("ind_key_increment", "low", False, 2, 0xFFFFFFFF, [ki]),
        native_vector("ind_append", "medium", False, 3, 0x80000000, [ap]),
        native_vector("ind_postcarding", "low", True, 4, 5, [pc]),
        native_vector("ind_sketch_merge", "medium", True, 5, 6, [sm]),
        native_vector("ind_mixed", "high", False, 0xCAFEBABE, 1000, [sm, pc, ap, ki, kw]),
    ]
    nacks = [
        native_nack("ind_nack_plain", 0x0A000001, 2, None),
        native_nack("ind_nack_sketch", 5, 7, {"sketch_id": 0x0102, "column": 0x0305,
                                               "epoch": 0x05060708}),
        native_nack("ind_nack_missing", 6, 0xFFFFFFF0, None,
                    [0xFFFFFFF2, 0xFFFFFFFF, 0x00000000, 0x0000002F]),
    ]
    notices = [
        native_notice("ind_notice_pause_both", 0x0A000001, 500, 0, 0),
        native_notice("ind_notice_lower_low", 2, 30000, 1000, 0xFFFFFFFF),
    ]
    hellos = [native_hello("ind_hello", 0x0A000001, 0xFEDCBA9876543210)]
    key = bytes.fromhex("f0e1d2c3b4a5968778695a4b3c2d1e0f")
    sealed_ = [
        sealed("ind_sealed_notice", key, bytes.fromhex(notices[0]["hex"]), 0x0102030405060708),
        sealed("ind_bound_nack", key, bytes.fromhex(nacks[2]["hex"]), 42, 0x0011223344556677),
        sealed("ind_sealed_hello", key, bytes.fromhex(hellos[0]["hex"]), 1 << 63),
    ]
    return {"generator": GENERATOR, "vectors": v, "nacks": nacks, "notices": notices,
            "hellos": hellos, "sealed": sealed_}


# ---------------------------------------------------------------------------------------------
# INT v2.1 over UDP in an Ethernet / IPv4 frame, and Telemetry Report v2.0
# ---------------------------------------------------------------------------------------------

INT_UDP_PORT = 5000  # the INT destination port the reader is configured with ("detect")

# [INT v2.1 §5.8] instruction bitmap, bit 0 = MSB, and the size of each item in 4-byte words.
INSTR = [  # (bit mask, words per item, item name)
    (0x8000, 1, "node_id"),                 # bit 0: node id (32)
    (0x4000, 1, "l1_ports"),                # bit 1: L1 ingress (16) + egress (16) interface id
    (0x2000, 1, "hop_latency"),             # bit 2: hop latency (32)
    (0x1000, 1, "queue"),                   # bit 3: queue id (8) + queue occupancy (24)
    (0x0800, 2, "ingress_timestamp"),       # bit 4: ingress timestamp (64)
    (0x0400, 2, "egress_timestamp"),        # bit 5: egress timestamp (64)
    (0x0200, 2, "l2_ports"),                # bit 6: L2 ingress (32) + egress (32) interface id
    (0x0100, 1, "egress_tx_util"),          # bit 7: egress port TX utilization (32)
    (0x0080, 1, "buffer"),                  # bit 8: buffer id (8) + buffer occupancy (24)
    (0x0001, 1, "checksum_complement"),     # bit 15: checksum complement (32)
]


def pack_item(name, h):
    """One metadata item of [INT v2.1 §5.8] (and of [TR v2.0 §3.3.1], same layouts)."""
    if name == "l1_ports":
        return struct.pack("!HH", h["l1_ingress_port"], h["l1_egress_port"])
    if name == "queue":
        return struct.pack("!I", h["queue_id"] << 24 | h["queue_occupancy"])
    if name == "buffer":
        return struct.pack("!I", h["buffer_id"] << 24 | h["buffer_occupancy"])
    if name == "l2_ports":
        return struct.pack("!II", h["l2_ingress_port"], h["l2_egress_port"])
    if name in ("ingress_timestamp", "egress_timestamp"):
        return struct.pack("!Q", h[name])
    return struct.pack("!I", h[name])


def hop_values(n):
    """The metadata hop `n` pushes (every value distinct, none the all-ones 'not available')."""
    return {
        "node_id": 0x1000 + n, "l1_ingress_port": 10 + n, "l1_egress_port": 20 + n,
        "hop_latency": 500 * (n + 1), "queue_id": n, "queue_occupancy": 0x010000 + n,
        "ingress_timestamp": 0x0000_0102_0304_0000 + n,
        "egress_timestamp": 0x0000_0102_0304_1000 + n,
        "l2_ingress_port": 0x00AA0000 + n, "l2_egress_port": 0x00BB0000 + n,
        "egress_tx_util": 40 + n, "buffer_id": 7, "buffer_occupancy": 0x000200 + n,
        "checksum_complement": 0xC0DE0000 + n,
        "domain_specific": f"d5{n:02x}0000d5{n:02x}0001",
    }


def ipv4_checksum(hdr):
    """[RFC 1071] ones'-complement sum of 16-bit words, complemented."""
    s = sum(struct.unpack(f"!{len(hdr) // 2}H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def int_md_frame(hops, instructions, payload, domain=(0, 0, 0), ds_words=0):
    """An Ethernet frame: IPv4 / UDP to INT_UDP_PORT / INT shim / INT-MD header / stack /
    payload. `hops` are in path order; the stack holds them newest first [INT v2.1 §5.8].
    `domain` = (Domain Specific ID, DS Instruction, DS Flags); each hop pushes `ds_words` words
    of domain specific metadata (its "domain_specific" bytes) after its baseline metadata."""
    items = [(name, words) for mask, words, name in INSTR if instructions & mask]
    # [INT v2.1 §5.8] Hop ML: the words each hop pushes, baseline and domain specific.
    hop_ml = sum(w for _, w in items) + ds_words
    stack = b"".join(b"".join(pack_item(name, h) for name, _ in items)
                     + bytes.fromhex(h["domain_specific"])[:4 * ds_words]
                     for h in reversed(hops))
    assert len(stack) == 4 * hop_ml * len(hops)
    max_hops = 8
    domain_id, ds_instructions, ds_flags = domain
    md = struct.pack(
        "!BBBBHHHH",
        # [INT v2.1 §5.8] Ver:4 = 2 | D:1 E:1 M:1 | Reserved:12 | Hop ML:5 | RemainingHopCnt:8
        2 << 4, 0, hop_ml, max_hops - len(hops),
        instructions,     # Instruction Bitmap (16)
        domain_id,        # Domain Specific ID (16); 0 is the default domain
        ds_instructions,  # DS Instruction (16)
        ds_flags,         # DS Flags (16)
    )
    length = (len(md) + len(stack)) // 4  # [INT v2.1 §5.7.3] Length: MD header + stack, words
    frame = udp_int_frame(1, md + stack, payload)

    def hop_json(h):
        out = {}
        for name, _ in items:
            if name == "l1_ports":
                out.update(l1_ingress_port=h["l1_ingress_port"],
                           l1_egress_port=h["l1_egress_port"])
            elif name == "queue":
                out.update(queue_id=h["queue_id"], queue_occupancy=h["queue_occupancy"])
            elif name == "buffer":
                out.update(buffer_id=h["buffer_id"], buffer_occupancy=h["buffer_occupancy"])
            elif name == "l2_ports":
                out.update(l2_ingress_port=h["l2_ingress_port"],
                           l2_egress_port=h["l2_egress_port"])
            else:
                out[name] = h[name]
        out["domain_specific"] = h["domain_specific"][:8 * ds_words]
        return out

    expect = {
        "int_type": "int_md",
        "shim": {"type": 1, "npt": 1, "length": length, "next": ORIG_DPORT},
        "header": {"version": 2, "d": False, "e": False, "m": False, "hop_ml": hop_ml,
                   "remaining_hop_count": max_hops - len(hops), "instructions": instructions,
                   "domain_id": domain_id, "ds_instructions": ds_instructions,
                   "ds_flags": ds_flags},
        "hop_count": len(hops),
        "hops": [hop_json(h) for h in reversed(hops)],
        "flow": FLOW,
    }
    return frame, expect


ORIG_DPORT = 4791  # the flow's own UDP destination port, kept in the shim (NPT 1)
# NPT 1: the flow's destination port is the original one the shim carries.
FLOW = {"src": "10.0.0.1", "dst": "10.0.0.2", "src_port": 40000, "dst_port": ORIG_DPORT,
        "protocol": 17}


def udp_int_frame(int_type, int_body, payload):
    """Ethernet / IPv4 / UDP to INT_UDP_PORT / INT shim / `int_body` (header and stack) /
    payload."""
    # [INT v2.1 §5.7.3] shim for TCP/UDP: Type:4 (1 INT-MD, 3 INT-MX) | NPT:2 (1 = the
    # original UDP destination port follows) | R:2 | Length:8 (words after the shim) | port (16)
    shim = struct.pack("!BBH", int_type << 4 | 1 << 2, len(int_body) // 4, ORIG_DPORT)
    return ipv4_udp_frame(shim + int_body + payload, INT_UDP_PORT, 0)


# [INT v1.0 §4.7] instruction bitmap, bit 0 = MSB: the same items as v2.1 bits 0..7, but the
# ingress and egress timestamps are 4 bytes; bits 8..14 are reserved; bit 15 checksum complement.
INSTR_V1 = [  # (bit mask, words per item, item name)
    (0x8000, 1, "node_id"),
    (0x4000, 1, "l1_ports"),
    (0x2000, 1, "hop_latency"),
    (0x1000, 1, "queue"),
    (0x0800, 1, "ingress_timestamp"),       # bit 4: ingress timestamp (32)
    (0x0400, 1, "egress_timestamp"),        # bit 5: egress timestamp (32)
    (0x0200, 2, "l2_ports"),
    (0x0100, 1, "egress_tx_util"),
    (0x0001, 1, "checksum_complement"),
]
INT_V1_DSCP = 0x17  # INT v1.0 over TCP/UDP is detected by a DSCP value ("detect" below)


def int_v1_md_frame(hops, instructions, payload, e=0, m=0):
    """[INT v1.0 §4.6.1, §4.7] An Ethernet frame: IPv4 with DSCP INT_V1_DSCP / UDP with the
    flow's own ports / INT v1.0 shim / 8-byte INT metadata header / stack / payload. `hops` in
    path order; the stack holds them newest first."""
    items = [(name, words) for mask, words, name in INSTR_V1 if instructions & mask]
    hop_ml = sum(w for _, w in items)

    def item(name, h):
        if name in ("ingress_timestamp", "egress_timestamp"):
            return struct.pack("!I", h[name] & 0xFFFFFFFF)
        return pack_item(name, h)

    stack = b"".join(b"".join(item(name, h) for name, _ in items) for h in reversed(hops))
    max_hops = 8
    # Ver:4 = 1 | Rep:2 | C:1 | E:1 | M:1 | Reserved:10 | Hop ML:5 | RemainingHopCnt:8, then
    # Instruction Bitmap (16) | Reserved (16)
    md = struct.pack("!BBBBHH", 1 << 4 | e, m << 7, hop_ml, max_hops - len(hops),
                     instructions, 0)
    # Shim: Type:8 (1 = hop-by-hop) | Reserved:8 | Length:8 (shim + header + stack, words) |
    # DSCP:6 (the original DSCP, 0 here) | R:2
    words = (4 + len(md) + len(stack)) // 4
    shim = struct.pack("!BBBB", 1, 0, words, 0)
    frame = ipv4_udp_frame(shim + md + stack + payload, ORIG_DPORT, INT_V1_DSCP << 2)

    def hop_json(h):
        out = {}
        for name, _ in items:
            if name == "l1_ports":
                out.update(l1_ingress_port=h["l1_ingress_port"],
                           l1_egress_port=h["l1_egress_port"])
            elif name == "queue":
                out.update(queue_id=h["queue_id"], queue_occupancy=h["queue_occupancy"])
            elif name == "l2_ports":
                out.update(l2_ingress_port=h["l2_ingress_port"],
                           l2_egress_port=h["l2_egress_port"])
            elif name in ("ingress_timestamp", "egress_timestamp"):
                out[name] = h[name] & 0xFFFFFFFF
            else:
                out[name] = h[name]
        out["domain_specific"] = ""
        return out

    expect = {
        "int_type": "int_md",
        # Read as v2.x carries it: Length counts the words after the shim; the DSCP byte in
        # `next`, NPT 0.
        "shim": {"type": 1, "npt": 0, "length": words - 1, "next": 0},
        "header": {"version": 1, "d": False, "e": bool(e), "m": bool(m), "hop_ml": hop_ml,
                   "remaining_hop_count": max_hops - len(hops), "instructions": instructions,
                   "domain_id": 0, "ds_instructions": 0, "ds_flags": 0},
        "hop_count": len(hops),
        "hops": [hop_json(h) for h in reversed(hops)],
        "flow": FLOW,
    }
    return frame, expect


def tr_v1_report(switch_id, seq, ts, frame, frame_expect, hw_id=0, d=0, q=0, f=1):
    """Telemetry Report v1.0, NProto 0 (the Ethernet frame follows): `Ver=1 (4) | Len (4) |
    NProto (3) | RepMdBits (6) | reserved (6) | D | Q | F | hw_id (6)`, switch id, sequence,
    ingress timestamp (32 each)."""
    w = 1 << 28 | 4 << 24 | 0 << 21 | 0 << 15 | d << 8 | q << 7 | f << 6 | hw_id
    head = struct.pack("!IIII", w, switch_id, seq, ts)
    expect = {"version": "1.0", "length": 4, "next_proto": 0, "rep_md_bits": 0,
              "d": bool(d), "q": bool(q), "f": bool(f), "hw_id": hw_id, "switch_id": switch_id,
              "sequence": seq, "ingress_timestamp": ts, "sub_header": None,
              "inner": frame.hex(), "inner_int": frame_expect}
    return head + frame, expect


def ipv4_udp_frame(udp_payload, dport, tos):
    """Ethernet / IPv4 (TOS `tos`) / UDP 40000 -> `dport` / `udp_payload`."""
    # [RFC 768] source port, destination port, length, checksum (0: none computed)
    udp = struct.pack("!HHHH", 40000, dport, 8 + len(udp_payload), 0)
    src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    # [RFC 791] version 4 / IHL 5, TOS, total length, id 1, DF, TTL 64, UDP, checksum, addrs
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + 8 + len(udp_payload), 1, 0x4000, 64, 17,
                     0, src, dst)
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    eth = bytes.fromhex("020000000002" "020000000001") + struct.pack("!H", 0x0800)
    return eth + ip + udp + udp_payload


def int_mx_frame(instructions, domain, payload):
    """[INT v2.1 §5.9] INT-MX: the 12-byte header and no stack (the shim's Length is 3)."""
    domain_id, ds_instructions, ds_flags = domain
    # Ver:4 = 2 | D:1 E:1 M:1 | Reserved:25; Instruction Bitmap (16) | Domain Specific ID (16);
    # DS Instruction (16) | DS Flags (16)
    mx = struct.pack("!IHHHH", 2 << 28, instructions, domain_id, ds_instructions, ds_flags)
    expect = {
        "int_type": "int_mx",
        "shim": {"type": 3, "npt": 1, "length": 3, "next": ORIG_DPORT},
        "header": {"version": 2, "d": False, "e": False, "m": False,
                   "instructions": instructions, "domain_id": domain_id,
                   "ds_instructions": ds_instructions, "ds_flags": ds_flags},
        "flow": FLOW,
    }
    return udp_int_frame(3, mx, payload), expect


# [TR v2.0 §3.3.1] RepMdBits: bit 0 reserved, bits 1..8 as the INT instruction bits 1..8,
# bit 15: queue id (8) + drop reason (8) + padding (16).
REP_MD = [b for b in INSTR if b[0] not in (0x8000, 0x0001)] + [(0x0001, 1, "drop")]


def tr_v2_report(node_id, hw_id, sequence, reports):
    """[TR v2.0 §3.2] group header: Ver:4 = 2 | hw_id:6 | Sequence Number:22 | Node ID u32,
    then the individual reports."""
    raw = struct.pack("!II", 2 << 28 | hw_id << 22 | sequence, node_id)
    expects = []
    for r in reports:
        body, e = individual_report(**r)
        raw += body
        expects.append(e)
    expect = {"version": "2.0", "hw_id": hw_id, "sequence": sequence, "node_id": node_id,
              "reports": expects}
    return raw, expect


def tlv(tlv_type, template, data):
    """[TR v2.0 §3.3.2] TLVType:4 (0 DS extension data, 1 Ethernet, 2 IPv4, 3 IPv6) | Rsvd:4 |
    TLVLength:8 (words of data) | TLV Data Template (16) | data."""
    assert len(data) % 4 == 0
    return struct.pack("!BBH", tlv_type << 4, len(data) // 4, template) + data


def individual_report(rep_md_bits, md, inner, inner_expect, d, q, f, i, in_type=3,
                      tlvs=None):
    """[TR v2.0 §3.3] RepType:4 (1 = INT) | InType:4 (1 TLV, 3 Ethernet, 4 IPv4) |
    Report Length:8 | MD Length:8 | D Q F I | Rsvd:4, then [TR v2.0 §3.3.1] the INT main
    contents: RepMdBits u16 | Domain Specific ID u16 | DSMdBits u16 | DSMdstatus u16 |
    metadata, then the inner contents (`tlvs`: their (type, template, data) when InType 1)."""
    if tlvs is not None:
        inner = b"".join(tlv(*t) for t in tlvs)
    metadata = b""
    md_json = {}
    for mask, _, name in REP_MD:
        if not rep_md_bits & mask:
            continue
        if name == "drop":
            # queue id (8) + drop reason (8) + padding (16)
            metadata += struct.pack("!BBH", md["drop_queue_id"], md["drop_reason"], 0)
            md_json.update(drop_queue_id=md["drop_queue_id"], drop_reason=md["drop_reason"])
            continue
        metadata += pack_item(name, md)
        for k in {"l1_ports": ("l1_ingress_port", "l1_egress_port"),
                  "queue": ("queue_id", "queue_occupancy"),
                  "buffer": ("buffer_id", "buffer_occupancy"),
                  "l2_ports": ("l2_ingress_port", "l2_egress_port")}.get(name, (name,)):
            md_json[k] = md[k]
    assert len(metadata) % 4 == 0 and len(inner) % 4 == 0
    main = struct.pack("!HHHH", rep_md_bits, 0, 0, 0) + metadata
    md_length = len(metadata) // 4  # MD Length: the optional metadata only, in words
    report_length = (len(main) + len(inner)) // 4  # Report Length: all but the first word
    flags = (d << 7) | (q << 6) | (f << 5) | (i << 4)
    head = struct.pack("!BBBB", 1 << 4 | in_type, report_length, md_length, flags)
    expect = {
        "rep_type": 1, "in_type": in_type, "report_length": report_length, "md_length": md_length,
        "d": bool(d), "q": bool(q), "f": bool(f), "i": bool(i),
        "main": {"rep_md_bits": rep_md_bits, "domain_id": 0, "ds_md_bits": 0,
                 "ds_md_status": 0, "metadata": md_json, "ds_metadata": ""},
        "inner": inner.hex(),
        "inner_int": inner_expect,
    }
    if tlvs is not None:
        expect["tlvs"] = [{"type": t, "template": tp, "data": dt.hex()} for t, tp, dt in tlvs]
    return head + main + inner, expect


def int_file():
    all_bits = sum(m for m, _, _ in INSTR)
    hops = [hop_values(n) for n in range(3)]
    frame3, exp3 = int_md_frame(hops, all_bits, b"payload!!!")
    frame1, exp1 = int_md_frame(hops[:1], 0x8000 | 0x2000, b"hi")
    v = [
        {"name": "ind_int_md_udp_3hop_all_bits", "kind": "frame", "hex": frame3.hex(),
         "expect": exp3, "note": "INT-MD over UDP, NPT 1, 3 hops, every defined instruction bit"},
        {"name": "ind_int_md_udp_1hop", "kind": "frame", "hex": frame1.hex(), "expect": exp1,
         "note": "INT-MD over UDP, NPT 1, 1 hop, node id and hop latency"},
    ]
    ds_hops = [hop_values(n) for n in (5, 6)]
    frame_ds, exp_ds = int_md_frame(ds_hops, 0x8000, b"dsmd", domain=(0x4455, 0xC000, 0x0001),
                                    ds_words=2)
    v.append({"name": "ind_int_md_udp_domain_specific", "kind": "frame", "hex": frame_ds.hex(),
              "expect": exp_ds, "note": "INT-MD, domain 0x4455: node id and 2 words of domain "
              "specific metadata per hop"})
    frame_mx, exp_mx = int_mx_frame(0x8000 | 0x1000, (0x0102, 0x8000, 0x0003), b"mx!!")
    v.append({"name": "ind_int_mx_udp", "kind": "frame", "hex": frame_mx.hex(),
              "expect": exp_mx, "note": "INT-MX: header only, no stack"})
    md = hop_values(9)
    md.update(drop_queue_id=5, drop_reason=0x2A)
    rep_all = sum(m for m, _, _ in REP_MD)
    raw, exp = tr_v2_report(0x00C0FFEE, 9, 0x3ABCDE, [
        dict(rep_md_bits=rep_all, md=md, inner=frame3, inner_expect=exp3, d=1, q=0, f=1, i=0)])
    v.append({"name": "ind_report_v2_all_bits", "kind": "report", "hex": raw.hex(),
              "expect": exp, "note": "TR v2.0, one INT report, every RepMdBits bit, Ethernet "
              "inner with the 3-hop INT-MD frame"})
    raw, exp = tr_v2_report(7, 1, 2, [
        dict(rep_md_bits=0x4000 | 0x1000, md=md, inner=frame1, inner_expect=exp1,
             d=0, q=1, f=1, i=0),
        dict(rep_md_bits=0x2000, md=md, inner=frame3, inner_expect=exp3, d=0, q=0, f=1, i=1)])
    v.append({"name": "ind_report_v2_two", "kind": "report", "hex": raw.hex(), "expect": exp,
              "note": "TR v2.0, two INT reports of different metadata"})
    ip1 = frame1[14:] + bytes(-len(frame1[14:]) % 4)  # the IPv4 packet, padded to whole words
    raw, exp = tr_v2_report(0xFFFFFFFE, 63, 0x3FFFFF, [
        dict(rep_md_bits=0x0800 | 0x0001, md=md, inner=ip1, inner_expect=exp1,
             d=1, q=1, f=1, i=1, in_type=4),
        dict(rep_md_bits=0x0100, md=md, inner=None, inner_expect=exp1, d=0, q=0, f=1, i=0,
             in_type=1, tlvs=[(0, 0x0007, bytes.fromhex("0badcafe")), (2, 0, ip1)])])
    v.append({"name": "ind_report_v2_ipv4_and_tlv", "kind": "report", "hex": raw.hex(),
              "expect": exp, "note": "TR v2.0: an IPv4 inner (InType 4), then TLVs (InType 1): "
              "domain specific data and an IPv4 packet; hw_id and sequence at their maxima"})
    v1_bits = sum(m for m, _, _ in INSTR_V1)
    v1_hops = [hop_values(n) for n in (1, 2, 3, 4, 5)]
    frame_v1, exp_v1 = int_v1_md_frame(v1_hops, v1_bits, b"v1.0", e=0, m=1)
    v.append({"name": "ind_int_v1_md_5hop_all_bits", "kind": "frame", "hex": frame_v1.hex(),
              "expect": exp_v1, "note": "INT v1.0 INT-MD over UDP (DSCP detection), 5 hops, "
              "every v1.0 instruction bit (4-byte timestamps), M set"})
    frame_v1b, exp_v1b = int_v1_md_frame(v1_hops[:3], 0x8000 | 0x2000 | 0x1000 | 0x0100, b"x")
    raw, exp = tr_v1_report(0x00ABCDEF, 77, 0x01020304, frame_v1b, exp_v1b, hw_id=5)
    v.append({"name": "ind_report_v1_int_v1", "kind": "report", "hex": raw.hex(),
              "expect": exp, "note": "TR v1.0 (NProto 0) carrying an INT v1.0 INT-MD frame of 3 "
              "hops: node id, hop latency, queue, egress utilisation"})
    detect = {"udp_port": INT_UDP_PORT, "dscp": [INT_V1_DSCP, 0x3F],
              "probe_marker": "123456789abcdef0"}
    return {"generator": GENERATOR, "detect": detect, "vectors": v}


GENERATOR = "spec/tools/independent_vectors.py (struct.pack from the specifications)"


def render(doc):
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def outputs():
    return {"prototype.json": render(prototype_file()), "native.json": render(native_file()),
            "int.json": render(int_file())}


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    out = pathlib.Path(args[0]) if args else (
        pathlib.Path(__file__).resolve().parents[1] / "vectors" / "independent")
    bad = 0
    for name, text in outputs().items():
        path = out / name
        if check:
            if not path.exists() or path.read_text() != text:
                print(f"{path}: differs from the generator's output", file=sys.stderr)
                bad += 1
        else:
            out.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
