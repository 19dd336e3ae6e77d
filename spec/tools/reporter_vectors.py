#!/usr/bin/env python3
"""Reporter behaviour vectors: scripted scenarios every reporter (Rust, C, Python) must play
the same way. Written by hand from docs/protocol.md ("NACK (kind 1)", "Congestion notice
(kind 2)", "Sequence numbers, loss and retransmission") and the reporter rules of
crates/engines/dta-reporter/src/flow.rs; the translator's datagrams are packed field by field with
``struct.pack``, without importing any of this repository's code, and every expected outcome
is a literal worked out by hand (the comments show the arithmetic).

Output: ``spec/vectors/reporter.json`` (schema in ``spec/README.md``).
``python3 spec/tools/reporter_vectors.py [--check] [OUT]``; ``--check`` compares with the
committed file instead of writing (exit 1 on a difference).
"""

import json
import pathlib
import struct
import sys

RATE_UNLIMITED = 0xFFFFFFFF  # docs/protocol.md "Congestion notice": u32::MAX = no limit


def native_header(kind, count, reporter_id, seq):
    """docs/protocol.md native header: version 1 (high nibble) | kind (low nibble), Pri/R 0,
    count, reserved, reporter id u32, seq u32."""
    return struct.pack("!BBBBII", (1 << 4) | kind, 0, count, 0, reporter_id, seq)


def nack(reporter_id, seq, missing=0):
    """Kind 1; count 2 with the 8-byte bitmap (bit i = seq + 1 + i missing), else count 0."""
    if missing:
        return (native_header(1, 2, reporter_id, seq) + struct.pack("!Q", missing)).hex()
    return native_header(1, 0, reporter_id, seq).hex()


def notice(reporter_id, hold_ms, low_rate, medium_rate):
    """Kind 2, count 1, seq 0; body hold_ms u32, low_rate u32, medium_rate u32."""
    return (native_header(2, 1, reporter_id, 0)
            + struct.pack("!III", hold_ms, low_rate, medium_rate)).hex()


def proto_nack(seqnum, n=True):
    """Prototype NACK: seqnum u8 | N:1 reserved:7."""
    return struct.pack("!BB", seqnum, 0x80 if n else 0).hex()


def stats(**kw):
    base = {"datagrams": 0, "retransmissions": 0, "nacks": 0, "nacks_held_off": 0,
            "unrecoverable_nacks": 0, "notices": 0, "nack_slowdowns": 0, "suppressed": 0,
            "bad_nacks": 0}
    base.update(kw)
    return base


