"""The report of a sweep: aggregated tables (median and IQR per axis combination) and plots, in one HTML page.

Replicate axes (seeds, slices, traces of a slice axis) are aggregated over;
every other axis column defines a combination. Files written in the results
directory: ``runs.csv`` (one row per run), ``aggregate.csv`` (and ``.parquet``
with pyarrow), ``report.html`` (self-contained, plots embedded).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from wattsched.errors import RunDirError

REPLICATE = ("seed", "slice", "t0_s")
"""Axis columns aggregated over (the spread of a combination's metric comes from them)."""

METRICS = ("mean_turnaround_s", "mean_wait_s", "mean_bsld", "utilization", "energy_j", "max_power_w",
           "window_mean_power_w", "window_power_utilization", "window_frac_above_cap", "max_overshoot_pct",
           "jobs_started_in_window", "sim_wall_s")
"""Metrics of the aggregated table (those present)."""

PLOT_METRICS = ("mean_turnaround_s", "window_mean_power_w", "window_frac_above_cap")

LABELS: dict[str, tuple[str, str]] = {
    "mean_turnaround_s": ("mean turnaround", "duration"),
    "mean_wait_s": ("mean wait", "duration"),
    "mean_bsld": ("mean bounded slowdown", "number"),
    "utilization": ("utilization", "fraction"),
    "energy_j": ("energy", "energy"),
    "max_power_w": ("max power", "power"),
    "window_mean_power_w": ("mean power in the window", "power"),
    "window_power_utilization": ("power / cap in the window", "fraction"),
    "window_frac_above_cap": ("time above cap in the window", "fraction"),
    "max_overshoot_pct": ("max overshoot", "percent_of_cap"),
    "jobs_started_in_window": ("jobs started in the window", "number"),
    "sim_wall_s": ("simulation wall time", "duration"),
}
"""Human name and kind of quantity of each metric the report shows (the CSV files keep the column names)."""

AXIS_LABELS = {"dr_events": "DR events", "energy_budgets": "energy budgets", "t0_s": "slice start"}
"""Human names of axis columns other than the generic ``a_b.c`` -> ``a b c``."""

_SCALES: dict[str, tuple[tuple[str, float, float], ...]] = {
    # kind: (unit, value of one unit in SI, used while the largest value is below this many SI units)
    "duration": (("s", 1.0, 120.0), ("min", 60.0, 2 * 3600.0), ("h", 3600.0, 3 * 86400.0),
                 ("days", 86400.0, math.inf)),
    "energy": (("J", 1.0, 1e4), ("Wh", 3.6e3, 3.6e6), ("kWh", 3.6e6, 3.6e9), ("MWh", 3.6e9, 3.6e12),
               ("GWh", 3.6e12, math.inf)),
    "power": (("W", 1.0, 1e4), ("kW", 1e3, 1e6), ("MW", 1e6, math.inf)),
    "fraction": (("%", 0.01, math.inf),),
    "percent_of_cap": (("% of cap", 1.0, math.inf),),
    "number": (("", 1.0, math.inf),),
}


def metric_unit(metric: str, values: list[float]) -> tuple[str, str, float]:
    """``(label, unit, scale)`` of a metric: one unit for a whole column or axis, chosen by its largest value.

    >>> metric_unit("energy_j", [4.825e11, 3.9e11])
    ('energy', 'MWh', 3600000000.0)
    >>> metric_unit("mean_turnaround_s", [5400.0, 9000.0])
    ('mean turnaround', 'h', 3600.0)
    >>> metric_unit("window_frac_above_cap", [0.02])
    ('time above cap in the window', '%', 0.01)
    """
    label, kind = LABELS.get(metric, (metric.replace("_", " "), "number"))
    top = max((abs(v) for v in values if _is_num(v)), default=0.0)
    for unit, scale, below in _SCALES[kind]:
        if top < below:
            return label, unit, scale
    unit, scale, _ = _SCALES[kind][-1]
    return label, unit, scale


def axis_label(column: str) -> str:
    """Human name of an axis column: ``policy.check`` -> ``policy check``.

    >>> axis_label("policy.check"), axis_label("dr_events")
    ('policy check', 'DR events')
    """
    return AXIS_LABELS.get(column, column.replace(".", " ").replace("_", " "))


def _heading(label: str, unit: str) -> str:
    return f"{label} ({unit})" if unit else label


def _number(x: float) -> str:
    """A value in its column's unit, to about three significant digits, never in exponent form."""
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 0.01 or a == 0:
        return f"{x:.2f}"
    return f"{x:.2g}" if a >= 1e-4 else "0.00"


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def aggregate(rows: list[dict], axes: list[str]) -> tuple[list[str], list[dict]]:
    """Median, first and third quartile of each metric per combination of the non-replicate axes."""
    group_cols = [a for a in axes if a not in REPLICATE]
    metrics = [m for m in METRICS if any(_is_num(r.get(m)) for r in rows)]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("status") != "ok":
            continue
        groups.setdefault(tuple(str(r.get(c, "")) for c in group_cols), []).append(r)
    out = []
    for key, members in groups.items():
        agg: dict[str, Any] = dict(zip(group_cols, key))
        agg["runs"] = len(members)
        for m in metrics:
            x = np.array([r[m] for r in members if _is_num(r.get(m))], dtype=float)
            if x.size:
                q1, med, q3 = np.percentile(x, [25, 50, 75])
                agg[f"{m}_median"], agg[f"{m}_q1"], agg[f"{m}_q3"] = float(med), float(q1), float(q3)
            else:
                agg[f"{m}_median"] = agg[f"{m}_q1"] = agg[f"{m}_q3"] = None
        out.append(agg)
    return group_cols, out


def _write_csv(path: Path, rows: list[dict]) -> None:
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r[k]) for k in keys})


