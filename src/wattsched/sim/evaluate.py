"""Offline evaluation of power predictors on a trace: MAE of mean, max and std power, overall and per user.

The evaluation convention
-------------------------
Jobs are replayed in time order *without a scheduler*, so that the result does
not depend on a policy: a job is submitted at its ``submit_s`` and completes at
``submit_s + runtime_s``, as if it had started the moment it was submitted (no
queueing). Every predictor estimates each job when it is submitted and learns
its measured power when it completes; at equal times completions come before
submissions. So the history a prediction can use is the jobs that *would have
finished* by then had they started at submission. (In a scheduled run jobs wait,
so less history is available; the errors here are those of the predictors, not
of a schedule.)

Consecutive submissions with no completion between them are predicted in one
``predict`` call (the predictors' results do not depend on how submissions are
grouped: no completion can inform them). The real values are those the
simulator's meters would show (see ``Intake.true_estimate`` in ``sim/intake.py``): the trace's
``mean_w``/``max_w``/``std_w``, the statistics of its ``power_series``, or the
node's busy power plus GPUs at TDP for a job without power. Traces without
power are augmented first, exactly as ``wattsched simulate`` does
(:func:`wattsched.workload.augment.augment_workload` with the config's ``augment``
options and ``seed``).

:func:`evaluate` runs the replay on any stream of jobs; :func:`run_evaluation`
opens a config's trace the way the simulator does and :func:`write_outputs`
writes ``summary.json``, ``per_user_mae.csv`` and ``per_user_mae.png`` (a
boxplot of per-user MAE, one panel per metric and one box per predictor: the
idea of Fig. 3 of Carastan-Santos et al. 2024).
"""

from __future__ import annotations

import csv
import heapq
import json
import math
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wattsched.errors import ConfigError, OptionError
from wattsched.model.job import PowerEstimate
from wattsched.model.platform import Platform
from wattsched.predictors import make_predictor, predictor_class
from wattsched.predictors.base import CompletedJob, predictor_tags
from wattsched.sim.intake import make_job
from wattsched.workload.records import TraceJob, true_power

METRICS = ("mean", "max", "std")
CONVENTION = (
    "no queueing: each job completes at submit_s + runtime_s; completions before submissions at equal times"
)
_BATCH = 4096


@dataclass
class PredictorScores:
    """Absolute errors of one predictor, job by job (in the order of :attr:`Evaluation.users`)."""

    label: str
    name: str
    params: dict[str, Any]
    oracle: bool
    errors: tuple[array, array, array] = field(default_factory=lambda: (array("d"), array("d"), array("d")))
    predictor: Any = None
    seconds: float | None = None

    def mae(self) -> dict[str, float]:
        return {f"mae_{m}_w": float(np.mean(e)) if len(e) else math.nan for m, e in zip(METRICS, self.errors)}


@dataclass
class Evaluation:
    """The outcome of :func:`evaluate`."""

    users: list[str]
    scores: list[PredictorScores]
    info: dict[str, Any] = field(default_factory=dict)

    def per_user(self) -> list[dict[str, Any]]:
        """Rows ``predictor, user, n_jobs, mae_mean_w, mae_max_w, mae_std_w``, users in sorted order."""
        users = np.asarray(self.users, dtype=object)
        names, inverse = np.unique(users, return_inverse=True) if len(users) else (np.array([]), np.array([]))
        counts = np.bincount(inverse, minlength=len(names)) if len(users) else np.array([])
        rows = []
        for s in self.scores:
            sums = [np.bincount(inverse, weights=np.frombuffer(e, dtype=np.float64), minlength=len(names))
                    for e in s.errors]
            for k, user in enumerate(names):
                rows.append({
                    "predictor": s.label, "user": str(user), "n_jobs": int(counts[k]),
                    **{f"mae_{m}_w": float(sums[i][k] / counts[k]) for i, m in enumerate(METRICS)},
                })
        return rows

    def summary(self) -> dict[str, Any]:
        per_user = self.per_user()
        out: dict[str, Any] = {**self.info, "jobs": len(self.users), "users": len(set(self.users)),
                               "convention": CONVENTION, "predictors": {}}
        for s in self.scores:
            rows = [r for r in per_user if r["predictor"] == s.label]
            entry: dict[str, Any] = {"name": s.name, "params": s.params, "oracle": s.oracle, **s.mae()}
            for m in METRICS:
                values = [r[f"mae_{m}_w"] for r in rows]
                entry[f"median_user_mae_{m}_w"] = float(np.median(values)) if values else math.nan
            if s.seconds is not None:
                entry["wall_s"] = s.seconds
            log = s.predictor.retrain_log_ if predictor_tags(s.predictor).retrain_log else None
            if log is not None:
                entry["retrainings"] = log
                timed = [r["seconds"] for r in log if r.get("seconds") is not None]
                if timed:
                    entry["retrain_seconds_mean"] = float(np.mean(timed))
                    entry["retrain_seconds_max"] = float(np.max(timed))
            out["predictors"][s.label] = entry
        return out


