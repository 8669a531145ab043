"""One simulation run from a validated :class:`~wattsched.config.SimConfig`: the glue the CLI and sweeps share."""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

from wattsched.config import SimConfig
from wattsched.errors import ConfigError
from wattsched.model.platform import Platform
from wattsched.workload.records import Workload

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    result: object
    summary: dict
    out_dir: Path | None


def is_swf(path: str | os.PathLike) -> bool:
    name = os.fspath(path).lower()
    return name.endswith((".swf", ".swf.gz"))


def open_workload(config: SimConfig, platform: Platform | None) -> Workload:
    """Open the config's trace (SWF or job table), cleaned against ``platform`` if given."""
    from wattsched.workload.swf import read_swf
    from wattsched.workload.tables import read_job_table

    trace = config.trace
    if not Path(trace).exists():
        raise ConfigError(f"{config.source}: trace: no such file {str(trace)!r}")
    cores = config.cores_per_node if platform is None else max(1, platform.nodes[0].cores)
    if is_swf(trace):
        machine = platform.total_cores if platform is not None else None
        return read_swf(
            trace,
            cores_per_node=cores,
            machine_procs=machine,
            default_walltime=config.default_walltime,
            skip_bad_lines=config.skip_bad_lines,
        )
    default = None if config.default_walltime == "runtime" else float(config.default_walltime)
    return read_job_table(trace, cores_per_node=cores, default_walltime_s=default)


def build_platform(config: SimConfig) -> Platform:
    """The config's platform, or one derived from the SWF header's ``MaxProcs``."""
    if config.platform is not None or config.procs is not None:
        return config.build_platform()
    from wattsched.sim.platforms import platform_from_procs
    from wattsched.workload.swf import read_header

    if not is_swf(config.trace):
        raise ConfigError(f"{config.source}: platform: required for a job table (only SWF headers give a machine size)")
    header = read_header(config.trace)
    raw = header.get("MaxProcs", "").split()
    if not raw or not raw[0].lstrip("-").isdigit() or int(raw[0]) <= 0:
        raise ConfigError(
            f"{config.trace}: the header has no MaxProcs; give the machine with --procs N or --platform FILE"
        )
    name = Path(config.trace).name.split(".swf")[0]
    return platform_from_procs(int(raw[0]), config.cores_per_node, name=name)


def run_simulation(config: SimConfig, *, progress: bool = True, write: bool = True, report: bool = True) -> RunOutcome:
    """Simulate ``config``: read the trace, augment power if needed, run, summarise, write outputs."""
    from wattsched.policies import make_policy
    from wattsched.sim.engine import Engine, EngineOptions
    from wattsched.sim.metrics import summarize
    from wattsched.sim.platforms import response_classes_of
    from wattsched.workload.augment import AugmentParams, augment_workload

    platform = build_platform(config)
    policy = make_policy(config.policy, config.params, source=f"{config.source}: params")
    validate_plugins(config)
    cap = config.build_cap_schedule(platform)
    budgets = config.build_energy_budgets()
    workload = open_workload(config, platform)
    out_dir = Path(config.out) if (write and config.out is not None) else None
    if write and out_dir is None:
        out_dir = Path("runs") / f"{workload.name}-{config.policy}"
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)

    source = workload  # the reader's own object: it learns the time origin as the stream is read
    had_power = workload.has_power
    augment_spec = dict(config.augment)
    augment_on = augment_spec.pop("enabled", True)
    if not workload.has_power and augment_on:
        try:
            params = AugmentParams(**augment_spec)
        except Exception as exc:  # pydantic ValidationError
            raise ConfigError(f"{config.source}: augment: {exc}") from None
        workload = augment_workload(workload, platform.reference_power, params, config.seed)
        if out_dir is not None:
            from wattsched.workload.tables import recording

            workload.jobs = recording(workload.jobs, out_dir / "workload.csv.gz")

    options = EngineOptions(
        kill_at_walltime=config.kill_at_walltime,
        tick_s=config.tick_s,
        strict=False,
        time_limit_s=config.time_limit_s,
        progress=progress,
        response_classes=response_classes_of(platform),
    )
    predictor = None
    if config.predictor is not None:
        from wattsched.predictors import make_predictor

        predictor = make_predictor(config.predictor, config.predictor_params,
                                   source=f"{config.source}: predictor_params")
        if hasattr(predictor, "clock"):  # lets retraining predictors report their cost per retraining
            import time

            predictor.clock = time.perf_counter
    baseline_workload = None
    if config.baseline is not None:
        # the baseline replays the very same jobs (augmented power included)
        workload.jobs = list(workload.jobs)
        baseline_workload = list(workload.jobs)
    engine = Engine(platform, workload, policy, cap=cap, budgets=budgets, options=options, seed=config.seed,
                    predictor=predictor, dr_events=config.build_dr_events(platform))
    result = engine.run()
    for _ in workload.jobs:  # finish the recorded workload table if the run stopped early
        pass
    window = _cap_window(cap)
    if predictor is None and not cap.is_uncapped:
        result.info.setdefault("notes", []).append(
            "no predictor given: policies saw every job at the node maximum power (as the naive predictor)")
    if getattr(predictor, "retrain_log_", None):
        result.info["predictor_retrain_log"] = list(predictor.retrain_log_)
    result.info.update(
        {
            "trace_path": str(config.trace),
            "cap": [[s.start_s, s.cap_w, s.label] for s in cap.steps],
            "config": json.loads(config.model_dump_json()),
            "power_augmented": not had_power and augment_on,
            "origin_unix_s": source.origin_unix_s,
        }
    )
    summary = summarize(result, bsld_threshold_s=config.bsld_threshold_s, window=window)
    if baseline_workload is not None:
        from wattsched.model.constraints import CapSchedule

        base_policy = make_policy(config.baseline)
        base = Engine(platform, baseline_workload, base_policy, cap=CapSchedule(), options=options,
                      seed=config.seed).run()
        base_summary = summarize(base, bsld_threshold_s=config.bsld_threshold_s, window=window)
        summary.update(baseline_comparison(summary, base_summary, config.baseline))
    if out_dir is not None:
        from wattsched.sim.report import write_html_report, write_run

        write_run(result, out_dir, summary)
        if report:
            write_html_report(out_dir)
    return RunOutcome(result, summary, out_dir)


def validate_plugins(config: SimConfig) -> None:
    """Fail before any work if the predictor, its parameters or the baseline policy are invalid."""
    from wattsched.policies import make_policy
    from wattsched.predictors import make_predictor

    if config.predictor is not None:
        make_predictor(config.predictor, config.predictor_params, source=f"{config.source}: predictor_params")
    if config.baseline is not None:
        make_policy(config.baseline, source=f"{config.source}: baseline")


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