SCENARIOS = [
    {
        "name": "selective_resend_bitmap",
        "reporter": {"protocol": "native", "reporter_id": 7, "priority": "high",
                     "retransmittable": True, "retransmit_buffer": 16},
        "steps": [
            {"t_ms": 0, "send": 10, "sent": list(range(10))},
            # seq 3 missing, bitmap 0b110: bit 1 -> 3+1+1 = 5, bit 2 -> 6.
            {"t_ms": 1, "receive": nack(7, 3, 0b110), "resent": [3, 5, 6]},
            # The same NACK 4 ms later: within the 10 ms hold-off, ignored.
            {"t_ms": 5, "receive": nack(7, 3, 0b110), "resent": []},
            # 19 ms after the honoured one: resent again.
            {"t_ms": 20, "receive": nack(7, 3, 0b110), "resent": [3, 5, 6]},
            # The next number (10) is not sent yet: nothing missing.
            {"t_ms": 21, "receive": nack(7, 10), "resent": []},
            # Another reporter's NACK, and 3 bytes that are no datagram: counted bad.
            {"t_ms": 22, "receive": nack(8, 3), "resent": []},
            {"t_ms": 23, "receive": "ff0001", "resent": []},
            # Only the named datagram, not everything after it (not go-back-N).
            {"t_ms": 40, "receive": nack(7, 8), "resent": [8]},
        ],
        # Slowdowns (high is never limited, but they are counted): the NACKs acted on at 1
        # (until 21) and 40; the one at 20 falls in the first (not extended), the one at 5 is
        # held off, the one at 21 names nothing sent.
        "stats": stats(datagrams=10, retransmissions=7, nacks=5, nacks_held_off=1,
                       nack_slowdowns=2, bad_nacks=2),
    },
    {
        "name": "unkept_numbers_counted",
        "reporter": {"protocol": "native", "reporter_id": 1, "priority": "high",
                     "retransmittable": True, "retransmit_buffer": 4},
        "steps": [
            {"t_ms": 0, "send": 10, "sent": list(range(10))},
            # Kept: 6..9. Named: 4, then bits 0,1,2 -> 5,6,7, bit 5 -> 10 (not sent yet).
            # 4 and 5 are gone (2 unrecoverable), 6 and 7 resent, 10 ignored.
            {"t_ms": 1, "receive": nack(1, 4, 0b100111), "resent": [6, 7]},
            # The oldest kept and the newest.
            {"t_ms": 2, "receive": nack(1, 6, 1 << 2), "resent": [6, 9]},
        ],
        # Acted on at 1 (slowdown until 21) and at 2 (within it: not extended).
        "stats": stats(datagrams=10, retransmissions=4, nacks=2, unrecoverable_nacks=2,
                       nack_slowdowns=1),
    },
    {
        "name": "prototype_go_back_n_across_wrap",
        "reporter": {"protocol": "prototype", "reporter_id": 0, "priority": "medium",
                     "retransmittable": True, "retransmit_buffer": 128},
        "steps": [
            # 260 datagrams: seqnums 0..255, then 0..3 (8 bits).
            {"t_ms": 0, "send": 260, "sent": list(range(256)) + [0, 1, 2, 3]},
            # Expects 254: resend 254, 255, 0, 1, 2, 3 (go-back-N from seqnum).
            {"t_ms": 1, "receive": proto_nack(254), "resent": [254, 255, 0, 1, 2, 3]},
            # N bit clear: not a NACK.
            {"t_ms": 30, "receive": proto_nack(254, n=False), "resent": []},
        ],
        "stats": stats(datagrams=260, retransmissions=6, nacks=1, nack_slowdowns=1),
    },
    {
        "name": "notice_pauses_low_then_lifted",
        "reporter": {"protocol": "native", "reporter_id": 7, "priority": "low",
                     "retransmittable": False, "retransmit_buffer": 0},
        "steps": [
            {"t_ms": 0, "send": 3, "sent": [0, 1, 2]},
            # Pause low for 100 ms, medium unlimited.
            {"t_ms": 10, "receive": notice(7, 100, 0, RATE_UNLIMITED), "resent": []},
            # Suppressed datagrams take no sequence number.
            {"t_ms": 20, "send": 3, "sent": []},
            # A notice for another reporter changes nothing (counted bad).
            {"t_ms": 30, "receive": notice(8, 0, 0, 0), "resent": []},
            {"t_ms": 40, "send": 1, "sent": []},
            # hold_ms 0 lifts the limits.
            {"t_ms": 50, "receive": notice(7, 0, 0, 0), "resent": []},
            {"t_ms": 60, "send": 2, "sent": [3, 4]},
        ],
        "stats": stats(datagrams=5, notices=2, suppressed=4, bad_nacks=1),
    },
    {
        "name": "notice_rate_bucket_then_expiry",
        "reporter": {"protocol": "native", "reporter_id": 3, "priority": "medium",
                     "retransmittable": False, "retransmit_buffer": 0},
        "steps": [
            # Medium 500/s for 1000 ms: bucket = max(1, 500 * 10 ms / 1000) = 5 datagrams,
            # refilled at 0.5 datagram per ms.
            {"t_ms": 0, "receive": notice(3, 1000, 0, 500), "resent": []},
            {"t_ms": 0, "send": 8, "sent": [0, 1, 2, 3, 4]},
            # 1 ms: 0.5 datagram: nothing.
            {"t_ms": 1, "send": 1, "sent": []},
            # 2 ms: 1.0: one.
            {"t_ms": 2, "send": 2, "sent": [5]},
            # 12 ms: 10 ms refill = 5 (the bucket's size).
            {"t_ms": 12, "send": 8, "sent": [6, 7, 8, 9, 10]},
            # 1000 ms after receipt the hold has ended.
            {"t_ms": 1000, "send": 3, "sent": [11, 12, 13]},
        ],
        "stats": stats(datagrams=14, notices=1, suppressed=8),
    },
    {
        "name": "notice_never_limits_high_and_newer_replaces",
        "reporter": {"protocol": "native", "reporter_id": 2, "priority": "high",
                     "retransmittable": True, "retransmit_buffer": 8},
        "steps": [
            {"t_ms": 0, "receive": notice(2, 500, 0, 0), "resent": []},
            {"t_ms": 1, "send": 3, "sent": [0, 1, 2]},
            {"t_ms": 2, "receive": notice(2, 500, 1, 0), "resent": []},
            # Retransmissions answer the translator: never limited.
            {"t_ms": 3, "receive": nack(2, 0, 0b11), "resent": [0, 1, 2]},
        ],
        "stats": stats(datagrams=3, retransmissions=3, nacks=1, notices=2),
    },
    {
        "name": "notice_replaced_by_a_lower_pause",
        "reporter": {"protocol": "native", "reporter_id": 4, "priority": "low",
                     "retransmittable": False, "retransmit_buffer": 0},
        "steps": [
            {"t_ms": 0, "receive": notice(4, 1000, 0, 0), "resent": []},
            {"t_ms": 1, "send": 1, "sent": []},
            # Low 1/s replaces the pause: a fresh bucket of one datagram.
            {"t_ms": 2, "receive": notice(4, 1000, 1, 0), "resent": []},
            {"t_ms": 3, "send": 2, "sent": [0]},
            # 1001 ms: 998 ms since the last token was taken = 0.998 datagram: suppressed.
            {"t_ms": 1001, "send": 1, "sent": []},
            # 1002 ms: the hold (2 + 1000) has ended.
            {"t_ms": 1002, "send": 1, "sent": [1]},
        ],
        "stats": stats(datagrams=2, notices=2, suppressed=3),
    },
]

