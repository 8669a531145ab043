"""Summary metrics of a simulation run (DESIGN.md §5), and a terminal table of them.

:func:`summarize` turns a :class:`~wattsched.sim.result.SimResult` into a flat,
JSON-serialisable dict; :func:`format_summary_table` prints it for humans.

The timeline is piecewise constant: row ``i`` holds from ``t_s[i]`` until
``t_s[i+1]`` and the last row only marks the end of the run, so every time
integral here is an exact sum of ``value[i] * (t_s[i+1] - t_s[i])``. Rows that
hold for no time (several events at one instant) carry no weight and are
ignored by the maxima too: a state that never lasted is not a peak.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

ABOVE_CAP_ABS_W = 1e-6
ABOVE_CAP_REL = 1e-9
"""Tolerance of the above-the-cap metrics: power above the cap by at most ``ABOVE_CAP_ABS_W + ABOVE_CAP_REL * cap``
is rounding noise of the summed power (events add and remove watts), not a violation."""

if TYPE_CHECKING:
    from wattsched.sim.result import SimResult

__all__ = ["SUMMARY_KEYS", "change_text", "comparison_rows", "format_summary_table", "summarize", "summary_rows"]

SUMMARY_KEYS = (
    # jobs
    "n_jobs", "jobs_completed", "jobs_timeout", "jobs_cancelled", "jobs_unfinished", "jobs_started",
    # waiting and response
    "mean_wait_s", "median_wait_s", "p95_wait_s", "max_wait_s",
    "mean_turnaround_s", "max_turnaround_s",
    "bsld_threshold_s", "mean_bsld", "max_bsld",
    "makespan_s",
    "bsld_definition",
    # platform use
    "nodes", "start_s", "end_s", "span_s", "utilization",
    # power and energy
    "energy_j", "mean_power_w", "max_power_w", "power_std_w",
    # the cap
    "capped_time_s", "time_above_cap_s", "frac_capped_time_above_cap",
    "max_overshoot_w", "max_overshoot_pct", "mean_overshoot_w", "energy_above_cap_j",
    # waste
    "job_energy_j", "wasted_j", "wasted_node_s", "evictions",
    # window
    "window_start_s", "window_end_s", "jobs_started_in_window",
    "window_energy_j", "window_mean_power_w", "window_max_power_w",
    "window_time_above_cap_s", "window_energy_above_cap_j", "window_power_utilization", "window_frac_above_cap",
)
"""Keys of the dict :func:`summarize` returns, in order.

Every key is always present; a value that is undefined for the run (no job
finished, no cap ever applied, no window given) is ``None``.
"""

_UNFINISHED_NOTE = "PENDING, RUNNING or PREEMPTED when the run stopped"


def _node_count(result: Any) -> int:
    """Nodes of the platform: ``len(result.platform)``, else ``result.nodes`` (a reloaded run)."""
    platform = getattr(result, "platform", None)
    if platform is not None:
        return len(platform)
    nodes = getattr(result, "nodes", None)
    if nodes is None:
        nodes = getattr(result, "info", {}).get("nodes")
    if nodes is None:
        raise ValueError("the result has neither a platform nor a node count")
    return int(nodes)


def median(x: np.ndarray) -> float:
    """``np.median`` of a non-empty 1-D float array, the same value, without importing ``numpy.ma``.

    ``np.median``'s NaN check imports ``numpy.ma`` (10 ms of every simulation run).
    Like it: NaN if any value is NaN, else the middle value or the mean of the two middle ones.
    """
    n = x.size
    if np.isnan(x).any():
        return math.nan
    h = n // 2
    if n % 2:
        return float(np.partition(x, h)[h])
    part = np.partition(x, [h - 1, h])
    return float(np.add(part[h - 1], part[h]) / 2.0)


def percentile(x: np.ndarray, q: float) -> float:
    """``np.percentile(x, q)`` of a non-empty 1-D array of finite floats, the same value, without importing
    ``numpy.ma`` (which ``np.percentile`` does through ``np.unique``: 5 to 10 ms of every simulation run).

    numpy's default ``linear`` method, step for step: the virtual index
    ``(n - 1) * q / 100``, its neighbours as order statistics, and numpy's
    two-sided interpolation (from the lower value below a weight of 0.5,
    from the upper one above).
    """
    n = x.size
    v = (n - 1) * (q / 100)
    if v >= n - 1:
        return float(x.max())
    lo = math.floor(v)
    part = np.partition(x, [lo, lo + 1])
    a, b = float(part[lo]), float(part[lo + 1])
    t = v - lo
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def _f(x: Any) -> float | None:
    """A Python float, or ``None`` for NaN, infinity or ``None`` (strict JSON has neither)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _col(table: dict[str, np.ndarray], name: str, n: int) -> np.ndarray:
    """Column ``name`` as float64, or NaN everywhere if the table lacks it."""
    if name in table:
        return np.asarray(table[name], dtype=np.float64)
    return np.full(n, np.nan)


