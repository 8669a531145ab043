"""Workload slices: the trace-replay practice of cutting N slices of a long trace, each after a warm-up.

A slice ``i`` starts at ``t0`` (trace seconds). It holds the jobs submitted in
``[t0 - warmup, t0 + length)``, rebased so the slice starts at 0: jobs
submitted during the warm-up run (they fill the machine) but are not measured;
window metrics and caps are placed relative to ``t0`` (at ``warmup`` seconds in
the slice's own time).

``t0`` is drawn in ``count`` equal strata of ``[max(warmup, min_history), span
- length]`` with a seed (:func:`strata_t0`), or chosen by load: the ``count``
non-overlapping slices of highest offered load (:func:`busiest_t0`).

The trace is read by whoever replays the slice (a Dask worker reads it from
shared storage, once per process: :func:`load_trace` caches it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from wattsched.workload.records import TraceJob

H = 3600.0
DAY = 86400.0


@dataclass
class Trace:
    """A cleaned trace in memory, with each job's real completion time (for priming predictors)."""

    jobs: list[TraceJob]
    submit: np.ndarray
    end: np.ndarray
    """Completion time in the real trace (submit + wait + runtime), NaN when the wait is missing."""
    report: dict
    span_s: float


_TRACES: dict[tuple[str, int, int], Trace] = {}


def load_trace(path: str, cores_per_node: int, machine_nodes: int) -> Trace:
    """The cleaned trace (cached per process); jobs wider than the machine are dropped and counted."""
    from wattsched.workload.swf import _open_text, read_swf

    key = (str(path), cores_per_node, machine_nodes)
    tr = _TRACES.get(key)
    if tr is not None:
        return tr
    w = read_swf(path, cores_per_node=cores_per_node, machine_procs=machine_nodes * cores_per_node)
    jobs = list(w.jobs)
    waits: dict[int, float] = {}
    with _open_text(path) as fh:
        for line in fh:
            if not line.strip() or line.lstrip().startswith(";"):
                continue
            parts = line.split()
            waits[int(parts[0])] = float(parts[2])
    submit = np.array([j.submit_s for j in jobs])
    wait = np.array([waits.get(j.id, -1.0) for j in jobs])
    runtime = np.array([j.runtime_s for j in jobs])
    end = np.where(wait >= 0, submit + wait + runtime, np.nan)
    tr = Trace(jobs, submit, end, w.report.as_dict(), float(submit[-1]) if len(submit) else 0.0)
    while len(_TRACES) >= 2:
        _TRACES.pop(next(iter(_TRACES)))
    _TRACES[key] = tr
    return tr


@dataclass(frozen=True)
class SliceSpec:
    """One slice: everything a worker needs to cut it (JSON-able, part of the run key)."""

    trace: str
    index: int
    t0_s: float
    warmup_s: float
    length_s: float
    seed: int
    cores_per_node: int
    prime_history: bool = False
    profile_step_s: float | None = None
    """With a value: the step of the augmentation's power series (:func:`wattsched.workload.augment.power_profile`)."""
    profile_max_steps: int | None = None

    def as_dict(self) -> dict:
        """The JSON-able form, without unset options (so adding an option keeps existing run keys)."""
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @property
    def origin_s(self) -> float:
        return self.t0_s - self.warmup_s


def strata_t0(span_s: float, count: int, *, warmup_s: float, length_s: float, min_history_s: float,
              seed: int) -> list[float]:
    """One t0 drawn (seeded) in each of ``count`` equal strata of the trace.

    >>> strata_t0(100 * DAY, 3, warmup_s=DAY, length_s=DAY, min_history_s=0, seed=1) == \
strata_t0(100 * DAY, 3, warmup_s=DAY, length_s=DAY, min_history_s=0, seed=1)
    True
    """
    lo = max(warmup_s, min_history_s)
    hi = span_s - length_s
    if hi <= lo:
        raise ValueError(f"the trace ({span_s / DAY:.1f} d) is too short for slices of "
                         f"{length_s / H:g} h after {lo / DAY:.1f} d")
    rng = np.random.default_rng(seed)
    width = (hi - lo) / count
    u = rng.random(count)
    return [float(round(lo + (i + u[i]) * width)) for i in range(count)]


def offered_load(tr: Trace, nodes: int, start_s: float, end_s: float) -> float:
    """Node-seconds of the jobs submitted in ``[start_s, end_s)`` over the machine's node-seconds then."""
    a, b = np.searchsorted(tr.submit, [start_s, end_s], side="left")
    work = sum(j.runtime_s * j.nodes for j in tr.jobs[a:b])
    return work / (nodes * (end_s - start_s)) if end_s > start_s else math.nan


def busiest_t0(tr: Trace, nodes: int, count: int, *, warmup_s: float, length_s: float,
               min_history_s: float) -> list[float]:
    """The starts of the ``count`` non-overlapping slices of highest offered load (on a length grid)."""
    lo = max(warmup_s, min_history_s)
    starts = np.arange(lo, tr.span_s - length_s + 1, length_s)
    if len(starts) < count:
        raise ValueError(f"the trace holds only {len(starts)} slices of {length_s / H:g} h, {count} asked")
    node_s = np.array([j.runtime_s * j.nodes for j in tr.jobs])
    cum = np.concatenate([[0.0], np.cumsum(node_s)])
    a = np.searchsorted(tr.submit, starts, side="left")
    b = np.searchsorted(tr.submit, starts + length_s, side="left")
    load = (cum[b] - cum[a]) / (nodes * length_s)
    order = np.argsort(-load, kind="stable")[:count]
    return sorted(float(starts[i]) for i in order)


