"""Many collectors from Python (docs/scale-out.md): the cluster map comes from the Rust core
(``dta.ClusterMap``, the same rendezvous hash as the Rust and C code), so a report is sent to
the translator of the collector owning its key, and a query asks the owner's HTTP API.

* ``ClusterReporter(map, **reporter_options)``: one ``dta.Reporter`` per translator address
  of the map; ``key_write``, ``key_increment``, ``postcard`` route by key, ``append`` by the
  list's table, ``sketch_merge`` by this reporter's section. ``per_collector`` counts the
  reports sent to each collector. Only the first translator's reporter binds the NACK port
  (the translator answers every reporter on one port), so retransmission is refused with more
  than one translator address.
* ``ClusterClient(map, token=None)``: ``kw``, ``ki``, ``postcard``, ``list`` answered by the
  owner(s) of the key through their HTTP query API (``/query/...``), new owner then old one
  during a change (Key-Increment counts summed, list entries concatenated old first);
  ``batch(kind, store, keys)`` asks the owners in parallel. An owner that cannot be asked
  raises ``ClusterError`` naming it (``.collector``), saying "timed out" or "refused": never
  an empty answer. Each owner has one deadline per call (``timeout``): in a batch, a hung
  owner costs its own keys that deadline, and each of them is an error object
  (``{"key", "error", "collector"}``, as ``/cluster/batch`` answers) while the other owners'
  answers arrive. A peer answering under another collector's name (a wrong ``http`` in the
  map) is an error, never an answer labelled with the wrong collector.
"""

import concurrent.futures
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from ._native import ClusterMap
from .reporter import Reporter

__all__ = ["ClusterClient", "ClusterError", "ClusterMap", "ClusterReporter"]

DEFAULT_TIMEOUT = 5.0


class ClusterError(RuntimeError):
    """A cluster query could not be answered; the message names the collector (also
    ``.collector``, None when the error is not about one)."""

    def __init__(self, message, collector=None):
        super().__init__(message)
        self.collector = collector


