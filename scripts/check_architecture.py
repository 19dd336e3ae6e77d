#!/usr/bin/env python3
"""Check docs/architecture.md against the code, as `cargo metadata` and the sources say.

1. The crate table lists every workspace crate once, and its "depends on" column names exactly
   the crate's normal dependencies inside the workspace (dev-dependencies are not claims).
2. The layers: every crate lives in the folder of its layer (crates/<layer>/<crate>), the table's
   layer column says which, and a crate depends only on crates of its own layer or of layers
   listed before it in LAYERS (data flows one way).
3. A handful: no crate but the node and the front-ends depends on more than MAX_DEPS of the
   workspace's crates.
4. No import loop between the files of a crate: a module uses another module's items only if
   that one does not (directly or through others) use its items; a module may use its own
   ancestors' items (Rust's `super::`), which is structure, not a loop.
5. Every Rust source file over 800 lines says at its top (first 8 lines) why it is one file
   (a line starting `// Size:`).

Prints each problem and exits 1 if there is any; run by scripts/test.sh and
scripts/tests/test_architecture.py.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
MAX_DEPS = 6
MAX_LINES = 800
# Layers in dependency order: a crate may depend on its own layer and those before it.
LAYERS = ["base", "wire", "engines", "rdma", "outputs", "tools", "node", "front"]
# Crates that assemble everything (the node) or present it (the front-ends).
MANY_ALLOWED = {"dta-node", "dta", "dta-capi", "dta-python"}


def metadata() -> dict:
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def crates(meta: dict) -> dict[str, dict]:
    """name -> {deps: set, dir: Path}"""
    ws = {p["name"] for p in meta["packages"]}
    out = {}
    for p in meta["packages"]:
        deps = {d["name"] for d in p["dependencies"] if d["name"] in ws and d["kind"] is None}
        out[p["name"]] = {"deps": deps, "dir": Path(p["manifest_path"]).parent}
    return out


def table(text: str) -> dict[str, dict]:
    """The crate table: rows `| `crate` | layer | job | depends on | knows nothing of |`."""
    rows = {}
    in_table = False
    for line in text.splitlines():
        if line.startswith("| crate | layer | job | depends on |"):
            in_table = True
            continue
        if in_table:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set(cells[0]) <= {"-", " "}:
                continue
            m = re.match(r"`([a-z0-9-]+)`", cells[0])
            if not m or len(cells) < 5:
                rows.setdefault("?", {"problems": []})["problems"].append(line[:80])
                continue
            deps_cell = cells[3]
            deps = set(re.findall(r"`([a-z0-9-]+)`", deps_cell))
            rows[m.group(1)] = {"layer": cells[1].strip("`"), "deps": deps}
    return rows


def layer_of(c: dict) -> str | None:
    rel = c["dir"].relative_to(ROOT)
    parts = rel.parts
    if len(parts) == 3 and parts[0] == "crates":
        return parts[1]
    if rel == Path("python"):
        return "front"
    return None


def check_crates(cs: dict, rows: dict) -> list[str]:
    problems = []
    if "?" in rows:
        problems += [f"architecture.md: a crate row that does not parse: {r}" for r in rows["?"]["problems"]]
    for name, c in sorted(cs.items()):
        row = rows.get(name)
        if row is None:
            problems.append(f"architecture.md: no row for the crate {name}")
            continue
        if row["deps"] != c["deps"]:
            missing = sorted(c["deps"] - row["deps"])
            extra = sorted(row["deps"] - c["deps"])
            problems.append(
                f"architecture.md: {name} depends on {', '.join(missing) or '-'} not said; "
                f"says {', '.join(extra) or '-'} which it does not depend on"
            )
        layer = layer_of(c)
        if layer not in LAYERS:
            problems.append(f"{name}: not in a layer folder (crates/<layer>/{name}, layers {LAYERS})")
        elif row["layer"] != layer:
            problems.append(f"architecture.md: {name} is in layer {layer}, the table says {row['layer']}")
        if len(c["deps"]) > MAX_DEPS and name not in MANY_ALLOWED:
            problems.append(f"{name} depends on {len(c['deps'])} workspace crates (at most {MAX_DEPS})")
    for name in sorted(set(rows) - set(cs) - {"?"}):
        problems.append(f"architecture.md: a row for {name}, which is not a workspace crate")
    for name, c in cs.items():
        la = layer_of(c)
        if la not in LAYERS:
            continue
        for d in c["deps"]:
            ld = layer_of(cs[d])
            if ld in LAYERS and LAYERS.index(ld) > LAYERS.index(la):
                problems.append(f"{name} ({la}) depends on {d} ({ld}), a later layer: data flows one way")
    return problems


def modules(src: Path) -> dict[str, Path]:
    """Module path ('' is the crate root; 'a::b') -> file."""
    mods = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("lib", "main") and len(parts) == 1:
            parts = []
        elif parts[-1] == "mod":
            parts = parts[:-1]
        if parts and parts[0] == "bin":
            continue
        mods["::".join(parts)] = f
    return mods


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("//"):
            continue
        # A trailing comment (a line without a string literal, which could hold `//`).
        out.append(line.split("//")[0] if '"' not in line else line)
    return "\n".join(out)


def edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    out = {m: set() for m in mods}
    names = set(mods)

    def resolve(path: list[str]) -> str | None:
        for i in range(len(path), 0, -1):
            cand = "::".join(path[:i])
            if cand in names:
                return cand
        return None

    for m, f in mods.items():
        text = strip_comments(f.read_text())
        # Test modules use whatever they test: not part of the structure.
        text = text.split("#[cfg(test)]")[0]
        here = m.split("::") if m else []
        for mt in re.finditer(r"\bcrate((?:::[a-z_][a-z0-9_]*)+)", text):
            t = resolve(mt.group(1).strip(":").split("::"))
            if t is not None:
                out[m].add(t)
        for mt in re.finditer(r"\b((?:super::)+)((?:[a-z_][a-z0-9_]*::)*)", text):
            up = mt.group(1).count("super::")
            base = here[: max(len(here) - up, 0)]
            rest = [p for p in mt.group(2).split("::") if p]
            t = resolve(base + rest) if base + rest else ""
            if t is not None:
                out[m].add(t)
        # Children named relatively (`child::item`, `use child::...`).
        for n in names:
            parent = n.rsplit("::", 1)[0] if "::" in n else ""
            if parent == m and n != m:
                child = n.rsplit("::", 1)[-1]
                if re.search(rf"(?<![:\w]){child}::", text):
                    out[m].add(n)
        out[m].discard(m)
    return out


def is_ancestor(a: str, b: str) -> bool:
    """Whether module a is an ancestor of module b."""
    return a == "" or b.startswith(a + "::")


def loops(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, edges to ancestors left out."""
    g = {m: {t for t in ts if not is_ancestor(t, m)} for m, ts in g.items()}
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in g:
        if v not in index:
            visit(v)
    return out


def check_loops(cs: dict) -> list[str]:
    problems = []
    for name, c in sorted(cs.items()):
        src = c["dir"] / "src"
        if not src.is_dir():
            continue
        for comp in loops(edges(modules(src))):
            problems.append(f"{name}: import loop between modules {', '.join(m or '(root)' for m in comp)}")
    return problems


def check_sizes() -> list[str]:
    problems = []
    files = subprocess.run(["git", "ls-files", "*.rs"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for f in files:
        p = ROOT / f
        if not p.is_file():
            continue
        lines = p.read_text(errors="replace").splitlines()
        if len(lines) > MAX_LINES and not any(l.startswith("// Size:") for l in lines[:8]):
            problems.append(f"{f}: {len(lines)} lines and no `// Size:` line at its top saying why it is one file")
    return problems


def main() -> int:
    cs = crates(metadata())
    problems = check_crates(cs, table(DOC.read_text()))
    problems += check_loops(cs)
    problems += check_sizes()
    for p in problems:
        print(p)
    print(f"architecture: {len(cs)} crates, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
