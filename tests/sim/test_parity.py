"""Parity: one workload through the simulator and through the daemon loop on the simulated cluster, same decisions.

The simulator runs the policy inside the engine. The daemon run is the real
control loop (observe Slurm records, build the snapshot, decide, guard,
release with pinned nodes, audit in SQLite) against the simulated cluster,
which is the same engine stepped against a clock; the clock is moved to each
event the cluster has next (and, for a policy with monitoring stages, to each of
its ticks), so the daemon decides at the same instants as the simulator. The
daemon gets its cap schedule, demand-response events and energy budget from a
config file, as a site gives them; the simulator gets the same ones in trace
time (the cluster's epoch is the first submission, so both clocks agree).
Both sides must take the same decisions: every ``Start`` with the same job,
time, node ids, frequency and cap, in the same order. That needs both
snapshots to list free nodes in the same canonical order
(:attr:`wattsched.model.snapshot.Snapshot.free_nodes`).

The energy budget is given to every policy, as a site's config gives it to
whichever policy runs, and both sides treat it alike: the same guard
(:func:`wattsched.model.guard.plan_problems`) rejects a plan whose own power
estimate, held over its horizon, needs more energy than the window has left,
live and in replay (the engine runs non-strict, as ``wattsched simulate``
does, and records the rejection). Policies that plan against the budget
(``budgets`` in their tags) keep within it; the others run as they would
without it except where the guard rejects a plan, and the test asserts that
both sides rejected the same plans at the same times for the same reasons.
That holds because the daemon counts the budget's energy as the simulator
does: the simulated nodes report energy counters (as RAPL's, through
``actuator.kind: sim``), which the daemon prefers to integrating the power it
read before its own starts changed it.
"""

from __future__ import annotations

import math
from importlib.resources import as_file, files

import numpy as np
import pytest
import yaml

from wattsched.config import load_config
from wattsched.config.daemon import DaemonConfig
from wattsched.daemon.loop import Daemon
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.notify import Notifier
from wattsched.daemon.simcluster import SimCluster
from wattsched.model.constraints import CapSchedule, DemandResponseEvent, EnergyBudget
from wattsched.model.guard import plan_problems
from wattsched.model.plan import Start
from wattsched.model.platform import Platform
from wattsched.model.snapshot import fraction_cap
from wattsched.policies import make_policy
from wattsched.policies.base import policy_tags
from wattsched.sim.engine import Engine
from wattsched.sim.options import EngineOptions
from wattsched.workload.augment import AugmentParams, augment_workload
from wattsched.workload.swf import read_swf

NODES = 100
JOBS = 400


class Recording:
    """A policy that notes every ``Start`` it decides: (time, job id, node ids, frequency, cap); those of plans
    the guard lets through (the starts applied); and the energy each budget window in force had consumed."""

    def __init__(self, policy):
        self._policy = policy
        self.starts: list[tuple[float, int, tuple[int, ...], float | None, float | None]] = []
        self.applied: list[tuple[float, int, tuple[int, ...], float | None, float | None]] = []
        self.budgets: list[tuple[float, float, float]] = []

    def __getattr__(self, name):
        return getattr(self._policy, name)

    def tags(self):
        return self._policy.tags()

    def decide(self, snapshot, state=None):
        plan = self._policy.decide(snapshot, state)
        starts = [(snapshot.now_s, a.job_id, tuple(a.nodes), a.freq_hz, a.cap_w)
                  for a in plan.actions if type(a) is Start]
        self.starts += starts
        if not plan_problems(snapshot, plan):  # the guard both sides run next, on this snapshot
            self.applied += starts
        self.budgets += [(snapshot.now_s, b.budget.start_s, b.consumed_j) for b in snapshot.budgets]
        return plan