class _Round:
    """The deadlines of one call: every collector answers by ``deadline``; one that timed
    out or refused the connection is not asked again in the call."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.down = {}
        self.lock = threading.Lock()

    def left(self):
        return self.deadline - time.monotonic()

    def mark(self, collector, err):
        with self.lock:
            self.down[collector] = err
        return err

    def err(self, collector):
        with self.lock:
            return self.down.get(collector)


# The response header naming the collector that answered (dta_collector::cluster).
COLLECTOR_HEADER = "dta-collector"


def _load(m):
    return m if isinstance(m, ClusterMap) else ClusterMap.load(os.fspath(m))


class ClusterReporter:
    """Sends each report to the translator of the collector owning its key."""

    def __init__(self, cluster_map, **options):
        self.map = _load(cluster_map)
        self.reporter_id = options.get("reporter_id", 0)
        addrs = []
        self._of = {}
        for c in self.map.collectors:
            a = c["translator"]
            if a not in addrs:
                addrs.append(a)
            self._of[c["name"]] = addrs.index(a)
        if options.get("retransmittable") and len(addrs) > 1:
            raise ValueError(f"retransmission needs one NACK port per translator; this map "
                             f"has {len(addrs)} translator addresses")
        self.reporters = []
        for i, (host, port) in enumerate(addrs):
            o = dict(options)
            if i > 0:
                o["nack_port"] = None
            else:
                # The one NACK socket hears every translator's notices.
                o["control_from"] = list(addrs)
            self.reporters.append(Reporter(host, port, **o))
        self.per_collector = {c["name"]: 0 for c in self.map.collectors}
        self._stores = {}

    def _store(self, kind, key_len=4, sketch_id=None):
        k = (kind, key_len, sketch_id)
        if k not in self._stores:
            self._stores[k] = self.map.store_for(kind, key_len, sketch_id)
        return self._stores[k]

    def _to(self, name):
        self.per_collector[name] += 1
        return self.reporters[self._of[name]]

    def key_write(self, key, data, **kw):
        o = self.map.owner(self._store("key_write", len(key)), bytes(key))
        return self._to(o).key_write(key, data, **kw)

    def key_increment(self, key, counter, **kw):
        o = self.map.owner(self._store("key_increment", len(key)), bytes(key))
        return self._to(o).key_increment(key, counter, **kw)

    def postcard(self, key, hop, value, **kw):
        o = self.map.owner(self._store("postcarding", len(key)), bytes(key))
        return self._to(o).postcard(key, hop, value, **kw)

    def append(self, list_id, data, **kw):
        o = self.map.list_owner(self._store("append"), list_id)
        return self._to(o).append(list_id, data, **kw)

    def sketch_merge(self, sketch_id, column, epoch, data, **kw):
        o = self.map.sketch_owner(self._store("sketch_merge", 2, sketch_id), self.reporter_id)
        return self._to(o).sketch_merge(sketch_id, column, epoch, data, **kw)

    def flush(self):
        for r in self.reporters:
            r.flush()

    def close(self):
        for r in self.reporters:
            r.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ClusterClient:
    """Queries answered by the owners' HTTP query APIs."""

    def __init__(self, cluster_map, token=None, timeout=DEFAULT_TIMEOUT):
        self.map = _load(cluster_map)
        if token is None:
            token = os.environ.get("DTA_HTTP_TOKEN") or None
            path = os.environ.get("DTA_HTTP_TOKEN_FILE")
            if path:
                with open(path) as f:
                    token = f.read().strip()
        self.token = token
        self.timeout = timeout

    def ask(self, collector, route, store, _round=None, **params):
        """GET /query/ROUTE/STORE?params from `collector` (a name); its JSON answer."""
        rnd = _round or _Round(self.timeout)
        c = self.map.collector(collector)
        if c["http"] is None:
            raise ClusterError(f"collector {collector}: no HTTP API in the cluster map", collector)
        down = rnd.err(collector)
        if down is not None:
            raise down
        host, port = c["http"]
        host = f"[{host}]" if ":" in host else host
        q = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        route_url = f"http://{host}:{port}/query/{route}/{urllib.parse.quote(store)}"
        req = urllib.request.Request(f"{route_url}?{q}")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        timed_out = ClusterError(
            f"collector {collector}: timed out: no answer within "
            f"{round(rnd.timeout * 1000)} ms ({route_url})", collector)
        if rnd.left() <= 0:
            raise rnd.mark(collector, timed_out)
        try:
            with urllib.request.urlopen(req, timeout=rnd.left()) as r:
                _check_answerer(collector, r.headers, host, port)
                return json.loads(r.read(16 << 20))
        except urllib.error.HTTPError as e:
            _check_answerer(collector, e.headers, host, port)
            try:
                msg = json.loads(e.read(1 << 16)).get("error", "")
            except ValueError:
                msg = ""
            raise ClusterError(f"collector {collector} answered {e.code}: {msg}",
                               collector) from None
        except (OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise rnd.mark(collector, timed_out) from None
            if isinstance(reason, ConnectionRefusedError):
                raise rnd.mark(collector, ClusterError(
                    f"collector {collector}: refused: connection refused by "
                    f"http://{host}:{port} (is its collector running?)", collector)) from None
            raise ClusterError(f"collector {collector}: {e}", collector) from None

    def _by_key(self, route, store, key, _round=None, **params):
        key = bytes(key)
        owners = self.map.owners_during_change(store, key)
        rnd = _round or _Round(self.timeout)
        answers = []
        for o in owners:
            v = self.ask(o, route, store, _round=rnd, key="0x" + key.hex(), **params)
            v["collectors"] = [o]
            if route != "ki" and v.get("status") == "found":
                return v
            answers.append(v)
        if route == "ki":
            v = dict(answers[0])
            v["count"] = sum(a["count"] for a in answers)
            v["collectors"] = [{"collector": o, "count": a["count"]}
                               for o, a in zip(owners, answers)]
            return v
        v = answers[0]
        v["collectors"] = owners
        return v

    def kw(self, store, key, redundancy=None, threshold=1):
        return self._by_key("kw", store, key, redundancy=redundancy, threshold=threshold)

    def ki(self, store, key, redundancy=None):
        return self._by_key("ki", store, key, redundancy=redundancy)

    def postcard(self, store, key, values=None):
        return self._by_key("postcard", store, key, values=values)

    def list(self, store, list_id, tail=None, max=None):
        owners = list(reversed(self.map.list_owners_during_change(store, list_id)))
        rnd = _Round(self.timeout)
        entries, parts, first = [], [], None
        for o in owners:
            v = self.ask(o, "list", store, _round=rnd, list=list_id, tail=tail, max=max)
            entries += v["entries"]
            parts.append({"collector": o, "entries": len(v["entries"])})
            first = first or v
        first["entries"] = entries
        first["collectors"] = parts
        return first

    def batch(self, kind, store, keys, **params):
        """Many keys of one store, each from its owner, the owners asked in parallel, each
        within one deadline. One item per key, in order: its answer, or (it could not be
        answered) ``{"key": HEX, "error": MESSAGE, "collector": NAME}``."""
        keys = [bytes(k) for k in keys]
        groups = {}
        for i, k in enumerate(keys):
            groups.setdefault(self.map.owner(store, k), []).append(i)
        out = [None] * len(keys)
        route = {"kw": "kw", "ki": "ki", "postcard": "postcard"}[kind]
        rnd = _Round(self.timeout)

        def one(i):
            try:
                return self._by_key(route, store, keys[i], _round=rnd, **params)
            except ClusterError as e:
                return {"key": keys[i].hex(), "error": str(e), "collector": e.collector}

        def run(idx):
            return [(i, one(i)) for i in idx]

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(groups))) as ex:
            for done in ex.map(run, groups.values()):
                for i, v in done:
                    out[i] = v
        return out


def _check_answerer(collector, headers, host, port):
    """A peer that names itself as another collector is reached through a wrong address."""
    other = headers.get(COLLECTOR_HEADER) if headers is not None else None
    if other is not None and other != collector:
        raise ClusterError(
            f"collector {collector}: its HTTP address http://{host}:{port} is served by "
            f'collector "{other}": the cluster map\'s `http` of "{collector}" is wrong', collector)
