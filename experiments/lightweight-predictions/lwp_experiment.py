"""Reproduction of Carastan-Santos et al. 2024 (§6.4-6.6, Figs. 4-7) on RICC-2010-2 and a Marconi100-like machine.

The runs are a wattsched sweep (``lightweight-predictions.sweep.yaml`` next to
this file): 30 workload slices of RICC-2010-2 (one RICC node = one M100 node),
each the jobs submitted in ``[t0 - 24 h, t0 + 24 h)`` with t0 drawn in 30
equal strata (seed 2024); a capping window ``[t0, t0 + 3 h)``; seeded power
augmentation; caps at 40-70 % of the highest dynamic power measured in the
uncapped EASY runs; EASY+PC with the naive, max, mean and Gaussian checks on
predicted (history, primed on the trace before each slice) and real (oracle)
power; then four algorithms at a 50 % cap. README.md has the design.

This module holds what is specific to the paper:

* :func:`run_metrics`, the sweep's extra per-run metrics (``metrics:`` in the
  sweep file): the columns of ``runs.csv`` that need the job table (turnaround
  per job class, the workload proper without the warm-up) and the platform
  power in the window on a 1-minute grid (Fig. 4);
* :func:`export`, which turns the sweep's results into ``runs.csv``,
  ``details.jsonl``, ``workloads.csv``, ``reference.json`` and
  ``config.json`` (turnaround changes against uncapped EASY on the same slice,
  the measured reference checked against the sweep file's), read by
  :mod:`lwp_report` for ``summary.md`` and the figures.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
SWEEP = HERE / "lightweight-predictions.sweep.yaml"
QUICK = HERE / "quick.sweep.yaml"
PROFILE = HERE / "lightweight-predictions-profile.sweep.yaml"

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


def run_spec_of(spec: dict) -> RunSpec:
    """The paper's name of a sweep run (from its resolved spec)."""
    sim = spec["sim"]
    policy = sim.get("policy", "easy")
    params = sim.get("params") or {}
    cap = spec.get("cap")
    frac = math.nan if cap is None else float(str(cap).rstrip("%")) / 100.0
    if policy == "easy":
        return BASELINE
    predictor = sim.get("predictor")
    values = {"naive": "naive", "history": "predicted", "oracle": "real"}[predictor]
    check = "naive" if predictor == "naive" else params.get("check", "gaussian_99")
    algorithm = f"knapsack-{params.get('profit', 'wait')}" if policy == "knapsack" else policy
    return RunSpec(algorithm, check, values, frac)


# --------------------------------------------------------------------------- per-run metrics (on a sweep worker)


def _class_of(nodes: np.ndarray) -> list[np.ndarray]:
    return [(nodes >= lo) & (nodes <= hi) for _, lo, hi in SIZE_CLASSES]


