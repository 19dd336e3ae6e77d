"""The C example (c/examples/send_reports.c) against a translator run from examples/dta.toml:
every report it sends is applied (no rejects) and queried back with default options; to a
dead port it fails. And the header's defaults are the Rust constants (crates/wire/dta-wire)."""

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

C_DIR = pathlib.Path(__file__).resolve().parents[1]
REPO = C_DIR.parent
sys.path.insert(0, str(REPO / "python" / "tests"))
from dta_stack import Stack  # noqa: E402

HEADER = (C_DIR / "include" / "dta" / "reporter.h").read_text()
WIRE = (REPO / "crates" / "wire" / "dta-wire" / "src" / "lib.rs").read_text()


def rust_const(name):
    m = re.search(rf"pub const {name}: \w+ = ([^;]+);", WIRE)
    assert m, f"dta-wire has no constant {name}"
    return eval(m.group(1).replace("_", ""), {})  # integer literals and shifts only


def c_define(name):
    m = re.search(rf"#define {name} (\d+)u?\b", HEADER)
    assert m, f"reporter.h has no #define {name}"
    return int(m.group(1))


@pytest.mark.parametrize("c,rust", [
    ("DTA_DEFAULT_REDUNDANCY", "DEFAULT_REDUNDANCY"),
    ("DTA_MAX_REDUNDANCY", "MAX_REDUNDANCY"),
    ("DTA_DEFAULT_POSTCARD_VALUES", "DEFAULT_POSTCARD_VALUES"),
    ("DTA_PORT", "DTA_PORT"),
    ("DTA_NACK_PORT", "NACK_PORT"),
])
def test_header_defaults_are_the_rust_constants(c, rust):
    assert c_define(c) == rust_const(rust)


@pytest.fixture
def example():
    for tool in ("make", "cc"):
        if shutil.which(tool) is None:
            pytest.skip(f"SKIPPED: no {tool} on PATH to build c/examples/send_reports.c")
    subprocess.run(["make", "-s", "-C", str(C_DIR), "build/send_reports"], check=True)
    return C_DIR / "build" / "send_reports"


@pytest.fixture
def stack(tmp_path):
    s = Stack(tmp_path)
    yield s
    s.close()


def test_example_reports_are_all_applied_and_read_back(example, stack):
    p = subprocess.run([example, "127.0.0.1", str(stack.port)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "Postcarding key 10.0.0.2" in p.stdout, p.stdout
    stats = stack.stop_translator()
    assert stack.rejected(stats) == {}
    assert stats["reports"]["key_write"] == 2 and stats["reports"]["postcarding"] == 5, stats

    v = stack.query("kw", "--store", "kw", "--key", "10.0.0.1")
    assert (v["status"], v["data"]) == ("found", "00003039"), v
    v = stack.query("kw", "--store", "flows", "--key", "10.0.0.1:8080-10.0.0.2:80/6")
    assert (v["status"], v["data"]) == ("found", "00000000000005dc"), v
    v = stack.query("list", "--store", "events", "--list", "7")
    assert v["entries"] == ["00003039"], v
    v = stack.query("postcard", "--store", "paths", "--key", "10.0.0.2")
    assert (v["status"], v["path"]) == ("found", [101, 102, 103, 104, 105]), v
    v = stack.query("ki", "--store", "counters", "--key", "10.0.0.1")
    assert v["count"] == 1500, v


def test_example_to_a_dead_port_fails(example, tmp_path):
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.run([example, "127.0.0.1", str(port)], capture_output=True, text=True)
    assert p.returncode != 0
    assert "Connection refused" in p.stderr, p.stderr
