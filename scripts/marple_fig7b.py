#!/usr/bin/env python3
"""[DTA §6.1] Fig. 7b in spirit: Marple reporters (switches) one collector supports before it
loses reports, DTA against a conventional hash-map collector. Runs the `fig7b` benchmark of
crates/engines/dta-systems (which ramps the switches and detects the first loss), then plots
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
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    summary = []
    for key in ("dta", "hashmap"):
        steps = r[key]["steps"]
        xs = [s["switches"] for s in steps]
        lost = [s for s in steps if s["loss"] > 0.001]
        ax.plot(xs, [s["received"] / max(s["sent"], 1) * s["achieved"] / 1e6 for s in steps],
                marker="o", label=f"{NAMES[key]}: {r[key]['supported']} switches without loss"
                + (f", loss from {lost[0]['switches']}" if lost else f" ({r[key]['bounded_by']})"))
        bx.plot(xs, [s["per_cpu_second"] / 1e6 for s in steps], marker="o", label=NAMES[key])
        summary.append(f"{key} {r[key]['supported']} switches ({r[key]['bounded_by']}), "
                       f"{r[key]['per_cpu_second'] / 1e6:.2f} M reports per CPU-second, "
                       f"{r[key]['switches_per_core']:.0f} switches per collector core")
    xs = [s["switches"] for s in r["dta"]["steps"]]
    ax.plot(xs, [x * r["per_switch_rate"] / 1e6 for x in xs], linestyle=":", color="grey",
            label="offered (switches x trace rate)")
    for a in (ax, bx):
        a.set_xscale("log", base=2)
        a.set_xlabel(f"Marple switches ({r['per_switch_rate']:.0f} reports/s each)")
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("reports collected (M/s)")
    ax.set_title("Marple reporters one collector supports", fontsize=10)
    bx.set_ylabel("M reports per CPU-second of the collector thread")
    bx.set_title("Collector cost per report (Fig. 7b in spirit)", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    print(f"fig7b: {'; '.join(summary)} -> {out}")
    if tmp is not None:
        os.unlink(data)


if __name__ == "__main__":
    main(sys.argv[1:])
