"""Reproduction of Carastan-Santos et al. 2024 (§6.4-6.6, Figs. 4-7) on RICC-2010-2 and a Marconi100-like machine.

The design, and where it departs from the paper, is in README.md next to this
file. In short: 30 workloads cut from RICC-2010-2 (one RICC node = one M100
node), each the jobs submitted in ``[t0 - warmup, t0 + W)`` rebased so that the
workload starts at 0; a capping window ``[warmup, warmup + 3 h)``; seeded power
augmentation (the trace has no power); caps at 40-70 % of the highest dynamic
power measured in the uncapped EASY runs; EASY+PC with the naive, max, mean and
Gaussian checks on predicted (history) and real (oracle) power; then four
algorithms at a 50 % cap.

Entry points: :func:`run_experiment` (everything: runs, summary, figures),
:func:`write_report` (summary and figures from an existing ``runs.csv``). The
command line is ``run.py`` next to this file.
"""

from __future__ import annotations

import copy
import csv
import json
import math
import multiprocessing
import os
import pickle
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from wattsched.model.constraints import CapSchedule
from wattsched.model.job import Job
from wattsched.policies import make_policy
from wattsched.predictors import make_predictor
from wattsched.predictors.base import CompletedJob
from wattsched.workload.augment import AugmentParams, augment_workload
from wattsched.sim.engine import Engine, EngineOptions
from wattsched.sim.metrics import summarize
from wattsched.sim.platforms import load_platform
from wattsched.workload.swf import read_swf
from wattsched.workload.records import TraceJob, Workload

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the sibling modules (lwp_policies, lwp_report) are imported by name
    sys.path.insert(0, str(HERE))

from lwp_policies import make_fast_policy  # noqa: E402

H = 3600.0
DAY = 86400.0

CHECKS = ("max", "mean", "gaussian_68", "gaussian_95", "gaussian_99")
"""The paper's power checks besides naive, in the order of its figures."""

ALGORITHMS = ("easy-pc", "easy-saf", "knapsack-wait", "knapsack-stretch")
"""§6.6: EASY FCFS, EASY SAF, Knapsack Wait., Knapsack Stretch (all with gaussian_99)."""

ALGO_LABELS = {"easy-pc": "EASY FCFS", "easy-saf": "EASY SAF", "knapsack-wait": "Knapsack Wait.",
               "knapsack-stretch": "Knapsack Stretch"}

SIZE_CLASSES = (("1", 1, 1), ("2-8", 2, 8), ("9-64", 9, 64), (">64", 65, 10**9))
"""Job size classes by node count (for the SAF-starves-large-jobs finding)."""

AREA_CLASSES = (("<=24nh", 0.0, 24.0), ("24-72nh", 24.0, 72.0), ("72-240nh", 72.0, 240.0), (">240nh", 240.0, math.inf))
"""Job classes by requested area (nodes x requested time, node-hours), the key SAF sorts on: (lo, hi]."""

POWER_SAMPLE_S = 60.0
"""Spacing of the platform-power samples kept per run for the Fig. 4 boxplots."""


def default_trace() -> Path:
    base = os.environ.get("WATTSCHED_TRACES")
    traces = Path(base) if base else HERE.parents[2] / "shared" / "traces"
    return traces / "RICC-2010-2.swf.gz"


@dataclass(frozen=True)
class Config:
    """Everything that defines a results set (saved as ``config.json``; a resumed run must match it)."""

    trace: str = field(default_factory=lambda: str(default_trace()))
    workloads: int = 30
    window_h: float = 24.0
    """W: each workload holds the jobs submitted in ``[t0, t0 + W)`` (plus the warm-up)."""
    warmup_h: float = 24.0
    """Jobs submitted in ``[t0 - warmup, t0)`` fill the machine before the cap window."""
    cap_window_h: float = 3.0
    caps: tuple[float, ...] = (0.4, 0.5, 0.6, 0.7)
    algo_cap: float = 0.5
    seed: int = 2024
    min_history_days: float = 14.0
    """t0 is drawn at least this long after the trace's start, so users have a history."""
    platform: str = "marconi100"
    cores_per_node: int = 8
    """RICC nodes have 8 cores: one RICC node maps onto one M100 node."""
    naive_node_w: float = 2100.0
    power_model: str = "constant"
    """``constant``: a job draws its augmented mean power throughout (the engine's default);
    ``profile``: a seeded step profile around the mean (see :func:`add_profiles`)."""
    profile_step_s: float = 3600.0
    profile_max_steps: int = 12
    t0_days: tuple[float, ...] | None = None
    """Explicit workload starts (trace days) instead of the seeded draw; for tests."""

    @property
    def machine_nodes(self) -> int:
        return len(_platform(self.platform))


