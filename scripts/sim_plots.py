#!/usr/bin/env python3
"""Plots and the results table of the InvisiFlow simulation sweep (scripts/sim.sh).

Reads one JSON per run (invisiflow-sim --out) from --runs and writes one PNG per metric plus
results.md (the figures beside the paper's values, [InvisiFlow §6.2-§6.3]) into --out.
Uses the system Python's matplotlib (scripts/setup.sh installs python3-matplotlib).
"""
import argparse
import glob
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CHANNELS = ["default_udp", "low_udp", "pull", "invisiflow"]
LABEL = {
    "default_udp": "Default-priority UDP",
    "low_udp": "Low-priority UDP",
    "pull": "Pull-based (no gradient)",
    "invisiflow": "InvisiFlow",
}
STYLE = {"default_udp": "s-", "low_udp": "o-", "pull": "^-", "invisiflow": "D-"}

# The paper's values this reproduction is compared with ([InvisiFlow §6.2, §6.3, Table 3]).
PAPER = {
    "loss_if_below_70": "0 % telemetry loss below 70 % load (Fig. 6)",
    "paths_70": "missing paths at 70 %: InvisiFlow 33.8x / 36.3x lower than low-priority UDP / pull (Fig. 6)",
    "paths_80": "missing paths at 80 %: InvisiFlow 1.6x / 3.1x lower than low-priority UDP / pull (Fig. 6)",
    "cms_70": "normalised CMS error at 70 %: InvisiFlow 2.4x / 4.8x lower than low-priority UDP / pull (Fig. 6)",
    "fct_80": "default-priority UDP: rack FCT +26.4 % at 80 %; others < 1 % (Fig. 12)",
    "delay_40": "p99 delay at 40 %: InvisiFlow ~80 us, 3.4x / 10.9x below low-priority UDP / pull (Fig. 11)",
    "delay_80": "p99 delay at 80 %: InvisiFlow ~4.9 ms (Fig. 11)",
    "imb_70": "load imbalance at 70 %: missing paths InvisiFlow 0, low-priority UDP 33.2 %, pull 27.9 % (Fig. 7)",
    "asym": "asymmetric: missing paths low-priority UDP often > 40 %, pull > 30 %; InvisiFlow loses only above 70 % (Fig. 8)",
    "table3_1": "80 %, 1 collector: 2.34 % loss (default), 5.38 % (asymmetric) (Table 3)",
    "table3_2": "80 %, + 1 collector: 0.00 % loss (Table 3)",
}


def load_runs(path):
    runs = {}
    for f in sorted(glob.glob(os.path.join(path, "*.json"))):
        name = os.path.basename(f)[: -len(".json")]
        try:
            with open(f) as fh:
                runs[name] = json.load(fh)
        except (OSError, ValueError) as e:
            print(f"sim_plots: skipping {f}: {e}", file=sys.stderr)
    return runs


def pick(run, key):
    """The DTA-queried value when the run had the stores, else the ground truth's."""
    v = run.get(key)
    if v is None:
        v = run.get(key + "_groundtruth")
    return v


def fct_pairs(run, base, dest="fct_rack"):
    """(FCT with telemetry, FCT of the same flow without) for the flows to `dest`: "fct_rack"
    (the collector's rack) or "fct_collector" (the collector servers)."""
    if run is None or base is None:
        return []
    b = {i: f for i, f in base.get(dest, [])}
    return [(f, b[i]) for i, f in run.get(dest, []) if i in b and b[i] > 0]


