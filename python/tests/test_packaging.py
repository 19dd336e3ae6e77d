"""The package on the ecosystem's conventions: the distribution `dta-telemetry` (import name
`dta`), `dta.__version__` (the Cargo workspace's version, one place), type stubs that list exactly
what the native module holds, and hostile calls that raise Python exceptions, never abort the
interpreter."""

import ast
import importlib.metadata
import pathlib
import re
import subprocess
import sys
import textwrap

import dta
import dta._native as native

from conftest import REPO

STUB = REPO / "python" / "src" / "dta" / "_native.pyi"


def workspace_version():
    text = (REPO / "Cargo.toml").read_text()
    section = text.split("[workspace.package]", 1)[1]
    return re.search(r'^version = "([^"]+)"', section, re.M).group(1)


def test_distribution_name_and_version_come_from_one_place():
    v = workspace_version()
    assert dta.__version__ == v
    assert "__version__" in dta.__all__
    assert importlib.metadata.version("dta-telemetry") == v
    meta = importlib.metadata.metadata("dta-telemetry")
    assert meta["Name"] == "dta-telemetry"
    pyproject = (REPO / "python" / "pyproject.toml").read_text()
    assert re.search(r'^name = "dta-telemetry"$', pyproject, re.M)


def public(names):
    return {n for n in names if not n.startswith("_") or n == "__version__"}


def stub_names():
    """Top-level names of the stub, and each class's members."""
    tree = ast.parse(STUB.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {
                n.name for n in node.body if isinstance(n, ast.FunctionDef)
            } | {
                n.target.id for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            }
    return top, members


def test_the_stub_lists_exactly_the_native_module():
    top, members = stub_names()
    assert top == public(dir(native)), (
        f"missing from the stub: {sorted(public(dir(native)) - top)}; "
        f"not in the module: {sorted(top - public(dir(native)))}")
    for cls, names in members.items():
        obj = getattr(native, cls)
        if issubclass(obj, BaseException):
            want = {"reason"} if cls in ("WireError", "RegionError") else set()
            assert public(names) == want, cls
            continue
        # Members the class defines itself (not object's), dunders the stub declares included.
        own = {n for n in vars(obj) if not n.startswith("_")}
        dunders = {n for n in names if n.startswith("__") and n != "__init__"}
        assert public(names) == own, (
            f"{cls}: missing {sorted(own - public(names))}, extra {sorted(public(names) - own)}")
        for d in dunders:
            assert hasattr(obj, d), f"{cls}.{d}"


def test_the_stub_is_shipped_with_a_py_typed_marker():
    assert (REPO / "python" / "src" / "dta" / "py.typed").exists()
    pkg = pathlib.Path(dta.__file__).parent
    assert (pkg / "_native.pyi").exists() and (pkg / "py.typed").exists()


HOSTILE = textwrap.dedent('''
    import math, os, sys, tempfile
    import dta

    def expect(exc, f, *a, **k):
        try:
            f(*a, **k)
        except exc:
            return
        raise SystemExit(f"no {exc} from {f.__name__}{a}{k}")

    expect(dta.WireError, dta.decode, b"")
    expect(dta.WireError, dta.decode, b"\\xff" * 70000)
    expect((TypeError, ValueError), dta.decode, None)
    expect(ValueError, dta.encode_prototype, "no_such_opcode", key=1, data=b"abcd")
    expect(ValueError, dta.encode_prototype, "key_write", key=2**40, data=b"abcd")
    expect(ValueError, dta.NativeDatagram, priority="urgent")
    expect(OverflowError, dta.NativeDatagram, capacity=-1)
    d = dta.NativeDatagram(capacity=64)
    expect(dta.DatagramFull, d.key_write, b"k" * 16, b"v" * 48)
    expect(ValueError, dta.Watcher, tempfile.mkdtemp(), timeout=math.nan)
    expect(ValueError, dta.ClusterMap.parse, "version = 'x'")
    expect(ValueError, dta.cluster_owner, [], b"key")
    d = tempfile.mkdtemp()
    expect((dta.RegionError, OSError), dta.Region, os.path.join(d, "missing"))
    junk = os.path.join(d, "junk.region")
    open(junk, "wb").write(b"\\0" * 8192)
    expect((dta.RegionError, ValueError), dta.Region, junk)
    p = os.path.join(d, "kw.region")
    r = dta.Region.create(p, "kw", {"kind": "key_write", "slots": 1024, "key_len": 4,
                                    "data_len": 4})
    os.truncate(p, 0)
    # A region truncated under its mapping reads as zeros: the answer is an error, not "empty".
    try:
        r.key_write(b"\\0\\0\\0\\1")
        raise SystemExit("a lost region answered")
    except dta.RegionError as e:
        assert e.reason == "region_lost", e
    expect(dta.RegionError, r.apply_key_write, b"\\0\\0\\0\\1", b"abcd")
    print("survived")
''')


def test_hostile_calls_raise_and_never_abort_the_interpreter():
    p = subprocess.run([sys.executable, "-c", HOSTILE], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, f"exit {p.returncode}: {p.stdout}{p.stderr}"
    assert p.stdout.strip() == "survived"
