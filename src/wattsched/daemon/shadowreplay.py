"""``wattsched shadow replay``: a window of the shadow record through any policy, beside what really happened.

The window's jobs become a job table the way ``traces import`` makes one
(:func:`~wattsched.daemon.traceimport.import_accounting`, with each job's power
from the record's measured node power, ``power_source`` ``shadow``); jobs
running when the window begins are marked ``running_at_start`` (the engine
starts them at once, on free nodes, with the rest of their run), jobs waiting
then are submitted at its start. The machine is the daemon's ``platform``, or
the recorded nodes (grouped by CPUs) with its ``node_power``; the cap is the one
recorded in force cycle by cycle (demand-response events included) unless
``--cap`` gives another. ``simulate``'s run builder and run directory do the
rest; ``shadow.json`` and ``shadow.md`` put the replay beside the live schedule
(Slurm's own, as the record saw it), measured by the same metrics.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wattsched.errors import ConfigError

if TYPE_CHECKING:
    from wattsched.daemon.shadow import LiveJob, ShadowRecord

__all__ = ["ShadowReplay", "add_shadow_commands", "shadow_replay", "side_by_side"]

COMPARED = (("n_jobs", "jobs", "{:.0f}"), ("jobs_completed", "jobs completed", "{:.0f}"),
            ("mean_wait_s", "mean wait (s)", "{:.1f}"),
            ("median_wait_s", "median wait (s)", "{:.1f}"), ("max_wait_s", "max wait (s)", "{:.1f}"),
            ("mean_bsld", "mean bounded slowdown", "{:.2f}"), ("max_bsld", "max bounded slowdown", "{:.2f}"),
            ("makespan_s", "makespan (s)", "{:.1f}"), ("energy_j", "energy (J)", "{:,.0f}"),
            ("mean_power_w", "mean power (W)", "{:,.1f}"), ("time_above_cap_s", "time above cap (s)", "{:.1f}"),
            ("energy_above_cap_j", "energy above cap (J)", "{:,.0f}"))
"""Summary keys of the side-by-side, their labels and formats."""


@dataclass
class ShadowReplay:
    """What :func:`shadow_replay` did: the run's outcome, the side-by-side, the notes."""

    outcome: object
    comparison: dict
    notes: list[str]


class _LiveRun:
    """The live window in the shape :func:`~wattsched.sim.metrics.summarize` reads."""

    def __init__(self, jobs: dict, timeline: dict, nodes: int):
        self.jobs, self.timeline, self.nodes = jobs, timeline, nodes


def _platform_yaml(config, record: ShadowRecord) -> dict:
    """A platform of the recorded nodes (the last cycle's), one group per CPU count, with ``node_power``."""
    last = record.cycles[-1]
    groups: dict[int, int] = {}
    for cpus in last.cpus:
        groups[max(cpus, 1)] = groups.get(max(cpus, 1), 0) + 1
    power = config.node_power.model_dump(exclude_none=True) if config.node_power is not None else None
    out = []
    for cpus, count in sorted(groups.items()):
        group = {"name": f"c{cpus}", "count": count, "cores": cpus, "prefix": f"c{cpus}n"}
        if power:
            group["power"] = power
        out.append(group)
    return {"name": "shadow", "node_groups": out}


def _cap_entries(record: ShadowRecord, origin: float) -> tuple[float | None, list[dict] | None]:
    """The recorded cap as ``cap_w`` (one value throughout) or ``cap_schedule`` windows, from ``origin``."""
    values = [(max(c.time - origin, 0.0), c.cap_w) for c in record.cycles]
    distinct = {v for _, v in values}
    if distinct == {None}:
        return None, None
    if len(distinct) == 1:
        return values[0][1], None
    windows, current = [], None
    for t, cap in values:
        if current is not None and current["cap_w"] != cap:
            current["end_s"] = t
            windows.append(current)
            current = None
        if current is None and cap is not None:
            current = {"start_s": t, "cap_w": cap}
    if current is not None:
        windows.append(current)
    merged = [w for w in windows if w.get("end_s", math.inf) > w["start_s"]]
    return None, merged or None