def _finite(a: np.ndarray) -> np.ndarray:
    return a[np.isfinite(a)]


def _job_metrics(jobs: dict[str, np.ndarray], bsld_threshold_s: float, window,
                 bsld_definition: str = "standard") -> dict[str, Any]:
    n = len(jobs["id"]) if "id" in jobs else len(next(iter(jobs.values()), ()))
    state = np.asarray(jobs["state"]) if "state" in jobs else np.full(n, "", dtype=object)
    if state.dtype.kind not in "US":
        # Object arrays (e.g. of JobState members, a str enum) compare fine but slowly; strings are fast.
        state = state.astype(str)
    completed = int(np.count_nonzero(state == "COMPLETED"))
    timeout = int(np.count_nonzero(state == "TIMEOUT"))
    cancelled = int(np.count_nonzero(state == "CANCELLED"))

    submit = _col(jobs, "submit_s", n)
    start = _col(jobs, "start_s", n)
    end = _col(jobs, "end_s", n)
    wait = _col(jobs, "wait_s", n) if "wait_s" in jobs else start - submit
    runtime = _col(jobs, "runtime_s", n) if "runtime_s" in jobs else end - start

    out: dict[str, Any] = {
        "n_jobs": int(n),
        "jobs_completed": completed,
        "jobs_timeout": timeout,
        "jobs_cancelled": cancelled,
        "jobs_unfinished": int(n - completed - timeout - cancelled),
        "jobs_started": int(np.count_nonzero(np.isfinite(start))),
    }

    w = _finite(wait)
    if w.size:
        out["mean_wait_s"] = _f(w.mean())
        out["median_wait_s"] = _f(median(w))
        out["p95_wait_s"] = _f(percentile(w, 95.0))
        out["max_wait_s"] = _f(w.max())
    else:
        out.update(mean_wait_s=None, median_wait_s=None, p95_wait_s=None, max_wait_s=None)

    ended = np.isfinite(end)
    turnaround = _finite(end[ended] - submit[ended])
    out["mean_turnaround_s"] = _f(turnaround.mean()) if turnaround.size else None
    out["max_turnaround_s"] = _f(turnaround.max()) if turnaround.size else None

    if bsld_definition == "borghesi2018":
        bsld = bounded_slowdown_eq3(wait[ended], runtime[ended], _col(jobs, "work_s", n)[ended], bsld_threshold_s)
    elif bsld_definition == "standard":
        bsld = bounded_slowdown(wait[ended], runtime[ended], bsld_threshold_s)
    else:
        raise ValueError(f"unknown bounded slowdown {bsld_definition!r}; choose one of {', '.join(BSLD_DEFINITIONS)}")
    bsld = _finite(bsld)
    out["bsld_definition"] = bsld_definition
    out["bsld_threshold_s"] = float(bsld_threshold_s)
    out["mean_bsld"] = _f(bsld.mean()) if bsld.size else None
    out["max_bsld"] = _f(bsld.max()) if bsld.size else None

    sub = _finite(submit)
    last_end = _finite(end)
    out["makespan_s"] = _f(last_end.max() - sub.min()) if (sub.size and last_end.size) else None

    out["job_energy_j"] = float(np.nansum(_col(jobs, "energy_j", n)))
    out["wasted_j"] = float(np.nansum(_col(jobs, "wasted_j", n)))
    out["wasted_node_s"] = float(np.nansum(_col(jobs, "wasted_node_s", n)))
    out["evictions"] = int(np.nansum(_col(jobs, "evictions", n)))

    if window is not None:
        w0, w1 = window
        # Half-open [w0, w1), like the timeline rows; NaN starts compare False.
        out["jobs_started_in_window"] = int(np.count_nonzero((start >= w0) & (start < w1)))
    else:
        out["jobs_started_in_window"] = None
    return out


