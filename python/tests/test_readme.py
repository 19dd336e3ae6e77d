"""python/README.md runs as written: its Python blocks, in order, the second against the
collector and translator of examples/dta.toml (copied into a temporary directory, which the
blocks run in, so the example's relative region directory is created there; its ports are the
example's own, as the README says)."""

import re
import shutil
import subprocess

import pytest

from dta_stack import REPO, _wait_for, dta_binary, udp_port_bound

README = (REPO / "python" / "README.md").read_text()


def blocks(lang):
    return re.findall(r"```" + lang + r"\n(.*?)```", README, re.S)


def test_the_build_section_names_paths_that_exist():
    build = blocks("sh")[0]
    for path in re.findall(r"(?:-m |pip install |pytest )(\S*python\S*)", build):
        assert (REPO / path).exists(), path


def test_the_python_blocks_run_as_written(tmp_path, monkeypatch, capsys):
    binary = dta_binary()
    if udp_port_bound(40040):
        pytest.fail("port 40040 (the example configuration's) is taken: the README cannot run")
    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / "examples" / "dta.toml", tmp_path / "examples" / "dta.toml")
    config = tmp_path / "examples" / "dta.toml"
    procs = []
    try:
        procs.append(subprocess.Popen([binary, "collector", "--config", config],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        regions = tmp_path / "examples" / "dta-regions"
        _wait_for("the collector's regions", lambda: (regions / "kw.region").exists())
        procs.append(subprocess.Popen([binary, "translator", "--config", config],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for("the translator's port", lambda: udp_port_bound(40040))
        monkeypatch.chdir(tmp_path)
        code = blocks("python")
        assert len(code) >= 2
        for i, block in enumerate(code[:2]):
            exec(compile(block, f"python/README.md block {i}", "exec"), {})
        out = capsys.readouterr().out
        assert "prototype" in out
        assert "'status': 'found'" in out and "b'\\xde\\xad\\xbe\\xef'" in out, out
        assert "\n1500\n" in out, out
        assert "[b'\\x00\\x00\\x00*']" in out, out
    finally:
        for p in procs:
            p.kill()
            p.wait()