def shadow_replay(config, record: ShadowRecord, out: Path, *, policy: str | None = None, params: dict | None = None,
                  cap: str | None = None, seed: int = 0, report: bool = True,
                  start_latency_s: float = 0.0, job_power: str = "measured",
                  sched_passes_s: float | None = None) -> ShadowReplay:
    """Replay ``record`` through ``policy`` (the daemon's by default) into the run directory ``out``.

    ``start_latency_s`` models the time between a decision to start a job and Slurm starting it (the daemon's
    poll, Slurm's own scheduling pass): each job that queues holds its nodes that long before its recorded run,
    drawing idle power (the ``node_power`` idle) then, and its replay start is reported that much after the
    decision, as a live start would be. ``job_power`` ``platform`` gives every job the ``node_power`` busy power
    instead of the power measured over its run (which reads low for jobs shorter than the telemetry's rate
    window: the energy they drew shows after their end).

    ``sched_passes_s`` (Slurm's ``batch_sched_delay``) starts jobs only at Slurm's main scheduling passes, at
    least that far apart (the ``sched_passes`` of the simulation config); ``start_latency_s`` is then the time from
    a decision to the release that asks for a pass (the daemon's poll), and each job's start is its pass.
    """
    from pydantic import ValidationError

    from wattsched.config.sim import SimConfig
    from wattsched.daemon.shadow import RecordedPower
    from wattsched.daemon.traceimport import import_accounting
    from wattsched.sim.run import run_simulation
    from wattsched.workload.tables import write_job_table

    if not record.cycles:
        raise ConfigError(f"{record.path}: the shadow record has no cycle in the window asked for (see "
                          "`wattsched status` for the window it holds)")
    cores = max(record.cycles[-1].cpus or (1,))
    from wattsched.daemon.shadow import replay_inputs

    inputs = replay_inputs(record, cores_per_node=max(cores, 1))
    if not inputs.acct:
        raise ConfigError(f"{record.path}: no job started in the window asked for; nothing to replay")
    imported = import_accounting(inputs.acct, power="prometheus", prometheus=RecordedPower(record),
                                 measured_name="shadow")
    hot = {j.job_id for j in inputs.live if j.hot}
    if start_latency_s < 0 or not math.isfinite(start_latency_s):
        raise ConfigError(f"--start-latency: {start_latency_s:g} is not a duration of 0 s or more")
    if sched_passes_s is not None and (sched_passes_s < 0 or not math.isfinite(sched_passes_s)):
        raise ConfigError(f"--sched-passes: {sched_passes_s:g} is not a duration of 0 s or more")
    idle_w = config.node_power.idle_w if config.node_power is not None else None
    if job_power not in ("measured", "platform"):
        raise ConfigError(f"--job-power: {job_power!r} is not one of measured, platform")
    if job_power == "platform":
        if config.node_power is None:
            raise ConfigError("--job-power platform: the daemon's config has no node_power (its busy_w is the "
                              "power it gives every job)")
        for job in imported.jobs:
            job.mean_w = job.max_w = config.node_power.busy_w
            job.std_w = 0.0
    for job in imported.jobs:
        if job.id in hot:
            job.extra["running_at_start"] = True
        elif start_latency_s > 0 and sched_passes_s is None:
            _hold_before(job, start_latency_s, idle_w)
    origin = imported.origin_unix_s
    notes = list(inputs.notes) + list(imported.notes)
    if job_power == "platform":
        notes.append(f"job power: the node_power busy power, {config.node_power.busy_w:g} W a node, for every job")
    if hot:
        notes.append(f"{len(hot)} jobs were running when the window began: the replay starts them at once with the "
                     "rest of their run")
    if imported.sources.get("none") and job_power == "measured":
        notes.append(f"jobs without measured power over their run in the record: {imported.sources['none']}; the "
                     "replay augments their power")
    work = Path(tempfile.mkdtemp(prefix="wattsched-shadow-"))
    try:
        trace = work / "shadow-trace.csv"
        write_job_table(imported.jobs, trace, imported.record)
        if config.platform is not None:
            platform = str(config.platform)
        else:
            import yaml

            platform_file = work / "shadow-platform.yaml"
            platform_file.write_text(yaml.safe_dump(_platform_yaml(config, record), sort_keys=False))
            platform = str(platform_file)
        same = policy is None or policy == config.policy
        sim = {"kind": "simulation", "trace": str(trace), "platform": platform,
               "policy": config.policy if same else policy,
               "params": {**(config.params if same else {}), **(params or {})}, "seed": seed, "out": str(out)}
        if sched_passes_s is not None:
            sim["sched_passes"] = {"interval_s": sched_passes_s, "release_lag_s": start_latency_s}
        if cap is not None:
            try:
                sim["cap_w"] = float(cap)
            except ValueError:
                sim["cap_w"] = cap
        else:
            cap_w, schedule = _cap_entries(record, origin)
            if cap_w is not None:
                sim["cap_w"] = cap_w
            elif schedule is not None:
                sim["cap_schedule"] = schedule
        try:
            sim_config = SimConfig.model_validate(sim)
        except ValidationError as exc:
            lines = [f"  {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
            raise ConfigError("shadow replay: the replay's settings are invalid:\n" + "\n".join(lines)) from None
        outcome = run_simulation(sim_config, progress=False, report=report)
        queue = (outcome.verdicts or {}).get("queue") or {}
        if queue and not queue.get("drained", True):
            notes.append(f"replay: {queue['text']} (a cap below what the jobs need leaves them waiting)")
        if sched_passes_s is not None:
            stats = outcome.result.info
            notes.append(f"Slurm's scheduling passes modelled: at least {sched_passes_s:g} s apart, a release "
                         f"{start_latency_s:g} s after each decision; {stats.get('sched_passes', 0)} passes, "
                         f"{stats.get('held_starts', 0)} starts waited for one")
        elif start_latency_s > 0:
            notes.append(f"start latency modelled: {start_latency_s:g} s between each decision and the job's start")
        comparison = side_by_side(record, inputs.live, origin, outcome, sim_config, notes,
                                  start_latency_s if sched_passes_s is None else 0.0)
        out_dir = outcome.out_dir
        shutil.copy(trace, out_dir / "shadow-trace.csv")
        if config.platform is None:
            shutil.copy(platform_file, out_dir / "shadow-platform.yaml")
        (out_dir / "shadow.json").write_text(json.dumps(comparison, indent=2, allow_nan=False) + "\n")
        (out_dir / "shadow.md").write_text(shadow_markdown(comparison))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ShadowReplay(outcome, comparison, notes)


def _hold_before(job, latency_s: float, idle_w: float | None) -> None:
    """Make ``job`` hold its nodes ``latency_s`` before its run: that much longer, at idle power then.

    >>> from wattsched.workload.records import TraceJob
    >>> j = TraceJob(1, 0.0, 10.0, 60.0, 2, 2, mean_w=250.0, max_w=260.0, std_w=5.0)
    >>> _hold_before(j, 2.0, 100.0)
    >>> j.runtime_s, j.walltime_s, j.mean_w, j.max_w
    (12.0, 62.0, 225.0, 260.0)
    """
    run = job.runtime_s
    job.runtime_s = run + latency_s
    job.walltime_s = job.walltime_s + latency_s
    if job.mean_w is not None and idle_w is not None and run + latency_s > 0:
        job.mean_w = (job.mean_w * run + idle_w * latency_s) / (run + latency_s)
        if job.max_w is not None:
            job.max_w = max(job.max_w, job.mean_w)


def _live_summary(record: ShadowRecord, live: list[LiveJob], origin: float, bsld_s: float | None,
                  bsld_def: str | None, cap_steps) -> dict:
    """The live window's metrics, its power measured against the replay's cap (``cap_steps``: ``[start_s, cap_w,
    label]`` from the origin), which is the recorded one unless ``--cap`` gave another."""
    import numpy as np

    from wattsched.sim.metrics import summarize

    jobs = {
        "id": np.array([j.job_id for j in live]),
        "submit_s": np.array([j.submit - origin for j in live]),
        "start_s": np.array([j.start - origin for j in live]),
        "end_s": np.array([j.end - origin for j in live]),
        "state": np.array(["COMPLETED"] * len(live)),
    }
    last_end = max(j.end for j in live)
    points = [c for c in record.cycles if origin <= c.time <= last_end]
    before = [c for c in record.cycles if c.time < origin]
    if before:
        points.insert(0, before[-1])
    t = [max(c.time - origin, 0.0) for c in points]
    busy = [sum(1 for s in c.states.values() if s.split("+")[0] in ("ALLOCATED", "MIXED", "COMPLETING"))
            for c in points]
    power = [_platform_w(c) for c in points]
    caps = [_cap_at(cap_steps, x) for x in t]
    if points and t[-1] < last_end - origin:  # the last reading holds to the last job's end
        t.append(last_end - origin)
        busy.append(busy[-1])
        power.append(power[-1])
        caps.append(caps[-1])
    timeline = {"t_s": np.array(t), "power_w": np.array(power), "cap_w": np.array(caps),
                "busy_nodes": np.array(busy)}
    nodes = len(record.cycles[-1].nodes)
    return summarize(_LiveRun(jobs, timeline, nodes), bsld_threshold_s=bsld_s or 10.0,
                     bsld_definition=bsld_def or "standard")


def _cap_at(steps, t: float) -> float:
    """The cap of ``steps`` (``[start_s, cap_w, label]``, in order) in force at ``t``; ``inf`` before the first.

    >>> _cap_at([[0.0, 500.0, ""], [10.0, float("inf"), ""]], 5.0), _cap_at([[3.0, 1.0, ""]], 1.0)
    (500.0, inf)
    """
    cap = math.inf
    for start, value, *_ in steps:
        if start > t:
            break
        cap = value
    return cap


def _platform_w(cycle) -> float:
    """The platform's power at a cycle: the nodes' measured power where every node has one, else the power the
    daemon decided at (measured where fresh, estimated elsewhere)."""
    if cycle.power and len(cycle.power) == len(cycle.nodes):
        return sum(cycle.power.values())
    return cycle.power_w if cycle.power_w is not None else math.nan


def side_by_side(record: ShadowRecord, live: list[LiveJob], origin: float, outcome, sim_config,
                 notes: list[str], start_latency_s: float = 0.0) -> dict:
    """The replay beside the live window: the metrics of :data:`COMPARED`, the start order, each job's starts
    (a queued job's replay start ``start_latency_s`` after the replay's decision, see :func:`shadow_replay`)."""
    from wattsched.sim.metrics import bsld_settings

    bsld_def, bsld_s = bsld_settings(sim_config.policy, sim_config.bsld_definition, sim_config.bsld_threshold_s)
    live_summary = _live_summary(record, live, origin, bsld_s, bsld_def, outcome.result.info.get("cap") or [])
    replay_summary = outcome.summary
    rj = outcome.result.jobs
    hot = {j.job_id for j in live if j.hot}
    replay_start = {int(i): float(s) + (0.0 if int(i) in hot else start_latency_s)
                    for i, s in zip(rj["id"], rj["start_s"], strict=True)}
    replay_end = {int(i): float(e) for i, e in zip(rj["id"], rj["end_s"], strict=True)}
    queued = [j for j in live if not j.hot]
    live_order = [j.job_id for j in sorted(queued, key=lambda j: (j.start, j.job_id))]
    replay_order = sorted((j.job_id for j in queued if math.isfinite(replay_start.get(j.job_id, math.nan))),
                          key=lambda i: (replay_start[i], i))
    same = sum(1 for a, b in zip(live_order, replay_order, strict=False) if a == b)
    deltas = sorted(abs(replay_start[j.job_id] - (j.start - origin)) for j in queued
                    if math.isfinite(replay_start.get(j.job_id, math.nan)))
    from statistics import median

    gaps = [b.time - a.time for a, b in zip(record.cycles, record.cycles[1:], strict=False)]
    poll = median(gaps) if gaps else None

    jobs = [{"id": j.job_id, "submit_s": j.submit - origin, "live_start_s": j.start - origin,
             "replay_start_s": _finite(replay_start.get(j.job_id)), "live_end_s": j.end - origin,
             "replay_end_s": _finite(replay_end.get(j.job_id)), "nodes": j.nodes, "node_list": j.node_list,
             "running_at_start": j.hot} for j in live]
    w0, w1 = record.window
    measured = sum(1 for c in record.cycles if c.power and len(c.power) == len(c.nodes))
    if measured < len(record.cycles):
        notes = [*notes, f"live power: measured on every node in {measured} of {len(record.cycles)} cycles; the "
                 "others count the power the daemon decided at (estimated where telemetry had nothing fresh)"]
    return {
        "window": {"start_unix_s": w0, "end_unix_s": w1, "origin_unix_s": origin, "cycles": len(record.cycles)},
        "record": str(record.path),
        "policy": sim_config.policy,
        "params": sim_config.params,
        "cap_w": sim_config.cap_w,
        "cap_schedule": None if sim_config.cap_schedule is None else
        [e.model_dump() for e in sim_config.cap_schedule],
        "live": {k: _finite(live_summary.get(k)) for k, _, _ in COMPARED},
        "replay": {k: _finite(replay_summary.get(k)) for k, _, _ in COMPARED},
        "start_order": {"live": live_order, "replay": replay_order, "same_position": same,
                        "same_position_share": same / len(live_order) if live_order else None},
        "start_error_s": {"median": median(deltas) if deltas else None, "max": deltas[-1] if deltas else None,
                          "poll_interval_s": poll},
        "jobs": jobs,
        "notes": notes,
    }


def _finite(value):
    if value is None or isinstance(value, str | bool):
        return value
    value = float(value)
    return value if math.isfinite(value) else None


def shadow_markdown(c: dict) -> str:
    """``shadow.md``: the side-by-side as a page."""
    from wattsched.daemon.clock import local_time

    w = c["window"]
    lines = [f"# Shadow replay: {c['policy']} beside the live schedule", "",
             f"Window {local_time(w['start_unix_s'])} to {local_time(w['end_unix_s'])} ({w['cycles']} cycles "
             f"recorded), from `{c['record']}`. Live: Slurm's own schedule as the daemon saw it each cycle; replay: "
             f"policy `{c['policy']}`" + (f" with {c['params']}" if c["params"] else "")
             + (f", cap {c['cap_w']}" if c["cap_w"] is not None else ", the recorded cap schedule"
                if c["cap_schedule"] else ", uncapped") + ". Times from the first submission in the window.", "",
             "| metric | live | replay |", "|---|---:|---:|"]
    for key, label, fmt in COMPARED:
        a, b = c["live"].get(key), c["replay"].get(key)
        lines.append(f"| {label} | {'-' if a is None else fmt.format(a)} | {'-' if b is None else fmt.format(b)} |")
    o = c["start_order"]
    share = o["same_position_share"]
    lines += ["", f"Start order: {o['same_position']} of {len(o['live'])} jobs in the same position"
              + (f" ({100 * share:.0f} %)" if share is not None else "") + "."]
    e = c["start_error_s"]
    if e["median"] is not None:
        polls = f" (poll interval {e['poll_interval_s']:.1f} s)" if e["poll_interval_s"] else ""
        lines.append(f"|replay start - live start|: median {e['median']:.1f} s, max {e['max']:.1f} s{polls}.")
    lines += ["", "| job | nodes | submit (s) | live start | replay start | live end | replay end |",
              "|---:|---:|---:|---:|---:|---:|---:|"]

    def f(x):
        return "-" if x is None else f"{x:.1f}"

    for j in c["jobs"]:
        lines.append(f"| {j['id']}{' (running)' if j['running_at_start'] else ''} | {j['nodes']} | "
                     f"{f(j['submit_s'])} | {f(j['live_start_s'])} | {f(j['replay_start_s'])} | {f(j['live_end_s'])} "
                     f"| {f(j['replay_end_s'])} |")
    if c["notes"]:
        lines += [""] + [f"- {n}" for n in c["notes"]]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the command


def cmd_shadow_replay(args: argparse.Namespace) -> int:
    from wattsched.daemon.commands import load_daemon_config
    from wattsched.daemon.store import Store
    from wattsched.daemon.twincommands import _when

    config, _ = load_daemon_config(args)
    path = Path(config.state_dir) / "state.db"
    if not path.exists():
        raise ConfigError(f"{path}: no state store (has the daemon run with --shadow and state_dir "
                          f"{config.state_dir}?)")
    now = time.time()
    since = _when(args.since, "--since", now)
    until = _when(args.until, "--until", now) if args.until else None
    store = Store(path, read_only=True)
    try:
        from wattsched.daemon.shadow import read_record

        record = read_record(store.db, path, since, until)
    finally:
        store.close()
    params = dict(args.param or ())
    result = shadow_replay(config, record, Path(args.out), policy=args.policy, params=params, cap=args.cap,
                           seed=args.seed, report=not args.no_report, start_latency_s=args.start_latency,
                           job_power=args.job_power, sched_passes_s=args.sched_passes)
    c = result.comparison
    print(f"replayed {len(c['jobs'])} jobs of {c['window']['cycles']} recorded cycles through {c['policy']}")
    print(f"{'':<24}{'live':>14}{'replay':>14}")
    for key, label, fmt in COMPARED:
        a, b = c["live"].get(key), c["replay"].get(key)
        print(f"{label:<24}{'-' if a is None else fmt.format(a):>14}{'-' if b is None else fmt.format(b):>14}")
    o = c["start_order"]
    print(f"start order: {o['same_position']} of {len(o['live'])} jobs in the same position")
    for note in result.notes:
        print(f"note: {note}")
    print(f"wrote {result.outcome.out_dir} (shadow.md, shadow.json beside the run)")
    return 0


def add_shadow_commands(sub) -> None:
    from wattsched.cliargs import key_value, seed

    p = sub.add_parser("shadow", help="replay what shadow mode recorded through any policy")
    ssub = p.add_subparsers(dest="shadow_command", metavar="SUBCOMMAND", required=True)
    r = ssub.add_parser(
        "replay", help="replay a recorded window through a policy, beside what really happened",
        description="Read the shadow record (`wattsched daemon --shadow`) of the state store and replay a window of "
        "it from its recorded starting state (jobs running then run on, jobs waiting then queue) through a policy, "
        "with each job's recorded run time and measured power and the recorded cap. Writes the run directory "
        "`simulate` writes, plus shadow.md and shadow.json: waits, bounded slowdown, energy and time above cap of "
        "the replay beside Slurm's own schedule as recorded, and the start order of both.",
        epilog="Example: wattsched shadow replay -c /etc/wattsched/wattsched.yaml --since 24h --policy easy-pc "
        "--cap 70%% --out runs/yesterday-easy-pc",
    )
    r.add_argument("--config", "-c", metavar="FILE", help="the daemon's config (its state_dir, platform, policy)")
    r.add_argument("--state-dir", metavar="DIR", help="state directory (overrides the config)")
    r.add_argument("--since", default="24h", metavar="WHEN",
                   help="window start: a duration back from now (24h, 30m, 7d), an epoch time or an ISO date "
                   "(default 24h; the record's start if later)")
    r.add_argument("--until", metavar="WHEN", help="window end (default: the record's end)")
    r.add_argument("--policy", metavar="NAME", help="policy to replay with (default: the daemon's, with its params)")
    r.add_argument("--param", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                   help="policy parameter, repeatable (over the daemon's own when the policy is the daemon's)")
    r.add_argument("--cap", metavar="W|PCT",
                   help="a constant cap for the replay, watts or a percentage such as 70%% (default: the cap "
                   "recorded in force each cycle, demand-response events included)")
    r.add_argument("--start-latency", type=float, default=0.0, metavar="S",
                   help="seconds between a decision to start a job and its start, as the live cluster takes them "
                   "(the daemon's poll, Slurm's scheduling pass): each queued job holds its nodes that long, "
                   "at idle power, before its recorded run (default 0: the replay starts jobs at once)")
    r.add_argument("--job-power", choices=("measured", "platform"), default="measured",
                   help="each job's power: measured over its run from the record (default), or the node_power "
                   "busy power for every job (for jobs shorter than the telemetry's rate window, which read low)")
    r.add_argument("--sched-passes", type=float, default=None, metavar="S",
                   help="start jobs only at passes of Slurm's main scheduler, at least S apart (the cluster's "
                   "batch_sched_delay, 3 by default), each asked for by a submission, a job's end or a release; "
                   "--start-latency is then the time from a decision to its release (the daemon's poll). "
                   "Default: jobs start when the policy decides")
    r.add_argument("--seed", type=seed, default=0, help="seed of the replay (default 0)")
    r.add_argument("--no-report", action="store_true", help="no report.html")
    r.add_argument("--out", "-o", required=True, metavar="DIR", help="run directory to write")
    r.set_defaults(func=cmd_shadow_replay)
