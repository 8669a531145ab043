"""One simulation run from a validated :class:`~wattsched.config.SimConfig`: the glue the CLI and sweeps share."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from wattsched.config import SimConfig
from wattsched.errors import ConfigError
from wattsched.sim.build import Run, build_platform, build_run, run_response, validate_plugins
from wattsched.sim.collector import frozen, read_whole
from wattsched.sim.metrics import bsld_settings
from wattsched.workload.open import trace_stem

__all__ = ["RunOutcome", "baseline_comparison", "build_platform", "check_out_dir", "publish_run_dir",
           "run_response", "run_simulation", "validate_plugins"]

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    """What :func:`run_simulation` gives: the result, its summary, where it was written, and the engine."""

    result: object
    summary: dict
    out_dir: Path | None
    engine: object = dataclasses.field(default=None, repr=False)
    """The engine that ran (its control log, its notices). Held here, its jobs and queues are freed with the
    outcome rather than when the run returns: a fifth of a second on a 400,000-job trace that a command
    which exits next, like ``wattsched simulate``, never spends."""
    baseline: dict | None = None
    """The summary of the uncapped baseline on the same jobs, when the config names one."""
    verdicts: dict | None = None
    """The run's verdicts and warnings (:func:`wattsched.sim.verdicts.verdicts`)."""


def run_simulation(config: SimConfig, *, progress: bool = True, write: bool = True, report: bool = True,
                   plotter=None) -> RunOutcome:
    """Simulate ``config``: read the trace, augment power if needed, run, summarise, write outputs.

    The outputs are written into a temporary directory beside the run directory
    and renamed into place once complete: a run that fails or is interrupted
    (an exception, Ctrl-C, SIGTERM turned into ``SystemExit`` by the CLI) leaves
    the previous run directory as it was, and says so on stderr.

    ``plotter`` is a :class:`~wattsched.sim.plotworker.PlotWorker` the caller
    started early (``wattsched simulate`` starts it before it reads the config,
    so that the worker's imports overlap the run's own); the run draws with it
    and the caller closes it. Without one, a run that writes starts (and
    closes) its own.
    """
    # What is alive before the run (modules, the config), and the trace once read, stay out of the collector's
    # passes during it: every collection would walk them again. Unfrozen when the run ends.
    with frozen():
        return _run_simulation(config, progress=progress, write=write, report=report, plotter=plotter)


def _run_simulation(config: SimConfig, *, progress: bool, write: bool, report: bool, plotter) -> RunOutcome:
    out_dir = Path(config.out) if (write and config.out is not None) else None
    if write and out_dir is None:
        out_dir = Path("runs") / f"{trace_stem(config.trace)}-{config.policy}"
    run = build_run(config, progress=progress,
                    before_trace=None if out_dir is None else (lambda: check_out_dir(out_dir)))
    staging = _staging_dir(out_dir) if out_dir is not None else None
    try:
        outcome = _run(run, staging, report, plotter)
        if staging is not None:
            publish_run_dir(staging, out_dir)
    except BaseException as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
            what = ("the previous run there is untouched" if (out_dir / "summary.json").exists()
                    else "nothing was written there")
            reason = "interrupted" if isinstance(exc, KeyboardInterrupt | SystemExit) else "failed"
            print(f"wattsched: {out_dir}: the run {reason}; {what}", file=sys.stderr)
        raise
    outcome.out_dir = out_dir
    return outcome