@pytest.fixture(scope="module")
def workload():
    platform = Platform.homogeneous_cluster(NODES)
    ref = files("wattsched") / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"
    with as_file(ref) as path:
        swf = read_swf(path, cores_per_node=1, machine_procs=NODES)
        jobs = list(augment_workload(swf, platform.reference_power, AugmentParams(), 7).jobs)[:JOBS]
    # A capped window at 60 % of the dynamic power over most of the slice; a demand-response event
    # with an absolute cap (45 %) announced an hour ahead inside it; one asking for a reduction of
    # 20 % of the dynamic power below the power drawn when it is announced, half an hour ahead, after it.
    end = jobs[-1].submit_s
    cap = CapSchedule.window(0.2 * end, 0.7 * end, fraction_cap(platform, 0.6))
    reduction_w = 0.2 * platform.max_dynamic_power_w
    events = [
        DemandResponseEvent(notice_s=0.4 * end - 3600.0, start_s=0.4 * end, end_s=0.5 * end,
                            cap_w=fraction_cap(platform, 0.45), label="grid event"),
        DemandResponseEvent(notice_s=0.8 * end - 1800.0, start_s=0.8 * end, end_s=0.9 * end,
                            reduction_w=reduction_w, label="grid reduction"),
    ]
    # An energy budget over a fifth of the slice, from the end of the first event past the end of the capped
    # window: 12 kW on average, below what the unconstrained policies draw there (13.8 kW).
    budgets = [EnergyBudget(0.55 * end, 0.75 * end, 12_000.0 * 0.2 * end)]
    site = {
        "cap_schedule": [{"start_s": 0.2 * end, "end_s": 0.7 * end, "cap_w": "60%"}],
        "demand_response": {"events": [
            {"notice_s": 0.4 * end - 3600.0, "start_s": 0.4 * end, "end_s": 0.5 * end, "cap_w": "45%",
             "label": "grid event"},
            {"notice_s": 0.8 * end - 1800.0, "start_s": 0.8 * end, "end_s": 0.9 * end,
             "reduction_w": reduction_w, "label": "grid reduction"},
        ]},
        "energy_budgets": [{"start_s": b.start_s, "end_s": b.end_s, "energy_j": b.energy_j, "label": "budget"}
                           for b in budgets],
    }
    return platform, jobs, cap, events, budgets, site


def first_event_s(jobs, cap, events, budgets) -> float:
    """When the simulator's clock starts: the first submission, or an earlier cap, notice or budget change."""
    return min([jobs[0].submit_s, *cap.change_times(), *(e.notice_s for e in events),
                *(b.start_s for b in budgets)])


