"""Tables, figures and the point-by-point findings of the Borghesi et al. 2018 reproduction."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import b18
import b18_compare
import numpy as np

PROACTIVE = ("LS", "DEC")
PROACTIVE_ALL = ("LS", "DEC", "DEC_1s", "DEC+RAPL", "LS_U", "DEC_U", "LS_vU99", "DEC_vU99")
"""The paper's methods and their variants: never "state of the art" in a comparison."""


def _cells(rows: list[dict]) -> dict[tuple, dict]:
    """(figure, family, method, budget) -> mean BSLD, n, runs that broke the budget."""
    acc: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        acc[(r["figure"], r["family"], r["method"], r["budget_pct"])].append(r)
    out = {}
    for k, rs in acc.items():
        vals = [r["bsld"] for r in rs if r["bsld"] is not None]
        out[k] = {"mean": float(np.mean(vals)) if vals else math.nan, "n": len(rs),
                  "broke": sum(not r["budget_kept"] for r in rs),
                  "over_pct": max((r["peak_over_cap_pct"] or 0.0) for r in rs)}
    return out


def _fmt(c: dict | None) -> str:
    if c is None:
        return "–"
    s = f"{c['mean']:.2f}" if math.isfinite(c["mean"]) else "nan"
    if c["broke"]:
        s += f" ✗{c['broke']}/{c['n']}"
    return s


