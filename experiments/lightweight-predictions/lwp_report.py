"""Summary table and figures (analogues of the paper's Figs. 4-7) from a results directory.

Reads ``runs.csv``, ``details.jsonl``, ``workloads.csv``, ``reference.json`` and
``config.json``; writes ``summary.md`` and ``fig4_window_power.png``,
``fig5_turnaround_change.png``, ``fig6_time_above_cap.png``,
``fig7_algorithms.png`` and ``fig7_size_classes.png``.

The paper's figure numbers: Fig. 4 is the platform power in the window,
Fig. 5 the turnaround degradation against EASY, Fig. 6 the time above the cap,
Fig. 7 the four algorithms at a 50 % cap.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
from lwp_experiment import (
    ALGO_LABELS,
    ALGORITHMS,
    AREA_CLASSES,
    BASELINE,
    CHECKS,
    SIZE_CLASSES,
    read_details,
    read_rows,
)

METHOD_ORDER = ["naive"] + [f"{c} ({v})" for c in ("max", "mean", "g68", "g95", "g99") for v in ("pred", "real")]
_SHORT = {"max": "max", "mean": "mean", "gaussian_68": "g68", "gaussian_95": "g95", "gaussian_99": "g99"}
assert len(METHOD_ORDER) == 1 + 2 * len(CHECKS)

PRED_COLOR = "#4C72B0"
REAL_COLOR = "#DD8452"
NAIVE_COLOR = "#8C8C8C"


def _color(method: str) -> str:
    if method == "naive":
        return NAIVE_COLOR
    return PRED_COLOR if method.endswith("(pred)") else REAL_COLOR


def _vals(rows: list[dict], key: str) -> np.ndarray:
    x = np.array([r[key] for r in rows if r.get(key) is not None], dtype=float)
    return x[np.isfinite(x)]


def _med_iqr(x: np.ndarray, scale: float = 1.0, digits: int = 1) -> str:
    if x.size == 0:
        return "—"
    q1, med, q3 = np.percentile(x * scale, [25, 50, 75])
    return f"{med:.{digits}f} [{q1:.{digits}f}, {q3:.{digits}f}]"


def _mean(x: np.ndarray, scale: float = 1.0, digits: int = 1) -> str:
    return "—" if x.size == 0 else f"{np.mean(x) * scale:.{digits}f}"


def _load(out: Path):
    rows = read_rows(out / "runs.csv")
    if not rows:
        raise SystemExit(f"no runs in {out / 'runs.csv'}")
    cfg = json.loads((out / "config.json").read_text())
    ref = json.loads((out / "reference.json").read_text()) if (out / "reference.json").exists() else None
    workloads = read_rows(out / "workloads.csv") if (out / "workloads.csv").exists() else []
    return rows, cfg, ref, workloads


def write_report(out: str | Path) -> None:
    """Write ``summary.md`` and the figures of the results in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    out = Path(out)
    rows, cfg, ref, workloads = _load(out)
    details = read_details(out)
    caps = [float(c) for c in cfg["caps"]]
    algo_cap = float(cfg["algo_cap"])
    base = {r["workload"]: r for r in rows if r["run_id"] == BASELINE.run_id}
    grid = [r for r in rows if r["algorithm"] == "easy-pc" and r["cap_frac"] is not None
            and not math.isnan(r["cap_frac"]) and r["cap_frac"] in caps]
    by = defaultdict(list)
    for r in grid:
        by[(r["method"], r["cap_frac"])].append(r)
    algo_rows = defaultdict(list)
    for r in rows:
        if r["algorithm"] in ALGORITHMS and r["check"] == "gaussian_99" and r["cap_frac"] == algo_cap:
            algo_rows[(r["algorithm"], r["values"])].append(r)

    _summary(out, rows, cfg, ref, workloads, caps, algo_cap, base, by, algo_rows)
    _fig4(out, by, details, caps, ref, base)
    _fig5(out, by, caps)
    _fig6(out, by, caps)
    _fig7(out, algo_rows, details, algo_cap, ref, base)
    _fig7_classes(out, algo_rows)


# --------------------------------------------------------------------------- summary.md


