"""Demand response in a run's outputs: the events, the frequency changes and evictions over time.

:func:`write_dr_outputs` writes, in the run directory,

``dr_events.csv``
    one row per demand-response event: notice, start, end, the baseline power
    at notice and the cap it resolved to, and the platform's highest power
    and mean power during the event;
``dr_actions.csv``
    what the policy did, in time order: ``freq`` rows (a job's nodes set to a
    frequency; empty = back to nominal), ``evict`` / ``cancel`` rows;
``dr.png``
    power and cap with the events' windows (notice dashed), the number of
    nodes below their nominal frequency, and the evictions.

The report (``report.html``) shows the plot and both tables.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wattsched.model.constraints import NoticedEvent

EVENT_COLUMNS = ("label", "notice_s", "start_s", "end_s", "baseline_w", "cap_w", "max_power_w", "mean_power_w")
ACTION_COLUMNS = ("t_s", "action", "job_id", "nodes", "freq_ghz")


def event_rows(noticed: Sequence[NoticedEvent], timeline: dict[str, np.ndarray]) -> list[dict]:
    """One row per event, with the platform's highest and time-weighted mean power inside its window."""
    t = np.asarray(timeline["t_s"], dtype=float)
    p = np.asarray(timeline["power_w"], dtype=float)
    rows = []
    for e in noticed:
        ev = e.event
        mx, mean = math.nan, math.nan
        if len(t) > 1:
            # piecewise constant: row i holds over [t[i], t[i+1])
            lo = np.maximum(t[:-1], ev.start_s)
            hi = np.minimum(t[1:], ev.end_s)
            dur = np.clip(hi - lo, 0.0, None)
            inside = dur > 0
            if inside.any():
                mx = float(p[:-1][inside].max())
                mean = float((p[:-1] * dur).sum() / dur.sum())
        rows.append({"label": ev.label, "notice_s": ev.notice_s, "start_s": ev.start_s, "end_s": ev.end_s,
                     "baseline_w": e.baseline_w, "cap_w": e.cap_w, "max_power_w": mx, "mean_power_w": mean})
    return rows


def action_rows(log: Sequence[tuple[float, str, int, float, int]]) -> list[dict]:
    """Group the engine's control log: one ``freq`` row per job and time (all its nodes), one row per eviction."""
    rows: list[dict] = []
    groups: dict[tuple[float, int, float], int] = {}
    for t, kind, _node, value, job in log:
        if kind == "freq":
            key = (t, job, value)
            if key in groups and not (isinstance(value, float) and math.isnan(value)):
                rows[groups[key]]["nodes"] += 1
                continue
            nan_key = (t, job, -1.0)
            if isinstance(value, float) and math.isnan(value):
                if nan_key in groups:
                    rows[groups[nan_key]]["nodes"] += 1
                    continue
                groups[nan_key] = len(rows)
            else:
                groups[key] = len(rows)
            rows.append({"t_s": t, "action": "freq", "job_id": job if job >= 0 else "",
                         "nodes": 1, "freq_ghz": "" if math.isnan(value) else round(value / 1e9, 4)})
        elif kind in ("evict", "cancel"):
            rows.append({"t_s": t, "action": kind, "job_id": job, "nodes": "", "freq_ghz": ""})
    return rows


def _write(path: Path, columns: Sequence[str], rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns))
        w.writeheader()
        w.writerows(rows)


def write_dr_outputs(out_dir: Path, noticed: Sequence[NoticedEvent], log: Sequence[tuple], timeline: dict,
                     nodes: int) -> list[Path]:
    """Write ``dr_events.csv``, ``dr_actions.csv`` and ``dr.png`` in ``out_dir`` (nothing without events or actions)."""
    if not noticed and not log:
        return []
    out_dir = Path(out_dir)
    paths = [out_dir / "dr_events.csv", out_dir / "dr_actions.csv"]
    _write(paths[0], EVENT_COLUMNS, event_rows(noticed, timeline))
    _write(paths[1], ACTION_COLUMNS, action_rows(log))
    paths.append(_plot(out_dir / "dr.png", noticed, log, timeline, nodes))
    return paths


def _plot(path: Path, noticed, log, timeline, nodes: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.asarray(timeline["t_s"], dtype=float) / 3600
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True, height_ratios=(2, 1))
    ax1.step(t, np.asarray(timeline["power_w"]) / 1e3, where="post", lw=0.8, label="platform power")
    cap = np.asarray(timeline["cap_w"], dtype=float)
    ax1.step(t, np.where(np.isfinite(cap), cap, np.nan) / 1e3, where="post", color="crimson", lw=1.0, label="cap")
    for i, e in enumerate(noticed):
        ev = e.event
        ax1.axvspan(ev.start_s / 3600, ev.end_s / 3600, color="orange", alpha=0.15,
                    label="demand-response event" if i == 0 else None)
        ax1.axvline(ev.notice_s / 3600, color="orange", ls="--", lw=0.8, label="notice" if i == 0 else None)
    ax1.set_ylabel("kW")
    ax1.legend(loc="upper right", fontsize=8)
    # nodes whose own frequency is below nominal, over time
    freq: dict[int, float] = {}
    ts, counts = [0.0], [0]
    evict_t = []
    for tt, kind, node, value, _job in log:
        if kind == "freq":
            if isinstance(value, float) and math.isnan(value):
                freq.pop(node, None)
            else:
                freq[node] = value
            ts.append(tt / 3600)
            counts.append(len(freq))
        elif kind in ("evict", "cancel"):
            evict_t.append(tt / 3600)
    if len(t):
        ts.append(float(t[-1]))
        counts.append(counts[-1])
    ax2.step(ts, counts, where="post", color="tab:green", label="nodes below nominal frequency")
    if evict_t:
        ax2.plot(evict_t, [nodes * 0.05] * len(evict_t), "kx", label=f"evictions ({len(evict_t)})")
    ax2.set_ylim(0, max(nodes, 1) * 1.05)
    ax2.set_ylabel("nodes")
    ax2.set_xlabel("time (h)")
    ax2.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
