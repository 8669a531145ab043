"""Parity: one workload through the simulator and through the daemon loop on the simulated cluster, same decisions.

The simulator runs the policy inside the engine. The daemon run is the real
control loop (observe Slurm records, build the snapshot, decide, guard,
release with pinned nodes, audit in SQLite) against the simulated cluster,
which is the same engine stepped against a clock; the clock is moved to each
event the cluster has next, so the daemon decides at the same instants as the
simulator. Both must start every job at the same time on as many nodes.
(Which nodes differs: the engine keeps its free list in release order, the
daemon lists idle nodes by index; the platform is homogeneous, so timing and
power do not depend on it.)
"""

from __future__ import annotations

import math
from importlib.resources import as_file, files

import numpy as np
import pytest

from wattsched.config.daemon import DaemonConfig
from wattsched.daemon.loop import Daemon
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.notify import Notifier
from wattsched.daemon.simcluster import SimCluster
from wattsched.model.constraints import CapSchedule, DemandResponseEvent
from wattsched.model.platform import Platform
from wattsched.model.snapshot import fraction_cap
from wattsched.policies import make_policy
from wattsched.sim.engine import Engine
from wattsched.workload.augment import AugmentParams, augment_workload
from wattsched.workload.swf import read_swf

NODES = 100
JOBS = 400


@pytest.fixture(scope="module")
def workload():
    platform = Platform.homogeneous_cluster(NODES)
    ref = files("wattsched") / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"
    with as_file(ref) as path:
        swf = read_swf(path, cores_per_node=1, machine_procs=NODES)
        jobs = list(augment_workload(swf, platform.reference_power, AugmentParams(), 7).jobs)[:JOBS]
    # A capped window at 60 % of the dynamic power over most of the slice, and a demand-response
    # event (a 45 % cap) announced an hour before it starts.
    end = jobs[-1].submit_s
    cap = CapSchedule.window(0.2 * end, 0.7 * end, fraction_cap(platform, 0.6))
    event = DemandResponseEvent(notice_s=0.4 * end - 3600.0, start_s=0.4 * end, end_s=0.5 * end,
                                cap_w=fraction_cap(platform, 0.45))
    return platform, jobs, cap, event


def schedule_at(cap: CapSchedule, event: DemandResponseEvent, now_s: float) -> CapSchedule:
    """The cap schedule a site's daemon knows at ``now_s``: the planned one, and the event once announced."""
    if now_s < event.notice_s:
        return cap
    assert event.cap_w is not None
    return cap.with_limit(event.start_s, event.end_s, event.cap_w, event.label)


class ScheduledDaemon(Daemon):
    """The daemon with the planned cap schedule and demand-response event of this workload."""

    def __init__(self, *args, cap: CapSchedule, event: DemandResponseEvent, **kwargs):
        self._schedule = (cap, event)
        super().__init__(*args, **kwargs)

    def _cap_w(self, platform):
        return schedule_at(*self._schedule, self.backend.now_s)


def starts(result) -> dict[int, float]:
    return dict(zip(result.jobs["id"].tolist(), result.jobs["start_s"].tolist(), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["easy", "easy-pc", "knapsack"])
def test_simulator_and_daemon_on_the_simulated_cluster_decide_alike(workload, policy, tmp_path):
    platform, jobs, cap, event = workload
    params = {"check": "max"} if policy != "easy" else {}

    replay = Engine(platform, jobs, make_policy(policy, params), cap=cap, dr_events=[event]).run()

    clock = [0.0]
    sim = SimCluster(jobs, platform, speedup=1.0, clock=lambda: clock[0], epoch_s=jobs[0].submit_s, cap=cap,
                     dr_events=[event])
    cfg = DaemonConfig(policy=policy, params=params, state_dir=tmp_path / "state", poll_interval_s=0.01)
    daemon = ScheduledDaemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}), cap=cap, event=event)
    try:
        cycles = 0
        while (t := sim.next_event_s()) < math.inf:
            clock[0] = sim.clock_time_of(t)
            report = daemon.cycle()
            assert not report.rejected, report.rejected
            cycles += 1
        live = sim.result()
    finally:
        daemon.store.close()

    expected, got = starts(replay), starts(live)
    assert set(expected) == set(got) == {j.id for j in jobs}
    differ = {j: (expected[j], got[j]) for j in expected
              if not (expected[j] == got[j] or (math.isnan(expected[j]) and math.isnan(got[j])))}
    assert differ == {}
    assert sum(1 for v in expected.values() if not math.isnan(v)) > JOBS // 2
    # every release was pinned to as many nodes as the job asked for
    asked = {j.id: j.nodes for j in jobs}
    assert sim.releases and all(len(nodes) == asked[jid] for _, jid, nodes in sim.releases)
    # the cap shaped the schedule: it binds in the capped part (easy ignores it; the others respect it)
    inside = (live.timeline["t_s"] >= cap.steps[0].start_s) & np.isfinite(live.timeline["cap_w"])
    assert inside.any()
    if policy != "easy":
        assert (live.timeline["power_w"][inside] <= live.timeline["cap_w"][inside] * (1 + 1e-6)).all()
    assert cycles >= len(jobs)
