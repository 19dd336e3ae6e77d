#!/usr/bin/env python3
"""Plot the papers' evaluation figures, reproduced: reads the CSV files the `figures` benchmark
(crates/engines/dta-int/benches/figures.rs) wrote and draws one PNG per figure, our medians beside the
paper's numbers. Run by scripts/figures.sh (docs/figures.md says what each figure shows).

    figures.py DATA_DIR PNG_DIR [FIG ...]     plot (all figures whose CSV exists, or FIG ...)

Each plot also prints a one-line summary (the figures docs/figures.md quotes). The paper's
numbers are those its text states ([DTA §6], [INT-NIC §IV]); where the text gives one point and a
rule (e.g. "linear in N"), the rule's other points are drawn dashed and labelled as derived.
"""

import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The paper's numbers, from its text.
PAPER = {
    # [DTA §6.5]: "Key-Write can collect 100M INT reports per second", N = 1; each report
    # becomes N RDMA writes, so the rate falls as 1/N.
    "fig10_n1": 100e6,
    # [DTA §6.5.1]: 4 cores answer 7.1 M queries/s at N = 2 (8 cores 14.2 M): per core.
    "fig11_n2_per_core": 7.1e6 / 4,
    # [DTA §6.5.3]: 3 GiB: 99.3 % at 10 M subsequent paths, 44.5 % at 100 M; 30 GiB: 99.99 %
    # and 98.2 %.
    "fig13": {3.0: [(10e6, 0.993), (100e6, 0.445)], 30.0: [(10e6, 0.9999), (100e6, 0.982)]},
    # [DTA §6.6]: at most 90.5 M paths/s (452.5 M postcards/s).
    "fig14_paths": 90.5e6,
    # [DTA §6.7]: over 1 G reports/s, line rate from batches of 4.
    "fig15": 1e9,
    # [DTA §6.7.1]: collection at 600 M reports/s alongside polling has no noticeable impact;
    # 8 cores read every report at the maximum collection rate (> 1 G/s): >= 1/8 of it per core.
    "fig16_collect": 600e6,
    "fig16_per_core": 1e9 / 8,
    # [INT-NIC §IV]: 11 Mpps at 1 hop x 1 metric, 6.57 Mpps at 5 hops x 4 metrics (the
    # arrival rate on 10 GbE: the sNIC keeps up with all of them).
    "int3": {(1, 1): 11e6, (5, 4): 6.57e6},
    # [INT-NIC §IV] Fig. 6: inaccuracy at the host below 0.04 % for every metric.
    "int6": 0.0004,
}

OURS = "ours (CPU, 1 core, 2-core VM)"


def read(data, name):
    path = os.path.join(data, f"{name}.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{path}: no rows")
    return rows


def num(row, key):
    return float(row[key])


def save(fig, out, name):
    fig.tight_layout()
    path = os.path.join(out, f"{name}.png")
    fig.savefig(path)
    plt.close(fig)
    return path


def mps(x):
    return x / 1e6


def fig10(rows, out):
    fig, ax = plt.subplots(figsize=(6.4, 4), dpi=110)
    ns = sorted({int(r["n"]) for r in rows})
    summary = []
    for dl, marker in (("4", "o"), ("20", "s")):
        sel = sorted((r for r in rows if r["data_len"] == dl), key=lambda r: int(r["n"]))
        ax.plot([int(r["n"]) for r in sel], [mps(num(r, "reports_per_s")) for r in sel],
                marker=marker, label=f"{OURS}, {dl} B data")
        summary += [f"N={r['n']} {dl}B {mps(num(r, 'reports_per_s')):.1f}" for r in sel]
    base = sorted((r for r in rows if r["data_len"] == "4"), key=lambda r: int(r["n"]))
    ax.plot([int(r["n"]) for r in base], [mps(num(r, "baseline_per_s")) for r in base],
            linestyle=":", color="grey", label="baseline: N random 8-byte writes per report")
    ax.plot([1], [mps(PAPER["fig10_n1"])], "r*", markersize=12, label="paper: 100 M/s at N = 1 (Tofino)")
    ax.plot(ns, [mps(PAPER["fig10_n1"]) / n for n in ns], "r--", alpha=0.5,
            label="paper, derived: 100 M/s / N")
    ax.set_xticks(ns)
    ax.set_xlabel("redundancy N")
    ax.set_ylabel("Key-Write reports / s (millions)")
    ax.set_yscale("log")
    ax.set_title("[DTA] Fig. 10: Key-Write collection rate vs N")
    ax.legend(fontsize=7)
    return save(fig, out, "fig10"), "; ".join(summary) + " M/s"


