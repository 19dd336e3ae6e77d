"""spec/vectors/reporter.json is exactly what spec/tools/reporter_vectors.py writes (the
committed scenarios cannot drift from the hand-written generator), and the generator uses
nothing of this repository.

Run: .venv/bin/python -m pytest spec/tests
"""

import ast
import pathlib
import subprocess
import sys

SPEC = pathlib.Path(__file__).resolve().parents[1]
TOOL = SPEC / "tools" / "reporter_vectors.py"


def test_committed_file_is_the_generators():
    p = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True)
    assert p.returncode == 0, f"regenerate: python3 {TOOL}: {p.stderr}"


def test_generator_imports_only_the_standard_library():
    tree = ast.parse(TOOL.read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
             for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= {"json", "pathlib", "struct", "sys"}, names