def _summary(out, rows, cfg, ref, workloads, caps, algo_cap, base, by, algo_rows) -> None:
    L: list[str] = []
    n_w = len(base)
    L.append("# Lightweight power predictions under a power cap: results\n")
    L.append(f"Generated from `{out.name}/runs.csv` ({len(rows)} runs, {n_w} workloads). "
             "Cells are **median [first quartile, third quartile] over workloads** unless said otherwise.\n")
    L.append("## Setup\n")
    L.append(f"- Trace `{cfg['trace']}`, {cfg['cores_per_node']} cores per node (one RICC node = one M100 node); "
             f"workloads: jobs submitted in [t0 − {cfg['warmup_h']:g} h, t0 + {cfg['window_h']:g} h), "
             f"cap window [{cfg['warmup_h']:g} h, {cfg['warmup_h'] + cfg['cap_window_h']:g} h) after the workload "
             f"start; power model `{cfg['power_model']}`; seed {cfg['seed']}.")
    if ref:
        L.append(f"- Reference dynamic power (highest platform power − all-idle power in the uncapped EASY runs): "
                 f"**{ref['ref_dyn_w']:,.0f} W** (workload {ref['workload']}); all-idle power "
                 f"{ref['idle_w']:,.0f} W; the platform model's maximum dynamic power "
                 f"{ref['platform_max_dyn_w']:,.0f} W; the paper's reference 955,080 W.")
        L.append("- Caps (cap_w = idle + f × reference): " + ", ".join(
            f"{f:.0%} = {ref['idle_w'] + f * ref['ref_dyn_w']:,.0f} W" for f in caps) + ".")
    if workloads:
        jobs = _vals(workloads, "jobs")
        load = _vals(workloads, "offered_load")
        L.append(f"- Jobs per workload (warm-up included): median {np.median(jobs):,.0f} "
                 f"(min {jobs.min():,.0f}, max {jobs.max():,.0f}); offered load of the workload on 980 nodes over "
                 f"warm-up + W: median {np.median(load):.2f} (min {load.min():.2f}, max {load.max():.2f}).")
        mae = [_vals(workloads, f"history_mae_{k}_w") for k in ("mean", "max", "std")]
        if all(m.size for m in mae):
            L.append("- History predictor (primed on the trace before the workload), mean absolute error on the "
                     "workload's jobs, median over workloads: mean power "
                     f"{np.median(mae[0]):.0f} W, max {np.median(mae[1]):.0f} W, std {np.median(mae[2]):.1f} W "
                     "(the paper: 67, 149 and 32.7 W on Marconi100).")
    if base:
        bw = np.array([(base[w]["window_mean_power_w"] - base[w]["idle_w"]) / ref["ref_dyn_w"] for w in base]) \
            if ref else np.array([])
        if bw.size:
            L.append("- Workloads whose uncapped EASY run draws more than the cap on average in the window "
                     "(where the cap binds): " + ", ".join(f"{f:.0%}: {int((bw > f).sum())}/{bw.size}" for f in caps)
                     + f". Uncapped EASY window power: median {np.median(bw):.2f} of the reference dynamic power.")
    unfinished = sum(1 for r in rows if r.get("jobs_unfinished"))
    rejected = sum(1 for r in rows if r.get("plans_rejected"))
    L.append(f"- Runs with unfinished jobs: {unfinished}; runs with plans rejected by the guard: {rejected}.")
    L.append("")

    L.append("## EASY+PC: power checks × caps (Figs. 4-6)\n")
    L.append("`util` = mean platform power in the window / cap (idle power included, the brief's metric); "
             "`dyn util` = (mean power − idle) / (cap − idle), the use of the dynamic power the cap allows; "
             "`above` = % of the window above the cap; `overshoot` = max % above the cap in the window; "
             "`ΔTAT` = change of the mean turnaround against uncapped EASY on the same workload (all jobs, warm-up "
             "included); `Δmax` = change of the max turnaround; `in win` = % of the jobs started in the window.\n")
    hdr = "| cap | method | util % | dyn util % | above % | overshoot % | ΔTAT % | Δmax TAT % | in win % |"
    L.append(hdr)
    L.append("|---" * (hdr.count("|") - 1) + "|")
    for f in caps:
        for m in METHOD_ORDER:
            rs = by.get((m, f), [])
            if not rs:
                continue
            L.append(f"| {f:.0%} | {m} | {_med_iqr(_vals(rs, 'power_util'), 100)} | "
                     f"{_med_iqr(_vals(rs, 'dyn_power_util'), 100)} | {_med_iqr(_vals(rs, 'frac_above_cap'), 100)} | "
                     f"{_med_iqr(_vals(rs, 'max_overshoot_pct'), 1, 2)} | {_med_iqr(_vals(rs, 'tat_change_pct'))} | "
                     f"{_med_iqr(_vals(rs, 'max_tat_change_pct'))} | "
                     f"{_med_iqr(_vals(rs, 'frac_jobs_in_window'), 100)} |")
    L.append("")

    L.append("## Per method, all caps together (the paper's way: per (workload, cap), then averaged)\n")
    L.append("Means over all (workload, cap) instances. `violating` = % of instances with any time above the cap. "
             "`under-use` = 100 − dyn util (the paper's \"under-utilization\", on the dynamic range).\n")
    L.append("| method | util % | dyn util % | under-use % | violating % | above % | overshoot % (mean / max) "
             "| ΔTAT % mean | ΔTAT % median |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for m in METHOD_ORDER:
        rs = [r for f in caps for r in by.get((m, f), [])]
        if not rs:
            continue
        above = _vals(rs, "frac_above_cap")
        ov = _vals(rs, "max_overshoot_pct")
        du = _vals(rs, "dyn_power_util")
        tat = _vals(rs, "tat_change_pct")
        L.append(f"| {m} | {_mean(_vals(rs, 'power_util'), 100)} | {_mean(du, 100)} | "
                 f"{100 - np.mean(du) * 100:.1f} | {100 * np.mean(above > 0):.0f} | {_mean(above, 100)} | "
                 f"{np.mean(ov):.2f} / {np.max(ov):.2f} | {np.mean(tat):+.1f} | {np.median(tat):+.1f} |")
    L.append("")

    if ref and base:
        L.append("Only the instances where the cap binds (uncapped EASY's mean power in the window above the cap):\n")
        L.append("| method | instances | dyn util % | violating % | above % | overshoot % (mean / max) "
                 "| ΔTAT % mean | ΔTAT % median |")
        L.append("|---|---|---|---|---|---|---|---|")
        for m in METHOD_ORDER:
            rs = [r for f in caps for r in by.get((m, f), []) if _binds(r, base)]
            if not rs:
                continue
            above = _vals(rs, "frac_above_cap")
            ov = _vals(rs, "max_overshoot_pct")
            tat = _vals(rs, "tat_change_pct")
            L.append(f"| {m} | {len(rs)} | {_mean(_vals(rs, 'dyn_power_util'), 100)} | "
                     f"{100 * np.mean(above > 0):.0f} | {_mean(above, 100)} | {np.mean(ov):.2f} / {np.max(ov):.2f} | "
                     f"{np.mean(tat):+.1f} | {np.median(tat):+.1f} |")
        L.append("")

    L.append(f"## Four algorithms at a {algo_cap:.0%} cap, gaussian_99 (Fig. 7)\n")
    L.append("`ΔTAT` and `Δmax` against uncapped EASY FCFS. Per size class (nodes): change of the class's mean "
             "turnaround, then of its max turnaround.\n")
    cls = [c[0] for c in SIZE_CLASSES]
    L.append("| algorithm | values | dyn util % | above % | overshoot % | ΔTAT % | Δmax TAT % | in win % | "
             + " | ".join(f"ΔTAT {c} n." for c in cls) + " | " + " | ".join(f"Δmax {c} n." for c in cls) + " |")
    L.append("|---|---|" + "---|" * (6 + 2 * len(cls)))
    for a in ALGORITHMS:
        for v in ("predicted", "real"):
            rs = algo_rows.get((a, v), [])
            if not rs:
                continue
            cells = [_med_iqr(_vals(rs, "dyn_power_util"), 100), _med_iqr(_vals(rs, "frac_above_cap"), 100),
                     _med_iqr(_vals(rs, "max_overshoot_pct"), 1, 2), _med_iqr(_vals(rs, "tat_change_pct")),
                     _med_iqr(_vals(rs, "max_tat_change_pct")), _med_iqr(_vals(rs, "frac_jobs_in_window"), 100)]
            cells += [_med_iqr(_vals(rs, f"mean_tat_change_pct_{c}")) for c in cls]
            cells += [_med_iqr(_vals(rs, f"max_tat_change_pct_{c}")) for c in cls]
            L.append(f"| {ALGO_LABELS[a]} | {v} | " + " | ".join(cells) + " |")
    L.append("")
    acls = [c[0] for c in AREA_CLASSES]
    L.append("The same by requested area (nodes × requested time, node-hours; the key SAF sorts on): change of "
             "the class's mean turnaround, then of its max turnaround.\n")
    L.append("| algorithm | values | " + " | ".join(f"ΔTAT {c}" for c in acls) + " | "
             + " | ".join(f"Δmax {c}" for c in acls) + " |")
    L.append("|---|---|" + "---|" * (2 * len(acls)))
    for a in ALGORITHMS:
        for v in ("predicted", "real"):
            rs = algo_rows.get((a, v), [])
            if not rs:
                continue
            cells = [_med_iqr(_vals(rs, f"mean_tat_change_pct_{c}")) for c in acls]
            cells += [_med_iqr(_vals(rs, f"max_tat_change_pct_{c}")) for c in acls]
            L.append(f"| {ALGO_LABELS[a]} | {v} | " + " | ".join(cells) + " |")
    L.append("")
    L.append("Wins (same workload): how often each algorithm's mean turnaround is below EASY FCFS's (same values), "
             "and how often its max turnaround is above it.\n")
    L.append("| algorithm | values | mean TAT < FCFS | max TAT > FCFS | max TAT of >64-node jobs > FCFS "
             "| mean TAT of >240 node-h jobs > FCFS | max TAT of >240 node-h jobs > FCFS |")
    L.append("|---|---|---|---|---|---|---|")
    for a in ALGORITHMS[1:]:
        for v in ("predicted", "real"):
            fc = {r["workload"]: r for r in algo_rows.get(("easy-pc", v), [])}
            rs = [r for r in algo_rows.get((a, v), []) if r["workload"] in fc]
            if not rs:
                continue
            better = sum(r["mean_turnaround_s"] < fc[r["workload"]]["mean_turnaround_s"] for r in rs)
            worse_max = sum(r["max_turnaround_s"] > fc[r["workload"]]["max_turnaround_s"] for r in rs)
            def worse(key: str, rs=rs, fc=fc) -> str:
                have = [r for r in rs if r.get(key) is not None and fc[r["workload"]].get(key) is not None]
                return f"{sum(r[key] > fc[r['workload']][key] for r in have)}/{len(have)}"

            L.append(f"| {ALGO_LABELS[a]} | {v} | {better}/{len(rs)} | {worse_max}/{len(rs)} | "
                     f"{worse('max_tat_>64')} | {worse('mean_tat_>240nh')} | {worse('max_tat_>240nh')} |")
    L.append("")
    L.append("## Uncapped EASY per workload\n")
    L.append("| workload | t0 (trace day) | jobs | warm-up jobs | offered load | window power (dyn frac) | "
             "mean TAT (h) | max TAT (h) |")
    L.append("|---|---|---|---|---|---|---|---|")
    winfo = {int(w["workload"]): w for w in workloads}
    for w in sorted(base):
        b = base[w]
        wi = winfo.get(w, {})
        dyn = (b["window_mean_power_w"] - b["idle_w"]) / ref["ref_dyn_w"] if ref else math.nan
        L.append(f"| {w} | {wi.get('t0_trace_day', float('nan')):.1f} | {b['n_jobs']} | "
                 f"{int(wi.get('warmup_jobs') or 0)} | {wi.get('offered_load', float('nan')):.2f} | {dyn:.2f} | "
                 f"{b['mean_turnaround_s'] / 3600:.1f} | {b['max_turnaround_s'] / 3600:.1f} |")
    L.append("")
    (out / "summary.md").write_text("\n".join(L))


def _binds(row: dict, base: dict) -> bool:
    """Whether the cap of ``row`` binds: uncapped EASY draws more than it on average in the window."""
    b = base.get(row["workload"])
    return b is not None and row.get("cap_w") is not None and b["window_mean_power_w"] > row["cap_w"]


# --------------------------------------------------------------------------- figures


def _boxplot(ax, data: list[np.ndarray], labels: list[str], colors: list[str], *, dots: bool = False) -> None:
    keep = [(d, lab, c) for d, lab, c in zip(data, labels, colors)]
    pos = np.arange(1, len(keep) + 1)
    bp = ax.boxplot([d if d.size else np.array([np.nan]) for d, _, _ in keep], positions=pos, widths=0.6,
                    whis=1.5, patch_artist=True, showfliers=not dots, flierprops={"markersize": 2, "alpha": 0.4},
                    medianprops={"color": "black"})
    for patch, (_, _, c) in zip(bp["boxes"], keep):
        patch.set_facecolor(c)
        patch.set_alpha(0.6)
    if dots:
        rng = np.random.default_rng(0)
        for p, (d, _, c) in zip(pos, keep):
            ax.scatter(p + rng.uniform(-0.18, 0.18, d.size), d, s=6, color=c, edgecolor="black", linewidth=0.2,
                       zorder=3)
    ax.set_xticks(pos)
    ax.set_xticklabels([lab for _, lab, _ in keep], rotation=70, fontsize=7)
    ax.grid(axis="y", alpha=0.3)


def _legend(fig) -> None:
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=NAIVE_COLOR, alpha=0.6, label="naive (2,100 W per node)"),
                        Patch(color=PRED_COLOR, alpha=0.6, label="predicted (history)"),
                        Patch(color=REAL_COLOR, alpha=0.6, label="real (oracle)")],
               loc="lower center", ncol=3, fontsize=8, frameon=False)