def check_out_dir(out_dir: Path) -> None:
    """Refuse, before any work, an ``--out`` that is a file, not writable, or a directory of something else.

    An existing directory is replaced only when it is empty or a run directory
    (it has ``summary.json`` or the completion marker).
    """
    from wattsched.sim.report import MARKER

    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out: {out_dir} is a file, not a directory; give a directory for the run")
    if out_dir.is_dir():
        try:
            entries = {p.name for p in out_dir.iterdir()}
        except OSError as exc:
            raise ConfigError(f"--out: cannot read {out_dir}: {exc.strerror}") from None
        if entries and not entries & {"summary.json", MARKER}:
            raise ConfigError(
                f"--out: {out_dir} exists and is not a run directory (no summary.json); a run replaces its "
                "directory whole, so give a new or empty directory")
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out: cannot create {parent}: {exc.strerror}") from None
    if not parent.is_dir():
        raise ConfigError(f"--out: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"--out: cannot write in {parent} (permission denied); give a writable place")


def _staging_dir(out_dir: Path) -> Path:
    # os.mkdir, not tempfile.mkdtemp: the run directory gets the umask's permissions, not 0700
    path = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        path.mkdir()
        return path
    except OSError as exc:
        raise ConfigError(f"--out: cannot write in {out_dir.parent}: {exc.strerror}") from None


def publish_run_dir(staging: Path, out_dir: Path) -> None:
    """Move a completed run from ``staging`` to ``out_dir``, replacing the previous run there.

    Both are in the same directory, so each step is a rename: the previous run
    stays whole until the new one is complete, and is removed only after the new
    one is in place.
    """
    if not out_dir.exists():
        os.rename(staging, out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.rename(out_dir, old / "run")
    try:
        os.rename(staging, out_dir)
    except OSError:
        os.rename(old / "run", out_dir)  # put the previous run back
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def _run(run: Run, out_dir: Path | None, report: bool, plotter=None) -> RunOutcome:
    # the plots are drawn by a worker process that imports matplotlib while the engine runs
    if out_dir is None:
        return _run_with(run, None, report, None)
    own = None
    if plotter is None:
        from wattsched.sim.plotworker import PlotWorker

        plotter = own = PlotWorker.start()
    try:
        return _run_with(run, out_dir, report, plotter)
    finally:
        if own is not None:
            own.close()


def _run_with(run: Run, out_dir: Path | None, report: bool, plotter) -> RunOutcome:
    from wattsched.policies import make_policy
    from wattsched.predictors.base import predictor_tags
    from wattsched.sim.metrics import summarize

    config, platform, cap, predictor = run.config, run.platform, run.cap, run.predictor
    trace = run.trace
    workload = trace.workload
    tape = None
    if trace.augmented and out_dir is not None:
        if plotter is not None:
            # read whole now (the run keeps every job for this file anyway), so that the worker writes
            # workload.csv.gz on the other core while the engine runs
            from wattsched.workload.tables import job_table_columns

            workload.jobs = tape = read_whole(workload.jobs)
            plotter.send_workload(job_table_columns(tape, pack_series=True), out_dir / "workload.csv.gz")
        else:
            tape = []
            workload.jobs = _taped(workload.jobs, tape.append)
    baseline_workload = None
    if config.baseline is not None:
        # the baseline replays the very same jobs (augmented power included)
        workload.jobs = read_whole(workload.jobs)
        baseline_workload = list(workload.jobs)
    engine = run.engine()
    result = engine.run()
    bsld_definition, bsld_threshold_s = bsld_settings(config.policy, config.bsld_definition, config.bsld_threshold_s)
    bsld_s, bsld_def = bsld_threshold_s or 10.0, bsld_definition or "standard"  # as the plots draw them
    if out_dir is not None and plotter is not None:
        # drawn, and the tables written, there (this process has not imported pyarrow); handed over first, so
        # that the worker draws while this process makes the summary
        plotter.send(result, out_dir, bsld_s, bsld_def, tables=True)
    if tape is not None and not isinstance(workload.jobs, list):
        for _ in workload.jobs:  # the rest of the streamed trace, if the run stopped early
            pass
    window = _cap_window(cap)
    if predictor is None and not cap.is_uncapped:
        result.info.setdefault("notes", []).append(
            "no predictor given: policies saw every job at the node maximum power (as the naive predictor)")
    if predictor is not None and predictor_tags(predictor).retrain_log and predictor.retrain_log_:
        result.info["predictor_retrain_log"] = list(predictor.retrain_log_)
    result.info.update(
        {
            "trace_path": str(config.trace),
            "cap": [[s.start_s, s.cap_w, s.label] for s in cap.steps],
            "config": json.loads(config.model_dump_json()),
            "power_augmented": trace.augmented,
            "origin_unix_s": trace.source.origin_unix_s,
            "cores_per_node": platform.nodes[0].cores,
            "machine": run.machine,
            **constraint_info(run, engine),
        }
    )
    summary = summarize(result, bsld_threshold_s=bsld_threshold_s, window=window, bsld_definition=bsld_definition)
    summary["machine"] = run.machine
    if baseline_workload is not None:
        from wattsched.model.constraints import CapSchedule

        base_policy = make_policy(config.baseline)
        base = run.engine(jobs=baseline_workload, policy=base_policy, cap=CapSchedule(), budgets=(),
                          predictor=None, dr_events=()).run()
        base.timeline["cap_w"] = caps_at(cap, base.timeline["t_s"])  # measured against the run's cap
        base_summary = summarize(base, bsld_threshold_s=bsld_threshold_s, window=window,
                                 bsld_definition=bsld_definition)
        summary.update(baseline_comparison(summary, base_summary, config.baseline))
    else:
        base_summary = None
    from wattsched.sim.verdicts import verdicts as judge

    verdicts = judge(summary, result.info, result.timeline, result.jobs)
    if out_dir is not None:
        from wattsched.sim.report import (
            PLOTS,
            TABLE_FILES,
            prepare_html_report,
            write_marker,
            write_plots,
            write_run,
            write_tables,
        )

        if plotter is not None:
            rows = write_run(result, out_dir, summary, plots=False, marker=False, tables=False,
                             baseline=base_summary, verdicts=verdicts)
        else:
            rows = _write_without_worker(result, out_dir, summary, tape, base_summary, verdicts)
        if engine.noticed or any(entry[1] != "cap" for entry in engine.control_log):
            from wattsched.sim.drlog import write_dr_outputs

            write_dr_outputs(out_dir, engine.noticed, engine.control_log, result.timeline, len(platform))
        if engine.control_log:
            from wattsched.sim.nodecaps import write_node_cap_outputs

            write_node_cap_outputs(out_dir, engine.control_log, result.timeline, [n.name for n in platform.nodes])
        if engine.recorder.sizes:
            from wattsched.sim.nodecounts import write_node_count_outputs

            write_node_count_outputs(out_dir, engine.recorder.sizes, result.timeline, len(platform))
        # the page but its plots is made while the worker draws them
        finish_report = prepare_html_report(out_dir, result, summary, baseline=base_summary,
                                            verdicts=verdicts) if report else None
        if plotter is not None:
            problem = plotter.wait()
            if tape is not None and not (out_dir / "workload.csv.gz").exists():
                from wattsched.workload.tables import write_job_table

                write_job_table(tape, out_dir / "workload.csv.gz")  # the worker could not: written here
            if not all((out_dir / name).exists() for name in TABLE_FILES):
                write_tables(result, out_dir)  # the worker could not: written here
            if problem is None and not all((out_dir / p).exists() for p in PLOTS):
                problem = "the plot worker ended without drawing every plot"
            if problem is not None:
                # drawn here instead, so that an error of the plotting code itself fails the run as itself
                print(f"wattsched: warning: {problem}; drawing the plots in this process", file=sys.stderr)
                write_plots(result, out_dir, bsld_s, bsld_def)
        if finish_report is not None:
            finish_report()
        write_marker(out_dir, rows)
    return RunOutcome(result, summary, out_dir, engine, base_summary, verdicts)


def caps_at(cap, t_s):
    """The cap of the schedule ``cap`` in force at each time of ``t_s`` (``inf`` where none applies): an
    uncapped baseline's timeline measured against the run's cap, so that its cap figures say how far it goes
    over it.

    >>> from wattsched.model.constraints import CapSchedule
    >>> caps_at(CapSchedule.window(10.0, 20.0, 500.0), [0.0, 10.0, 15.0, 20.0]).tolist()
    [inf, 500.0, 500.0, inf]
    """
    import numpy as np

    t = np.asarray(t_s, dtype=float)
    starts = np.array([s.start_s for s in cap.steps], dtype=float)
    values = np.array([s.cap_w for s in cap.steps], dtype=float)
    if not starts.size:
        return np.full(t.size, np.inf)
    i = np.searchsorted(starts, t, side="right") - 1
    return np.where(i >= 0, values[np.clip(i, 0, None)], np.inf)


def constraint_info(run: Run, engine) -> dict:
    """What the verdicts need to know of the run's constraints: its budgets, its events with the targets they
    resolved to, the platform's idle power and the constraints its policy declares."""
    from wattsched.policies.base import policy_tags

    noticed = {(e.event.start_s, e.event.end_s, e.event.label): e.cap_w for e in getattr(engine, "noticed", ())}
    events = []
    for e in run.dr_events:
        target = noticed.get((e.start_s, e.end_s, e.label), e.cap_w)
        if target is not None:  # a reduction never noticed (after the run's end) has no target
            events.append({"label": e.label, "notice_s": e.notice_s, "start_s": e.start_s, "end_s": e.end_s,
                           "cap_w": float(target)})
    uses = policy_tags(run.policy).constraints
    return {
        "energy_budgets": [{"start_s": b.start_s, "end_s": b.end_s, "energy_j": b.energy_j} for b in run.budgets],
        "dr_events": events,
        "idle_power_w": run.platform.idle_power_w,
        "policy_constraints": None if uses is None else sorted(uses),
    }


def _write_without_worker(result, out_dir: Path, summary: dict, tape: list | None, baseline: dict | None = None,
                          verdicts: dict | None = None) -> dict[str, int]:
    """Write the run's outputs in this process; the augmented workload (``tape``) is compressed and written by a
    thread (zlib releases the GIL) while this one writes the run's tables and plots."""
    from concurrent.futures import ThreadPoolExecutor

    from wattsched.sim.report import write_run

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wattsched-gzip") as pool:
        workload_written = None
        if tape is not None:
            from wattsched.workload.tables import submit_job_table

            workload_written = submit_job_table(tape, out_dir / "workload.csv.gz", pool)
        rows = write_run(result, out_dir, summary, marker=False, baseline=baseline, verdicts=verdicts)
        if workload_written is not None:
            workload_written.result()
    return rows


def _taped(jobs, keep):
    """Yield ``jobs`` and hand each to ``keep`` (the augmented workload is written once, after the run)."""
    for job in jobs:
        keep(job)
        yield job


def baseline_comparison(summary: dict, base: dict, policy: str) -> dict:
    """Turnaround and slowdown of a run against an uncapped baseline on the same workload."""
    out = {
        "baseline_policy": policy,
        "baseline_mean_turnaround_s": base.get("mean_turnaround_s"),
        "baseline_max_turnaround_s": base.get("max_turnaround_s"),
        "baseline_mean_bsld": base.get("mean_bsld"),
        "mean_turnaround_change_pct": None,
    }
    b, m = base.get("mean_turnaround_s"), summary.get("mean_turnaround_s")
    if b and m is not None:
        out["mean_turnaround_change_pct"] = 100.0 * (m - b) / b
    return out


def _cap_window(cap) -> tuple[float, float] | None:
    """The first finite capped interval of the schedule, for window metrics (none for a constant cap)."""
    steps = cap.steps
    for i, s in enumerate(steps):
        if math.isfinite(s.cap_w):
            if not math.isfinite(s.start_s) and i + 1 == len(steps):
                return None
            end = steps[i + 1].start_s if i + 1 < len(steps) else math.inf
            return (max(s.start_s, 0.0), end)
    return None
