"""The C header's loss and congestion logic plays spec/vectors/reporter.json (the scenarios
the Rust and Python reporters play too) through c/tests/reporter_vector.c, and its defaults
are the vectors' (the Rust crate's)."""

import json
import pathlib
import re
import shutil
import subprocess

import pytest

C_DIR = pathlib.Path(__file__).resolve().parents[1]
VECTORS = json.loads((C_DIR.parent / "spec" / "vectors" / "reporter.json").read_text())
PRIORITY = {"low": 0, "medium": 1, "high": 2}
COMPILERS = ["gcc"] + (["clang"] if shutil.which("clang") else [])


def binary(cc):
    name = "reporter_vector" + ("" if cc == "gcc" else "-" + cc)
    b = C_DIR / "build" / name
    subprocess.run(["make", "-s", "-C", str(C_DIR), f"build/{name}"], check=True)
    return b


def script(sc):
    r = sc["reporter"]
    lines = [" ".join(map(str, ["init", int(r["protocol"] == "prototype"), r["reporter_id"],
                                PRIORITY[r["priority"]], int(r["retransmittable"]),
                                r["retransmit_buffer"]]))]
    for s in sc["steps"]:
        if "send" in s:
            lines.append(f"send {s['t_ms']} {s['send']}")
        else:
            lines.append(f"recv {s['t_ms']} {s['receive']}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("sc", VECTORS["scenarios"], ids=lambda s: s["name"])
def test_scenario(cc, sc):
    out = subprocess.run([str(binary(cc))], input=script(sc), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert len(out) == len(sc["steps"]) + 1, out
    for i, (line, step) in enumerate(zip(out, sc["steps"])):
        word, *seqs = line.split()
        want = ("sent", step["sent"]) if "send" in step else ("resent", step["resent"])
        assert (word, [int(x) for x in seqs]) == want, f"step {i}"
    stats = dict(kv.split("=") for kv in out[-1].split()[1:])
    assert {k: int(v) for k, v in stats.items()} == sc["stats"]


def test_defaults_are_the_vectors():
    header = (C_DIR / "include" / "dta" / "reporter.h").read_text()

    def define(name):
        m = re.search(rf"#define {name} (\w+)", header)
        assert m, name
        return m.group(1)

    d = VECTORS["defaults"]
    assert define("DTA_DEFAULT_PRIORITY") == "DTA_PRIORITY_" + d["priority"].upper()
    assert int(define("DTA_DEFAULT_RETRANSMIT_BUFFER")) == d["retransmit_buffer"]
    assert int(define("DTA_DEFAULT_TAIL_PROBES")) == d["tail_probes"]
    assert int(define("DTA_DEFAULT_TAIL_PROBE_INTERVAL_MS")) == d["tail_probe_interval_ms"]
    assert int(define("DTA_DEFAULT_NACK_HOLDOFF_MS")) == d["nack_holdoff_ms"]