def fig11(rows, out):
    fig, ax = plt.subplots(figsize=(6.4, 4), dpi=110)
    rows = sorted(rows, key=lambda r: int(r["n"]))
    ns = [int(r["n"]) for r in rows]
    ax.plot(ns, [mps(num(r, "lookup_per_s")) for r in rows], marker="o", label=f"{OURS}: lookup")
    ax.plot(ns, [mps(num(r, "lookup_batch_per_s")) for r in rows], marker="s",
            label=f"{OURS}: lookup_batch (64 keys)")
    ax.plot([2], [mps(PAPER["fig11_n2_per_core"])], "r*", markersize=12,
            label="paper: 7.1 M/s on 4 cores at N = 2 (per core)")
    ax.set_xticks(ns)
    ax.set_xlabel("redundancy N")
    ax.set_ylabel("queries / s per core (millions)")
    ax.set_ylim(bottom=0)
    ax.set_title("[DTA] Fig. 11: Key-Write query rate vs N")
    ax.legend(fontsize=7)
    s = "; ".join(f"N={r['n']} lookup {mps(num(r, 'lookup_per_s')):.2f} batch "
                  f"{mps(num(r, 'lookup_batch_per_s')):.2f}" for r in rows)
    return save(fig, out, "fig11"), s + " M/s"


def fig12(rows, out):
    fig, ax = plt.subplots(figsize=(6.4, 4), dpi=110)
    worst = 0.0
    for n in sorted({r["n"] for r in rows}):
        sel = sorted((r for r in rows if r["n"] == n), key=lambda r: num(r, "load_factor"))
        xs = [num(r, "load_factor") for r in sel]
        line, = ax.plot(xs, [num(r, "measured") for r in sel], marker="o", markersize=3,
                        label=f"measured N = {n}")
        ax.plot(xs, [num(r, "a5") for r in sel], linestyle="--", color=line.get_color(),
                label=f"[DTA A.5] N = {n}")
        worst = max(worst, max(abs(num(r, "measured") - num(r, "a5")) for r in sel))
    # The paper's background: which N is best in each interval (from the measured points).
    by_alpha = {}
    for r in rows:
        by_alpha.setdefault(num(r, "load_factor"), []).append((num(r, "measured"), r["n"]))
    best = sorted((a, max(v)[1]) for a, v in by_alpha.items())
    # The paper's background colour: the N with the highest success in each interval.
    colors = {n: c for n, c in zip(sorted({r["n"] for r in rows}), plt.rcParams["axes.prop_cycle"].by_key()["color"])}
    step = best[1][0] - best[0][0] if len(best) > 1 else 0.1
    for a, n in best:
        ax.axvspan(a - step / 2, a + step / 2, color=colors[n], alpha=0.08, linewidth=0)
    ax.set_xlabel("load factor (keys / slots)")
    ax.set_ylabel("average query success")
    ax.set_title("[DTA] Fig. 12: query success vs load factor")
    ax.legend(fontsize=6, ncol=2)
    changes = [f"{a:g}:N={n}" for i, (a, n) in enumerate(best) if i == 0 or best[i - 1][1] != n]
    s = f"largest |measured - A.5| {worst:.4f}; best N from load factor " + ", ".join(changes)
    return save(fig, out, "fig12"), s


def fig13(rows, out):
    fig, ax = plt.subplots(figsize=(6.4, 4), dpi=110)
    summary = []
    for gib in sorted({num(r, "store_gib") for r in rows}):
        sel = sorted((r for r in rows if num(r, "store_gib") == gib), key=lambda r: num(r, "age_lo"))
        xs = [(num(r, "age_lo") + num(r, "age_hi")) / 2e6 for r in sel]
        line, = ax.plot(xs, [num(r, "queryability") for r in sel], marker="o", markersize=3,
                        label=f"measured, {gib:g} GiB")
        ax.plot(xs, [num(r, "a5") for r in sel], linestyle="--", color=line.get_color(), alpha=0.6)
        for age, q in PAPER["fig13"].get(gib, []):
            ax.plot([age / 1e6], [q], "*", color=line.get_color(), markersize=12,
                    markeredgecolor="black")
        avg = sum(num(r, "queryability") for r in sel) / len(sel)
        summary.append(f"{gib:g} GiB: oldest bin {num(sel[-1], 'queryability'):.3f}, mean {avg:.3f}")
    ax.plot([], [], "k*", label="paper (3 and 30 GiB, text)")
    ax.plot([], [], "k--", label="[DTA A.5]")
    ax.set_xlabel("report age (millions of subsequently reported paths)")
    ax.set_ylabel("queryability")
    ax.set_title("[DTA] Fig. 13: data longevity, 5-hop paths (20 B), N = 2")
    ax.legend(fontsize=7)
    return save(fig, out, "fig13"), "; ".join(summary)