def run_daemon(platform, jobs, cap, events, budgets, config: DaemonConfig):
    """The daemon loop on the simulated cluster, its clock moved to each event of the cluster and, for a policy
    with monitoring stages, to each of its ticks; returns (daemon policy, cluster, result, starts, baselines,
    rejections)."""
    clock = [0.0]
    sim = SimCluster(jobs, platform, speedup=1.0, clock=lambda: clock[0], epoch_s=jobs[0].submit_s, cap=cap,
                     dr_events=events, budgets=budgets)
    daemon = Daemon(config, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    policy = daemon.policy = Recording(daemon.policy)
    # A live daemon polls far more often than the policy's monitoring period: cycling at its ticks (the times the
    # simulator calls it, counted from its first event) is what the policy sees of that. They go on while the
    # cluster has something to happen, or, within a budget window, a job waits (as the simulator's do).
    tick_s = policy_tags(policy).tick_period_s
    tick = first_event_s(jobs, cap, events, budgets) + tick_s if tick_s else math.inf
    last_budget_end = max((b.end_s for b in budgets), default=-math.inf)
    started, rejected = [], []
    try:
        cycles = 0
        while (t := min(sim.next_event_s(), tick)) < math.inf:
            clock[0] = sim.clock_time_of(t)
            report = daemon.cycle()
            if report.rejected:
                rejected.append(f"t={t:.0f}: " + "; ".join(report.rejected))
            started += report.started
            cycles += 1
            if t == tick:
                more = sim.next_event_s() < math.inf or (sim.jobs and t < last_budget_end)
                tick = t + tick_s if more else math.inf
        live = sim.result()
        baselines = dict(daemon.store.get("dr_baselines", {}))
    finally:
        daemon.store.close()
    assert cycles >= len(jobs)
    return policy, sim, live, started, baselines, rejected


PARAMS = {**{name: {"check": "max"} for name in ("easy-pc", "easy-saf", "knapsack")},
          "dec": {"time_limit_s": 0.02, "horizon_jobs": 50}}
"""Policy parameters: the power checks that plan on the maximum; ``dec``'s CP model smaller and its solver's
(deterministic) time shorter, so that its two runs take seconds rather than minutes."""

OVER_THE_CAP = {"dynshare", "simple", "dec+rapl", "performance"}
"""Policies that decide under the cap but let power go over it by design: the RAPL methods share the budget as node
caps that a job's power does not fill exactly (Borghesi et al. 2018); ``performance`` is the demand-response
baseline that runs at full speed."""


MEAN_PLANNERS = {"dr": 0.03}
"""Policies that plan a job at its predicted mean power (Ahmed et al. 2017): the jobs' power fluctuates around
it (the augmentation's series), so the platform goes over the cap by a little, here at most this share."""


def _alike(a, b) -> bool:
    """The same decision (or time): ids and nodes equal, times and watts to the last digits.

    The daemon's measured power comes through Slurm's node records, the simulator's from the ledger per job:
    a share of the budget computed from them (a RAPL method's node caps) can differ in its last digit, and so
    the end of a capped job whose power fluctuates, and the decision made then.
    """
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(map(_alike, a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)
    return a == b


def _cases():
    from wattsched.policies import available

    return sorted(available())


@pytest.mark.slow
@pytest.mark.parametrize("policy", _cases())
def test_simulator_and_daemon_on_the_simulated_cluster_decide_alike(workload, policy, tmp_path):
    """Every registered policy, on the KTH slice with a capped window, two demand-response events and an energy
    budget; the daemon sets node caps and frequencies through the simulated cluster's actuator."""
    platform, jobs, cap, events, budgets, site = workload
    params = PARAMS.get(policy, {})

    replay_policy = Recording(make_policy(policy, params))
    engine = Engine(platform, jobs, replay_policy, cap=cap, dr_events=events, budgets=budgets,
                    options=EngineOptions(strict=False))
    replay = engine.run()

    path = tmp_path / "wattsched.yaml"
    # Node power as Slurm reports it (the simulated cluster's CurrentWatts), used at once: the platform
    # power a reduction counts from is the one the simulator measures.
    path.write_text(yaml.safe_dump({"policy": policy, "params": params, "state_dir": str(tmp_path / "state"),
                                    "poll_interval_s": 0.01, "telemetry": {"source": "slurm", "settle_s": 0},
                                    "actuator": {"kind": "sim"},
                                    **site}))
    config = load_config(path, DaemonConfig)
    daemon_policy, sim, live, started, baselines, rejected = run_daemon(platform, jobs, cap, events, budgets, config)

    # The same decisions, node for node, in the same order.
    expected, got = replay_policy.starts, daemon_policy.starts
    assert len(expected) > JOBS // 2
    first = next((i for i, (a, b) in enumerate(zip(expected, got)) if not _alike(a, b)),
                 min(len(expected), len(got)))
    assert len(got) == len(expected) and first == len(got), \
        f"first difference at decision {first}: simulator {expected[first:first + 1]}, daemon {got[first:first + 1]}"
    # The guard rejected the same plans on both sides, for the same reasons (the budget's energy left).
    assert rejected == engine.rejections
    # The daemon applied the others: released the job pinned to those nodes at that time.
    applied = replay_policy.applied
    assert len(daemon_policy.applied) == len(applied)
    assert all(map(_alike, daemon_policy.applied, applied))
    names = [n.name for n in platform.nodes]
    assert len(sim.releases) == len(applied)
    assert all(map(_alike, sim.releases, [(t, jid, tuple(names[i] for i in nodes)) for t, jid, nodes, _, _ in applied]))
    assert started == [jid for _, jid, *_ in applied]
    # Both counted the budget's energy alike (the daemon from the nodes' energy counters, in µJ), whenever both
    # called the policy (the daemon calls a queue-only policy with running jobs and no queue too).
    want_j = {(t, b): c for t, b, c in replay_policy.budgets}
    have_j = {(t, b): c for t, b, c in daemon_policy.budgets}
    both = sorted(want_j.keys() & have_j.keys())
    assert len(both) > 10
    assert [have_j[k] for k in both] == pytest.approx([want_j[k] for k in both], rel=1e-9, abs=1e-3)
    # And the jobs ran alike: same start times on both sides.
    want = dict(zip(replay.jobs["id"].tolist(), replay.jobs["start_s"].tolist(), strict=True))
    have = dict(zip(live.jobs["id"].tolist(), live.jobs["start_s"].tolist(), strict=True))
    assert set(want) == set(have) == {j.id for j in jobs}
    assert all(_alike(want[j], have[j]) for j in want)
    # The cap shaped the schedule: it binds in the planned window (policies that plan against it respect it;
    # a reduction may ask for less than the running jobs draw, which no start can fix), and both events
    # were announced to the daemon at the simulator's baseline power.
    t_s = live.timeline["t_s"]
    inside = (t_s >= cap.steps[0].start_s) & (t_s < cap.steps[1].start_s)
    assert inside.any()
    if "cap" in (policy_tags(replay_policy).constraints or ()) and policy not in OVER_THE_CAP:
        ratio = float(np.max(live.timeline["power_w"][inside] / live.timeline["cap_w"][inside]))
        # a job's power moves around its mean: a policy that plans on the mean goes over by some of that
        assert ratio <= (1 + MEAN_PLANNERS.get(policy, 0.0)) * (1 + 1e-6), ratio
    # Policies that plan against the budget keep within it.
    if "budgets" in (policy_tags(replay_policy).constraints or ()):
        budget = budgets[0]
        t = np.clip(np.append(t_s, math.inf), budget.start_s, budget.end_s)
        assert float(np.sum(live.timeline["power_w"] * np.diff(t))) <= budget.energy_j
    assert [n.event.label for n in engine.noticed] == ["grid event", "grid reduction"]
    seen = [baselines[k] for k in sorted(baselines, key=lambda k: int(k.split(":")[0]))]
    assert seen == pytest.approx([n.baseline_w for n in engine.noticed], rel=1e-9)
