"""Verdicts of a simulation run: did it hold its cap, keep its budgets, meet its events, drain its queue?

:func:`verdicts` is the one place they are decided; the report's header
(``report.html``), ``simulate``'s text summary and ``summary.json``
(``"verdicts"``) all show what it returns, and :func:`verdict_lines` words it
for a terminal. It is pure: the run's summary, its information and its
tables in, plain JSON-ready values out.

Warnings flag conditions that make a result meaningless rather than bad: an
energy budget below what the platform draws idle over its window (and the
run never powered a node off), a demand-response event, budget window or
capped window outside the trace's span (from its first submission to its last
job's end), a constraint the
chosen policy declares it ignores (:class:`~wattsched.policies.base.PolicyTags`
``constraints``), and a run where most jobs never finished.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from wattsched.sim.metrics import ABOVE_CAP_ABS_W, ABOVE_CAP_REL, format_duration, format_energy, format_power

__all__ = ["WARNING_KINDS", "finished_text", "repeats_a_warning", "verdict_lines", "verdicts"]

WARNING_KINDS = ("budget_below_idle", "outside_trace", "ignored_constraint", "most_unfinished")
"""The ``kind`` of each warning :func:`verdicts` can give."""


def _tolerance(limit_w: float) -> float:
    return ABOVE_CAP_ABS_W + ABOVE_CAP_REL * abs(limit_w)


def _rows(timeline: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(timeline.get("t_s", ()), dtype=float)
    p = np.asarray(timeline.get("power_w", np.full(t.size, np.nan)), dtype=float)
    return t, p


def _energy_between(t: np.ndarray, p: np.ndarray, start_s: float, end_s: float) -> tuple[float, float]:
    """Energy of the piecewise-constant power over ``[start_s, end_s)``, and the time of it the run covered."""
    if t.size < 2:
        return 0.0, 0.0
    dt = np.clip(np.minimum(t[1:], end_s) - np.maximum(t[:-1], start_s), 0.0, None)
    return float(np.dot(np.nan_to_num(p[:-1]), dt)), float(dt.sum())


def _peak_between(t: np.ndarray, p: np.ndarray, start_s: float, end_s: float) -> float | None:
    if t.size < 2:
        return None
    inside = (np.minimum(t[1:], end_s) - np.maximum(t[:-1], start_s)) > 0
    return float(np.nanmax(p[:-1][inside])) if inside.any() else None


def _cap_verdict(summary: dict) -> dict | None:
    capped = summary.get("capped_time_s")
    if not capped:
        return None
    above = float(summary.get("time_above_cap_s") or 0.0)
    out = {
        "held": above == 0.0,
        "capped_time_s": float(capped),
        "time_above_s": above,
        "frac_capped_time_above": above / float(capped),
        "energy_above_j": float(summary.get("energy_above_cap_j") or 0.0),
        "max_overshoot_w": float(summary.get("max_overshoot_w") or 0.0),
        "max_overshoot_pct": summary.get("max_overshoot_pct"),
    }
    if out["held"]:
        out["text"] = f"held: power never above the cap over {format_duration(out['capped_time_s'])} capped"
    else:
        pct = out["max_overshoot_pct"]
        worst = format_power(out["max_overshoot_w"]) + (f" ({pct:.1f} % of the cap)" if pct is not None else "")
        share = 100 * out["frac_capped_time_above"]
        out["text"] = (f"not held: above the cap for {format_duration(above)} ({share:.1f} % of the capped time), "
                       f"{format_energy(out['energy_above_j'])} above it, worst overshoot {worst}")
    return out


def _budget_verdicts(budgets: list[dict], t: np.ndarray, p: np.ndarray) -> list[dict]:
    out = []
    end_of_run = float(t[-1]) if t.size else -math.inf
    for i, b in enumerate(budgets):
        start, end, budget = float(b["start_s"]), float(b["end_s"]), float(b["energy_j"])
        used, _covered = _energy_between(t, p, start, end)
        margin = budget - used
        held = used <= budget * (1 + 1e-9)
        v = {"index": i, "start_s": start, "end_s": end, "budget_j": budget, "used_j": used, "margin_j": margin,
             "held": held, "window_complete": end_of_run >= end}
        words = "held" if held else "not held"
        v["text"] = (f"{words}: budget {format_energy(budget)} from {format_duration(start)} to "
                     f"{format_duration(end)}, used {format_energy(used)}, margin {format_energy(margin)} "
                     f"({100 * margin / budget:+.1f} %)")
        if not v["window_complete"]:
            v["text"] += f"; the run ended {format_duration(end - max(end_of_run, start))} before the window did"
        out.append(v)
    return out


def _event_verdicts(events: list[dict], t: np.ndarray, p: np.ndarray) -> list[dict]:
    out = []
    for i, e in enumerate(events):
        start, end, target = float(e["start_s"]), float(e["end_s"]), float(e["cap_w"])
        peak = _peak_between(t, p, start, end)
        met = None if peak is None else peak <= target + _tolerance(target)
        v = {"index": i, "label": e.get("label") or "demand response", "start_s": start, "end_s": end,
             "target_w": target, "max_power_w": peak, "met": met}
        if met is None:
            v["text"] = f"not reached: the run ended before the event ({format_duration(start)})"
        else:
            v["text"] = (f"{'met' if met else 'missed'}: peak {format_power(peak)} against a target of "
                         f"{format_power(target)} from {format_duration(start)} to {format_duration(end)}")
        out.append(v)
    return out


def _queue_verdict(summary: dict, timeline: dict[str, np.ndarray]) -> dict:
    n = int(summary.get("n_jobs") or 0)
    unfinished = int(summary.get("jobs_unfinished") or 0)
    pending = np.asarray(timeline.get("pending_jobs", ()), dtype=float)
    busy = np.asarray(timeline.get("busy_nodes", ()), dtype=float)
    pending_end = int(pending[-1]) if pending.size and math.isfinite(pending[-1]) else None
    out = {"drained": unfinished == 0, "n_jobs": n, "unfinished": unfinished, "pending_at_end": pending_end,
           "busy_nodes_at_end": int(busy[-1]) if busy.size and math.isfinite(busy[-1]) else None,
           "max_pending": int(np.nanmax(pending)) if pending.size and np.isfinite(pending).any() else None}
    if out["drained"]:
        out["text"] = f"drained: all {n:,} jobs finished"
    else:
        pend = f", {pending_end:,} pending at the end" if pending_end is not None else ""
        out["text"] = f"not drained: {unfinished:,} of {n:,} jobs never finished{pend}"
    return out


def _given_constraints(info: dict) -> set[str]:
    given = set()
    if any(math.isfinite(float(c[1])) for c in info.get("cap") or ()):
        given.add("cap")
    if info.get("energy_budgets"):
        given.add("budgets")
    if info.get("dr_events"):
        given.add("dr_events")
    return given


def _warnings(summary: dict, info: dict, timeline: dict[str, np.ndarray], span: tuple[float, float] | None,
              ) -> list[dict]:
    warnings: list[dict] = []

    def warn(kind: str, message: str) -> None:
        warnings.append({"kind": kind, "message": message})

    idle_w = info.get("idle_power_w")
    off = np.asarray(timeline.get("off_nodes", ()), dtype=float)
    shut_down = bool(off.size and np.nanmax(off) > 0)
    if idle_w is not None and not shut_down:
        for i, b in enumerate(info.get("energy_budgets") or ()):
            floor = float(idle_w) * (float(b["end_s"]) - float(b["start_s"]))
            if float(b["energy_j"]) < floor:
                warn("budget_below_idle",
                     f"energy budget {i + 1} ({format_energy(float(b['energy_j']))}) is below what the platform "
                     f"draws idle over its window ({format_power(float(idle_w))} x "
                     f"{format_duration(float(b['end_s']) - float(b['start_s']))} = {format_energy(floor)}) and no "
                     "node was powered off: it cannot be kept, whatever the policy does")
    if span is not None:
        first, last = span
        windows = [(f"energy budget {i + 1}", float(b["start_s"]), float(b["end_s"]))
                   for i, b in enumerate(info.get("energy_budgets") or ())]
        windows += [(f"demand-response event {i + 1}", float(e["start_s"]), float(e["end_s"]))
                    for i, e in enumerate(info.get("dr_events") or ())]
        steps = info.get("cap") or ()
        for i, step in enumerate(steps):
            start = float(step[0])
            if math.isfinite(float(step[1])) and math.isfinite(start):
                end = float(steps[i + 1][0]) if i + 1 < len(steps) else math.inf
                windows.append((f"the cap of {format_power(float(step[1]))}", start, end))
        for what, start, end in windows:
            if end <= first or start > last:
                warn("outside_trace",
                     f"{what} ({format_duration(start)} to {format_duration(end)}) lies outside the trace's span "
                     f"(first submission to last job end: {format_duration(first)} to {format_duration(last)}): no "
                     "job of the trace is in the system then, so it measures nothing about the policy")
    uses = info.get("policy_constraints")
    if uses is not None:
        names = {"cap": "power cap", "budgets": "energy budgets", "dr_events": "demand-response events"}
        uses = set(uses)
        for c in sorted(_given_constraints(info)):
            if c not in uses and not (c == "dr_events" and "cap" in uses):
                warn("ignored_constraint",
                     f"policy {info.get('policy')} ignores the {names[c]} of this run: no decision respects it, "
                     "the verdict measures an unconstrained schedule against it")
    n = int(summary.get("n_jobs") or 0)
    unfinished = int(summary.get("jobs_unfinished") or 0)
    if n and unfinished > n / 2:
        warn("most_unfinished",
             f"{unfinished:,} of {n:,} jobs never finished: the means of waits and slowdowns cover the few that did")
    return warnings


def verdicts(summary: dict[str, Any], info: dict[str, Any], timeline: dict[str, np.ndarray],
             jobs: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The verdicts of a run and the warnings about it, as plain values.

    Parameters
    ----------
    summary
        The run's summary (:func:`~wattsched.sim.metrics.summarize`).
    info
        The run's information: ``cap`` (the cap steps), ``energy_budgets``
        (``start_s``, ``end_s``, ``energy_j``), ``dr_events`` (``start_s``,
        ``end_s``, ``cap_w`` the target they resolved to), ``idle_power_w``
        and ``policy_constraints`` (those the policy declares; ``None``:
        undeclared), each optional.
    timeline, jobs
        The run's tables (``jobs`` gives the trace's span, first submission to
        last end, that the outside-the-trace warning needs).

    Returns
    -------
    dict
        ``cap`` (``None`` when no cap applied), ``budgets`` and ``dr_events``
        (one entry each), ``queue``, ``finished`` (the jobs the means count)
        and ``warnings`` (``kind`` of :data:`WARNING_KINDS`, ``message``).
        Each verdict has a ``text`` for people.

    Examples
    --------
    >>> import numpy as np
    >>> tl = {"t_s": np.array([0.0, 10.0, 20.0]), "power_w": np.array([100.0, 300.0, 0.0]),
    ...       "pending_jobs": np.array([1.0, 1.0, 1.0])}
    >>> v = verdicts({"n_jobs": 2, "jobs_unfinished": 1}, {"energy_budgets": [
    ...     {"start_s": 0.0, "end_s": 20.0, "energy_j": 3000.0}]}, tl)
    >>> v["budgets"][0]["held"], v["budgets"][0]["used_j"], v["queue"]["drained"], v["queue"]["pending_at_end"]
    (False, 4000.0, False, 1)
    """
    t, p = _rows(timeline)
    span = None
    if jobs is not None and "submit_s" in jobs and len(jobs["submit_s"]):
        s = np.asarray(jobs["submit_s"], dtype=float)
        ends = np.asarray(jobs.get("end_s", ()), dtype=float)
        ends = ends[np.isfinite(ends)]
        span = (float(np.nanmin(s)), max(float(np.nanmax(s)), float(ends.max()) if ends.size else -math.inf))
    n = int(summary.get("n_jobs") or 0)
    unfinished = int(summary.get("jobs_unfinished") or 0)
    return {
        "cap": _cap_verdict(summary),
        "budgets": _budget_verdicts(list(info.get("energy_budgets") or ()), t, p),
        "dr_events": _event_verdicts(list(info.get("dr_events") or ()), t, p),
        "queue": _queue_verdict(summary, timeline),
        "finished": {"jobs": n - unfinished, "of": n},
        "warnings": _warnings(summary, info, timeline, span),
    }