def label_of(name: str, oracle: bool) -> str:
    """How outputs name a predictor: the oracle says it shows the real values."""
    return f"{name} (real values)" if oracle else name


def evaluate(
    jobs: Iterable[TraceJob],
    platform: Platform,
    predictors: Sequence[tuple[str, Any]],
    *,
    progress: bool = False,
    total: int | None = None,
    clock: Callable[[], float] | None = None,
    max_jobs: int | None = None,
) -> Evaluation:
    """Replay ``jobs`` (in submission order) through ``predictors`` and collect their absolute errors.

    Parameters
    ----------
    jobs
        Trace jobs sorted by ``submit_s``.
    platform
        The machine, for node power bounds (``setup``) and jobs without power.
    predictors
        ``(label, predictor)`` pairs; an oracle predictor is fed the real values.
    progress
        Show a progress bar (tqdm) when the replay takes more than 2 s.
    total
        Number of jobs, for the progress bar, if known.
    clock
        A wall clock (``time.perf_counter``): times each predictor's calls and
        is handed to predictors that time their retrainings.
    max_jobs
        Evaluate only the first ``max_jobs`` jobs.
    """
    truth: dict[int, PowerEstimate] = {}
    scores = []
    for label, pred in predictors:
        pred.setup(platform)
        tags = predictor_tags(pred)
        if tags.needs_truth:
            pred.observe_truth(truth.__getitem__)
        if clock is not None and tags.takes_clock:
            pred.set_clock(clock)
        get = getattr(pred, "get_params", None)
        scores.append(PredictorScores(label, getattr(pred, "name", type(pred).__name__), get() if get else {},
                                      tags.needs_truth, predictor=pred,
                                      seconds=0.0 if clock is not None else None))
    users: list[str] = []
    heap: list[tuple[float, int, CompletedJob]] = []
    batch: list = []

    def flush() -> None:
        if not batch:
            return
        for s in scores:
            t0 = clock() if clock is not None else 0.0
            estimates = s.predictor.predict(batch)
            if clock is not None:
                s.seconds += clock() - t0
            em, ex, es = s.errors
            for job, est in zip(batch, estimates):
                real = truth[job.id]
                em.append(abs(est.mean_w - real.mean_w))
                ex.append(abs(est.max_w - real.max_w))
                es.append(abs(est.std_w - real.std_w))
        users.extend(job.user for job in batch)
        batch.clear()

    def complete_until(t: float) -> None:
        while heap and heap[0][0] <= t:
            _, _, done = heapq.heappop(heap)
            for s in scores:
                t0 = clock() if clock is not None else 0.0
                s.predictor.update(done)
                if clock is not None:
                    s.seconds += clock() - t0
            del truth[done.job.id]

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=min(total, max_jobs) if total and max_jobs else (total or max_jobs), unit=" jobs",
                   delay=2.0, mininterval=0.5, leave=False, desc="evaluating")
    for seq, tj in enumerate(jobs):
        if max_jobs is not None and seq >= max_jobs:
            break
        if (heap and heap[0][0] <= tj.submit_s) or len(batch) >= _BATCH:
            flush()
            complete_until(tj.submit_s)
        job = make_job(tj)  # the Job the simulator would submit
        real = truth[job.id] = true_power(tj, platform)
        batch.append(job)
        end = tj.submit_s + max(tj.runtime_s, 0.0)
        heapq.heappush(heap, (end, seq, CompletedJob(job, tj.submit_s, end, real.mean_w, real.max_w, real.std_w)))
        if bar is not None:
            bar.update(1)
    flush()
    if bar is not None:
        bar.close()
    return Evaluation(users, scores)


def build_predictors(
    specs: Sequence[tuple[str, dict[str, Any]]], *, time_origin_s: float | None = None
) -> list[tuple[str, Any]]:
    """``(label, predictor)`` for each ``(name, params)``; predictors with a ``time_origin_s`` get the trace's.

    Raises
    ------
    ConfigError
        A name is given twice.
    """
    out = []
    seen = set()
    for name, params in specs:
        if name in seen:
            raise ConfigError(f"predictor {name!r} is given twice; give each predictor once")
        seen.add(name)
        cls = predictor_class(name)
        params = dict(params)
        fields = getattr(getattr(cls, "Params", None), "model_fields", {})
        if "time_origin_s" in fields and "time_origin_s" not in params and time_origin_s is not None:
            params["time_origin_s"] = time_origin_s
        pred = make_predictor(name, params, source=lambda loc, n=name: "--param: " + ".".join([n, *map(str, loc)]))
        out.append((label_of(name, predictor_tags(pred).needs_truth), pred))
    return out