def slice_specs(cfg, machine_nodes: int) -> list[SliceSpec]:
    """The slices of a :class:`~wattsched.sweep.spec.SlicesConfig`."""
    warm, length = cfg.warmup_h * H, cfg.length_h * H
    if cfg.t0_days is not None:
        t0s = [float(round(d * DAY)) for d in cfg.t0_days]
        tr = load_trace(str(cfg.trace), cfg.cores_per_node, machine_nodes)
        counts = np.searchsorted(tr.submit, [t + length for t in t0s]) - np.searchsorted(tr.submit, t0s)
        empty = [i for i, n in enumerate(counts) if n == 0]
        if empty:
            i = empty[0]
            raise ValueError(f"t0_days[{i}]: day {cfg.t0_days[i]:g} gives a slice of {cfg.length_h:g} h with no "
                             f"submission (the trace's submissions span days 0 to {tr.span_s / DAY:.2f}); "
                             f"{len(empty)} of {len(t0s)} slices are empty")
    else:
        tr = load_trace(str(cfg.trace), cfg.cores_per_node, machine_nodes)
        if cfg.t0 == "load":
            t0s = busiest_t0(tr, machine_nodes, cfg.count, warmup_s=warm, length_s=length,
                             min_history_s=cfg.min_history_days * DAY)
        else:
            t0s = strata_t0(tr.span_s, cfg.count, warmup_s=warm, length_s=length,
                            min_history_s=cfg.min_history_days * DAY, seed=cfg.seed)
    profile = cfg.power_profile
    return [SliceSpec(str(cfg.trace), i, t0, warm, length, cfg.seed * 1000 + i, cfg.cores_per_node,
                      cfg.prime_history, None if profile is None else profile.step_s,
                      None if profile is None else profile.max_steps) for i, t0 in enumerate(t0s)]


@dataclass
class PreparedSlice:
    """A slice ready to replay: rebased, augmented jobs, the primed history predictor (or None), facts."""

    spec: SliceSpec
    jobs: list[TraceJob]
    history: Any
    info: dict


def prepare_slice(spec: SliceSpec, platform, augment_params, seed: int) -> PreparedSlice:
    """Cut, rebase and augment one slice; prime a ``history`` predictor on the trace before it.

    History: jobs submitted before the slice's origin that really completed
    before it, augmented with the same seed as the slice's own jobs, fed to the
    predictor in order of completion.
    """
    from wattsched.model.job import Job
    from wattsched.predictors import make_predictor
    from wattsched.predictors.base import CompletedJob
    from wattsched.workload.augment import augment_workload, reference_cores
    from wattsched.workload.records import Workload

    tr = load_trace(spec.trace, spec.cores_per_node, len(platform))
    origin = spec.origin_s
    lo, mid, hi = np.searchsorted(tr.submit, [origin, spec.t0_s, spec.t0_s + spec.length_s], side="left")
    hist_idx = np.nonzero(tr.end[:lo] <= origin)[0] if spec.prime_history else np.array([], dtype=int)
    picked = [tr.jobs[k] for k in hist_idx] + tr.jobs[lo:hi]
    rebased = [replace(j, submit_s=j.submit_s - origin) for j in picked]
    wl = Workload(name=f"slice{spec.index:02d}", jobs=iter(rebased))
    if spec.profile_step_s is not None:
        if augment_params is None:
            raise ValueError("slices.power_profile needs augmented power (augment.enabled must stay true)")
        # the augmentation's own power series, with the slices' steps
        augment_params = augment_params.model_copy(update={
            "profile": "ar1", "step_s": spec.profile_step_s, "max_steps": spec.profile_max_steps or 12})
    if augment_params is not None:
        # the platform's reference node, as every run's augmentation (wattsched.sim.build.prepare_trace)
        aug = list(augment_workload(wl, platform.reference_power, augment_params, seed,
                                    cores_per_node=reference_cores(platform)).jobs)
    else:
        aug = rebased
    n_hist = len(hist_idx)
    hist, jobs = aug[:n_hist], aug[n_hist:]
    predictor = None
    mae = {}
    if spec.prime_history:
        predictor = make_predictor("history")
        predictor.setup(platform)
        ends = tr.end[hist_idx] - origin
        for k in np.argsort(ends, kind="stable"):
            tj = hist[k]
            end = float(ends[k])
            job = Job(tj.id, tj.submit_s, tj.walltime_s, tj.nodes, tj.user)
            predictor.update(CompletedJob(job, end - tj.runtime_s, end, tj.mean_w, tj.max_w, tj.std_w))
        est = predictor.predict([Job(j.id, j.submit_s, j.walltime_s, j.nodes, j.user) for j in jobs])
        mae = {f"history_mae_{k}_w": float(np.mean([abs(getattr(e, f"{k}_w") - getattr(j, f"{k}_w"))
                                                     for e, j in zip(est, jobs)])) if jobs else math.nan
               for k in ("mean", "max", "std")}
    node_s = sum(j.runtime_s * j.nodes for j in jobs)
    span = spec.warmup_s + spec.length_s
    users = {j.user for j in jobs}
    info = {
        "slice": spec.index,
        "t0_trace_s": spec.t0_s,
        "t0_trace_day": round(spec.t0_s / DAY, 3),
        "seed": seed,
        "jobs": len(jobs),
        "warmup_jobs": int(mid - lo),
        "history_jobs": n_hist,
        "users": len(users),
        "users_with_history": (sum(1 for u in users if u in predictor.users_) if predictor is not None else 0),
        "offered_load": node_s / (len(platform) * span),
        "mean_node_w": float(np.mean([j.mean_w for j in jobs])) if jobs and jobs[0].mean_w is not None
        else math.nan,
        **mae,
    }
    return PreparedSlice(spec, jobs, predictor, info)