# --------------------------------------------------------------------------- trace and workloads


@dataclass
class Trace:
    jobs: list[TraceJob]
    submit: np.ndarray
    end: np.ndarray
    """Completion time in the real trace (submit + wait + runtime), NaN when the wait is missing."""
    report: dict
    span_s: float


_TRACE: dict[tuple[str, int, int], Trace] = {}
_PLATFORMS: dict[str, Any] = {}


def _platform(name: str):
    p = _PLATFORMS.get(name)
    if p is None:
        p = _PLATFORMS[name] = load_platform(name)
    return p


def load_trace(path: str, cores_per_node: int, machine_nodes: int) -> Trace:
    """The cleaned trace in memory (cached per process); jobs wider than the machine are dropped and counted."""
    key = (str(path), cores_per_node, machine_nodes)
    tr = _TRACE.get(key)
    if tr is not None:
        return tr
    w = read_swf(path, cores_per_node=cores_per_node, machine_procs=machine_nodes * cores_per_node)
    jobs = list(w.jobs)
    waits: dict[int, float] = {}
    first_submit = None
    from wattsched.workload.swf import _open_text

    with _open_text(path) as fh:
        for line in fh:
            if not line.strip() or line.lstrip().startswith(";"):
                continue
            parts = line.split()
            if first_submit is None:
                first_submit = float(parts[1])
            waits[int(parts[0])] = float(parts[2])
    # read_swf rebases times on the first kept job; RICC's first job is kept, but be exact anyway
    submit = np.array([j.submit_s for j in jobs])
    wait = np.array([waits.get(j.id, -1.0) for j in jobs])
    runtime = np.array([j.runtime_s for j in jobs])
    end = np.where(wait >= 0, submit + wait + runtime, np.nan)
    tr = Trace(jobs, submit, end, w.report.as_dict(), float(submit[-1]) if len(submit) else 0.0)
    _TRACE[key] = tr
    return tr


@dataclass(frozen=True)
class WorkloadSpec:
    index: int
    t0_s: float
    """Start of the workload proper, in trace seconds (the cap window starts here)."""
    seed: int


def workload_specs(cfg: Config, span_s: float) -> list[WorkloadSpec]:
    """t0 drawn (seeded) in equal strata across the trace, so the workloads cover it (or ``cfg.t0_days``)."""
    if cfg.t0_days is not None:
        return [WorkloadSpec(i, float(round(d * DAY)), cfg.seed * 1000 + i) for i, d in enumerate(cfg.t0_days)]
    lo = max(cfg.warmup_h * H, cfg.min_history_days * DAY)
    hi = span_s - cfg.window_h * H
    if hi <= lo:
        raise ValueError(f"trace too short ({span_s / DAY:.1f} d) for the window and history asked")
    rng = np.random.default_rng(cfg.seed)
    n = cfg.workloads
    width = (hi - lo) / n
    u = rng.random(n)
    return [WorkloadSpec(i, float(round(lo + (i + u[i]) * width)), cfg.seed * 1000 + i) for i in range(n)]


@dataclass
class Prepared:
    """A workload ready to replay: jobs (rebased, augmented), the primed history predictor, facts."""

    spec: WorkloadSpec
    jobs: list[TraceJob]
    history: Any
    info: dict