def bounded_slowdown(wait_s: np.ndarray, runtime_s: np.ndarray, threshold_s: float) -> np.ndarray:
    """Bounded slowdown ``max(1, (wait + runtime) / max(runtime, threshold))``.

    The threshold keeps very short jobs from dominating the mean (Feitelson,
    "Metrics for parallel job scheduling"; papers use 10 s or 300 s). NaN in,
    NaN out.

    >>> bounded_slowdown(np.array([0.0, 90.0, 90.0]), np.array([5.0, 1.0, 30.0]), 10.0).tolist()
    [1.0, 9.1, 4.0]
    """
    wait_s = np.asarray(wait_s, dtype=np.float64)
    runtime_s = np.asarray(runtime_s, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        # np.maximum (not fmax) so that NaN propagates.
        return np.maximum(1.0, (wait_s + runtime_s) / np.maximum(runtime_s, threshold_s))


def bounded_slowdown_eq3(wait_s: np.ndarray, runtime_s: np.ndarray, work_s: np.ndarray,
                         threshold_s: float) -> np.ndarray:
    """Bounded slowdown of Borghesi et al. 2018, Eq. 3: ``max((wait + run') / max(threshold, run), 1)``.

    ``run'`` (``runtime_s``) is the run time as it happened, slowed by caps or
    lower frequencies; ``run`` (``work_s``) the run time at nominal speed. A
    job slowed down counts its slowdown even when it did not wait. NaN in,
    NaN out.

    >>> bounded_slowdown_eq3(np.array([0.0, 0.0]), np.array([600.0, 600.0]), np.array([600.0, 400.0]), 300.0).tolist()
    [1.0, 1.5]
    """
    wait_s = np.asarray(wait_s, dtype=np.float64)
    runtime_s = np.asarray(runtime_s, dtype=np.float64)
    work_s = np.asarray(work_s, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.maximum(1.0, (wait_s + runtime_s) / np.maximum(work_s, threshold_s))


BSLD_DEFINITIONS = ("standard", "borghesi2018")
"""The bounded slowdowns :func:`summarize` computes (``bsld_definition``)."""

BORGHESI_FAMILY = frozenset({"ls", "dec", "bf", "dvfs", "simple", "dynshare", "dec+rapl"})
"""Policies of Borghesi et al. 2018, whose runs report Eq. 3 with a 300 s threshold unless told otherwise."""


def bsld_settings(policy: str, definition: str | None = None, threshold_s: float | None = None) -> tuple[str, float]:
    """The bounded slowdown of a run: ``(definition, threshold_s)``, each the given one or the policy's default.

    >>> bsld_settings("easy"), bsld_settings("dynshare"), bsld_settings("ls", "standard", 10.0)
    (('standard', 10.0), ('borghesi2018', 300.0), ('standard', 10.0))
    """
    family = policy in BORGHESI_FAMILY
    if definition is None:
        definition = "borghesi2018" if family else "standard"
    if threshold_s is None:
        threshold_s = 300.0 if family else 10.0
    return definition, float(threshold_s)


def _timeline_metrics(timeline: dict[str, np.ndarray], nodes: int, window) -> dict[str, Any]:
    t = np.asarray(timeline["t_s"], dtype=np.float64) if "t_s" in timeline else np.empty(0)
    n = t.size
    out: dict[str, Any] = {"nodes": int(nodes)}
    keys = (
        "start_s", "end_s", "span_s", "utilization", "energy_j", "mean_power_w", "max_power_w",
        "power_std_w", "capped_time_s", "time_above_cap_s", "frac_capped_time_above_cap",
        "max_overshoot_w", "max_overshoot_pct", "mean_overshoot_w", "energy_above_cap_j",
        "window_energy_j", "window_mean_power_w", "window_max_power_w", "window_time_above_cap_s",
        "window_energy_above_cap_j", "window_power_utilization",
    )
    out.update(dict.fromkeys(keys))
    if n == 0:
        return out

    dt = np.diff(t)
    if dt.size and dt.min() < 0:
        raise ValueError("timeline t_s must be non-decreasing")
    power = _col(timeline, "power_w", n)
    cap = _col(timeline, "cap_w", n) if "cap_w" in timeline else np.full(n, np.inf)
    busy = _col(timeline, "busy_nodes", n)
    p, c, b = power[:-1], cap[:-1], busy[:-1]
    span = float(t[-1] - t[0])
    out.update(start_s=float(t[0]), end_s=float(t[-1]), span_s=span)

    held = dt > 0
    energy = float(np.dot(p, dt))
    out["energy_j"] = _f(energy)
    if span > 0:
        mean_p = energy / span
        out["mean_power_w"] = _f(mean_p)
        out["power_std_w"] = _f(math.sqrt(max(0.0, float(np.dot((p - mean_p) ** 2, dt)) / span)))
        out["utilization"] = _f(float(np.dot(b, dt)) / (nodes * span)) if nodes > 0 else None
        out["max_power_w"] = _f(p[held].max())
    elif n == 1 or not held.any():
        # A run of no duration: the instantaneous power is all there is.
        out["max_power_w"] = _f(np.nanmax(power)) if np.isfinite(power).any() else None

    capped = np.isfinite(c) & held
    out["capped_time_s"] = float(dt[capped].sum())
    with np.errstate(invalid="ignore"):
        excess = p - c  # -inf where uncapped, NaN where power is NaN
    # Floating-point noise in the summed power (a few 1e-11 W) is not a violation.
    above = held & (excess > ABOVE_CAP_ABS_W + ABOVE_CAP_REL * np.where(np.isfinite(c), c, 0.0))
    time_above = float(dt[above].sum())
    energy_above = float(np.dot(excess[above], dt[above]))
    out["time_above_cap_s"] = time_above
    out["energy_above_cap_j"] = energy_above
    out["frac_capped_time_above_cap"] = (
        time_above / out["capped_time_s"] if out["capped_time_s"] > 0 else None
    )
    if above.any():
        out["max_overshoot_w"] = float(excess[above].max())
        pos = above & (c > 0)
        out["max_overshoot_pct"] = float((100.0 * excess[pos] / c[pos]).max()) if pos.any() else None
        out["mean_overshoot_w"] = energy_above / time_above
    else:
        out.update(max_overshoot_w=0.0, max_overshoot_pct=0.0, mean_overshoot_w=0.0)

    if window is not None:
        w0, w1 = (float(x) for x in window)
        # Part of each row's interval inside [w0, w1).
        dtw = np.clip(np.minimum(t[1:], w1) - np.maximum(t[:-1], w0), 0.0, None)
        inw = dtw > 0
        covered = float(dtw.sum())
        e_w = float(np.dot(p, dtw))
        out["window_energy_j"] = _f(e_w)
        if covered > 0:
            out["window_mean_power_w"] = _f(e_w / covered)
            out["window_max_power_w"] = _f(p[inw].max())
        aw = above & inw
        out["window_time_above_cap_s"] = float(dtw[aw].sum())
        out["window_energy_above_cap_j"] = float(np.dot(excess[aw], dtw[aw]))
        cw = np.isfinite(c) & inw
        allowed = float(np.dot(c[cw], dtw[cw]))
        # Energy used over energy allowed, over the capped part of the window:
        # mean power / cap when one cap holds throughout.
        out["window_power_utilization"] = _f(float(np.dot(p[cw], dtw[cw])) / allowed) if allowed > 0 else None
    return out


def summarize(
    result: SimResult,
    *,
    bsld_threshold_s: float = 10.0,
    window: tuple[float, float] | None = None,
    bsld_definition: str = "standard",
) -> dict[str, Any]:
    """Compute the run metrics of DESIGN.md §5.

    Parameters
    ----------
    result
        A :class:`~wattsched.sim.result.SimResult`, or any object with ``jobs``
        and ``timeline`` column dicts and either a ``platform`` or a ``nodes``
        count (such as a run reloaded by :func:`wattsched.sim.report.load_run`).
    bsld_threshold_s
        Runtime below which bounded slowdown treats a job as this long
        (papers use 10 s and 300 s).
    bsld_definition
        ``standard`` or ``borghesi2018`` (see :data:`BSLD_DEFINITIONS`).
    window
        ``(start_s, end_s)`` of a window of interest (a demand-response event,
        a budget period). Adds the jobs started in ``[start_s, end_s)`` and the
        power of the window.

    Returns
    -------
    dict
        Flat dict with the keys of :data:`SUMMARY_KEYS`, values Python ``int``,
        ``float`` or ``None`` (undefined), so ``json.dumps(..., allow_nan=False)``
        works. Job metrics:

        - ``jobs_completed``, ``jobs_timeout``, ``jobs_cancelled`` count final
          states; ``jobs_unfinished`` the rest (PENDING, RUNNING or PREEMPTED
          when the run stopped); ``jobs_started`` the jobs with a start.
        - ``*_wait_s`` over jobs that started; ``p95`` interpolates linearly.
        - ``*_turnaround_s`` is ``end - submit`` over jobs that ended; its max
          measures starvation.
        - ``*_bsld`` is the bounded slowdown over jobs that ended, by
          ``bsld_definition``: ``standard`` (:func:`bounded_slowdown`) or
          ``borghesi2018`` (Eq. 3, :func:`bounded_slowdown_eq3`, which needs
          the jobs' ``work_s``).
        - ``makespan_s`` is the last end minus the first submit.
        - ``job_energy_j`` (every attempt), ``wasted_j``, ``wasted_node_s`` and
          ``evictions`` are sums over jobs.

        Timeline metrics (exact integrals of the piecewise-constant timeline):

        - ``span_s`` from the first to the last timeline point;
          ``utilization`` is busy node-seconds over ``nodes * span_s``.
        - ``energy_j`` integrates ``power_w``; ``mean_power_w = energy_j / span_s``;
          ``power_std_w`` is the time-weighted standard deviation.
        - ``capped_time_s`` is the time with a finite cap; ``time_above_cap_s``
          the time with power above it, and ``frac_capped_time_above_cap`` their
          ratio. ``max_overshoot_w`` and ``max_overshoot_pct`` (of the cap in
          force) are maxima over that time (0 if never above),
          ``mean_overshoot_w`` the time-weighted mean over it, and
          ``energy_above_cap_j`` integrates ``max(0, power - cap)``. Power counts
          as above the cap only when it exceeds it by more than
          ``ABOVE_CAP_ABS_W + ABOVE_CAP_REL * cap`` (1 µW plus 1e-9 of the cap):
          rounding in the running power sum is not a violation.
        - ``window_*`` restrict these to the window; ``window_power_utilization``
          is the energy used over the energy the cap allowed in the capped part
          of the window (mean power over cap when one cap holds throughout).

    Examples
    --------
    >>> import numpy as np
    >>> from wattsched.model.platform import Platform
    >>> from wattsched.sim.result import SimResult
    >>> jobs = {"id": np.array([1]), "submit_s": np.array([0.0]), "start_s": np.array([0.0]),
    ...         "end_s": np.array([30.0]), "wait_s": np.array([0.0]), "runtime_s": np.array([30.0]),
    ...         "state": np.array(["COMPLETED"])}
    >>> timeline = {"t_s": np.array([0.0, 10.0, 30.0]), "power_w": np.array([100.0, 300.0, 0.0]),
    ...             "cap_w": np.array([np.inf, 200.0, 200.0]), "busy_nodes": np.array([1, 2, 0])}
    >>> s = summarize(SimResult(jobs, timeline, Platform.homogeneous_cluster(2)))
    >>> s["energy_j"], s["time_above_cap_s"], s["energy_above_cap_j"], s["max_overshoot_pct"]
    (7000.0, 20.0, 2000.0, 50.0)
    """
    if window is not None and (len(window) != 2 or not window[1] >= window[0]):
        raise ValueError(f"window must be (start_s, end_s) with end_s >= start_s, got {window!r}")
    out = _job_metrics(result.jobs, bsld_threshold_s, window, bsld_definition)
    out.update(_timeline_metrics(result.timeline, _node_count(result), window))
    out["window_start_s"] = None if window is None else float(window[0])
    out["window_end_s"] = None if window is None else float(window[1])
    out["window_frac_above_cap"] = None
    if window is not None and out.get("window_time_above_cap_s") is not None and out.get("start_s") is not None:
        length = min(window[1], out["end_s"]) - max(window[0], out["start_s"])
        if length > 0:
            out["window_frac_above_cap"] = out["window_time_above_cap_s"] / length
    return {k: out[k] for k in SUMMARY_KEYS}


# --------------------------------------------------------------------------- formatting


def _num(x: float) -> str:
    """A number rounded for reading: three significant figures or so, thousands separated.

    >>> _num(1234.5), _num(12.345), _num(1.2345), _num(0.000123), _num(0.0), _num(3e300)
    ('1,234', '12.3', '1.23', '0.000123', '0', '3e+300')
    """
    a = abs(x)
    if a == 0 or a != a:
        return "0" if a == 0 else "nan"
    if a >= 1e9:  # past a billion the digits stop meaning anything to a reader (and may not fit the table)
        return f"{x:.3g}"
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 0.01:
        return f"{x:.2f}"
    return f"{x:.3g}"


def readable(value) -> str:
    """A config or summary value as text for people: ``yes``/``no``, ``key: value`` lists, no Python reprs.

    >>> readable({"check": "gaussian_99", "lookahead": True, "queue_ewt_s": {}, "p_off_w": None})
    'check: gaussian_99, lookahead: yes, queue_ewt_s: none, p_off_w: default'
    >>> readable({"queue_ewt_s": {"debug": 60.0, "long": 86400.0}}), readable([1.5, "a"])
    ('queue_ewt_s: debug=60 long=86400', '1.5, a')
    """
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "default"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        if not value:
            return "none"
        return ", ".join(f"{k}: {_readable_inner(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(readable(v) for v in value) if value else "none"
    return str(value)


def _readable_inner(value) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={readable(v)}" for k, v in value.items()) if value else "none"
    return readable(value)


def _jobs(n: int) -> str:
    return f"{n:,} job" + ("" if n == 1 else "s")


def cleaning_text(cleaning: dict) -> str:
    """What trace cleaning dropped, for people.

    >>> cleaning_text({"dropped": {"procs_missing": 1}, "skipped_lines": 0})
    'dropped procs missing: 1 job'
    >>> cleaning_text({"dropped": {"procs_missing": 2, "runtime_missing": 1}, "skipped_lines": 1})
    'dropped 3 jobs (procs missing: 2 jobs, runtime missing: 1 job); skipped 1 malformed line'
    """
    dropped = {k: int(v) for k, v in (cleaning.get("dropped") or {}).items() if v}
    parts = []
    reasons = ", ".join(f"{k.replace('_', ' ')}: {_jobs(v)}" for k, v in dropped.items())
    if len(dropped) == 1:
        parts.append(f"dropped {reasons}")
    elif dropped:
        parts.append(f"dropped {_jobs(sum(dropped.values()))} ({reasons})")
    skipped = int(cleaning.get("skipped_lines") or 0)
    if skipped:
        parts.append(f"skipped {skipped:,} malformed line" + ("" if skipped == 1 else "s"))
    return "; ".join(parts) or "nothing dropped"


def format_duration(seconds: float | None) -> str:
    """Seconds as s, min, h or d, whichever reads best.

    >>> format_duration(42.0), format_duration(5400.0), format_duration(7200.0), format_duration(5 * 86400.0)
    ('42.0 s', '90.0 min', '2.00 h', '5.00 d')
    """
    if seconds is None:
        return "—"
    a = abs(seconds)
    if a < 120:
        return f"{_num(seconds)} s"
    if a < 2 * 3600:
        return f"{_num(seconds / 60)} min"
    if a < 3 * 86400:
        return f"{_num(seconds / 3600)} h"
    return f"{_num(seconds / 86400)} d"


def format_energy(joules: float | None) -> str:
    """Joules as J, Wh, kWh, MWh or GWh.

    >>> format_energy(2000.0), format_energy(7.2e6), format_energy(3.6e10)
    ('2,000 J', '2.00 kWh', '10.0 MWh')
    """
    if joules is None:
        return "—"
    a = abs(joules)
    if a < 1e4:
        return f"{_num(joules)} J"
    for unit, scale in (("Wh", 3.6e3), ("kWh", 3.6e6), ("MWh", 3.6e9)):
        if a < scale * 1000:
            return f"{_num(joules / scale)} {unit}"
    return f"{_num(joules / 3.6e12)} GWh"


def format_power(watts: float | None) -> str:
    """Watts as W, kW or MW.

    >>> format_power(950.0), format_power(12500.0), format_power(3.2e6)
    ('950 W', '12.5 kW', '3.20 MW')
    """
    if watts is None:
        return "—"
    a = abs(watts)
    if a < 1e4:
        return f"{_num(watts)} W"
    if a < 1e6:
        return f"{_num(watts / 1e3)} kW"
    return f"{_num(watts / 1e6)} MW"


def _pct(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{100 * x:.1f} %" if abs(x) < 1e4 else f"{100 * x:.3g} %"


def _count(x: int | None) -> str:
    return "—" if x is None else f"{int(x):,}"


def _node_time(x: float | None) -> str:
    """Node-seconds in node-s, node-min, node-h or node-d."""
    if x is None:
        return "—"
    value, unit = format_duration(x).rsplit(" ", 1)
    return f"{value} node-{unit}"


def _plain(x: float | None) -> str:
    return "—" if x is None else _num(x)


def _pct_value(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f} %"


def _signed_pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1f} %"


_ROWS: tuple[tuple[str, tuple[tuple[str, str, Any], ...]], ...] = (
    ("Jobs", (
        ("n_jobs", "jobs", _count),
        ("jobs_completed", "completed", _count),
        ("jobs_timeout", "timeout", _count),
        ("jobs_cancelled", "cancelled", _count),
        ("jobs_unfinished", "unfinished", _count),
        ("makespan_s", "makespan", format_duration),
    )),
    ("Waiting", (
        ("mean_wait_s", "mean wait", format_duration),
        ("median_wait_s", "median wait", format_duration),
        ("p95_wait_s", "p95 wait", format_duration),
        ("max_wait_s", "max wait", format_duration),
        ("mean_turnaround_s", "mean turnaround", format_duration),
        ("max_turnaround_s", "max turnaround", format_duration),
        ("mean_bsld", "mean bounded slowdown", _plain),
        ("max_bsld", "max bounded slowdown", _plain),
        ("bsld_threshold_s", "bsld threshold", format_duration),
        ("bsld_definition", "bsld definition", str),
    )),
    ("Platform", (
        ("nodes", "nodes", _count),
        ("span_s", "span", format_duration),
        ("utilization", "utilization", _pct),
    )),
    ("Power", (
        ("energy_j", "energy", format_energy),
        ("mean_power_w", "mean power", format_power),
        ("max_power_w", "max power", format_power),
        ("power_std_w", "power std", format_power),
    )),
    ("Cap", (
        ("capped_time_s", "capped time", format_duration),
        ("time_above_cap_s", "time above cap", format_duration),
        ("frac_capped_time_above_cap", "capped time above cap", _pct),
        ("max_overshoot_w", "max overshoot", format_power),
        ("max_overshoot_pct", "max overshoot (of cap)", _pct_value),
        ("mean_overshoot_w", "mean overshoot", format_power),
        ("energy_above_cap_j", "energy above cap", format_energy),
    )),
    ("Waste", (
        ("job_energy_j", "job energy", format_energy),
        ("wasted_j", "wasted energy", format_energy),
        ("wasted_node_s", "wasted node time", _node_time),
        ("evictions", "evictions", _count),
    )),
    ("Against the baseline", (
        ("baseline_policy", "baseline (uncapped)", str),
        ("baseline_mean_turnaround_s", "its mean turnaround", format_duration),
        ("mean_turnaround_change_pct", "mean turnaround change", _signed_pct),
    )),
    ("Window", (
        ("window_start_s", "start", format_duration),
        ("window_end_s", "end", format_duration),
        ("jobs_started_in_window", "jobs started", _count),
        ("window_energy_j", "energy", format_energy),
        ("window_mean_power_w", "mean power", format_power),
        ("window_max_power_w", "max power", format_power),
        ("window_time_above_cap_s", "time above cap", format_duration),
        ("window_frac_above_cap", "window time above cap", _pct),
        ("window_energy_above_cap_j", "energy above cap", format_energy),
        ("window_power_utilization", "power / cap", _pct),
    )),
)


def _items(summary: dict[str, Any], *, comparing: bool = False) -> list[tuple[str, str, str, Any, Any]]:
    """``(section, key, label, format, value)`` of each row a summary shows."""
    items = []
    for section, entries in _ROWS:
        if section == "Window" and summary.get("window_start_s") is None:
            continue
        if section == "Against the baseline" and comparing:
            continue  # the comparison shows the baseline column by column
        for key, label, fmt in entries:
            if key in summary:
                value = summary[key]
                if key == "bsld_definition" and value in (None, "standard"):
                    continue  # shown only when it is not the usual one
                if isinstance(value, float) and not math.isfinite(value):
                    value = None
                items.append((section, key, label, fmt, value))
    return items


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(section, label, formatted value)`` rows of a summary, as the table and HTML report show them.

    Keys missing from ``summary`` are skipped, and the window section when no
    window was given.
    """
    return [(section, label, fmt(value)) for section, _key, label, fmt, value in _items(summary)]


def change_text(value: Any, base: Any, fmt: Any) -> str:
    """The change from ``base`` to ``value``: percentage points for shares, a relative change otherwise.

    >>> change_text(6.35, 4.37, format_duration), change_text(0.62, 0.70, _pct), change_text(3, 0, _count)
    ('+45.3 %', '-8.0 pt', 'new')
    >>> change_text(0, 0, _count), change_text(None, 1.0, _plain), change_text("easy", "easy", str)
    ('=', '', '')
    """
    if not isinstance(value, int | float) or not isinstance(base, int | float) or isinstance(value, bool):
        return ""
    if fmt is _pct:
        return f"{100 * (value - base):+.1f} pt"
    if fmt is _pct_value:
        return f"{value - base:+.1f} pt"
    if value == base:
        return "="
    if base == 0:
        return "new"
    return f"{100 * (value - base) / abs(base):+.1f} %"


def comparison_rows(summary: dict[str, Any], baseline: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """``(section, label, run, baseline, change)`` rows: the run and its baseline side by side, column for column.

    >>> comparison_rows({"n_jobs": 10, "mean_wait_s": 90.0}, {"n_jobs": 10, "mean_wait_s": 60.0})
    [('Jobs', 'jobs', '10', '10', '='), ('Waiting', 'mean wait', '90.0 s', '60.0 s', '+50.0 %')]
    """
    rows = []
    for section, key, label, fmt, value in _items(summary, comparing=True):
        base = baseline.get(key)
        if isinstance(base, float) and not math.isfinite(base):
            base = None
        rows.append((section, label, fmt(value), fmt(base) if key in baseline else "", change_text(value, base, fmt)))
    return rows


def format_summary_table(summary: dict[str, Any], baseline: dict[str, Any] | None = None,
                         baseline_name: str = "baseline") -> str:
    """Render a summary as an aligned text table for a terminal; with ``baseline``, the two side by side.

    Times read in s, min, h or d, energy in J, Wh, kWh or MWh, power in W, kW
    or MW; undefined values show as ``—``.

    >>> print(format_summary_table({"n_jobs": 1200, "energy_j": 7.2e6, "utilization": 0.5}))
    Jobs
      jobs            1,200
    Platform
      utilization    50.0 %
    Power
      energy       2.00 kWh
    >>> print(format_summary_table({"n_jobs": 1200, "utilization": 0.5}, {"n_jobs": 1200, "utilization": 0.6}))
                      run  baseline    change
    Jobs
      jobs          1,200     1,200         =
    Platform
      utilization  50.0 %    60.0 %  -10.0 pt
    """
    if baseline is not None:
        return _format_columns(comparison_rows(summary, baseline), ("run", baseline_name, "change"))
    rows = summary_rows(summary)
    if not rows:
        return ""
    label_w = max(len(label) for _, label, _ in rows)
    value_w = max(len(value) for _, _, value in rows)
    lines: list[str] = []
    current = None
    for section, label, value in rows:
        if section != current:
            lines.append(section)
            current = section
        lines.append(f"  {label:<{label_w}}  {value:>{value_w}}")
    return "\n".join(lines)


def _format_columns(rows: list[tuple[str, ...]], heads: tuple[str, ...]) -> str:
    if not rows:
        return ""
    label_w = max(len(r[1]) for r in rows)
    widths = [max(len(h), *(len(r[2 + i]) for r in rows)) for i, h in enumerate(heads)]
    lines = [" " * (label_w + 2) + "".join(f"  {h:>{w}}" for h, w in zip(heads, widths))]
    current = None
    for row in rows:
        if row[0] != current:
            lines.append(row[0])
            current = row[0]
        lines.append(f"  {row[1]:<{label_w}}" + "".join(f"  {v:>{w}}" for v, w in zip(row[2:], widths)))
    return "\n".join(line.rstrip() for line in lines)


def budget_metrics(result: Any, start_s: float, end_s: float, energy_j: float | None = None,
                   bsld_threshold_s: float = 10.0) -> dict[str, Any]:
    """The measures of Dutot et al. 2017 (§V-D) over a period such as a replayed week.

    Utilization and energy count ``[start_s, end_s)`` only (work after it is
    excluded); ``relative_energy`` is the energy over ``energy_j`` (the budget,
    when given). AVEbsld (``mean_bsld``, bounded slowdown with
    ``bsld_threshold_s``) and ``jobs_started`` count every job that started
    before ``end_s``, whenever it was submitted.
    """
    tl = result.timeline
    t = np.asarray(tl["t_s"], dtype=float)
    p = np.asarray(tl["power_w"], dtype=float)
    busy = np.asarray(tl["busy_nodes"], dtype=float)
    lo = np.clip(t[:-1], start_s, end_s)
    hi = np.clip(t[1:], start_s, end_s)
    dt = hi - lo
    energy = float(np.sum(p[:-1] * dt))
    span = max(end_s - start_s, 0.0)
    nodes = _node_count(result)
    jobs = result.jobs
    start = np.asarray(jobs["start_s"], dtype=float)
    ok = np.isfinite(start) & (start < end_s)
    wait = start[ok] - np.asarray(jobs["submit_s"], dtype=float)[ok]
    end = np.asarray(jobs["end_s"], dtype=float)[ok]
    run = np.where(np.isfinite(end), end - start[ok], np.nan)
    bsld = bounded_slowdown(wait, run, bsld_threshold_s) if ok.any() else np.array([])
    return {
        "utilization": float(np.sum(busy[:-1] * dt) / (nodes * span)) if span and nodes else None,
        "energy_j": energy,
        "relative_energy": energy / energy_j if energy_j else None,
        "mean_bsld": float(np.nanmean(bsld)) if bsld.size and np.isfinite(bsld).any() else None,
        "jobs_started": int(ok.sum()),
    }


def normalize_between_subjects(values: dict[tuple[str, str], float],
                               method: str = "additive") -> dict[tuple[str, str], float]:
    """Between-subject normalization (Dutot et al. 2017 §V-D): remove each workload's own level.

    ``values`` maps ``(workload, condition)`` to a measure. ``additive`` (the
    default) is the method the paper cites, Morey 2008 after Cousineau 2005:
    each value minus its workload's mean plus the grand mean of every value,
    ``y − ȳ_w + ȳ``, so the normalized values keep the measure's unit and
    mean. (Morey's correction itself widens the confidence intervals of such
    data by ``√(M/(M−1))``, M conditions; it does not change the means.)
    ``ratio`` divides each value by its workload's mean instead.

    >>> normalize_between_subjects({("w1", "a"): 2.0, ("w1", "b"): 6.0, ("w2", "a"): 1.0, ("w2", "b"): 1.0})
    {('w1', 'a'): 0.5, ('w1', 'b'): 4.5, ('w2', 'a'): 2.5, ('w2', 'b'): 2.5}
    >>> normalize_between_subjects({("w1", "a"): 2.0, ("w1", "b"): 6.0}, method="ratio")
    {('w1', 'a'): 0.5, ('w1', 'b'): 1.5}
    """
    if method not in ("additive", "ratio"):
        raise ValueError(f"normalize_between_subjects: method is 'additive' or 'ratio', got {method!r}")
    by: dict[str, list[float]] = {}
    for (w, _), v in values.items():
        by.setdefault(w, []).append(v)
    means = {w: float(np.mean(v)) for w, v in by.items()}
    if method == "ratio":
        return {k: (v / means[k[0]] if means[k[0]] else math.nan) for k, v in values.items()}
    grand = float(np.mean(list(values.values()))) if values else math.nan
    return {k: v - means[k[0]] + grand for k, v in values.items()}


def theoretical_baseline(easy_utilization: float, budget_fraction: float, budget_days: float = 3.0,
                         period_days: float = 7.0) -> float:
    """The "theoretical baseline" of Dutot et al. 2017 §V-G: performance cut as much as the budget.

    ``u_EASY · (d/D · budget + (D − d)/D)`` for a budget over ``d`` of the ``D`` days.

    >>> round(theoretical_baseline(1.0, 0.3), 4)
    0.7
    """
    share = budget_days / period_days
    return easy_utilization * (share * budget_fraction + (1.0 - share))