def split_params(names: Sequence[str], params: Sequence[tuple[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Route ``--param`` values to predictors: ``NAME.key=v`` to one, ``key=v`` to each that has ``key``.

    >>> split_params(["history", "learned"], [("model", "sgd"), ("history.alpha", 1)])
    [('history', {'alpha': 1}), ('learned', {'model': 'sgd'})]
    """
    out: dict[str, dict[str, Any]] = {n: {} for n in names}
    for key, value in params:
        target, dot, rest = key.partition(".")
        if dot and target in out:
            out[target][rest] = value
            continue
        if dot:
            raise OptionError("--param", f"{key}={value!r}: {target!r} is not a predictor being evaluated "
                                         f"({', '.join(names)}); write NAME.KEY=VALUE with NAME one of them, or "
                                         "KEY=VALUE for every predictor that has KEY")
        takers = [n for n in names if key in getattr(predictor_class(n).Params, "model_fields", {})]
        if not takers:
            raise OptionError("--param", f"{key}: no predictor among {', '.join(names)} has a parameter {key!r}")
        for n in takers:
            out[n][key] = value
    return [(n, out[n]) for n in names]


def run_evaluation(
    config,
    specs: Sequence[tuple[str, dict[str, Any]]],
    *,
    progress: bool = True,
    clock: Callable[[], float] | None = None,
    max_jobs: int | None = None,
) -> Evaluation:
    """Evaluate ``specs`` (``(name, params)``) on the trace of a :class:`~wattsched.config.SimConfig`.

    The trace and machine are opened as ``wattsched simulate`` opens them
    (:func:`wattsched.sim.build.build_platform`, :func:`~wattsched.sim.build.prepare_trace`),
    and power is augmented the same way when the trace has none.
    """
    from wattsched.sim.build import build_platform, machine_of, prepare_trace

    platform = build_platform(config)
    trace = prepare_trace(config, platform)
    source, workload = trace.source, trace.workload
    stream = iter(workload.jobs)
    first = next(stream, None)  # the reader learns the time origin from the first job
    origin = source.origin_unix_s
    predictors = build_predictors(specs, time_origin_s=origin)
    jobs = stream if first is None else _chain(first, stream)
    total = None
    raw = source.header.get("MaxJobs") if source.header else None
    if raw and raw.strip().isdigit():
        total = int(raw.strip())
    result = evaluate(jobs, platform, predictors, progress=progress, total=total, clock=clock, max_jobs=max_jobs)
    result.info.update({
        "trace": source.name,
        "trace_path": str(config.trace),
        "platform": platform.name,
        "nodes": len(platform.nodes),
        "seed": config.seed,
        "power_augmented": trace.augmented,
        "machine": machine_of(config, platform),
        "origin_unix_s": origin,
        "max_jobs": max_jobs,
        "cleaning": source.report.as_dict(),
    })
    return result


def _chain(first, rest):
    yield first
    yield from rest


def format_table(evaluation: Evaluation) -> str:
    """The terminal table: overall and median per-user MAE of each metric, in watts."""
    summary = evaluation.summary()
    head = ["predictor", "MAE mean", "MAE max", "MAE std", "user-median mean", "user-median max",
            "user-median std", "retrainings"]
    rows = [head]
    for label, e in summary["predictors"].items():
        log = e.get("retrainings")
        rows.append([label, *(f"{e[f'mae_{m}_w']:.2f}" for m in METRICS),
                     *(f"{e[f'median_user_mae_{m}_w']:.2f}" for m in METRICS),
                     "-" if log is None else str(len(log))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = []
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_outputs(evaluation: Evaluation, out_dir: str | Path) -> Path:
    """Write ``summary.json``, ``per_user_mae.csv`` and ``per_user_mae.png`` to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = evaluation.per_user()
    with open(out / "per_user_mae.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, ["predictor", "user", "n_jobs", *(f"mae_{m}_w" for m in METRICS)])
        writer.writeheader()
        writer.writerows(rows)
    (out / "summary.json").write_text(json.dumps(evaluation.summary(), indent=2, default=str) + "\n")
    plot_per_user_mae(rows, [s.label for s in evaluation.scores], out / "per_user_mae.png",
                      title=str(evaluation.info.get("trace", "")))
    return out


def plot_per_user_mae(rows: list[dict[str, Any]], labels: Sequence[str], path: str | Path, title: str = "") -> None:
    """Boxplots of per-user MAE: one panel per metric (mean, max, std), one box per predictor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 4.2), sharey=False)
    for ax, m in zip(axes, METRICS):
        data = [[r[f"mae_{m}_w"] for r in rows if r["predictor"] == label] for label in labels]
        ax.boxplot(data, showfliers=True)
        ax.set_xticks(range(1, len(labels) + 1), labels, rotation=30, ha="right")
        ax.set_title(f"{m} power")
        ax.set_ylabel("per-user MAE (W)")
        ax.grid(axis="y", alpha=0.3)
    if title:
        fig.suptitle(f"{title}: per-user mean absolute error")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