def add_profiles(jobs: Sequence[TraceJob], seed: int, step_s: float, max_steps: int, *,
                 series_for: int = 0) -> list[TraceJob]:
    """Give jobs a seeded power profile; their mean/max/std become the profile's.

    A job of runtime ``r`` gets ``n = clip(ceil(r / step_s), 1, max_steps)``
    equal steps; step values are ``mean + std * Z`` (``Z`` standard normal)
    clipped to ``[mean - 2 std, max]`` with the augmented mean, std and max
    (``max = min(mean + 2 std, busy)``). All the nodes of a job move together.
    The job's ``mean_w``/``max_w``/``std_w`` are replaced by the realised
    values, so the oracle, the history predictor and the engine agree. Only
    the last ``series_for`` jobs get the series itself (the others are history:
    only their statistics are needed).
    """
    rng = np.random.default_rng([seed, 0x70F11E])
    out: list[TraceJob] = []
    n_all = len(jobs)
    chunk = 16384
    for a in range(0, n_all, chunk):
        block = jobs[a : a + chunk]
        mean = np.array([j.mean_w for j in block])
        std = np.array([j.std_w for j in block])
        top = np.array([j.max_w for j in block])
        rt = np.array([j.runtime_s for j in block])
        n = np.clip(np.ceil(rt / step_s), 1, max_steps).astype(int)
        z = rng.standard_normal((len(block), max_steps))
        v = np.clip(mean[:, None] + std[:, None] * z, (mean - 2 * std)[:, None], top[:, None])
        mask = np.arange(max_steps)[None, :] < n[:, None]
        cnt = mask.sum(axis=1)
        m_r = np.where(mask, v, 0.0).sum(axis=1) / cnt
        x_r = np.where(mask, v, -np.inf).max(axis=1)
        s_r = np.sqrt(np.maximum(0.0, np.where(mask, (v - m_r[:, None]) ** 2, 0.0).sum(axis=1) / cnt))
        for k, j in enumerate(block):
            series = None
            if a + k >= n_all - series_for:
                dt = j.runtime_s / n[k] if j.runtime_s > 0 else 0.0
                series = tuple((i * dt, float(v[k, i])) for i in range(n[k]))
            out.append(replace(j, mean_w=float(m_r[k]), max_w=float(x_r[k]), std_w=float(s_r[k]),
                               power_series=series))
    return out


