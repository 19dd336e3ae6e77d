"""The C header dta/cluster.h against spec/vectors/cluster.json (the vectors the Rust crate
and the Python package check too), and its map parser on the line format."""

import json
import pathlib
import shutil
import subprocess

import pytest

C_DIR = pathlib.Path(__file__).resolve().parents[1]
VECTORS = json.loads((C_DIR.parent / "spec" / "vectors" / "cluster.json").read_text())
COMPILERS = ["gcc"] + (["clang"] if shutil.which("clang") else [])


def binary(cc):
    name = "cluster_vector" + ("" if cc == "gcc" else "-" + cc)
    subprocess.run(["make", "-s", "-C", str(C_DIR), f"build/{name}"], check=True)
    return C_DIR / "build" / name


def run(cc, lines):
    out = subprocess.run([str(binary(cc))], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, check=True).stdout
    return out.splitlines()


@pytest.mark.parametrize("cc", COMPILERS)
def test_owners_and_scores(cc):
    cases = VECTORS["cases"]
    lines = [f"owner {len(c['collectors'])} {' '.join(c['collectors'])} {c['key']}"
             for c in cases]
    out = run(cc, lines)
    assert len(out) == len(cases)
    for line, c in zip(out, cases):
        owner, *scores = line.split()
        assert owner == c["owner"], c
        assert scores == c["scores"], c


@pytest.mark.parametrize("cc", COMPILERS)
def test_map_parse_and_route(cc, tmp_path):
    m = tmp_path / "map.txt"
    m.write_text("# written by dta cluster export\nversion 2\n"
                 "collector c0 10.0.0.1:40040\ncollector c1 10.0.0.2:40040\n"
                 "collector c2 10.0.0.3:40041\n"
                 "list events 3 c1\nlist events 4 c2\ndefault events c0\n")
    want = {c["key"]: c["owner"] for c in VECTORS["cases"]
            if c["collectors"] == ["c0", "c1", "c2"]}
    keys = sorted(want)
    out = run(cc, [f"map {m}"] + [f"key {k}" for k in keys] + ["list 3", "list 4", "list 9"])
    assert out[0] == "ok 3"
    for k, line in zip(keys, out[1:]):
        name, ip, port = line.split()
        assert name == want[k]
        idx = int(name[1])
        assert int(ip) == (10 << 24) + idx + 1
        assert int(port) == (40041 if name == "c2" else 40040)
    assert out[-3:] == ["c1", "c2", "c0"]


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("text,rc", [
    ("", -5),
    ("collector c0 10.0.0.1\n", -3),
    ("collector c0 10.0.0.256:1\n", -3),
    ("collector c0 10.0.0.1:1\ncollector c0 10.0.0.2:1\n", -2),
    ("collector c0 10.0.0.1:1\nlist ev 1 c9\n", -4),
    ("collector c0 10.0.0.1:1 extra\n", -3),
    ("frobnicate\n", -3),
])
def test_bad_maps_are_refused(cc, tmp_path, text, rc):
    m = tmp_path / "map.txt"
    m.write_text(text)
    out = run(cc, [f"map {m}"])
    assert out[0].split()[:2] == ["error", str(rc)]