def _fig4(out, by, details, caps, ref, base) -> None:
    import matplotlib.pyplot as plt

    if not ref:
        return
    idle, dyn = ref["idle_w"], ref["ref_dyn_w"]
    fig, axes = plt.subplots(1, len(caps), figsize=(3.6 * len(caps), 4.6), sharey=True, squeeze=False)
    easy = [np.array(details[(w, BASELINE.run_id)]) for w in base if (w, BASELINE.run_id) in details]
    easy = (np.concatenate(easy) - idle) / dyn if easy else np.array([])
    for ax, f in zip(axes[0], caps):
        data, labels, colors = [easy], ["EASY (no cap)"], ["#55A868"]
        for m in METHOD_ORDER:
            samples = [details.get((r["workload"], r["run_id"])) for r in by.get((m, f), [])]
            samples = [np.array(s) for s in samples if s]
            data.append((np.concatenate(samples) - idle) / dyn if samples else np.array([]))
            labels.append(m)
            colors.append(_color(m))
        _boxplot(ax, data, labels, colors)
        ax.axhline(f, color="black", linewidth=1.2)
        ax.set_title(f"pcap = {f:.0%}", fontsize=10)
    axes[0][0].set_ylabel("platform power in the window\n(fraction of the max dynamic power)")
    fig.suptitle("Fig. 4 analogue: platform power during the 3-hour cap window (all workloads, 1-min samples)",
                 fontsize=10)
    _legend(fig)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    fig.savefig(out / "fig4_window_power.png", dpi=130)
    plt.close(fig)