def _write_parquet(path: Path, rows: list[dict]) -> bool:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    cols = {}
    for k in keys:
        vals = [r.get(k) for r in rows]
        if all(v is None or _is_num(v) or (isinstance(v, float)) for v in vals) and any(v is not None for v in vals):
            cols[k] = pa.array([None if v is None else float(v) for v in vals], pa.float64())
        else:
            cols[k] = pa.array([None if v is None else str(v) for v in vals], pa.string())
    pq.write_table(pa.table(cols), path)
    return True


def _fig_html(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _label(r: dict, cols: list[str]) -> str:
    return " ".join(str(r.get(c)) for c in cols if r.get(c) not in (None, ""))


def _cap_order(v: str) -> float:
    s = str(v)
    if s == "none":
        return math.inf
    try:
        return float(s.rstrip("%"))
    except ValueError:
        return math.inf


def _plots(rows: list[dict], group_cols: list[str]) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.get("status") == "ok"]
    out: list[tuple[str, str]] = []
    if not ok:
        return out
    series_cols = [c for c in group_cols if c != "cap"]
    caps = sorted({str(r.get("cap")) for r in ok if "cap" in r}, key=_cap_order)
    for metric in PLOT_METRICS:
        if not any(_is_num(r.get(metric)) for r in ok):
            continue
        label, unit, scale = metric_unit(metric, [r.get(metric) for r in ok])
        ok = [{**r, metric: r[metric] / scale} if _is_num(r.get(metric)) else r for r in ok]
        if len(caps) >= 2:  # metric against cap, one line per combination of the other axes
            fig, ax = plt.subplots(figsize=(7, 4))
            series: dict[str, dict[str, list[float]]] = {}
            for r in ok:
                if _is_num(r.get(metric)):
                    series.setdefault(_label(r, series_cols) or "all", {}).setdefault(str(r["cap"]), []).append(
                        r[metric])
            for name, by_cap in sorted(series.items()):
                xs = [c for c in caps if c in by_cap]
                med = [float(np.median(by_cap[c])) for c in xs]
                q1 = [float(np.percentile(by_cap[c], 25)) for c in xs]
                q3 = [float(np.percentile(by_cap[c], 75)) for c in xs]
                pos = [caps.index(c) for c in xs]
                ax.errorbar(pos, med, yerr=[np.subtract(med, q1), np.subtract(q3, med)], marker="o", capsize=3,
                            label=name)
            ax.set_xticks(range(len(caps)), caps)
            ax.set_xlabel("cap")
            ax.set_ylabel(_heading(label, unit))
            ax.set_title(f"{label} against cap (median, IQR)")
            if len(series) <= 14:
                ax.legend(fontsize=7)
            out.append((f"{label.capitalize()} against cap", _fig_html(fig)))
        groups: dict[str, list[float]] = {}
        for r in ok:
            if _is_num(r.get(metric)):
                groups.setdefault(_label(r, group_cols) or "all", []).append(r[metric])
        if groups and max(len(v) for v in groups.values()) > 1:  # spread over seeds or slices
            names = sorted(groups)[:40]
            fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(names) + 2), 4))
            ax.boxplot([groups[n] for n in names], showfliers=False)
            ax.set_xticks(range(1, len(names) + 1), names, rotation=75, fontsize=7)
            ax.set_ylabel(_heading(label, unit))
            ax.set_title(f"{label} over seeds and slices")
            out.append((f"{label.capitalize()} over seeds and slices", _fig_html(fig)))
    power: dict[str, list[float]] = {}
    for r in ok:
        if isinstance(r.get("window_power_w"), list) and r.get("cap_w"):
            power.setdefault(_label(r, group_cols) or "all", []).extend(
                100.0 * p / r["cap_w"] for p in r["window_power_w"])
    if power:
        names = sorted(power)[:40]
        fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(names) + 2), 4))
        ax.boxplot([power[n] for n in names], showfliers=False)
        ax.axhline(100, color="red", lw=0.8)
        ax.set_xticks(range(1, len(names) + 1), names, rotation=75, fontsize=7)
        ax.set_ylabel("platform power in the window, % of cap")
        ax.set_title("power in the cap window (1-minute samples)")
        out.append(("Power in the cap window", _fig_html(fig)))
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def write_report(directory: str | Path) -> Path:
    """Write ``runs.csv``, ``aggregate.csv`` (+ ``.parquet``) and ``report.html`` in ``directory``."""
    from wattsched.sweep.store import Store

    directory = Path(directory)
    if not (directory / "results.sqlite").exists():
        raise RunDirError(f"{directory}: no results.sqlite here; run `wattsched sweep SWEEP.yaml` first")
    store = Store(directory, read_only=True)
    meta = store.meta("sweep", {}) or {}
    if not isinstance(meta, dict) or not isinstance(meta.get("keys") or [], list):
        store.close()
        raise RunDirError(f"{store.path}: meta 'sweep': not a sweep description; the file was changed outside "
                          "wattsched")
    keys = set(meta.get("keys") or []) or None
    rows = store.rows(keys)
    store.close()
    axes = meta.get("axes") or []
    group_cols, agg = aggregate(rows, axes)
    flat = [{k: v for k, v in r.items() if not isinstance(v, list)} for r in rows]
    _write_csv(directory / "runs.csv", flat)
    _write_csv(directory / "aggregate.csv", agg)
    _write_parquet(directory / "aggregate.parquet", agg)
    _write_parquet(directory / "runs.parquet", flat)
    ok = sum(r.get("status") == "ok" for r in rows)
    failed = [r for r in rows if r.get("status") != "ok"]
    total = len(meta.get("keys") or rows)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(str(meta.get('name', 'sweep')))}: wattsched sweep report</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}</style></head><body>",
        f"<h1>Sweep {html.escape(str(meta.get('name', '')))}</h1>",
        f"<p>{html.escape(str(meta.get('file', '')))}: {total} runs, {ok} finished, {len(failed)} failed, "
        f"{max(0, total - ok - len(failed))} not run yet. Axes: {html.escape(', '.join(map(axis_label, axes)))}; "
        f"aggregated over {html.escape(', '.join(axis_label(a) for a in axes if a in REPLICATE) or 'nothing')}. "
        "Tables: aggregate.csv, runs.csv.</p>",
    ]
    metrics = [m for m in METRICS if any(f"{m}_median" in a for a in agg)]
    units = {m: metric_unit(m, [a.get(f"{m}_{q}") for a in agg for q in ("median", "q1", "q3")])
             for m in metrics}
    parts.append("<h2>Median [IQR] per combination</h2><table><tr>")
    parts += [f"<th>{html.escape(axis_label(c))}</th>" for c in group_cols]
    parts.append("<th>runs</th>")
    parts += [f"<th>{html.escape(_heading(*units[m][:2]))}</th>" for m in metrics]
    parts.append("</tr>")
    for a in agg:
        parts.append("<tr>" + "".join(f"<td>{html.escape(_fmt(a.get(c)))}</td>" for c in [*group_cols, "runs"]))
        for m in metrics:
            med, scale = a.get(f"{m}_median"), units[m][2]
            cell = "—" if med is None else (f"{_number(med / scale)} [{_number(a[f'{m}_q1'] / scale)}, "
                                             f"{_number(a[f'{m}_q3'] / scale)}]")
            parts.append(f"<td>{html.escape(cell)}</td>")
        parts.append("</tr>")
    parts.append("</table>")
    for title, img in _plots(rows, group_cols):
        parts.append(f"<h2>{html.escape(title)}</h2>{img}")
    if failed:
        parts.append("<h2>Failed runs</h2><table><tr><th>key</th><th>axes</th><th>error</th></tr>")
        for r in failed:
            ax = ", ".join(f"{axis_label(c)} {r.get(c)}" for c in axes if c in r)
            parts.append(f"<tr><td>{html.escape(str(r['key']))}</td><td>{html.escape(ax)}</td>"
                         f"<td style='text-align:left'>{html.escape(str(r.get('error')))}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    path = directory / "report.html"
    path.write_text("\n".join(parts))
    return path