def _finite_mean(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else None


def _finite_max(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(x.max()) if x.size else None


def run_metrics(result, run: dict) -> dict:
    """The sweep's extra metrics: the ``runs.csv`` columns of one run that need its job table.

    Metrics over *all* jobs of the slice (warm-up included, as the paper's
    turnaround), the workload proper (``main_*``), per job class, and the
    platform power in the window on a 1-minute grid.
    """
    from wattsched.sim.metrics import summarize

    spec = run["spec"]
    ws, we = run["window"]
    platform = run["platform"]
    idle = platform.idle_power_w
    rs = run_spec_of(spec)
    ref = spec.get("cap_reference_dyn_w")
    cap_w = None if math.isnan(rs.cap_frac) else idle + rs.cap_frac * ref
    s = summarize(result, window=(ws, we))
    jobs = result.jobs
    submit, end, nodes = jobs["submit_s"], jobs["end_s"], jobs["nodes"]
    tat = end - submit
    main = submit >= ws  # the workload proper, without the warm-up jobs
    row: dict[str, Any] = {
        "cap_w": cap_w,
        "ref_dyn_w": None if cap_w is None else ref,
        "idle_w": idle,
        "window_start_s": ws,
        "window_end_s": we,
        "n_jobs": s["n_jobs"],
        "jobs_unfinished": s["jobs_unfinished"],
        "plans_rejected": result.info.get("plans_rejected", 0),
        "policy_calls": result.info.get("policy_calls"),
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
    tl_t, tl_p = result.timeline["t_s"], result.timeline["power_w"]
    grid = np.arange(ws + POWER_SAMPLE_S / 2, we, POWER_SAMPLE_S)
    idx = np.clip(np.searchsorted(tl_t, grid, side="right") - 1, 0, len(tl_t) - 1)
    return {"lwp": row, "lwp_power_w": [round(float(p), 1) for p in tl_p[idx]]}


# --------------------------------------------------------------------------- results files


def _pct_change(new: float | None, base: float | None) -> float | None:
    if new is None or base is None or not base:
        return None
    return 100.0 * (new - base) / base


def _fmt(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return repr(round(v, 6)) if abs(v) < 1e12 else repr(v)
    return v


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


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [_parse_row(r) for r in rows]


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


def _as_written(row: dict) -> dict:
    """``row`` with the values ``runs.csv`` holds (floats rounded as :func:`_fmt` writes them)."""
    return {k: (round(v, 6) if isinstance(v, float) and math.isfinite(v) and abs(v) < 1e12 else v)
            for k, v in row.items()}


def _write_csv(path: Path, rows: list[dict]) -> None:
    keys = list(rows[0])
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _fmt(r.get(k)) for k in keys})


def export(sweep_file: str | Path, sweep_dir: str | Path, out: str | Path, *, check_reference: bool = True) -> dict:
    """Write the paper's results files in ``out`` from the sweep's results in ``sweep_dir``.

    Checks that the sweep file's ``cap_reference_dyn_w`` is the highest dynamic
    power of the uncapped EASY runs (the paper's reference, measured here).
    Returns facts (runs, reference, missing runs).
    """
    from wattsched.sweep.expand import expand
    from wattsched.sweep.spec import load_sweep
    from wattsched.sweep.store import Store

    cfg = load_sweep(sweep_file)
    runs = expand(cfg)
    store = Store(sweep_dir)
    stored = {r["key"]: r for r in store.rows({r.key for r in runs}) if r["status"] == "ok"}
    store.close()
    missing = [r for r in runs if r.key not in stored]
    if missing:
        raise SystemExit(f"{len(missing)} of {len(runs)} runs of {sweep_file} are not in {sweep_dir}; "
                         "run the sweep first")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sl = cfg.blocks()[0].slices
    platform_idle = None
    rows, details, infos = [], [], {}
    baseline: dict[int, dict] = {}
    for run in runs:
        r = stored[run.key]
        rs = run_spec_of(run.spec)
        w = run.axes["slice"]
        row = {"workload": w, "t0_trace_s": run.axes["t0_s"], "run_id": rs.run_id, "algorithm": rs.algorithm,
               "check": rs.check, "values": rs.values, "method": rs.method, "cap_frac": rs.cap_frac,
               **r["lwp"], "sim_wall_s": r["sim_wall_s"]}
        rows.append(row)
        details.append({"workload": w, "run_id": rs.run_id, "power_w": r["lwp_power_w"]})
        platform_idle = r["idle_w"]
        if rs == BASELINE:
            baseline[w] = row
        infos[w] = {"workload": w, "t0_trace_s": r["slice_t0_trace_s"], "t0_trace_day": r["slice_t0_trace_day"],
                    "seed": run.spec["slice"]["seed"], **{k[6:]: v for k, v in r.items() if k.startswith("slice_")
                                                          and k not in ("slice_t0_trace_s", "slice_t0_trace_day")}}
    order = ["workload", "t0_trace_s", "run_id", "algorithm", "check", "values", "method", "cap_frac", "cap_w",
             "ref_dyn_w", "idle_w", "window_start_s", "window_end_s", "n_jobs", "jobs_unfinished",
             "plans_rejected", "policy_calls", "sim_wall_s"]
    for row in rows:
        # against uncapped EASY as written in runs.csv (6 decimals), as the results have always been computed;
        # the uncapped row itself has no change
        b = {} if row is baseline.get(row["workload"]) else _as_written(baseline.get(row["workload"]) or {})
        row["tat_change_pct"] = _pct_change(row["mean_turnaround_s"], b.get("mean_turnaround_s"))
        row["max_tat_change_pct"] = _pct_change(row["max_turnaround_s"], b.get("max_turnaround_s"))
        row["main_tat_change_pct"] = _pct_change(row["main_mean_turnaround_s"], b.get("main_mean_turnaround_s"))
        for name, _, _ in (*SIZE_CLASSES, *AREA_CLASSES):
            row[f"mean_tat_change_pct_{name}"] = _pct_change(row[f"mean_tat_{name}"], b.get(f"mean_tat_{name}"))
            row[f"max_tat_change_pct_{name}"] = _pct_change(row[f"max_tat_{name}"], b.get(f"max_tat_{name}"))
    rows = [{**{k: row[k] for k in order}, **{k: v for k, v in row.items() if k not in order}} for row in rows]
    ref_dyn = max(_as_written(b)["max_dyn_power_w"] for b in baseline.values())
    if check_reference and cfg.cap_reference_dyn_w is not None and not math.isclose(
            ref_dyn, cfg.cap_reference_dyn_w, rel_tol=1e-9):
        raise SystemExit(f"{sweep_file}: cap_reference_dyn_w is {cfg.cap_reference_dyn_w!r} but the uncapped EASY "
                         f"runs peak at {ref_dyn!r} W of dynamic power: put that value in the sweep file and rerun")
    _write_csv(out / "runs.csv", rows)
    with open(out / "details.jsonl", "w") as fh:
        for d in details:
            fh.write(json.dumps(d) + "\n")
    _write_csv(out / "workloads.csv", [infos[w] for w in sorted(infos)])
    from wattsched.config.platform import load_platform

    platform = load_platform(cfg.base.get("platform", "default"))
    ref = {"ref_dyn_w": ref_dyn, "workload": max(baseline, key=lambda w: baseline[w]["max_dyn_power_w"]),
           "idle_w": platform_idle, "platform_max_dyn_w": platform.max_dynamic_power_w}
    (out / "reference.json").write_text(json.dumps(ref, indent=2) + "\n")
    caps = sorted({run_spec_of(r.spec).cap_frac for r in runs} - {math.nan}, key=float)
    caps = [c for c in caps if not math.isnan(c)]
    algo_caps = {run_spec_of(r.spec).cap_frac for r in runs if run_spec_of(r.spec).algorithm != "easy-pc"} - {
        BASELINE.cap_frac}
    algo_caps = [c for c in algo_caps if not math.isnan(c)]
    config = {"trace": Path(sl.trace).name, "workloads": sl.count, "window_h": sl.length_h, "warmup_h": sl.warmup_h,
              "cap_window_h": (cfg.cap_window.end_s - cfg.cap_window.start_s) / H, "caps": caps,
              "algo_cap": algo_caps[0] if algo_caps else 0.5, "seed": sl.seed,
              "min_history_days": sl.min_history_days, "platform": cfg.base.get("platform"),
              "cores_per_node": sl.cores_per_node,
              "power_model": "constant" if sl.power_profile is None else "profile", "sweep": Path(sweep_file).name}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return {"runs": len(rows), "ref_dyn_w": ref_dyn}