def fig14(rows, out):
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(9.6, 4), dpi=110)
    summary = []
    for c in sorted({int(r["concurrent_flows"]) for r in rows}):
        sel = sorted((r for r in rows if int(r["concurrent_flows"]) == c),
                     key=lambda r: int(r["cache_entries"]))
        xs = [int(r["cache_entries"]) for r in sel]
        ax.plot(xs, [mps(num(r, "paths_per_s")) for r in sel], marker="o",
                label=f"{c} concurrent flows")
        ax2.plot(xs, [num(r, "success") for r in sel], marker="o", label=f"{c} concurrent flows")
        top = max(sel, key=lambda r: num(r, "paths_per_s"))
        summary.append(f"{c} flows: best {mps(num(top, 'paths_per_s')):.2f} M paths/s at "
                       f"{top['cache_entries']} entries (success {num(top, 'success'):.3f})")
    ax.axhline(mps(PAPER["fig14_paths"]), color="r", linestyle="--",
               label="paper: max 90.5 M paths/s (Tofino)")
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.set_xlabel("translator cache entries")
    ax.set_yscale("log")
    ax.set_ylim(bottom=1e-3)  # below 1 000 paths/s: the cache is thrashing (success ~0)
    ax.set_ylabel("complete 5-hop paths / s (millions)")
    ax2.set_ylabel("success (complete paths / paths)")
    ax2.set_ylim(0, 1.02)
    ax.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.suptitle("[DTA] Fig. 14: Postcarding rate and success vs cache size")
    return save(fig, out, "fig14"), "; ".join(summary)