def _per_method(by, f, key, scale=1.0):
    data, labels, colors = [], [], []
    for m in METHOD_ORDER:
        rs = by.get((m, f), [])
        data.append(_vals(rs, key) * scale)
        labels.append(m)
        colors.append(_color(m))
    return data, labels, colors


def _fig5(out, by, caps) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(caps), figsize=(3.4 * len(caps), 4.4), sharey=True, squeeze=False)
    for ax, f in zip(axes[0], caps):
        _boxplot(ax, *_per_method(by, f, "tat_change_pct"), dots=True)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_yscale("symlog", linthresh=10)
        ax.set_title(f"pcap = {f:.0%}", fontsize=10)
    axes[0][0].set_ylabel("mean turnaround change vs uncapped EASY (%, symlog)")
    fig.suptitle("Fig. 5 analogue: turnaround degradation against EASY (one dot per workload; lower is better)",
                 fontsize=10)
    _legend(fig)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    fig.savefig(out / "fig5_turnaround_change.png", dpi=130)
    plt.close(fig)


def _fig6(out, by, caps) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(caps), figsize=(3.4 * len(caps), 8.0), sharey="row", squeeze=False)
    for j, f in enumerate(caps):
        _boxplot(axes[0][j], *_per_method(by, f, "frac_above_cap", 100.0), dots=True)
        axes[0][j].set_title(f"pcap = {f:.0%}", fontsize=10)
        _boxplot(axes[1][j], *_per_method(by, f, "max_overshoot_pct"), dots=True)
    axes[0][0].set_ylabel("time above the cap (% of the 3-h window)")
    axes[1][0].set_ylabel("max overshoot (% of the cap)")
    fig.suptitle("Fig. 6 analogue: time above the cap and largest overshoot (one dot per workload; lower is better)",
                 fontsize=10)
    _legend(fig)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    fig.savefig(out / "fig6_time_above_cap.png", dpi=130)
    plt.close(fig)