_REPEATED = re.compile(
    r"policy \S+ ignores the "  # wattsched.sim.checks.ignored_constraints
    r"|energy_budgets\[\d+\]: the budget of .* is below the platform's idle energy"  # budget_notes
    r"|(energy_budgets|demand_response)\[\d+\]: the (budget window|event) \(.*\) ends before the trace's first "
    r"submission")  # outside_trace_notes (one that starts after the last submission may still see jobs run)


def repeats_a_warning(note: str) -> bool:
    """Whether a note of the run (:mod:`wattsched.sim.checks`, written before it ran) says what a warning of
    :func:`verdicts` says: the report and the text summary show the warning and leave the note out.

    >>> repeats_a_warning("policy easy ignores the power cap of this run (cap_w): no decision respects it")
    True
    >>> repeats_a_warning("no predictor given: policies saw every job at the node maximum power")
    False
    """
    return _REPEATED.match(note) is not None


def finished_text(finished: dict) -> str:
    """How many jobs the means over finished jobs count.

    >>> finished_text({"jobs": 4537, "of": 5000})
    'means over finished jobs: 4,537 of 5,000'
    """
    return f"means over finished jobs: {finished['jobs']:,} of {finished['of']:,}"


def verdict_lines(v: dict) -> list[tuple[str, bool | None, str]]:
    """``(subject, passed, text)`` for each verdict: the cap, each budget, each event, the queue.

    ``passed`` is ``None`` for an event the run never reached.
    """
    lines: list[tuple[str, bool | None, str]] = []
    if v.get("cap") is not None:
        lines.append(("cap", v["cap"]["held"], v["cap"]["text"]))
    for b in v.get("budgets") or ():
        lines.append((f"budget {b['index'] + 1}", b["held"], b["text"]))
    for e in v.get("dr_events") or ():
        lines.append((f"event {e['index'] + 1}", e["met"], e["text"]))
    lines.append(("queue", v["queue"]["drained"], v["queue"]["text"]))
    return lines