def prepare_workload(cfg: Config, spec: WorkloadSpec) -> Prepared:
    """Cut, rebase and augment one workload; prime a history predictor on the trace before it."""
    platform = _platform(cfg.platform)
    tr = load_trace(cfg.trace, cfg.cores_per_node, len(platform))
    origin = spec.t0_s - cfg.warmup_h * H
    lo, mid, hi = np.searchsorted(tr.submit, [origin, spec.t0_s, spec.t0_s + cfg.window_h * H], side="left")
    # History: jobs submitted before the workload that really completed before it started.
    hist_idx = np.nonzero(tr.end[:lo] <= origin)[0]
    picked = [tr.jobs[k] for k in hist_idx] + tr.jobs[lo:hi]
    rebased = [replace(j, submit_s=j.submit_s - origin) for j in picked]
    wl = Workload(name=f"ricc-w{spec.index:02d}", jobs=iter(rebased))
    aug = list(augment_workload(wl, platform.nodes[0].power, AugmentParams(), spec.seed).jobs)
    n_hist = len(hist_idx)
    if cfg.power_model == "profile":
        aug = add_profiles(aug, spec.seed, cfg.profile_step_s, cfg.profile_max_steps, series_for=len(aug) - n_hist)
    elif cfg.power_model != "constant":
        raise ValueError(f"unknown power model {cfg.power_model!r}")
    hist, jobs = aug[:n_hist], aug[n_hist:]
    predictor = make_predictor("history")
    predictor.setup(platform)
    ends = tr.end[hist_idx] - origin
    for k in np.argsort(ends, kind="stable"):
        tj = hist[k]
        end = float(ends[k])
        job = Job(tj.id, tj.submit_s, tj.walltime_s, tj.nodes, tj.user)
        predictor.update(CompletedJob(job, end - tj.runtime_s, end, tj.mean_w, tj.max_w, tj.std_w))
    # Accuracy of the primed predictor on the workload's jobs (before any online update), as in §6.3
    est = predictor.predict([Job(j.id, j.submit_s, j.walltime_s, j.nodes, j.user) for j in jobs])
    mae = {k: float(np.mean([abs(getattr(e, f"{k}_w") - getattr(j, f"{k}_w")) for e, j in zip(est, jobs)]))
           if jobs else math.nan for k in ("mean", "max", "std")}
    node_s = sum(j.runtime_s * j.nodes for j in jobs)
    span = cfg.warmup_h * H + cfg.window_h * H
    info = {
        "workload": spec.index,
        "t0_trace_s": spec.t0_s,
        "t0_trace_day": round(spec.t0_s / DAY, 3),
        "seed": spec.seed,
        "jobs": len(jobs),
        "warmup_jobs": int(mid - lo),
        "history_jobs": n_hist,
        "users": len({j.user for j in jobs}),
        "users_with_history": sum(1 for u in {j.user for j in jobs} if u in predictor.users_),
        "offered_load": node_s / (len(platform) * span),
        "mean_node_w": float(np.mean([j.mean_w for j in jobs])) if jobs else math.nan,
        "history_mae_mean_w": mae["mean"],
        "history_mae_max_w": mae["max"],
        "history_mae_std_w": mae["std"],
    }
    return Prepared(spec, jobs, predictor, info)


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunSpec:
    algorithm: str
    """easy (uncapped reference), easy-pc, easy-saf, knapsack-wait, knapsack-stretch."""
    check: str
    """naive, max, mean, gaussian_68/95/99; ``-`` for uncapped easy."""
    values: str
    """predicted (history), real (oracle), naive (maximum node power), ``-``."""
    cap_frac: float
    """Fraction of the reference dynamic power; NaN for uncapped easy."""

    @property
    def run_id(self) -> str:
        cap = "none" if math.isnan(self.cap_frac) else f"{self.cap_frac:.2f}"
        return f"{self.algorithm}|{self.check}|{self.values}|{cap}"

    @property
    def method(self) -> str:
        """Label of the power check and the values it uses, as in the paper's figures."""
        if self.check == "naive":
            return "naive"
        if self.check == "-":
            return "EASY (no cap)"
        short = {"gaussian_68": "g68", "gaussian_95": "g95", "gaussian_99": "g99"}.get(self.check, self.check)
        return f"{short} ({'pred' if self.values == 'predicted' else 'real'})"


BASELINE = RunSpec("easy", "-", "-", math.nan)


def run_specs(cfg: Config) -> list[RunSpec]:
    """The capped runs of one workload (the uncapped EASY reference is :data:`BASELINE`)."""
    specs = []
    for f in cfg.caps:
        specs.append(RunSpec("easy-pc", "naive", "naive", f))
        for check in CHECKS:
            for values in ("predicted", "real"):
                specs.append(RunSpec("easy-pc", check, values, f))
    for algo in ALGORITHMS[1:]:
        for values in ("predicted", "real"):
            specs.append(RunSpec(algo, "gaussian_99", values, cfg.algo_cap))
    if cfg.algo_cap not in cfg.caps:
        for values in ("predicted", "real"):
            specs.append(RunSpec("easy-pc", "gaussian_99", values, cfg.algo_cap))
    return specs


def _policy(spec: RunSpec, fast: bool = True):
    """The policy of a run; ``fast`` uses the decision-identical stand-ins of :mod:`lwp_policies`."""
    make = make_fast_policy if fast else make_policy
    if spec.algorithm == "easy":
        return make_policy("easy")
    check = "mean" if spec.check == "naive" else spec.check
    if spec.algorithm in ("easy-pc", "easy-saf"):
        return make(spec.algorithm, {"check": check})
    if spec.algorithm.startswith("knapsack-"):
        return make("knapsack", {"check": check, "profit": spec.algorithm.split("-", 1)[1]})
    raise ValueError(f"unknown algorithm {spec.algorithm!r}")


