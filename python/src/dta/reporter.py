"""A UDP reporter for both DTA wire protocols, built on the native encoders.

``Reporter`` sends reports to a translator (UDP port 40040 by default):

* ``protocol="native"`` (default) batches reports into native datagrams: reports accumulate
  in a ``NativeDatagram`` until the next one does not fit (``max_datagram`` bytes or 255
  reports), or until ``flush()``; each datagram carries the reporter id and the next 32-bit
  sequence number (docs/protocol.md, "Native protocol").
* ``protocol="prototype"`` sends every report at once in its own datagram, with the
  configured ``base_header`` ("short" or "long"; the long header carries an 8-bit seqnum,
  incremented per datagram).

Loss and congestion, the same behaviour as the Rust reporter (``dta_reporter::flow``) and the
C header, played from the same vectors (``spec/vectors/reporter.json``):

* A ``retransmittable`` reporter keeps its last ``retransmit_buffer`` datagrams. A native
  NACK names ``seq`` and a bitmap of further missing numbers; each one still kept is resent,
  ``seq`` first (selective repeat); a number no longer kept is counted
  (``unrecoverable_nacks``), one not sent yet ignored. A prototype NACK resends from its
  seqnum to the newest (go-back-N). A repeat of the NACK for the same number within
  ``nack_holdoff_ms`` is ignored. ([DTA-draft §3.2]: "A detected loss will trigger
  NACK-generation at the translator, which informs the reporter that the data should be
  re-sent".)
* A congestion notice for this reporter limits low and medium priority for its ``hold_ms``:
  one token bucket each, holding at most 10 ms of its rate and at least one datagram,
  starting full, refilled continuously, in thousandths of a datagram; rate 0 pauses,
  ``RATE_UNLIMITED`` does not limit, high priority is never limited, a newer notice replaces
  the older, ``hold_ms`` 0 lifts the limits. A datagram over the limit is not sent, takes no
  sequence number and is counted (``suppressed``); sending never blocks.
* A NACK acted on (not a held-off repeat, not one naming only numbers not sent yet) slows the
  reporter down the same way for ``NACK_SLOWDOWN_MS`` unless limits are in force: low paused,
  medium at half its recent rate (the datagrams admitted in the current and the previous
  ``RATE_WINDOW_MS`` window, times 25, per second, at least 1); counted in
  ``nack_slowdowns``.
* The tail probe: ``close()`` / ``linger()`` / ``tail_probe()`` of a retransmittable reporter
  resend the newest datagram ``tail_probes`` times, ``tail_probe_interval_ms`` apart, handling
  NACKs meanwhile (a lost last datagram leaves no gap the translator could NACK).

NACKs and notices arrive on a UDP socket bound on ``nack_port`` (default ``NACK_PORT``, where
the translator sends them; 0: an ephemeral port; None: none, and the caller passes what it
receives to ``handle_control``: no flow control). A port that cannot be bound is an
``OSError`` naming the process that holds it, never a reporter that silently obeys nothing
(a prototype reporter that is not retransmittable has nothing to hear and opens none). A
message that fails its authenticator is counted and said once (``RuntimeWarning``). The socket is polled without blocking every
``NACK_POLL_EVERY`` datagrams, by ``poll_nacks()``, and while lingering.

``send_reports(reports, host, port)`` is the one-call helper: it sends a list of report dicts
(the schema of ``spec/vectors`` and of ``dta.decode``) and returns the datagrams it sent.
"""

import collections
import errno
import secrets
import select
import socket
import time
import warnings

from ._native import (
    DEFAULT_NACK_HOLDOFF_MS,
    DEFAULT_PRIORITY,
    DEFAULT_REDUNDANCY,
    DEFAULT_RETRANSMIT_BUFFER,
    DEFAULT_TAIL_PROBE_INTERVAL_MS,
    DEFAULT_TAIL_PROBES,
    DTA_PORT,
    HELLO_INTERVAL_MS,
    HELLO_RETRY_MS,
    MAX_REDUNDANCY,
    NACK_PORT,
    RATE_UNLIMITED,
    DatagramFull,
    NativeDatagram,
    WireError,
    decode_native_nack,
    decode_notice,
    decode_prototype_nack,
    encode_hello,
    encode_prototype,
    open_control,
    seal_control,
    strip_control,
    udp_port_holder,
)

