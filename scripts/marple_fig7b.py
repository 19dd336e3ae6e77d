#!/usr/bin/env python3
"""[DTA §6.1] Fig. 7b in spirit: Marple reporters (switches) one collector supports before it
loses reports, DTA against a conventional hash-map collector. Runs the `fig7b` benchmark of
crates/dta-systems (which ramps the switches and detects the first loss), then plots
docs/figures/fig7b_marple.png in the style of scripts/figures.py and prints a summary line.

    marple_fig7b.py [--quick] [--secs S] [--flows N] [--max-switches N] [--out PNG] [--json FILE]

Run by `scripts/bench.sh --only marple`; docs/figures.md and docs/benchmarks.md record it.
"""

import json
import os
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = {"dta": "DTA (translator writes the stores)", "hashmap": "hash-map CPU collector"}


def main(argv):
    out = os.path.join(ROOT, "docs", "figures", "fig7b_marple.png")
    data = None
    bench = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--out":
            out = argv[i + 1]
            i += 2
        elif a == "--json":
            # cargo runs the benchmark in its package's directory: an absolute path.
            data = os.path.abspath(argv[i + 1])
            i += 2
        elif a == "--quick":
            bench.append(a)
            i += 1
        elif a in ("--secs", "--flows", "--max-switches"):
            bench += [a, argv[i + 1]]
            i += 2
        else:
            raise SystemExit(f"unknown argument {a!r}\n{__doc__}")
    tmp = None
    if data is None:
        tmp = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
        data = tmp.name
    subprocess.run(
        ["cargo", "bench", "-q", "-p", "dta-systems", "--bench", "fig7b", "--"] + bench + ["--json", data],
        cwd=ROOT, check=True)
    with open(data) as f:
        r = json.load(f)
    fig, ax = plt.subplots(figsize=(6.4, 4), dpi=110)
    summary = []
    for key in ("dta", "hashmap"):
        steps = r[key]["steps"]
        xs = [s["switches"] for s in steps]
        ax.plot(xs, [100 * s["loss"] for s in steps], marker="o", label=NAMES[key])
        summary.append(f"{key} {r[key]['supported']} switches ({r[key]['bounded_by']})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"Marple switches ({r['per_switch_rate']:.0f} reports/s each)")
    ax.set_ylabel("reports lost (%)")
    ax.set_title("Marple reporters one collector supports (Fig. 7b in spirit)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    print(f"fig7b: {'; '.join(summary)} -> {out}")
    if tmp is not None:
        os.unlink(data)


if __name__ == "__main__":
    main(sys.argv[1:])
