"""docs/embedding.md's example program, compiled with the command the page gives and run as it
says: it prints what the page says it prints. The library is the one `make -C c all` builds
(cargo's debug profile) where the page names the release build's directory."""

import os
import pathlib
import re
import shutil
import subprocess

import pytest

C_DIR = pathlib.Path(__file__).resolve().parents[1]
REPO = C_DIR.parent
DOC = (REPO / "docs" / "embedding.md").read_text()


def test_the_example_program_runs_as_written(tmp_path):
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("SKIPPED: no C compiler (cc)")
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    libdir = target / "debug"
    if not (libdir / "libdta.so").exists():
        pytest.skip(f"SKIPPED: no {libdir}/libdta.so (make -C c all builds it)")
    program = re.search(r"```c\n(.*?)```", DOC, re.S).group(1)
    said = re.search(r"It prints `([^`]+)`", DOC).group(1)
    build = re.search(r"```sh\n(.*?)```", DOC, re.S).group(1).splitlines()
    compile_line = next(l for l in build if l.startswith("cc "))
    run_line = next(l for l in build if l.startswith("./a.out "))
    (tmp_path / "app.c").write_text(program)
    # The page's command, from the repository's root, with the library directory of this build.
    cmd = compile_line.split(" #")[0].replace("target/release", str(libdir))
    cmd = cmd.replace("$PWD/", "").replace("app.c", str(tmp_path / "app.c"))
    cmd = cmd.replace("-I c/include", f"-I {C_DIR / 'include'}") + f" -o {tmp_path / 'a.out'}"
    subprocess.run(cmd, shell=True, check=True, cwd=REPO)
    args = run_line.split()[1:]
    args[1] = str(tmp_path / "regions")  # a fresh directory, as the page advises
    out = subprocess.run([tmp_path / "a.out", *args], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == said