def _algo_series(algo_rows, key, scale=1.0):
    data, labels, colors = [], [], []
    for a in ALGORITHMS:
        for v in ("predicted", "real"):
            data.append(_vals(algo_rows.get((a, v), []), key) * scale)
            labels.append(f"{ALGO_LABELS[a]} ({'pred' if v == 'predicted' else 'real'})")
            colors.append(PRED_COLOR if v == "predicted" else REAL_COLOR)
    return data, labels, colors


def _fig7(out, algo_rows, details, algo_cap, ref, base) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 5.0), squeeze=False)
    ax = axes[0]
    if ref:
        idle, dyn = ref["idle_w"], ref["ref_dyn_w"]
        data, labels, colors = _algo_series(algo_rows, "window_mean_power_w")
        _boxplot(ax[0], [(d - idle) / dyn for d in data], labels, colors, dots=True)
        ax[0].axhline(algo_cap, color="black", linewidth=1.2)
    ax[0].set_title("(a) mean platform power in the window\n(fraction of max dynamic power; cap = line)", fontsize=9)
    data, labels, colors = _algo_series(algo_rows, "tat_change_pct")
    _boxplot(ax[1], [-d for d in data], labels, colors, dots=True)
    ax[1].axhline(0, color="black", linewidth=0.8)
    ax[1].set_title("(b) mean turnaround improvement vs\nuncapped EASY FCFS (%, higher is better)", fontsize=9)
    _boxplot(ax[2], *_algo_series(algo_rows, "max_tat_change_pct"), dots=True)
    ax[2].axhline(0, color="black", linewidth=0.8)
    ax[2].set_title("(c) max turnaround increase vs\nuncapped EASY FCFS (%, lower is better)", fontsize=9)
    _boxplot(ax[3], *_algo_series(algo_rows, "frac_jobs_in_window", 100.0), dots=True)
    ax[3].set_title("(d) jobs started inside the window\n(% of the workload's jobs)", fontsize=9)
    fig.suptitle(f"Fig. 7 analogue: four algorithms, gaussian_99 check, cap {algo_cap:.0%} (one dot per workload)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    fig.savefig(out / "fig7_algorithms.png", dpi=130)
    plt.close(fig)


def _fig7_classes(out, algo_rows) -> None:
    import matplotlib.pyplot as plt

    colors = {"easy-pc": "#4C72B0", "easy-saf": "#C44E52", "knapsack-wait": "#55A868", "knapsack-stretch": "#8172B2"}
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    for row, (classes, unit) in enumerate(((SIZE_CLASSES, "nodes"), (AREA_CLASSES, "requested node-hours"))):
        cls = [c[0] for c in classes]
        for col, (key, what) in enumerate((("mean_tat_change_pct", "mean"), ("max_tat_change_pct", "max"))):
            ax = axes[row][col]
            width = 0.8 / len(ALGORITHMS)
            for i, a in enumerate(ALGORITHMS):
                rs = algo_rows.get((a, "predicted"), [])
                data = [_vals(rs, f"{key}_{c}") for c in cls]
                pos = np.arange(len(cls)) + (i - (len(ALGORITHMS) - 1) / 2) * width
                bp = ax.boxplot([d if d.size else np.array([np.nan]) for d in data], positions=pos,
                                widths=width * 0.9, patch_artist=True, showfliers=True, flierprops={"markersize": 2},
                                medianprops={"color": "black"})
                for patch in bp["boxes"]:
                    patch.set_facecolor(colors[a])
                    patch.set_alpha(0.7)
                ax.plot([], [], color=colors[a], linewidth=6, alpha=0.7, label=ALGO_LABELS[a])
            ax.axhline(0, color="black", linewidth=0.8)
            ax.set_xticks(np.arange(len(cls)))
            ax.set_xticklabels(cls)
            ax.set_xlabel(f"job class by {unit}")
            ax.set_title(f"{what} turnaround change per class vs uncapped EASY (%, symlog)", fontsize=9)
            ax.set_yscale("symlog", linthresh=10)
            ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Turnaround per job class, four algorithms, gaussian_99 on predicted power, cap 50 % "
                 "(boxes over workloads)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(out / "fig7_size_classes.png", dpi=130)
    plt.close(fig)
