"""A UDP reporter for both DTA wire protocols, built on the native encoders.

``Reporter`` sends reports to a translator (UDP port 40040 by default):

* ``protocol="native"`` (default) batches reports into native datagrams: reports accumulate
  in a ``NativeDatagram`` until the next one does not fit (``max_datagram`` bytes or 255
  reports), or until ``flush()``; each datagram carries the reporter id and the next 32-bit
  sequence number (docs/protocol.md, "Native protocol").
* ``protocol="prototype"`` sends every report at once in its own datagram, with the
  configured ``base_header`` ("short" or "long"; the long header carries an 8-bit seqnum,
  incremented per datagram).

When ``retransmittable=True`` the reporter keeps the last ``window`` datagrams it sent and
``handle_nack(payload)`` resends those from the sequence number a NACK names (001 §5.2: the
translator "generate[s] a DTA NACK which is bounced back to the reporter").

``send_reports(reports, host, port)`` is the one-call helper: it sends a list of report dicts
(the schema of ``spec/vectors`` and of ``dta.decode``) and returns the datagrams it sent.
"""

import collections
import socket

from ._native import (
    DEFAULT_REDUNDANCY,
    DTA_PORT,
    MAX_REDUNDANCY,
    DatagramFull,
    NativeDatagram,
    decode_native_nack,
    decode_prototype_nack,
    encode_prototype,
)

_SEQ_MASK = 0xFFFFFFFF


def _check_redundancy(redundancy):
    """Key-Write / Key-Increment copies: 1..=MAX_REDUNDANCY (the wire carries no more)."""
    if not isinstance(redundancy, int) or not 1 <= redundancy <= MAX_REDUNDANCY:
        raise ValueError(f"redundancy must be 1..={MAX_REDUNDANCY}, not {redundancy!r}")