_SEQ_MASK = 0xFFFFFFFF

# The defaults of every reporter (DEFAULT_*, imported above) are the Rust crate's
# ``dta_reporter::flow`` constants, exported by the core (tests check them against
# spec/vectors/reporter.json "defaults"). RATE_UNLIMITED: docs/protocol.md "Congestion notice
# (kind 2)", a rate of 2**32 - 1 means no limit.
# The NACK socket is polled (non-blocking) once every this many datagrams.
NACK_POLL_EVERY = 64
# The prototype's 8-bit seqnum: at most half its space kept, so a NACK is never ambiguous.
_PROTOTYPE_MAX_KEPT = 128


class _Bucket:
    """A token bucket in thousandths of a datagram (see the module doc)."""

    def __init__(self, rate, now_ms):
        self.rate = rate
        self.capacity = max(1000, rate * 10)
        self.tokens = self.capacity
        self.last_ms = now_ms

    def take(self, now_ms):
        if self.rate == 0:
            return False
        if self.rate == RATE_UNLIMITED:
            return True
        elapsed = min(max(now_ms - self.last_ms, 0), 1000)
        self.tokens = min(self.tokens + self.rate * elapsed, self.capacity)
        self.last_ms = max(self.last_ms, now_ms)
        if self.tokens >= 1000:
            self.tokens -= 1000
            return True
        return False


# docs/protocol.md "Slowing down when NACKed" (dta_reporter::flow).
NACK_SLOWDOWN_MS = 20
RATE_WINDOW_MS = 10


class _Governor:
    """The limits of the last congestion notice (or NACK slowdown), and the recent rate."""

    def __init__(self):
        self.until_ms = None
        self.buckets = {}
        self.window_ms = 0
        self.in_window = 0
        self.last_window = 0

    def _roll(self, now_ms):
        if now_ms >= self.window_ms + RATE_WINDOW_MS:
            self.last_window = (self.in_window if now_ms < self.window_ms + 2 * RATE_WINDOW_MS
                                else 0)
            self.in_window = 0
            self.window_ms = now_ms

    def limited(self, now_ms):
        return self.until_ms is not None and now_ms < self.until_ms

    def on_nack(self, now_ms):
        """An acted-on NACK: low paused, medium at half its recent rate, for
        NACK_SLOWDOWN_MS, unless limits are in force. Returns whether it slowed down."""
        if self.limited(now_ms):
            return False
        self._roll(now_ms)
        half = min(max((self.in_window + self.last_window) * 25, 1), RATE_UNLIMITED - 1)
        self.until_ms = now_ms + NACK_SLOWDOWN_MS
        self.buckets = {"low": _Bucket(0, now_ms), "medium": _Bucket(half, now_ms)}
        return True

    def on_notice(self, notice, now_ms):
        if notice["hold_ms"] == 0:
            self.until_ms = None
            return
        self.until_ms = now_ms + notice["hold_ms"]
        self.buckets = {"low": _Bucket(notice["low_rate"], now_ms),
                        "medium": _Bucket(notice["medium_rate"], now_ms)}

    def admit(self, priority, now_ms):
        self._roll(now_ms)
        if self.until_ms is None or now_ms >= self.until_ms:
            self.until_ms = None
            ok = True
        elif priority == "high":
            ok = True
        else:
            ok = self.buckets[priority].take(now_ms)
        self.in_window += int(ok)
        return ok


def _canonical(addr):
    """An address and port, IPv4-mapped IPv6 as IPv4 (a dual-stack socket's view)."""
    host, port = addr[0], addr[1]
    if host.startswith("::ffff:") and "." in host:
        host = host[len("::ffff:"):]
    return host, port


