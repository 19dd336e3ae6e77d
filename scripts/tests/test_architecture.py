"""scripts/check_architecture.py: it passes on the repository and finds what it is for."""
import importlib.util
import shutil
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("check_architecture", ROOT / "scripts" / "check_architecture.py")
arch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(arch)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo missing")
def test_the_repository_holds_to_its_map(capsys):
    assert arch.main() == 0, capsys.readouterr().out


def write(src: Path, files: dict) -> None:
    for name, text in files.items():
        p = src / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


def test_a_loop_between_siblings_is_found_and_a_child_using_its_parent_is_not(tmp_path):
    write(tmp_path, {
        "lib.rs": "pub mod a;\npub mod b;\npub mod c;\n",
        "a.rs": "use crate::b::X;\n/// crate::c::Y in a comment is not a use\n",
        "b.rs": "pub struct X;\nfn f() { crate::a::g(); }\n",
        "c/mod.rs": "mod d;\npub use d::Z;\npub struct Y;\n",
        "c/d.rs": "use super::Y;\npub struct Z;\n",
    })
    found = arch.loops(arch.edges(arch.modules(tmp_path)))
    assert found == [["a", "b"]]


def test_a_loop_through_three_modules_is_found(tmp_path):
    write(tmp_path, {
        "lib.rs": "mod a; mod b; mod c;\n",
        "a.rs": "use crate::b::X;\n",
        "b.rs": "use crate::c::Y;\n",
        "c.rs": "use crate::a::Z;\n",
    })
    assert arch.loops(arch.edges(arch.modules(tmp_path))) == [["a", "b", "c"]]


def test_tests_do_not_make_a_loop(tmp_path):
    write(tmp_path, {
        "lib.rs": "mod a; mod b;\n",
        "a.rs": "use crate::b::X;\n",
        "b.rs": "pub struct X;\n#[cfg(test)]\nmod tests { use crate::a::*; }\n",
    })
    assert arch.loops(arch.edges(arch.modules(tmp_path))) == []


def test_the_table_is_compared_with_the_dependencies():
    doc = textwrap.dedent("""\
        | crate | layer | job | depends on | knows nothing of |
        | --- | --- | --- | --- | --- |
        | `dta-a` | base | a | none | x |
        | `dta-b` | wire | b | `dta-a` | x |
        | `dta-gone` | wire | c | none | x |
        """)
    rows = arch.table(doc)
    root = arch.ROOT
    cs = {
        "dta-a": {"deps": set(), "dir": root / "crates" / "base" / "dta-a"},
        "dta-b": {"deps": {"dta-a", "dta-c"}, "dir": root / "crates" / "wire" / "dta-b"},
        "dta-c": {"deps": {"dta-b"}, "dir": root / "crates" / "base" / "dta-c"},
    }
    problems = "\n".join(arch.check_crates(cs, rows))
    assert "dta-b depends on dta-c not said" in problems
    assert "no row for the crate dta-c" in problems
    assert "a row for dta-gone" in problems
    assert "dta-c (base) depends on dta-b (wire), a later layer" in problems
    # dta-a is as the table says.
    assert "crate dta-a" not in problems and "architecture.md: dta-a" not in problems
