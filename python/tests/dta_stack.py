"""A collector and a translator run by the `dta` binary from examples/dta.toml (free loopback
ports, a temporary region directory, nothing else changed), and `dta query` with default
options: what the C and Python round-trip tests send into and read back from.

The binary is $DTA_BIN, else debug/dta or release/dta under $CARGO_TARGET_DIR or the
repository's target/ (build it with `cargo build -p dta`); without one the tests are skipped
with the reason.
"""

import json
import os
import pathlib
import signal
import socket
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "dta.toml"


def dta_binary():
    """The `dta` binary, or pytest.skip with the reason."""
    env = os.environ.get("DTA_BIN")
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    candidates = [pathlib.Path(env)] if env else [target / "debug" / "dta", target / "release" / "dta"]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    pytest.skip(f"SKIPPED: no dta binary at {', '.join(map(str, candidates))} "
                "(cargo build -p dta, or set DTA_BIN)")


def _free_port(kind):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def udp_port_bound(port):
    """Whether a UDP socket is bound to `port`, read from the kernel's socket tables. A probe
    that binds the port itself would race with the translator: holding the port for an instant,
    it makes the translator's own bind (or its check for another user of the port) fail."""
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            lines = pathlib.Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            f = line.split()
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if int(f[1].rsplit(":", 1)[1], 16) == port and f[9] != "0":
                return True
    return False


def _wait_for(what, ok, timeout=60):
    end = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > end:
            raise AssertionError(f"timed out: {what}")
        time.sleep(0.02)


def _replace(text, old, new):
    assert old in text, f"examples/dta.toml no longer has {old!r}"
    return text.replace(old, new)


class Stack:
    """`dta collector` then `dta translator`, both from the example configuration (with the
    `[[store]]` tables of `extra_stores` appended)."""

    def __init__(self, tmp, extra_stores=""):
        self.bin = dta_binary()
        self.port = _free_port(socket.SOCK_DGRAM)
        regions = pathlib.Path(tmp) / "regions"
        text = EXAMPLE.read_text()
        text = _replace(text, 'region_dir = "dta-regions"', f'region_dir = "{regions}"')
        text = _replace(text, "127.0.0.1:40040", f"127.0.0.1:{self.port}")
        text = _replace(text, "127.0.0.1:40080", f"127.0.0.1:{_free_port(socket.SOCK_STREAM)}")
        text += extra_stores
        self.config = pathlib.Path(tmp) / "dta.toml"
        self.config.write_text(text)
        stores = text.count("[[store]]")
        self.collector = subprocess.Popen(
            [self.bin, "collector", "--config", self.config],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.translator = None
        _wait_for("the collector's regions", lambda: regions.is_dir() and len(
            list(regions.glob("*.region"))) == stores)
        self.translator = subprocess.Popen(
            [self.bin, "translator", "--json", "--stats-interval", "0", "--config", self.config],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        _wait_for("the translator's port", self._port_taken)

    def _port_taken(self):
        return udp_port_bound(self.port)

    def stop_translator(self):
        """Ctrl-C the translator; its final counters (JSON)."""
        time.sleep(0.3)  # the Append batch and Postcarding timers flush
        self.translator.send_signal(signal.SIGINT)
        out, _ = self.translator.communicate(timeout=60)
        assert self.translator.returncode == 0, self.translator.returncode
        self.translator = None
        return json.loads(out)

    def rejected(self, stats):
        return {k: v for k, v in stats["rejected"].items() if v}

    def query(self, what, *args):
        """`dta query WHAT --config CONFIG ARGS --json`: its JSON."""
        p = subprocess.run([self.bin, "query", what, "--config", self.config, *args, "--json"],
                           capture_output=True, text=True, timeout=60)
        try:
            return json.loads(p.stdout)
        except json.JSONDecodeError:
            raise AssertionError(f"dta query {what} {args}: {p.stdout}{p.stderr}") from None

    def close(self):
        for p in (self.translator, self.collector):
            if p is not None:
                p.kill()
                p.wait()