class _ReplayWindow:
    """The counters of authenticated control messages taken: the highest, and which of the 64
    below it were seen (the translator's threads send out of order); older ones are replays."""

    def __init__(self):
        self.top = None
        self.seen = 0

    def take(self, c):
        if self.top is None:
            self.top, self.seen = c, 1
            return True
        if c > self.top:
            shift = c - self.top
            self.seen = ((self.seen << shift) if shift < 64 else 0) & ((1 << 64) - 1) | 1
            self.top = c
            return True
        back = self.top - c
        if back >= 64 or self.seen >> back & 1:
            return False
        self.seen |= 1 << back
        return True


def _monotonic_ms():
    return int(time.monotonic() * 1000)


def _check_redundancy(redundancy):
    """Key-Write / Key-Increment copies: 1..=MAX_REDUNDANCY (the wire carries no more)."""
    if not isinstance(redundancy, int) or not 1 <= redundancy <= MAX_REDUNDANCY:
        raise ValueError(f"redundancy must be 1..={MAX_REDUNDANCY}, not {redundancy!r}")


class Reporter:
    """Sends DTA reports over UDP. Use as a context manager to flush, tail-probe and close.

    ``clock`` returns milliseconds on a monotonic clock (default ``time.monotonic``); the
    behaviour vectors pass a scripted one. ``stats`` holds the counters, named as the Rust
    reporter's ``ReporterStats``."""

    def __init__(self, host="127.0.0.1", port=DTA_PORT, *, protocol="native", base_header="short",
                 reporter_id=0, priority=DEFAULT_PRIORITY, retransmittable=False,
                 max_datagram=1472, seq=0, retransmit_buffer=DEFAULT_RETRANSMIT_BUFFER,
                 nack_port=NACK_PORT, nack_holdoff_ms=DEFAULT_NACK_HOLDOFF_MS,
                 tail_probes=DEFAULT_TAIL_PROBES,
                 tail_probe_interval_ms=DEFAULT_TAIL_PROBE_INTERVAL_MS, clock=_monotonic_ms,
                 control_key=None, control_from=()):
        if protocol not in ("native", "prototype"):
            raise ValueError(f"protocol must be 'native' or 'prototype', not {protocol!r}")
        if base_header not in ("short", "long"):
            raise ValueError(f"base_header must be 'short' or 'long', not {base_header!r}")
        if priority not in ("low", "medium", "high"):
            raise ValueError(f"priority must be 'low', 'medium' or 'high', not {priority!r}")
        if protocol == "prototype" and retransmittable and base_header != "long":
            raise ValueError("prototype retransmission needs base_header='long' (the short "
                             "header has no seqnum)")
        if retransmit_buffer < 1:
            raise ValueError("retransmit_buffer must be at least 1")
        if isinstance(control_key, str):
            control_key = bytes.fromhex(control_key.strip())
        if control_key is not None and len(control_key) != 16:
            raise ValueError("control_key is 16 bytes (32 hexadecimal digits)")
        # The key shared with the translator (docs/security.md): NACKs and notices are then
        # obeyed only when authenticated, each counter once.
        self.control_key = control_key
        self._replay = _ReplayWindow()
        # Addresses NACKs and notices are taken from besides the translator's (a NACK socket
        # that serves several translators: dta.ClusterReporter).
        self._control_from = {_canonical(a) for a in control_from}
        self.protocol = protocol
        self.base_header = base_header
        self.retransmittable = bool(retransmittable)
        self.reporter_id = reporter_id
        self.priority = priority
        self.retransmit_buffer = (min(retransmit_buffer, _PROTOTYPE_MAX_KEPT)
                                  if protocol == "prototype" else retransmit_buffer)
        self.nack_holdoff_ms = nack_holdoff_ms
        self.tail_probes = tail_probes
        self.tail_probe_interval_ms = tail_probe_interval_ms
        self._clock = clock
        # Every datagram put on the wire, resends and probes included.
        self.sent_datagrams = 0
        self.sent_bytes = 0
        self.stats = dict.fromkeys(
            ("datagrams", "reports", "bytes", "retransmissions", "nacks", "nacks_held_off",
             "unrecoverable_nacks", "tail_probes", "notices", "nack_slowdowns", "suppressed",
             "suppressed_reports", "bad_nacks", "control_wrong_source",
             "control_unauthenticated", "control_bad_authenticator", "control_replayed",
             "control_unbound", "control_stale_life", "hellos"), 0)
        self._governor = _Governor()
        self._last_nack = None  # (seq, ms) of the last NACK honoured
        self._sketch_nack = None
        self._since_poll = 0
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_DGRAM)
        family, _, _, _, self._addr = infos[0]
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._nack_sock = None
        self._said_bad_key = False
        # Flow control is on or refused (docs/security.md): a control port that cannot be
        # bound is an error naming who holds it; nack_port=None runs without flow control. A
        # prototype reporter that is not retransmittable has nothing to hear (no notices).
        if nack_port is not None and (protocol == "native" or self.retransmittable):
            ns = socket.socket(family, socket.SOCK_DGRAM)
            try:
                ns.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", nack_port))
                ns.setblocking(False)
                self._nack_sock = ns
            except OSError as e:
                ns.close()
                self._sock.close()
                who = (udp_port_holder(nack_port) if e.errno == errno.EADDRINUSE
                       else f"an error ({e.strerror})")
                raise OSError(
                    e.errno,
                    f"the control port {nack_port} (NACKs and congestion notices from the "
                    f"translator) is held by {who}: this reporter could not obey its "
                    "translator's flow control. Stop the other reporter, give this one another "
                    "nack_port (the translator's nack_port must match), or pass nack_port=None "
                    "to run without flow control") from e
        self._sent = collections.OrderedDict()  # seq -> datagram, oldest first
        if protocol == "native":
            self._dgram = NativeDatagram(priority, self.retransmittable, reporter_id,
                                         seq & _SEQ_MASK, max_datagram)
            self._seq = seq & _SEQ_MASK
            self._mask = _SEQ_MASK
        else:
            self._dgram = None
            self._seq = seq & 0xFF
            self._mask = 0xFF
        # A keyed native reporter that hears its translator draws a life and announces it in
        # a sealed hello (at start, once a second, again on a message bound to no life): it
        # obeys only messages bound to this life, so nothing recorded before it started
        # (docs/security.md "Replayed control messages").
        self.life = None
        self._hello_counter = 0
        self._last_hello = None
        if protocol == "native" and control_key is not None and self._nack_sock is not None:
            self.life = secrets.randbits(64)
            self._say_hello()

    # -- sending ---------------------------------------------------------------------------

    @property
    def next_seq(self):
        """Sequence number of the next datagram (native: 32 bits; prototype long: 8 bits)."""
        return self._seq

    @property
    def pending(self):
        """Reports batched and not yet sent (native protocol; always 0 for the prototype)."""
        return self._dgram.count if self._dgram is not None else 0

    @property
    def nack_addr(self):
        """The (host, port) NACKs are received on, or None without a NACK socket."""
        return self._nack_sock.getsockname() if self._nack_sock is not None else None

    def _say_hello(self):
        self._hello_counter = max(time.time_ns(), self._hello_counter + 1)
        hello = seal_control(encode_hello(self.reporter_id, self.life), self.control_key,
                             self._hello_counter)
        self._last_hello = time.monotonic()
        try:
            self._sock.sendto(hello, self._addr)
        except ConnectionRefusedError:
            return  # nothing listens yet: the next hello (within a second) tells it
        self.stats["hellos"] += 1

    def _hello_due(self, ms):
        if self.life is not None and (self._last_hello is None
                                      or time.monotonic() - self._last_hello >= ms / 1000):
            self._say_hello()

    def _wire(self, payload):
        self._sock.sendto(payload, self._addr)
        self.sent_datagrams += 1
        self.sent_bytes += len(payload)

    def _send(self, payload, reports):
        """Send ``payload`` as datagram ``next_seq`` and advance it; or, over a congestion
        notice's limit, drop it (counted). Returns whether it was sent."""
        if not self._governor.admit(self.priority, self._clock()):
            self.stats["suppressed"] += 1
            self.stats["suppressed_reports"] += reports
            self._count_toward_poll()
            return False
        self._wire(payload)
        self.stats["datagrams"] += 1
        self.stats["reports"] += reports
        self.stats["bytes"] += len(payload)
        if self.retransmittable:
            self._sent[self._seq] = payload
            self._sent.move_to_end(self._seq)
            while len(self._sent) > self.retransmit_buffer:
                self._sent.popitem(last=False)
        self._seq = (self._seq + 1) & self._mask
        self._count_toward_poll()
        return True

    def _count_toward_poll(self):
        self._since_poll += 1
        if self._since_poll >= NACK_POLL_EVERY:
            self.poll_nacks()

    def flush(self):
        """Send the batched native datagram, if any. Returns the bytes sent (0 if none, or
        when a congestion notice suppressed it)."""
        if self._dgram is None or self._dgram.count == 0:
            return 0
        payload = self._dgram.to_bytes()
        sent = self._send(payload, self._dgram.count)
        self._dgram.clear(self._seq)
        return len(payload) if sent else 0

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
        self._send(payload, 1)
        if not long:
            self._seq = 0
        return len(payload)

    # -- primitives ([DTA §4]; Sketch-Merge: [DTA-draft §3.1]) -------------------------------

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

    # -- NACKs, notices, the tail probe -----------------------------------------------------

    def handle_control_from(self, payload, addr):
        """``handle_control`` of a datagram received from ``addr``: taken only from the
        translator the reporter sends to (others counted ``control_wrong_source``)."""
        a = _canonical(addr)
        if a != _canonical(self._addr) and a not in self._control_from:
            self.stats["control_wrong_source"] += 1
            return 0
        return self.handle_control(payload)

    def handle_control(self, payload):
        """Handle one datagram from the translator's NACK port: a NACK (resend what it names),
        a congestion notice (obey it), anything else or another reporter's (counted
        ``bad_nacks``). With a control key only an authenticated message whose counter was not
        seen, bound to this reporter's life, is taken (else counted by reason). Returns how many
        datagrams were resent."""
        if self._dgram is not None:
            if self.control_key is not None:
                try:
                    payload, counter = open_control(payload, self.control_key, self.life)
                except WireError as e:
                    reason = "bad_authenticator" if e.reason == "truncated" else e.reason
                    self.stats["control_" + reason] += 1
                    if reason == "unbound":
                        # The translator has not heard this life (yet): say it again.
                        self._hello_due(HELLO_RETRY_MS)
                    if reason == "bad_authenticator" and not self._said_bad_key:
                        # Said once: a key other than the translator's; then only counted.
                        self._said_bad_key = True
                        warnings.warn(
                            f"a control message from {self._addr} failed its authenticator: is "
                            "the control key the translator's? Such messages are not obeyed "
                            "(counted control_bad_authenticator)", RuntimeWarning, stacklevel=2)
                    return 0
                if not self._replay.take(counter):
                    self.stats["control_replayed"] += 1
                    return 0
            elif len(payload) > 1 and payload[1] & 0x10:
                # Signed by the translator, not checked here (no key).
                payload = strip_control(payload)
                if payload is None:
                    self.stats["bad_nacks"] += 1
                    return 0
        now = self._clock()
        if self._dgram is None:
            try:
                nack = decode_prototype_nack(payload)
            except WireError:
                self.stats["bad_nacks"] += 1
                return 0
            if not nack["nack"]:
                return 0
            self.stats["nacks"] += 1
            return self._go_back_n(nack["seqnum"], now)
        kind = payload[0] & 0x0F if payload else None
        try:
            msg = decode_notice(payload) if kind == 2 else decode_native_nack(payload)
        except WireError:
            msg = None
        if msg is None or msg["reporter_id"] != self.reporter_id:
            self.stats["bad_nacks"] += 1
            return 0
        if kind == 2:
            self.stats["notices"] += 1
            self._governor.on_notice(msg, now)
            return 0
        self.stats["nacks"] += 1
        if msg["sketch"] is not None:
            self._sketch_nack = msg["sketch"]
            return 0
        return self._selective(msg["seq"], msg["missing"], now)

    def take_sketch_nack(self):
        """The last Sketch-Merge NACK's ``{"sketch_id", "column", "epoch"}``, once."""
        s, self._sketch_nack = self._sketch_nack, None
        return s

    def _back(self, seq):
        """How far back ``seq`` is from the next number; 0: not sent yet (or ahead)."""
        back = (self._seq - seq) & self._mask
        return 0 if back > (self._mask + 1) // 2 else back

    def _held_off(self, seq, now):
        if self._last_nack is not None:
            s, at = self._last_nack
            if s == seq and 0 <= now - at < self.nack_holdoff_ms:
                self.stats["nacks_held_off"] += 1
                return True
        self._last_nack = (seq, now)
        return False

    def _slow_down(self, now):
        """An acted-on NACK: yield to the recovery (_Governor.on_nack)."""
        if self._governor.on_nack(now):
            self.stats["nack_slowdowns"] += 1

    def _resend(self, seq):
        self._wire(self._sent[seq])
        self.stats["retransmissions"] += 1

    def _selective(self, seq, missing, now):
        if not missing and self._back(seq) == 0:
            return 0  # the translator expects the datagram not sent yet: nothing missing
        if self._held_off(seq, now):
            return 0
        self._slow_down(now)
        resent = 0
        for s in [seq] + list(missing):
            s &= self._mask
            if self._back(s) == 0:
                continue
            if s in self._sent:
                self._resend(s)
                resent += 1
            else:
                self.stats["unrecoverable_nacks"] += 1
        return resent

    def _go_back_n(self, seqnum, now):
        back = self._back(seqnum)
        if back == 0:
            return 0
        if back > len(self._sent):
            self.stats["unrecoverable_nacks"] += 1
            return 0
        if self._held_off(seqnum, now):
            return 0
        self._slow_down(now)
        for k in range(back, 0, -1):
            self._resend((self._seq - k) & self._mask)
        return back

    def poll_nacks(self, timeout=0.0):
        """Handle what waits on the NACK socket, waiting up to ``timeout`` seconds for the
        first datagram. Returns how many datagrams were received."""
        self._since_poll = 0
        self._hello_due(HELLO_INTERVAL_MS)
        if self._nack_sock is None:
            return 0
        handled = 0
        while True:
            wait = timeout if handled == 0 else 0
            if wait > 0 and not select.select([self._nack_sock], [], [], wait)[0]:
                return handled
            try:
                payload, addr = self._nack_sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                return handled
            handled += 1
            self.handle_control_from(payload, addr)

    def _serve_nacks_for(self, seconds):
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self._nack_sock is None:
                time.sleep(left)
            else:
                self.poll_nacks(left)

    def tail_probe(self):
        """Flush, then resend the newest kept datagram ``tail_probes`` times, each after
        ``tail_probe_interval_ms`` of handling NACKs. A no-op for a reporter that is not
        retransmittable or has sent nothing. Returns the probes sent."""
        self.flush()
        if not self.retransmittable or not self._sent:
            return 0
        newest = next(reversed(self._sent.values()))
        for _ in range(self.tail_probes):
            self._serve_nacks_for(self.tail_probe_interval_ms / 1000)
            self._wire(newest)
            self.stats["tail_probes"] += 1
        return self.tail_probes

    def linger(self, quiet=0.05, max_wait=1.0):
        """Flush, tail-probe, then handle NACKs until ``quiet`` seconds pass with none (at
        most ``max_wait`` in all). Returns the NACK datagrams received after the probe."""
        self.tail_probe()
        end = time.monotonic() + max_wait
        total = 0
        while (left := end - time.monotonic()) > 0:
            n = self.poll_nacks(min(quiet, left))
            if n == 0:
                break
            total += n
        return total

    # -- lifetime ----------------------------------------------------------------------------

    def close(self):
        """Flush, tail-probe (retransmittable) and close the sockets."""
        if self._sock is not None:
            try:
                self.tail_probe()
            finally:
                self._sock.close()
                self._sock = None
                if self._nack_sock is not None:
                    self._nack_sock.close()
                    self._nack_sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def send_reports(reports, host="127.0.0.1", port=DTA_PORT, **options):
    """Send report dicts (``opcode`` and the fields of spec/vectors) with a fresh ``Reporter``
    (``options`` are its keyword arguments); returns the number of datagrams sent (first
    transmissions: not the resends or tail probes of a retransmittable reporter)."""
    with Reporter(host, port, **options) as r:
        for report in reports:
            r.add(report)
    return r.stats["datagrams"]
