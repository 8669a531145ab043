"""Per-run metrics of the Ahmed et al. 2017 reproduction, computed on the sweep's workers.

``wattsched sweep`` calls :func:`dr_metrics` as ``dr_metrics(result, run)`` after each run
(the sweep file names it under ``metrics:``); the columns it returns land in ``runs.csv``.
"""

from __future__ import annotations

import math

import numpy as np

TIMELINE_POINTS = 720
"""Samples of the power timeline kept for Fig. 4 (runs with a cap schedule only)."""


def power_stats(timeline: dict, t0: float, t1: float) -> tuple[float, float, float]:
    """Time-weighted mean, standard deviation and maximum of the platform power over ``[t0, t1)``.

    The timeline is piecewise constant: ``power_w[i]`` holds from ``t_s[i]`` to ``t_s[i + 1]``.

    >>> tl = {"t_s": np.array([0.0, 10.0, 30.0]), "power_w": np.array([100.0, 300.0, 0.0])}
    >>> [round(x, 3) for x in power_stats(tl, 0.0, 30.0)]
    [233.333, 94.281, 300.0]
    """
    t = np.asarray(timeline["t_s"], dtype=float)
    p = np.asarray(timeline["power_w"], dtype=float)
    if len(t) < 2:
        return math.nan, math.nan, math.nan
    lo, hi = np.maximum(t[:-1], t0), np.minimum(t[1:], t1)
    w = np.clip(hi - lo, 0.0, None)
    if w.sum() <= 0:
        return math.nan, math.nan, math.nan
    p = p[:-1]
    mean = float((p * w).sum() / w.sum())
    std = float(math.sqrt(((p - mean) ** 2 * w).sum() / w.sum()))
    return mean, std, float(p[w > 0].max())


def _mean(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(x.mean()) if len(x) else None


def dr_metrics(result, run: dict) -> dict:
    """Turnaround and energy of jobs started inside and outside the events; power during the events.

    The events are the run's ``dr_events`` (one per run in this experiment) or, for Fig. 4, the
    capped steps of its cap schedule. Returned columns (``None`` when undefined):

    ``turnaround_in_s``, ``turnaround_out_s``, ``energy_in_j``, ``energy_out_j``
        Mean turnaround (end - submit) and mean energy of the finished jobs that started inside
        (``_in``) or outside (``_out``) an event.
    ``jobs_in``, ``jobs_out``
        How many finished jobs started inside and outside.
    ``event_mean_w``, ``event_std_w``, ``event_max_w``
        Time-weighted mean, standard deviation and maximum of the platform power during the events.
    ``event_cap_w``, ``event_s``
        The lowest cap of the events and their total length.
    ``steps``
        For runs with a cap schedule (Fig. 4): per capped step, its cap and the power's mean,
        maximum, standard deviation and share of the step above the cap.
    ``timeline_t_s``, ``timeline_power_w``, ``timeline_max_w``, ``timeline_cap_w``
        For runs with a cap schedule (Fig. 4): the power at, and its maximum after, each point of a
        regular grid, and the cap.
    """
    spec = run["spec"]
    jobs = result.jobs
    windows: list[tuple[float, float, float]] = []
    for e in spec.get("dr_events") or []:
        windows.append((float(e["start_s"]), float(e["end_s"]), math.nan))
    tl = result.timeline
    cap_arr = np.asarray(tl["cap_w"], dtype=float)
    t_arr = np.asarray(tl["t_s"], dtype=float)
    if isinstance(spec.get("cap"), dict):
        for e in spec["cap"]["schedule"]:
            if e.get("end_s") is not None:
                windows.append((float(e["start_s"]), float(e["end_s"]), math.nan))
    out: dict = {}
    start = np.asarray(jobs["start_s"], dtype=float)
    end = np.asarray(jobs["end_s"], dtype=float)
    submit = np.asarray(jobs["submit_s"], dtype=float)
    energy = np.asarray(jobs["energy_j"], dtype=float)
    done = np.isfinite(end)
    inside = np.zeros(len(start), dtype=bool)
    for s, e, _ in windows:
        inside |= (start >= s) & (start < e)
    ta = end - submit
    out["turnaround_in_s"] = _mean(ta[done & inside])
    out["turnaround_out_s"] = _mean(ta[done & ~inside])
    out["energy_in_j"] = _mean(energy[done & inside])
    out["energy_out_j"] = _mean(energy[done & ~inside])
    out["jobs_in"] = int((done & inside).sum())
    out["jobs_out"] = int((done & ~inside).sum())
    if windows:
        # power over the union of the event windows: concatenate their pieces
        ws = sorted((s, e) for s, e, _ in windows)
        pieces_t, pieces_p = [], []
        p_arr = np.asarray(tl["power_w"], dtype=float)
        for s, e in ws:
            lo, hi = np.maximum(t_arr[:-1], s), np.minimum(t_arr[1:], e)
            w = np.clip(hi - lo, 0.0, None)
            pieces_t.append(w[w > 0])
            pieces_p.append(p_arr[:-1][w > 0])
        w = np.concatenate(pieces_t) if pieces_t else np.array([])
        p = np.concatenate(pieces_p) if pieces_p else np.array([])
        if w.sum() > 0:
            mean = float((p * w).sum() / w.sum())
            out["event_mean_w"] = mean
            out["event_std_w"] = float(math.sqrt(((p - mean) ** 2 * w).sum() / w.sum()))
            out["event_max_w"] = float(p.max())
        out["event_s"] = float(sum(e - s for s, e in ws))
        caps = [float(x) for x in cap_arr[(t_arr >= ws[0][0]) & (t_arr < ws[-1][1])] if math.isfinite(x)]
        out["event_cap_w"] = min(caps) if caps else None
    if isinstance(spec.get("cap"), dict) and len(t_arr):
        steps = []
        for e in spec["cap"]["schedule"]:
            if e.get("end_s") is None:
                continue
            s0, s1 = float(e["start_s"]), float(e["end_s"])
            mean, std, peak = power_stats(tl, s0, s1)
            caps = cap_arr[(t_arr >= s0) & (t_arr < s1)]
            cap_w = float(caps.min()) if len(caps) else math.nan
            lo, hi = np.maximum(t_arr[:-1], s0), np.minimum(t_arr[1:], s1)
            w = np.clip(hi - lo, 0.0, None)
            above = float(w[np.asarray(tl["power_w"], dtype=float)[:-1] > cap_w * (1 + 1e-9)].sum())
            steps.append({"label": e.get("label", ""), "start_s": s0, "end_s": s1, "cap_w": cap_w, "mean_w": mean,
                          "max_w": peak, "std_w": std, "frac_above_cap": above / (s1 - s0)})
        out["steps"] = steps
        t_end = float(t_arr[-1])
        grid = np.linspace(0.0, t_end, TIMELINE_POINTS, endpoint=False)
        idx = np.clip(np.searchsorted(t_arr, grid, side="right") - 1, 0, len(t_arr) - 1)
        out["timeline_t_s"] = [round(float(x), 1) for x in grid]
        p_all = np.asarray(tl["power_w"], dtype=float)
        out["timeline_power_w"] = [round(float(x), 1) for x in p_all[idx]]
        out["timeline_max_w"] = [round(float(x), 1) for x in np.maximum.reduceat(p_all, idx)]
        out["timeline_cap_w"] = [None if not math.isfinite(x) else round(float(x), 1) for x in cap_arr[idx]]
    return out