def write(rows: list[dict], results: Path, figures, meta: dict) -> None:
    results.mkdir(parents=True, exist_ok=True)
    with open(results / "rows.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["figure"])
        w.writeheader()
        w.writerows(rows)
    cells = _cells(rows)
    lines = ["# Borghesi et al. 2018 reproduction: mean BSLD (Eq. 3, θ = 300 s)", "",
             f"Instances per point: {meta['instances_per_point']}; budgets: "
             f"{'all' if meta['budgets'] is None else ', '.join(map(str, meta['budgets']))} %; "
             f"dec limits: {meta['dec']['time_limit_s']} s doubling to {meta['dec']['max_time_limit_s']} s "
             f"(CP-SAT deterministic time); sweep rows: {meta['runs']}.",
             "Each cell is the mean over instances; `✗k/n`: k of the n runs went above the budget "
             f"(by more than {b18.VIOLATION_TOL:.0%} at some time), the paper's 'no solution'.", ""]
    for fig in figures:
        for fam in fig.families:
            present = sorted({b for (f, fa, _, b) in cells if f == fig.key and fa == fam.key}, reverse=True)
            if not present:
                continue
            n = max(c["n"] for (f, fa, _, _), c in cells.items() if f == fig.key and fa == fam.key)
            lines += [f"## {fig.title}" + (f" — {fam.describe()}" if len(fig.families) > 1 else ""),
                      "", f"{fam.describe()}; up to {n} instances per cell.", "",
                      "| method | " + " | ".join(f"{b} %" for b in present) + " |",
                      "|---|" + "---|" * len(present)]
            for m in fig.methods:
                lines.append(f"| {m} | " + " | ".join(_fmt(cells.get((fig.key, fam.key, m, b))) for b in present)
                             + " |")
            lines.append("")
            if fig.key != "fig6":
                _bar_plot(cells, fig, fam, present, results / f"{fig.key}.png")
        if fig.key == "fig6":
            lines += _fig6(cells, fig, results / "fig6.png")
    findings = _findings(cells)
    lines += ["## Findings, computed", ""] + [f"- **{k}**: {v}" for k, v in findings.items()] + [""]
    (results / "summary.md").write_text("\n".join(lines))
    (results / "findings.json").write_text(json.dumps(findings, indent=1))
    (results / "meta.json").write_text(json.dumps(meta, indent=1, default=str))


def _bar_plot(cells, fig, fam, budgets, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = list(fig.methods)
    fig_, ax = plt.subplots(figsize=(max(6, 0.9 * len(budgets) * len(ms) / 5), 4))
    width = 0.8 / len(ms)
    x = np.arange(len(budgets))
    cmap = plt.get_cmap("tab20")
    for i, m in enumerate(ms):
        ys = [cells.get((fig.key, fam.key, m, b), {}).get("mean", math.nan) for b in budgets]
        broke = [cells.get((fig.key, fam.key, m, b), {}).get("broke", 0) for b in budgets]
        hatch = "//" if m.endswith("vU99") else None
        bars = ax.bar(x + (i - len(ms) / 2 + 0.5) * width, ys, width, label=m, color=cmap(i % 20), hatch=hatch)
        for bar, k in zip(bars, broke):
            if k:
                bar.set_alpha(0.35)
                ax.annotate("✗", (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", fontsize=6)
    ax.set_xticks(x, [f"{b}%" for b in budgets])
    ax.set_xlabel("power budget (% of the instance's uncapped peak of dynamic power)")
    ax.set_ylabel("average BSLD (θ = 300 s)")
    ax.set_yscale("log")
    ax.set_title(f"{fig.title}\n(faded ✗: some runs above the budget)", fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    fig_.tight_layout()
    fig_.savefig(path, dpi=110)
    plt.close(fig_)


def _fig6(cells, fig, path: Path) -> list[str]:
    """%DIF = 100 (BSLD_DEC - BSLD_DynShare_mixed) / BSLD_DynShare_mixed per window and budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = sorted({b for (f, _, _, b) in cells if f == fig.key}, reverse=True)
    table = {}
    for fam in fig.families:
        for b in budgets:
            d = cells.get((fig.key, fam.key, "DEC", b))
            r = cells.get((fig.key, fam.key, "DynShare_mixed", b))
            if d and r and r["mean"] > 0:
                table[(fam.window_s, b)] = 100 * (d["mean"] - r["mean"]) / r["mean"]
    if not table:
        return []
    windows = [fam.window_s for fam in fig.families]
    lines = ["### Fig. 6: %DIF of DEC against DynShare_mixed (negative: DEC better)", "",
             "| window | " + " | ".join(f"{b} %" for b in budgets) + " | mean |", "|---|" + "---|" * (len(budgets) + 1)]
    f_, ax = plt.subplots(figsize=(6, 4))
    for b in budgets:
        ax.plot([w / 60 for w in windows], [table.get((w, b), math.nan) for w in windows], marker="o", label=f"{b}%")
    means = [_mean_of([table[(w, b)] for b in budgets if (w, b) in table]) for w in windows]
    ax.plot([w / 60 for w in windows], means, marker="s", color="gold", linewidth=2.5, label="mean")
    for w, mean in zip(windows, means):
        lines.append(f"| {w / 60:g} min | " + " | ".join(
            f"{table[(w, b)]:+.0f} %" if (w, b) in table else "–" for b in budgets)
            + (f" | {mean:+.0f} % |" if math.isfinite(mean) else " | – |"))
    ax.axhline(0, color="k", linewidth=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("arrival window (min), 100 jobs, uniform")
    ax.set_ylabel("%DIF BSLD, DEC vs DynShare_mixed")
    ax.legend(fontsize=7)
    ax.set_title(fig.title, fontsize=9)
    f_.tight_layout()
    f_.savefig(path, dpi=110)
    plt.close(f_)
    return [*lines, ""]


def _is_dynshare(method: str, suffix: str) -> bool:
    return method.startswith("DynShare") and (method.endswith("+AC") if suffix else "+AC" not in method)


def _mean_of(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def _findings(cells) -> dict[str, str]:
    out: dict[str, str] = {}

    def mean(f, fa, m, b):
        c = cells.get((f, fa, m, b))
        return c["mean"] if c else math.nan

    keys = {(f, fa, b) for (f, fa, _, b) in cells}
    # 1. DEC never worse than LS
    pairs = [(k, mean(*k[:2], "DEC", k[2]), mean(*k[:2], "LS", k[2])) for k in sorted(keys)]
    pairs = [(k, d, s) for k, d, s in pairs if math.isfinite(d) and math.isfinite(s)]
    worse = [(k, d, s) for k, d, s in pairs if d > s * 1.01]
    if pairs:
        out["DEC never worse than LS"] = (
            f"DEC above LS by more than 1 % in {len(worse)} of {len(pairs)} (figure, budget) cells"
            + (": " + "; ".join(f"{k[0]} {k[2]} %: {d:.2f} vs {s:.2f}" for k, d, s in worse[:6]) if worse else ""))
    # 2. LS/DEC ahead at budgets >= 50 % with an empty machine
    for f, fa in (("fig2a", b18.F50.key), ("fig3", b18.F200.key), ("fig4a", b18.F400.key)):
        res = []
        for b in sorted({b for (ff, faa, b) in keys if ff == f and faa == fa and b >= 50}, reverse=True):
            pro = min(mean(f, fa, m, b) for m in PROACTIVE)
            others = {m: mean(f, fa, m, b) for (ff, faa, m, bb) in cells if ff == f and faa == fa and bb == b
                      and m not in PROACTIVE_ALL and m != "DynShare_0"}
            best = min(others, key=lambda m: others[m] if math.isfinite(others[m]) else math.inf) if others else None
            if best:
                res.append(f"{b} %: {pro:.2f} vs {best} {others[best]:.2f}")
        if res:
            out[f"LS/DEC ahead at >= 50 % ({f}, best other but DynShare_0)"] = "; ".join(res)
    # 3. RAPL ahead with HS 70 % and tight budgets
    f, fa = "fig2b", b18.F50HS.key
    res = []
    for b in sorted({b for (ff, faa, b) in keys if ff == f and faa == fa}, reverse=True):
        pro = min(mean(f, fa, m, b) for m in PROACTIVE)
        rapl = {m: mean(f, fa, m, b) for m in ("DynShare_0.25", "DynShare_0.5", "DynShare_0.75", "DynShare_mixed")}
        rapl = {m: v for m, v in rapl.items() if math.isfinite(v)}
        if rapl:
            bm = min(rapl, key=rapl.get)
            res.append(f"{b} %: LS/DEC {pro:.2f} vs {bm} {rapl[bm]:.2f}")
    if res:
        out["RAPL methods vs LS/DEC with HS 70 % (fig2b)"] = "; ".join(res)
    # 4. Simple an order of magnitude worse
    ratios = []
    for (f, fa, b) in sorted(keys):
        s = mean(f, fa, "Simple", b)
        others = [c["mean"] for (ff, faa, m, bb), c in cells.items()
                  if (ff, faa, bb) == (f, fa, b) and m != "Simple" and math.isfinite(c["mean"])]
        if math.isfinite(s) and others:
            ratios.append((f, b, s / float(np.median(others))))
    if ratios:
        rs = np.array([r for _, _, r in ratios])
        out["Simple vs the median of the other methods"] = (
            f"ratio median {np.median(rs):.1f}, min {rs.min():.1f}, max {rs.max():.1f} over {len(rs)} cells; "
            f">= 10 in {(rs >= 10).sum()}")
    # 5. DynShare infeasible <= 30 % with 400 jobs without admission control, feasible with it
    for f, suffix in (("fig4a", ""), ("fig4b", "+AC")):
        tight = [c for (ff, _, m, b), c in cells.items() if ff == f and _is_dynshare(m, suffix) and b <= 30]
        loose = [c for (ff, _, m, b), c in cells.items() if ff == f and _is_dynshare(m, suffix) and b > 30]
        if tight:
            out[f"DynShare{suffix} runs above budget ({f})"] = (
                f"at <= 30 %: {sum(c['broke'] for c in tight)} of {sum(c['n'] for c in tight)}; "
                f"at > 30 %: {sum(c['broke'] for c in loose)} of {sum(c['n'] for c in loose)}")
    # 6. DEC+RAPL best or equal
    for f in ("fig5a", "fig5b", "fig6"):
        tot = ok = 0
        worst = []
        for (ff, fa, b) in sorted(keys):
            if ff != f:
                continue
            dr = mean(ff, fa, "DEC+RAPL", b)
            others = [c["mean"] for (x, y, m, bb), c in cells.items() if (x, y, bb) == (ff, fa, b)
                      and m != "DEC+RAPL" and math.isfinite(c["mean"]) and not c["broke"]]
            if math.isfinite(dr) and others:
                tot += 1
                best = min(others)
                if dr <= best * 1.05:
                    ok += 1
                else:
                    worst.append(f"{fa} {b} %: {dr:.2f} vs {best:.2f}")
        if tot:
            out[f"DEC+RAPL best or within 5 % ({f})"] = f"{ok} of {tot} cells" + (
                "; not in " + "; ".join(worst[:5]) if worst else "")
    # 7. margin
    f, fa = "fig7", b18.F100U.key
    parts = []
    for m in ("LS", "DEC", "LS_U", "DEC_U", "LS_vU99", "DEC_vU99"):
        tot = sum(c["n"] for (ff, faa, mm, _), c in cells.items() if (ff, faa, mm) == (f, fa, m))
        broke = sum(c["broke"] for (ff, faa, mm, _), c in cells.items() if (ff, faa, mm) == (f, fa, m))
        over = max((c["over_pct"] for (ff, faa, mm, _), c in cells.items() if (ff, faa, mm) == (f, fa, m)),
                   default=math.nan)
        if tot:
            parts.append(f"{m} above budget in {broke}/{tot} runs (peak {over:+.1f} %)")
    for base, marg in (("LS", "LS_vU99"), ("DEC", "DEC_vU99")):
        b_ = [mean(f, fa, base, b) for (ff, faa, b) in keys if (ff, faa) == (f, fa)]
        m_ = [mean(f, fa, marg, b) for (ff, faa, b) in keys if (ff, faa) == (f, fa)]
        pairs = [(x, y) for x, y in zip(b_, m_) if math.isfinite(x) and math.isfinite(y)]
        if pairs:
            parts.append(f"{marg} BSLD vs {base} (true predictions): "
                         f"{100 * (np.mean([y for _, y in pairs]) / np.mean([x for x, _ in pairs]) - 1):+.1f} %")
    if parts:
        out["Under-prediction and the 1 % margin (fig7)"] = "; ".join(parts)
    return out


def read_rows(path: Path) -> list[dict]:
    """``rows.csv`` read back with its types: the comparison is computed from the file as committed."""
    out = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            out.append({**r, "budget_pct": int(r["budget_pct"]), "instance": int(r["instance"]),
                        "window_s": float(r["window_s"]), "bsld": b18._num(r["bsld"]),
                        "budget_kept": r["budget_kept"] == "True",
                        "peak_over_cap_pct": b18._num(r["peak_over_cap_pct"]),
                        "time_over_cap_frac": b18._num(r["time_over_cap_frac"])})
    return out


def comparison(rows: list[dict]) -> str:
    """COMPARISON.md: one row per claim of the paper, its number beside ours, computed from ``rows``."""
    return b18_compare.comparison(rows)