SCENARIOS += [
    {
        "name": "nack_slows_medium_to_half_its_recent_rate",
        "reporter": {"protocol": "native", "reporter_id": 5, "priority": "medium",
                     "retransmittable": True, "retransmit_buffer": 64},
        "steps": [
            # Rate windows of 10 ms: [0, 10) holds 10 datagrams, [10, 20) 10 more.
            {"t_ms": 0, "send": 10, "sent": list(range(10))},
            {"t_ms": 10, "send": 10, "sent": list(range(10, 20))},
            # Acted on at 15: recent = 10 (current window) + 10 (previous) = 20 datagrams,
            # 20 * 25 = 500/s for medium until 35: a bucket of max(1, 500 * 10 / 1000) = 5.
            {"t_ms": 15, "receive": nack(5, 5), "resent": [5]},
            {"t_ms": 15, "send": 8, "sent": [20, 21, 22, 23, 24]},
            # 16: 0.5 datagram refilled: nothing. 17: 1.0: one.
            {"t_ms": 16, "send": 1, "sent": []},
            {"t_ms": 17, "send": 2, "sent": [25]},
            # 35: the slowdown (15 + 20) is over.
            {"t_ms": 35, "send": 3, "sent": [26, 27, 28]},
        ],
        "stats": stats(datagrams=29, retransmissions=1, nacks=1, nack_slowdowns=1,
                       suppressed=5),
    },
    {
        "name": "nack_pauses_low_and_a_repeat_is_not_acted_on",
        "reporter": {"protocol": "native", "reporter_id": 6, "priority": "low",
                     "retransmittable": True, "retransmit_buffer": 8},
        "steps": [
            {"t_ms": 0, "send": 3, "sent": [0, 1, 2]},
            # Acted on at 1: low paused until 21.
            {"t_ms": 1, "receive": nack(6, 1), "resent": [1]},
            {"t_ms": 1, "send": 2, "sent": []},
            # The same NACK within the hold-off: ignored, the pause not extended.
            {"t_ms": 5, "receive": nack(6, 1), "resent": []},
            {"t_ms": 20, "send": 1, "sent": []},
            {"t_ms": 21, "send": 1, "sent": [3]},
        ],
        "stats": stats(datagrams=4, retransmissions=1, nacks=2, nacks_held_off=1,
                       nack_slowdowns=1, suppressed=3),
    },
]

DOC = {
    "description": "Reporter behaviour: scripted sends and translator datagrams (NACKs, "
                   "congestion notices) at given times, and what the reporter must send back. "
                   "Schema: spec/README.md 'vectors/reporter.json'.",
    "generator": "spec/tools/reporter_vectors.py (by hand from docs/protocol.md)",
    "defaults": {"priority": "medium", "retransmit_buffer": 256, "tail_probes": 2,
                 "tail_probe_interval_ms": 10, "nack_holdoff_ms": 10},
    "scenarios": SCENARIOS,
}


def main(argv):
    check = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    out = pathlib.Path(rest[0]) if rest else (
        pathlib.Path(__file__).resolve().parents[1] / "vectors" / "reporter.json")
    text = json.dumps(DOC, indent=1) + "\n"
    if check:
        if out.read_text() != text:
            print(f"{out} differs from what {__file__} writes", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