class Reporter:
    """Sends DTA reports over UDP. Use as a context manager to flush and close."""

    def __init__(self, host="127.0.0.1", port=DTA_PORT, *, protocol="native", base_header="short",
                 reporter_id=0, priority="low", retransmittable=False, max_datagram=1472,
                 seq=0, window=1024):
        if protocol not in ("native", "prototype"):
            raise ValueError(f"protocol must be 'native' or 'prototype', not {protocol!r}")
        if base_header not in ("short", "long"):
            raise ValueError(f"base_header must be 'short' or 'long', not {base_header!r}")
        if protocol == "prototype" and retransmittable and base_header != "long":
            raise ValueError("prototype retransmission needs base_header='long' (the short "
                             "header has no seqnum)")
        if window < 1:
            raise ValueError("window must be at least 1")
        self.protocol = protocol
        self.base_header = base_header
        self.retransmittable = bool(retransmittable)
        self.reporter_id = reporter_id
        self.window = window
        self.sent_datagrams = 0
        self.sent_bytes = 0
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_DGRAM)
        family, _, _, _, self._addr = infos[0]
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._sent = collections.OrderedDict()  # seq -> datagram, oldest first
        if protocol == "native":
            self._dgram = NativeDatagram(priority, self.retransmittable, reporter_id,
                                         seq & _SEQ_MASK, max_datagram)
            self._seq = seq & _SEQ_MASK
        else:
            self._dgram = None
            self._seq = seq & 0xFF

    # -- sending ---------------------------------------------------------------------------

    @property
    def next_seq(self):
        """Sequence number of the next datagram (native: 32 bits; prototype long: 8 bits)."""
        return self._seq

    @property
    def pending(self):
        """Reports batched and not yet sent (native protocol; always 0 for the prototype)."""
        return self._dgram.count if self._dgram is not None else 0

    def _send(self, seq, payload):
        self._sock.sendto(payload, self._addr)
        self.sent_datagrams += 1
        self.sent_bytes += len(payload)
        if self.retransmittable:
            self._sent[seq] = payload
            self._sent.move_to_end(seq)
            while len(self._sent) > self.window:
                self._sent.popitem(last=False)

    def flush(self):
        """Send the batched native datagram, if any. Returns the bytes sent (0 if none)."""
        if self._dgram is None or self._dgram.count == 0:
            return 0
        payload = self._dgram.to_bytes()
        self._send(self._seq, payload)
        self._seq = (self._seq + 1) & _SEQ_MASK
        self._dgram.clear(self._seq)
        return len(payload)

    def _native(self, method, *args, **kwargs):
        try:
            return getattr(self._dgram, method)(*args, **kwargs)
        except DatagramFull:
            if self._dgram.count == 0:
                raise
            self.flush()
            return getattr(self._dgram, method)(*args, **kwargs)

    def _prototype(self, opcode, **fields):
        long = self.base_header == "long"
        payload = encode_prototype(
            opcode, base_header=self.base_header,
            seqnum=self._seq if long else None,
            retransmittable=self.retransmittable if long else False, **fields)
        self._send(self._seq, payload)
        if long:
            self._seq = (self._seq + 1) & 0xFF
        return len(payload)

    # -- primitives (001 §4; Sketch-Merge: 000 §3.1) ----------------------------------------

    def key_write(self, key, data, redundancy=DEFAULT_REDUNDANCY, immediate=False):
        """Key-Write ``data`` under ``key`` in ``redundancy`` slots (default: the stores'
        default, ``DEFAULT_REDUNDANCY``). Prototype: key is a u32, data 4/12/28 bytes. Invalid
        arguments raise ``ValueError`` (``WireError`` for what the wire cannot carry)."""
        _check_redundancy(redundancy)
        if self._dgram is None:
            return self._prototype("key_write", key=key, data=data, redundancy=redundancy,
                                   immediate=immediate)
        return self._native("key_write", key, data, redundancy=redundancy, immediate=immediate)

    def key_increment(self, key, counter, redundancy=DEFAULT_REDUNDANCY, immediate=False):
        """Key-Increment ``key``'s ``redundancy`` counters (default ``DEFAULT_REDUNDANCY``) by
        ``counter``."""
        _check_redundancy(redundancy)
        if self._dgram is None:
            return self._prototype("key_increment", key=key, counter=counter,
                                   redundancy=redundancy, immediate=immediate)
        return self._native("key_increment", key, counter, redundancy=redundancy,
                            immediate=immediate)

    def append(self, list_id, data, immediate=False):
        """Append ``data`` to list ``list_id``. Prototype: data is 4 bytes."""
        if self._dgram is None:
            return self._prototype("append", list_id=list_id, data=data, immediate=immediate)
        return self._native("append", list_id, data, immediate=immediate)

    def postcard(self, key, hop, value, path_len=0, immediate=False):
        """One hop's postcard: the u32 ``value`` of hop ``hop`` of flow ``key``."""
        if self._dgram is None:
            return self._prototype("postcarding", key=key, hop=hop, data=value,
                                   immediate=immediate)
        return self._native("postcard", key, hop, value, path_len=path_len, immediate=immediate)

    def sketch_merge(self, sketch_id, column, epoch, data, immediate=False):
        """One Sketch-Merge column (native protocol only)."""
        if self._dgram is None:
            raise ValueError("sketch_merge is a native-protocol primitive")
        return self._native("sketch_merge", sketch_id, column, epoch, data, immediate=immediate)

    def add(self, report):
        """Send a report given as a dict (``opcode`` and the fields of spec/vectors)."""
        r = dict(report)
        op = r.pop("opcode")
        if self._dgram is None:
            for k in ("key", "data"):
                if isinstance(r.get(k), str):
                    r[k] = bytes.fromhex(r[k])
            r.pop("path_len", None)
            if op == "postcarding" and "value" in r:
                r["data"] = r.pop("value")
            return self._prototype(op, **r)
        r["opcode"] = op
        return self._native("add", r)

    # -- NACKs -------------------------------------------------------------------------------

    def handle_nack(self, payload):
        """Resend the kept datagrams from the sequence number a NACK names. Returns how many
        were resent (0 for a NACK addressed to another reporter, or with the N bit clear)."""
        if self._dgram is not None:
            nack = decode_native_nack(payload)
            if nack["reporter_id"] != self.reporter_id:
                return 0
            start, mask = nack["seq"], _SEQ_MASK
        else:
            nack = decode_prototype_nack(payload)
            if not nack["nack"]:
                return 0
            start, mask = nack["seqnum"], 0xFF
        # Datagrams sent at or after `start` (wrapping), oldest first.
        distance_to_next = (self._seq - start) & mask
        resend = [p for s, p in self._sent.items() if ((s - start) & mask) < distance_to_next]
        for p in resend:
            self._sock.sendto(p, self._addr)
            self.sent_datagrams += 1
            self.sent_bytes += len(p)
        return len(resend)

    # -- lifetime ----------------------------------------------------------------------------

    def close(self):
        """Flush and close the socket."""
        if self._sock is not None:
            try:
                self.flush()
            finally:
                self._sock.close()
                self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def send_reports(reports, host="127.0.0.1", port=DTA_PORT, **options):
    """Send report dicts (``opcode`` and the fields of spec/vectors) with a fresh ``Reporter``
    (``options`` are its keyword arguments); returns the number of datagrams sent."""
    with Reporter(host, port, **options) as r:
        for report in reports:
            r.add(report)
    return r.sent_datagrams