def _predictor(cfg: Config, spec: RunSpec, prep: Prepared):
    if spec.algorithm == "easy":
        return None
    if spec.values == "naive":
        return make_predictor("naive", {"node_max_w": cfg.naive_node_w})
    if spec.values == "real":
        return make_predictor("oracle")
    return copy.deepcopy(prep.history)


def _class_of(nodes: np.ndarray) -> list[np.ndarray]:
    return [(nodes >= lo) & (nodes <= hi) for _, lo, hi in SIZE_CLASSES]


def _pct_change(new: float | None, base: float | None) -> float | None:
    if new is None or base is None or not base:
        return None
    return 100.0 * (new - base) / base


def window_of(cfg: Config) -> tuple[float, float]:
    return cfg.warmup_h * H, cfg.warmup_h * H + cfg.cap_window_h * H


def execute_run(cfg: Config, prep: Prepared, spec: RunSpec, ref_dyn_w: float | None,
                baseline: dict | None) -> tuple[dict, dict]:
    """Simulate one run; return its ``runs.csv`` row and its detail (power samples in the window)."""
    platform = _platform(cfg.platform)
    idle = platform.idle_power_w
    ws, we = window_of(cfg)
    cap_w = None
    cap = None
    if not math.isnan(spec.cap_frac):
        if ref_dyn_w is None:
            raise ValueError("a capped run needs the reference dynamic power")
        cap_w = idle + spec.cap_frac * ref_dyn_w
        cap = CapSchedule.window(ws, we, cap_w)
    t = time.perf_counter()
    result = Engine(platform, prep.jobs, _policy(spec), cap=cap, predictor=_predictor(cfg, spec, prep),
                    options=EngineOptions(strict=False), seed=prep.spec.seed).run()
    wall = time.perf_counter() - t
    s = summarize(result, window=(ws, we))
    jobs = result.jobs
    submit, end, nodes = jobs["submit_s"], jobs["end_s"], jobs["nodes"]
    tat = end - submit
    main = submit >= ws  # the workload proper, without the warm-up jobs
    row: dict[str, Any] = {
        "workload": prep.spec.index,
        "t0_trace_s": prep.spec.t0_s,
        "run_id": spec.run_id,
        "algorithm": spec.algorithm,
        "check": spec.check,
        "values": spec.values,
        "method": spec.method,
        "cap_frac": spec.cap_frac,
        "cap_w": cap_w,
        "ref_dyn_w": ref_dyn_w,
        "idle_w": idle,
        "window_start_s": ws,
        "window_end_s": we,
        "n_jobs": s["n_jobs"],
        "jobs_unfinished": s["jobs_unfinished"],
        "plans_rejected": result.info.get("plans_rejected", 0),
        "policy_calls": result.info.get("policy_calls"),
        "sim_wall_s": round(wall, 3),
        "max_power_w": s["max_power_w"],
        "max_dyn_power_w": None if s["max_power_w"] is None else s["max_power_w"] - idle,
        "window_mean_power_w": s["window_mean_power_w"],
        "window_max_power_w": s["window_max_power_w"],
        "power_util": s["window_power_utilization"],
        "dyn_power_util": None if cap_w is None or s["window_mean_power_w"] is None
        else (s["window_mean_power_w"] - idle) / (cap_w - idle),
        "frac_above_cap": s["window_frac_above_cap"] if cap_w is not None else None,
        "max_overshoot_pct": s["max_overshoot_pct"] if cap_w is not None else None,
        "energy_above_cap_kwh": None if cap_w is None else s["window_energy_above_cap_j"] / 3.6e6,
        "jobs_started_in_window": s["jobs_started_in_window"],
        "frac_jobs_in_window": s["jobs_started_in_window"] / s["n_jobs"] if s["n_jobs"] else None,
        "mean_turnaround_s": s["mean_turnaround_s"],
        "max_turnaround_s": s["max_turnaround_s"],
        "mean_wait_s": s["mean_wait_s"],
        "mean_bsld": s["mean_bsld"],
        "main_mean_turnaround_s": _finite_mean(tat[main]),
        "main_max_turnaround_s": _finite_max(tat[main]),
    }
    area = nodes * jobs["walltime_s"] / H
    classes = list(zip(SIZE_CLASSES, _class_of(nodes)))
    classes += [(c, (area > c[1]) & (area <= c[2])) for c in AREA_CLASSES]
    for (name, _, _), sel in classes:
        x = tat[sel & np.isfinite(tat)]
        row[f"n_{name}"] = int(sel.sum())
        row[f"mean_tat_{name}"] = float(x.mean()) if x.size else None
        row[f"p95_tat_{name}"] = float(np.percentile(x, 95)) if x.size else None
        row[f"max_tat_{name}"] = float(x.max()) if x.size else None
    b = baseline or {}
    row["tat_change_pct"] = _pct_change(row["mean_turnaround_s"], b.get("mean_turnaround_s"))
    row["max_tat_change_pct"] = _pct_change(row["max_turnaround_s"], b.get("max_turnaround_s"))
    row["main_tat_change_pct"] = _pct_change(row["main_mean_turnaround_s"], b.get("main_mean_turnaround_s"))
    for name, _, _ in (*SIZE_CLASSES, *AREA_CLASSES):
        row[f"mean_tat_change_pct_{name}"] = _pct_change(row[f"mean_tat_{name}"], b.get(f"mean_tat_{name}"))
        row[f"max_tat_change_pct_{name}"] = _pct_change(row[f"max_tat_{name}"], b.get(f"max_tat_{name}"))
    # platform power on a 1-minute grid over the window, for the Fig. 4 boxplots
    tl_t, tl_p = result.timeline["t_s"], result.timeline["power_w"]
    grid = np.arange(ws + POWER_SAMPLE_S / 2, we, POWER_SAMPLE_S)
    idx = np.clip(np.searchsorted(tl_t, grid, side="right") - 1, 0, len(tl_t) - 1)
    detail = {"workload": prep.spec.index, "run_id": spec.run_id, "power_w": [round(float(p), 1) for p in tl_p[idx]]}
    return row, detail