def fig15(rows, out):
    fig, ax = plt.subplots(figsize=(6.4, 4), dpi=110)
    rows = sorted(rows, key=lambda r: int(r["batch"]))
    bs = [int(r["batch"]) for r in rows]
    ax.plot(bs, [mps(num(r, "entries_per_s")) for r in rows], marker="o", label=OURS)
    ax.plot(bs, [mps(num(r, "baseline_per_s")) for r in rows], linestyle=":", color="grey",
            label="baseline: B entries copied per write")
    ax.axhline(mps(PAPER["fig15"]), color="r", linestyle="--",
               label="paper: > 1 G reports/s, line rate from B = 4 (Tofino)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(bs, [str(b) for b in bs])
    ax.set_xlabel("batch size B (4-byte entries)")
    ax.set_ylabel("Append entries / s (millions)")
    ax.set_title("[DTA] Fig. 15: Append rate vs batch size")
    ax.legend(fontsize=7)
    s = "; ".join(f"B={r['batch']} {mps(num(r, 'entries_per_s')):.1f}" for r in rows)
    return save(fig, out, "fig15"), s + " M/s"


def fig16(rows, out):
    fig, ax = plt.subplots(figsize=(6.4, 4), dpi=110)
    by = {(r["readers"], r["collecting"]): r for r in rows}
    readers = sorted({r["readers"] for r in rows}, key=int)
    width = 0.38
    vals = {}
    for j, (col, label) in enumerate((("0", "polling alone"), ("1", "polling while collecting"))):
        ys = [mps(num(by[(k, col)], "poll_entries_per_s")) for k in readers]
        vals[col] = ys
        bars = ax.bar([i + (j - 0.5) * width for i in range(len(readers))], ys, width, label=label)
        ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.plot([i for i in range(len(readers))], [mps(PAPER["fig16_per_core"]) * int(k) for k in readers],
            "r--", marker="_", markersize=30,
            label="paper, derived: >= 125 M/s per core (8 cores poll > 1 G/s)")
    collect = mps(num(by[(readers[0], "1")], "collect_entries_per_s"))
    ax.set_xticks(range(len(readers)), [f"{k} core{'s' if k != '1' else ''}" for k in readers])
    ax.set_ylim(0, max(max(v) for v in vals.values()) * 1.35)
    ax.set_ylabel("entries polled / s (millions)")
    ax.set_title(f"[DTA] Fig. 16a: Append list polling (collection: {collect:.1f} M entries/s)")
    ax.legend(fontsize=7, loc="upper left")
    s = "; ".join(f"{k} reader(s): alone {a:.0f} M/s, while collecting {b:.0f} M/s ({b / a:.2f}x)"
                  for k, a, b in zip(readers, vals["0"], vals["1"]))
    return save(fig, out, "fig16"), s + f"; collection alongside {collect:.1f} M entries/s"


def int3(rows, out):
    fig, ax = plt.subplots(figsize=(6.4, 4), dpi=110)
    summary = []
    for m in sorted({int(r["metrics"]) for r in rows}):
        sel = sorted((r for r in rows if int(r["metrics"]) == m), key=lambda r: int(r["hops"]))
        ax.plot([int(r["hops"]) for r in sel], [mps(num(r, "frames_per_s")) for r in sel],
                marker="o", label=f"{OURS}, {m} metric{'s' if m > 1 else ''}")
    sel = sorted((r for r in rows if int(r["metrics"]) == 4), key=lambda r: int(r["hops"]))
    ax.plot([int(r["hops"]) for r in sel], [mps(num(r, "parse_per_s")) for r in sel],
            linestyle=":", color="grey", label="baseline: INT parse alone, 4 metrics")
    for (h, m), v in PAPER["int3"].items():
        ax.plot([h], [mps(v)], "r*", markersize=12)
        ax.annotate(f"paper (sNIC, 10 GbE) {h}x{m}: {mps(v):g} Mpps", (h, mps(v)), fontsize=7,
                    xytext=(6 if h == 1 else -6, 6), textcoords="offset points",
                    ha="left" if h == 1 else "right")
    ax.set_yscale("log")
    ax.set_xticks(range(1, 6))
    ax.set_xlabel("INT hops")
    ax.set_ylabel("INT packets / s (millions)")
    ax.set_title("[INT-NIC] Fig. 3a: INT sink throughput vs hops x metrics")
    ax.set_ylim(top=ax.get_ylim()[1] * 3)
    ax.legend(fontsize=7, loc="lower left")
    for key in ((1, 1), (5, 4), (5, 3)):
        r = next((r for r in rows if (int(r["hops"]), int(r["metrics"])) == key), None)
        if r:
            summary.append(f"{key[0]}x{key[1]}: {mps(num(r, 'frames_per_s')):.3f} Mpps "
                           f"(parse alone {mps(num(r, 'parse_per_s')):.1f})")
    return save(fig, out, "int3"), "; ".join(summary)


def int6(rows, out):
    metrics = ["hop_latency", "queue_occupancy", "egress_tx_util"]
    titles = ["(a) hop latency, all switches", "(b) queue occupancy, first switch",
              "(c) link utilisation, first switch"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), dpi=110)
    summary = []
    for ax, m, title in zip(axes, metrics, titles):
        sel = [r for r in rows if r["metric"] == m]
        lo = [int(r["bucket_lo"]) for r in sel]
        truth = [int(r["truth"]) for r in sel]
        obs = [int(r["observed"]) for r in sel]
        ax.bar(range(len(sel)), truth, width=0.4, label="trace ground truth", align="edge")
        ax.bar([i + 0.4 for i in range(len(sel))], obs, width=0.4, label="at the host (ours)",
               align="edge")
        # Log2 buckets: bucket 0 holds 0, the others [2^k, 2^(k+1)), labelled by 2^k.
        ax.set_xticks(range(len(sel)), [f"2^{int(math.log2(x))}" if x else "0" for x in lo],
                      rotation=90, fontsize=6)
        ax.set_xlabel("bucket (lower bound)", fontsize=8)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        t, o = sum(truth), sum(obs)
        # [INT-NIC] Fig. 6: loss rate = 1 - observed / occurrences in the trace, per value.
        worst = max(abs(oo - tt) / tt for tt, oo in zip(truth, obs) if tt)
        summary.append(f"{m}: {o} of {t} samples, total error {abs(o - t) / t:.2e}, "
                       f"worst bucket {worst:.2e}")
    axes[0].legend(fontsize=7)
    fig.suptitle("[INT-NIC] Fig. 6: metric distribution at the host vs the trace "
                 "(paper: inaccuracy < 0.04 %)", fontsize=10)
    return save(fig, out, "int6"), "; ".join(summary)


FIGS = {"fig10": fig10, "fig11": fig11, "fig12": fig12, "fig13": fig13, "fig14": fig14,
        "fig15": fig15, "fig16": fig16, "int3": int3, "int6": int6}


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    data, out = argv[0], argv[1]
    names = argv[2:] or [n for n in FIGS if os.path.exists(os.path.join(data, f"{n}.csv"))]
    if not names:
        raise SystemExit(f"{data}: no figure data (run scripts/figures.sh)")
    os.makedirs(out, exist_ok=True)
    for name in names:
        if name not in FIGS:
            raise SystemExit(f"unknown figure {name!r} (one of {', '.join(FIGS)})")
        path, summary = FIGS[name](read(data, name), out)
        print(f"{name}: {path}: {summary}")


if __name__ == "__main__":
    main(sys.argv[1:])
