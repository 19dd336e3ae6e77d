"""Direct Telemetry Access (DTA) for Python.

A thin layer over the Rust core (the native extension ``dta._native``):

* encoding of reports for both wire protocols (``encode_prototype``, ``NativeDatagram``) and
  decoding of any datagram (``decode``), from ``dta-wire``;
* read-only queries on region files (``Region``), from ``dta-store``;
* push notifications of a region directory (``Watcher``, an iterator of notices);
* the INT sink's questions over its stores (``int_flows``, ``int_network``, ``int_events``, ``int_episodes``,
  ``int_histogram``, ``int_path``), answered as ``GET /int/...`` and ``dta query int`` answer;
* ``dta.reporter.Reporter``, a UDP sender for both protocols that batches native reports;
* ``ApproSync``, a Count-Min sketch that sends a column through a ``Reporter`` whenever one of
  its counters diverges (Sketch-Merge stores of ``sync = "approsync"``), from ``dta-reporter``.

Rejections raise ``WireError`` (a ``ValueError``) whose ``reason`` is the counter name of
``docs/protocol.md`` (``"bad_key_len"``, ``"truncated"``, ...).

The distribution is ``dta-telemetry``; ``dta.__version__`` is its version (the Cargo
workspace's, compiled into the native module).
"""

from ._native import __version__  # noqa: F401
from ._native import (  # noqa: F401
    DEFAULT_POSTCARD_VALUES,
    DEFAULT_REDUNDANCY,
    DTA_PORT,
    MAX_KEY_LEN,
    MAX_REDUNDANCY,
    ERROR_REASONS,
    NACK_PORT,
    DatagramFull,
    ApproSync,
    NativeDatagram,
    WireError,
    decode,
    decode_hello,
    decode_native_nack,
    decode_notice,
    decode_prototype_nack,
    encode_hello,
    encode_native_nack,
    encode_notice,
    encode_prototype,
    encode_prototype_nack,
    native_report_len,
    open_control,
    seal_control,
)

from ._native import Region, RegionError, Watcher  # noqa: F401
from ._native import ClusterMap, cluster_owner, cluster_score, cluster_seed  # noqa: F401
from ._native import (  # noqa: F401
    int_episodes,
    int_events,
    int_flows,
    int_histogram,
    int_network,
    int_path,
)

from .reporter import Reporter, send_reports  # noqa: F401,E402
from .cluster import ClusterClient, ClusterError, ClusterReporter  # noqa: F401,E402

__all__ = [
    "__version__",
    "ApproSync",
    "ClusterClient",
    "ClusterError",
    "ClusterMap",
    "ClusterReporter",
    "cluster_owner",
    "cluster_score",
    "cluster_seed",
    "DEFAULT_POSTCARD_VALUES",
    "DEFAULT_REDUNDANCY",
    "DTA_PORT",
    "MAX_KEY_LEN",
    "MAX_REDUNDANCY",
    "NACK_PORT",
    "ERROR_REASONS",
    "DatagramFull",
    "int_events",
    "int_flows",
    "int_histogram",
    "int_network",
    "int_episodes",
    "int_path",
    "NativeDatagram",
    "Region",
    "RegionError",
    "Reporter",
    "Watcher",
    "WireError",
    "decode",
    "decode_hello",
    "decode_native_nack",
    "decode_notice",
    "decode_prototype_nack",
    "encode_hello",
    "encode_native_nack",
    "encode_notice",
    "encode_prototype",
    "open_control",
    "seal_control",
    "encode_prototype_nack",
    "native_report_len",
    "send_reports",
]