def fct_ratio(run, base, dest="fct_rack"):
    """Median over the flows to `dest` of each flow's FCT divided by the same flow's FCT
    without telemetry (same seed, same flows). The median, because the mean of a few hundred
    FB_Hadoop flows is that of its few largest, which any perturbation reorders."""
    pairs = sorted(f / b for f, b in fct_pairs(run, base, dest))
    return pairs[len(pairs) // 2] if pairs else None


def fct_mean_ratio(run, base, dest="fct_rack"):
    """Mean FCT of the same flows with and without telemetry (the paper's normalisation)."""
    pairs = fct_pairs(run, base, dest)
    if not pairs:
        return None
    return sum(p[0] for p in pairs) / sum(p[1] for p in pairs)


def baseline(runs, scenario, load):
    """The run without telemetry of the same scenario and load (same seed, same flows); the
    volume and seed-rate variants only change telemetry, so theirs is the default one."""
    return runs.get(f"{scenario}-none-{load}") or runs.get(f"default-none-{load}")


def series(runs, scenario, channel, metric):
    xs, ys = [], []
    for name, r in runs.items():
        if not name.startswith(scenario + "-" + channel + "-"):
            continue
        if metric in ("fct_rack", "fct_collector"):
            v = fct_mean_ratio(r, baseline(runs, scenario, r["load"]), metric)
        else:
            v = pick(r, metric)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        xs.append(r["load"])
        ys.append(v)
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    return [xs[i] for i in order], [ys[i] for i in order]


def seeded_prefixes(runs):
    """Run-name prefixes of the seeds at 80 % load: "default" (seed 1), then "seedN"."""
    return ["default"] + sorted(
        n.split("-")[0] for n in runs if n.startswith("seed") and "-none-" in n
    )


def seed_average(runs, channel, dest):
    """Mean-FCT ratio of `channel` at 80 % averaged over the seeds run, and how many."""
    vals = []
    for prefix in seeded_prefixes(runs):
        m = fct_mean_ratio(runs.get(f"{prefix}-{channel}-0.8"), runs.get(f"{prefix}-none-0.8"), dest)
        if m is not None:
            vals.append(m)
    return (sum(vals) / len(vals), len(vals)) if vals else (None, 0)


def line_plot(runs, scenario, metric, ylabel, title, out, channels=CHANNELS, percent=False):
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    any_data = False
    for ch in channels:
        xs, ys = series(runs, scenario, ch, metric)
        if not xs:
            continue
        any_data = True
        ys = [y * 100 for y in ys] if percent else ys
        line = ax.plot(xs, ys, STYLE[ch], label=LABEL[ch])[0]
        if scenario == "default" and metric.startswith("fct_"):
            avg, n = seed_average(runs, ch, metric)
            if n > 1:
                ax.plot([0.8], [avg], STYLE[ch][0], ms=11, mfc="none", color=line.get_color(),
                        label=f"{LABEL[ch]}: mean of {n} seeds at 0.8")
    if not any_data:
        plt.close(fig)
        return False
    ax.set_xlabel("load")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def delay_plot(runs, out):
    loads = sorted({r["load"] for n, r in runs.items() if n.startswith("default-invisiflow-")})
    if not loads:
        return False
    show = sorted({min(loads, key=lambda l: abs(l - 0.4)), max(loads)})
    fig, axes = plt.subplots(1, len(show), figsize=(5.0 * len(show), 3.6), squeeze=False)
    for ax, load in zip(axes[0], show):
        for ch in CHANNELS:
            r = runs.get(f"default-{ch}-{load}")
            if r is None:
                continue
            q = r["delay_us_quantiles"]
            pts = [(v, i / 100) for i, v in enumerate(q) if v is not None]
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], STYLE[ch][:-1] + "-", ms=2,
                    label=LABEL[ch])
        ax.set_xscale("log")
        ax.set_xlabel("telemetry delay (us); lost entries never reach the curve's top")
        ax.set_ylabel("CDF")
        ax.set_title(f"load {load}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def fmt(v, percent=False, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if percent:
        return f"{v * 100:.2f} %"
    return f"{v:.{digits}g}"


def p99(run):
    v = run.get("delay_us_p99")
    return fmt(v) if v is not None else "∞ (> 1 % lost)"


def table(runs):
    lines = []
    loads = sorted({r["load"] for n, r in runs.items() if n.startswith("default-")})
    lines.append("### Default setting (FB_Hadoop)\n")
    lines.append(
        "| load | channel | telemetry loss | missing paths | missing imbalance events | "
        "normalised CMS error | p99 delay (us) | rack FCT / no telemetry, median (mean) | "
        "collector FCT / no telemetry, median (mean) | source |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for load in loads:
        base = runs.get(f"default-none-{load}")
        for ch in CHANNELS:
            r = runs.get(f"default-{ch}-{load}")
            if r is None:
                continue
            src = "DTA stores" if r.get("missing_paths_ratio") is not None else "ground truth"
            lines.append(
                f"| {load} | {LABEL[ch]} | {fmt(r.get('telemetry_loss_rate'), True)} | "
                f"{fmt(pick(r, 'missing_paths_ratio'), True)} | "
                f"{fmt(pick(r, 'missing_imbalance_ratio'), True)} | "
                f"{fmt(pick(r, 'cms_normalized_error'))} | "
                f"{p99(r)} | "
                f"{fmt(fct_ratio(r, base))} ({fmt(fct_mean_ratio(r, base))}) | "
                f"{fmt(fct_ratio(r, base, 'fct_collector'))} "
                f"({fmt(fct_mean_ratio(r, base, 'fct_collector'))}) | {src} |"
            )
    for scen, title in (("imbalance", "Load imbalance"), ("asymmetric", "Asymmetric topology"),
                        ("websearch", "WebSearch workload"),
                        ("volume5x", "Five times the load-imbalance reports (every 10 us)"),
                        ("buffer2x", "Twice the telemetry buffer (34 KB per switch)"),
                        ("buffer4x", "Four times the telemetry buffer (68 KB per switch)"),
                        ("seeds4x", "Seeds every 0.25 us on every switch port"),
                        ("ecnk65", "DCTCP marking threshold K = 65 packets unscaled (78 us of queue at 10 Gbps)")):
        rows = sorted(
            (r["load"], n, r) for n, r in runs.items() if n.startswith(scen + "-") and "-none-" not in n
        )
        if not rows:
            continue
        lines.append(f"\n### {title}\n")
        lines.append("| load | channel | telemetry loss | missing paths | normalised CMS error | "
                     "p99 delay (us) | rack FCT / no telemetry | collector FCT / no telemetry |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for load, n, r in rows:
            ch = n.split("-")[1]
            base = baseline(runs, scen, load)
            lines.append(
                f"| {load} | {LABEL.get(ch, ch)} | {fmt(r.get('telemetry_loss_rate'), True)} | "
                f"{fmt(pick(r, 'missing_paths_ratio'), True)} | "
                f"{fmt(pick(r, 'cms_normalized_error'))} | {p99(r)} | {fmt(fct_ratio(r, base))} | "
                f"{fmt(fct_ratio(r, base, 'fct_collector'))} |"
            )
    seeded = [(1 if p == "default" else int(p[4:]), p) for p in seeded_prefixes(runs)]
    if len(seeded) > 1:
        lines.append("\n### FCT of flows to the collector's rack at 80 % load, over seeds\n")
        lines.append("Mean FCT with telemetry / mean FCT of the same flows without (the paper's "
                     "normalisation), per seed, and their average; the median per-flow ratio in "
                     "brackets.\n")
        lines.append("| channel | " + " | ".join(f"seed {k}" for k, _ in seeded) + " | average |")
        lines.append("|---|" + "---|" * (len(seeded) + 1))
        for ch in CHANNELS:
            cells, means = [], []
            for _, prefix in seeded:
                r, base = runs.get(f"{prefix}-{ch}-0.8"), runs.get(f"{prefix}-none-0.8")
                m = fct_mean_ratio(r, base)
                if m is not None:
                    means.append(m)
                cells.append(f"{fmt(m)} ({fmt(fct_ratio(r, base))})")
            avg = sum(means) / len(means) if means else None
            lines.append(f"| {LABEL[ch]} | " + " | ".join(cells) + f" | {fmt(avg)} |")
    stress = [(scen, ch) for scen in ("imbalance", "asymmetric") for ch in ("low_udp", "invisiflow")]
    stress_seeds = sorted({int(n.split("-")[0][4:]) for n in runs
                           if n.startswith("seed") and n.split("-")[1] in ("imbalance", "asymmetric")})
    if stress_seeds:
        seeds = [1] + stress_seeds
        lines.append("\n### Stress cases at 70 % load, over seeds\n")
        lines.append("Missing paths (telemetry loss in brackets) per seed, and their mean.\n")
        lines.append("| case | channel | " + " | ".join(f"seed {k}" for k in seeds) + " | mean |")
        lines.append("|---|---|" + "---|" * (len(seeds) + 1))
        for scen, ch in stress:
            cells, vals = [], []
            for k in seeds:
                r = runs.get(f"{scen}-{ch}-0.7" if k == 1 else f"seed{k}-{scen}-{ch}-0.7")
                m = pick(r, "missing_paths_ratio") if r else None
                if m is not None:
                    vals.append(m)
                cells.append(f"{fmt(m, True)} ({fmt(r.get('telemetry_loss_rate') if r else None, True)})")
            mean = sum(vals) / len(vals) if vals else None
            lines.append(f"| {scen} | {LABEL[ch]} | " + " | ".join(cells) + f" | {fmt(mean, True)} |")
    t3 = [
        ("default, 1 collector", runs.get("default-invisiflow-0.8")),
        ("default, + 1 collector", runs.get("collectors2-invisiflow-0.8")),
        ("asymmetric, 1 collector", runs.get("asymmetric-invisiflow-0.8")),
        ("asymmetric, + 1 collector", runs.get("collectors2asym-invisiflow-0.8")),
    ]
    if any(r for _, r in t3):
        lines.append("\n### Second collector at 80 % load (InvisiFlow, Table 3)\n")
        lines.append("| configuration | telemetry loss | paper |")
        lines.append("|---|---|---|")
        paper = ["2.34 %", "0.00 %", "5.38 %", "0.00 %"]
        for (label, r), p in zip(t3, paper):
            lines.append(f"| {label} | {fmt(r.get('telemetry_loss_rate') if r else None, True)} | {p} |")
    lines.append("\n### The paper's values\n")
    for v in PAPER.values():
        lines.append(f"- {v}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    runs = load_runs(a.runs)
    if not runs:
        print(f"sim_plots: no run JSON in {a.runs}", file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    made = []
    specs = [
        ("default", "telemetry_loss_rate", "telemetry loss (%)", "Telemetry loss (FB_Hadoop)",
         "loss.png", CHANNELS, True),
        ("default", "missing_paths_ratio", "missing paths (%)", "Ratio of missing paths",
         "missing_paths.png", CHANNELS, True),
        ("default", "missing_imbalance_ratio", "missing events (%)",
         "Missing load-imbalance events (core)", "missing_imbalance.png", CHANNELS, True),
        ("default", "cms_normalized_error", "normalised relative error",
         "Count-Min relative error / loss-free", "cms_error.png", CHANNELS, False),
        ("default", "fct_rack", "mean FCT / same flows without telemetry",
         "FCT of flows to the collector's rack",
         "fct_rack.png", CHANNELS, False),
        ("default", "fct_collector", "mean FCT / same flows without telemetry",
         "FCT of flows to the collector server",
         "fct_collector.png", CHANNELS, False),
        ("imbalance", "missing_paths_ratio", "missing paths (%)", "Load imbalance: missing paths",
         "imbalance_missing_paths.png", ["low_udp", "pull", "invisiflow"], True),
        ("asymmetric", "missing_paths_ratio", "missing paths (%)",
         "Asymmetric topology: missing paths", "asymmetric_missing_paths.png",
         ["low_udp", "pull", "invisiflow"], True),
        ("asymmetric", "fct_rack", "mean FCT / no telemetry", "Asymmetric topology: rack FCT",
         "asymmetric_fct_rack.png", ["low_udp", "pull", "invisiflow"], False),
    ]
    for scen, metric, ylabel, title, fname, chans, pct in specs:
        if line_plot(runs, scen, metric, ylabel, title, os.path.join(a.out, fname), chans, pct):
            made.append(fname)
    if delay_plot(runs, os.path.join(a.out, "delay_cdf.png")):
        made.append("delay_cdf.png")
    with open(os.path.join(a.out, "results.md"), "w") as fh:
        fh.write("<!-- generated by scripts/sim_plots.py from the runs of scripts/sim.sh -->\n")
        fh.write(f"# InvisiFlow simulation results ({len(runs)} runs)\n\n")
        fh.write(table(runs))
    print(f"sim_plots: {len(runs)} runs -> {', '.join(made)} and results.md in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