def _finite_mean(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else None


def _finite_max(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(x.max()) if x.size else None


def verify_identical(cfg: Config, ref_dyn_w: float, specs: Sequence[RunSpec] | None = None,
                     indices: Sequence[int] | None = None, progress: bool = False) -> list[str]:
    """Run ``specs`` (default: every capped run) with the library's policies and with the fast stand-ins.

    ``indices`` picks workloads of the design (default all). Returns the runs whose job start or
    end times differ (an empty list when they all agree).
    """
    tr = load_trace(cfg.trace, cfg.cores_per_node, cfg.machine_nodes)
    platform = _platform(cfg.platform)
    ws, we = window_of(cfg)
    bad = []
    for wspec in workload_specs(cfg, tr.span_s):
        if indices is not None and wspec.index not in indices:
            continue
        prep = prepare_workload(cfg, wspec)
        for spec in specs if specs is not None else run_specs(cfg):
            if progress:
                print(f"workload {wspec.index}: {spec.run_id}", flush=True)
            cap = CapSchedule.window(ws, we, platform.idle_power_w + spec.cap_frac * ref_dyn_w)
            out = []
            for fast in (False, True):
                result = Engine(platform, prep.jobs, _policy(spec, fast), cap=cap,
                                predictor=_predictor(cfg, spec, prep), options=EngineOptions(strict=False)).run()
                out.append(result.jobs)
            a, b = out
            if not (np.array_equal(a["id"], b["id"]) and np.array_equal(a["start_s"], b["start_s"], equal_nan=True)
                    and np.array_equal(a["end_s"], b["end_s"], equal_nan=True)):
                bad.append(f"workload {wspec.index}: {spec.run_id}")
    return bad


# --------------------------------------------------------------------------- workers


_PREPARED: dict[tuple, Prepared] = {}


def _cache_path(out: Path, spec: WorkloadSpec) -> Path:
    return out / ".cache" / f"w{spec.index:03d}-{spec.seed}.pkl"


def get_prepared(cfg: Config, spec: WorkloadSpec, out: Path) -> Prepared:
    """The prepared workload: from this process's memory, the cache file, or built (and cached)."""
    key = (cfg, spec)
    prep = _PREPARED.get(key)
    if prep is not None:
        return prep
    path = _cache_path(out, spec)
    if path.exists():
        with open(path, "rb") as fh:
            prep = pickle.load(fh)
    else:
        prep = prepare_workload(cfg, spec)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(prep, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    while len(_PREPARED) >= 3:
        _PREPARED.pop(next(iter(_PREPARED)))
    _PREPARED[key] = prep
    return prep


def _task(cfg: Config, out: str, wspec: WorkloadSpec, specs: Sequence[RunSpec], ref_dyn_w: float | None,
          baseline: dict | None) -> tuple[dict, list[tuple[dict, dict]]]:
    prep = get_prepared(cfg, wspec, Path(out))
    return prep.info, [execute_run(cfg, prep, s, ref_dyn_w, baseline) for s in specs]


# --------------------------------------------------------------------------- results files


ROW_KEYS: list[str] | None = None


def _fmt(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return repr(round(v, 6)) if abs(v) < 1e12 else repr(v)
    return v


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [_parse_row(r) for r in rows]


_STR_KEYS = {"run_id", "algorithm", "check", "values", "method"}


def _parse_row(r: dict) -> dict:
    out = {}
    for k, v in r.items():
        if k in _STR_KEYS:
            out[k] = v
        elif v == "":
            out[k] = None
        else:
            try:
                x = float(v)
                out[k] = int(x) if k in ("workload", "n_jobs", "jobs_unfinished") else x
            except ValueError:
                out[k] = v
    return out


class ResultsWriter:
    """Appends rows to ``runs.csv`` and details to ``details.jsonl`` as runs finish (resumable)."""

    def __init__(self, out: Path):
        self.out = out
        self.runs = out / "runs.csv"
        self.details = out / "details.jsonl"
        self.keys: list[str] | None = None
        if self.runs.exists():
            with open(self.runs, newline="") as fh:
                header = next(csv.reader(fh), None)
            self.keys = header

    def done(self) -> set[tuple[int, str]]:
        return {(r["workload"], r["run_id"]) for r in read_rows(self.runs)}

    def add(self, row: dict, detail: dict) -> None:
        with open(self.details, "a") as fh:
            fh.write(json.dumps(detail) + "\n")
        new = self.keys is None
        if new:
            self.keys = list(row)
        with open(self.runs, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=self.keys, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow({k: _fmt(row.get(k)) for k in self.keys})


def read_details(out: Path) -> dict[tuple[int, str], list[float]]:
    path = out / "details.jsonl"
    found: dict[tuple[int, str], list[float]] = {}
    if path.exists():
        with open(path) as fh:
            for line in fh:
                if line.strip():
                    d = json.loads(line)
                    found[(d["workload"], d["run_id"])] = d["power_w"]
    return found


# --------------------------------------------------------------------------- driver


def _config_dict(cfg: Config) -> dict:
    d = asdict(cfg)
    d["caps"] = list(cfg.caps)
    if cfg.t0_days is not None:
        d["t0_days"] = list(cfg.t0_days)
    d["trace"] = os.path.basename(cfg.trace)
    return d


def _batches(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), max(1, size)):
        yield items[i : i + max(1, size)]


def run_experiment(cfg: Config, out: str | Path, *, workers: int = 2, jobs_per_process: int = 4,
                   progress: bool = True, report: bool = True, keep_cache: bool = False) -> dict:
    """Run every missing run of ``cfg`` into ``out``, then write the summary and figures.

    Phase 1 runs uncapped EASY on every workload and measures the reference
    dynamic power (the highest platform power minus all-idle power seen in any
    of them); phase 2 runs the capped runs. Runs already in ``out/runs.csv``
    are skipped. Returns facts about the run (timings, counts, reference).
    """
    from tqdm import tqdm

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    cfg_path = out / "config.json"
    cfg_d = _config_dict(cfg)
    if cfg_path.exists():
        old = json.loads(cfg_path.read_text())
        if old != cfg_d:
            raise SystemExit(f"{out} holds results of another configuration ({cfg_path}); use another --out "
                             "or delete that directory")
    else:
        cfg_path.write_text(json.dumps(cfg_d, indent=2) + "\n")
    if not Path(cfg.trace).exists():
        raise FileNotFoundError(f"trace not found: {cfg.trace}")
    platform = _platform(cfg.platform)
    tr = load_trace(cfg.trace, cfg.cores_per_node, len(platform))  # before forking: workers share it
    wspecs = workload_specs(cfg, tr.span_s)
    writer = ResultsWriter(out)
    done = writer.done()
    infos: dict[int, dict] = {}
    wl_path = out / "workloads.csv"
    if wl_path.exists():
        for r in read_rows(wl_path):
            infos[int(r["workload"])] = r

    pool = None
    if workers > 1:
        ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)

    def run_phase(tasks: list[tuple], label: str) -> None:
        total = sum(len(t[1]) for t in tasks)
        if not total:
            return
        bar = tqdm(total=total, desc=label, unit="run", disable=not progress, dynamic_ncols=True)
        if pool is None:
            for t in tasks:
                info, results = _task(cfg, str(out), *t)
                _collect(info, results)
                bar.update(len(results))
        else:
            futures = [pool.submit(_task, cfg, str(out), *t) for t in tasks]
            for fut in as_completed(futures):
                info, results = fut.result()
                _collect(info, results)
                bar.update(len(results))
        bar.close()

    def _collect(info: dict, results: list[tuple[dict, dict]]) -> None:
        infos[info["workload"]] = info
        for row, detail in results:
            writer.add(row, detail)

    try:
        # phase 1: uncapped EASY, the reference for turnaround and for the caps
        tasks = [(w, [BASELINE], None, None) for w in wspecs if (w.index, BASELINE.run_id) not in done]
        run_phase(tasks, "uncapped EASY")
        rows = read_rows(writer.runs)
        base = {r["workload"]: r for r in rows if r["run_id"] == BASELINE.run_id}
        ref_dyn = max(base[w.index]["max_dyn_power_w"] for w in wspecs)
        ref_path = out / "reference.json"
        ref = {"ref_dyn_w": ref_dyn, "workload": max(wspecs, key=lambda w: base[w.index]["max_dyn_power_w"]).index,
               "idle_w": platform.idle_power_w, "platform_max_dyn_w": platform.max_dynamic_power_w}
        if ref_path.exists():
            old = json.loads(ref_path.read_text())
            if not math.isclose(old["ref_dyn_w"], ref_dyn, rel_tol=1e-9):
                raise SystemExit(f"reference dynamic power changed ({old['ref_dyn_w']} -> {ref_dyn}); "
                                 f"delete {out} and start again")
        ref_path.write_text(json.dumps(ref, indent=2) + "\n")
        # phase 2: capped runs, batched per workload
        specs = run_specs(cfg)
        tasks = []
        for w in wspecs:
            todo = [s for s in specs if (w.index, s.run_id) not in done]
            b = base[w.index]
            for batch in _batches(todo, jobs_per_process):
                tasks.append((w, batch, ref_dyn, b))
        run_phase(tasks, "capped runs")
    finally:
        if pool is not None:
            pool.shutdown()
    for w in wspecs:  # a resumed run may not have prepared every workload in this process
        if w.index not in infos:
            infos[w.index] = get_prepared(cfg, w, out).info
    with open(wl_path, "w", newline="") as fh:
        keys = list(next(iter(infos.values())))
        wr = csv.DictWriter(fh, fieldnames=keys)
        wr.writeheader()
        for i in sorted(infos):
            wr.writerow({k: _fmt(infos[i].get(k)) for k in keys})
    if not keep_cache:
        shutil.rmtree(out / ".cache", ignore_errors=True)
    elapsed = time.perf_counter() - t_start
    facts = {"elapsed_s": elapsed, "ref_dyn_w": ref_dyn, "dropped": tr.report.get("dropped", {}),
             "runs": len(read_rows(writer.runs))}
    if report:
        from lwp_report import write_report

        write_report(out)
    return facts
