"""Slurm's main scheduling passes in the engine (``EngineOptions.sched_passes``): starts wait for the next pass."""

from __future__ import annotations

import pytest

from builders import platform, tj
from wattsched.config.sim import SimConfig
from wattsched.errors import ConfigError
from wattsched.policies import make_policy
from wattsched.sim.engine import Engine, EngineOptions
from wattsched.sim.options import SchedPasses

JOBS = [tj(1, 0.0, 10.0, walltime=60.0), tj(2, 0.5, 4.0, walltime=60.0), tj(3, 1.2, 2.0, walltime=60.0),
        tj(4, 9.5, 1.0, walltime=60.0)]


def run(passes: SchedPasses | None):
    engine = Engine(platform(2), JOBS, make_policy("fcfs", {}), options=EngineOptions(sched_passes=passes))
    result = engine.run()
    starts = {int(i): float(s) for i, s in zip(result.jobs["id"], result.jobs["start_s"], strict=True)}
    ends = {int(i): float(e) for i, e in zip(result.jobs["id"], result.jobs["end_s"], strict=True)}
    return engine, result, starts, ends


def test_without_passes_jobs_start_when_the_policy_decides():
    _, _, starts, ends = run(None)
    assert starts == pytest.approx({1: 0.0, 2: 0.5, 3: 4.5, 4: 9.5})
    assert ends == pytest.approx({1: 10.0, 2: 4.5, 3: 6.5, 4: 10.5})


def test_each_start_waits_for_the_next_pass_at_least_the_interval_after_the_last():
    engine, result, starts, ends = run(SchedPasses(interval_s=3.0, tick_s=1.0))
    # 1: its submission's pass at 0; 2 (submitted at 0.5) waits for the pass 3 s later; 3 queues behind it and
    # starts at the pass its end at 7 asks for; 3's end at 9 asks for one 3 s after that, at 10, which serves 4
    assert starts == pytest.approx({1: 0.0, 2: 3.0, 3: 7.0, 4: 10.0})
    assert ends == pytest.approx({1: 10.0, 2: 7.0, 3: 9.0, 4: 11.0}), "each runs its own run time from its start"
    assert engine.stats["held_starts"] == 2
    assert engine.stats["sched_passes"] == 5  # at 0, 3, 7, 10 and 13 (asked for by 4's end)
    # held nodes draw idle power: the platform's energy is the idle floor plus each run's busy excess
    idle, busy, makespan = 100.0, 300.0, 11.0
    assert result.info["energy_j"] == pytest.approx(2 * idle * makespan + (busy - idle) * (10 + 4 + 2 + 1))


def test_a_release_after_the_decision_misses_the_pass_its_submission_asked_for():
    # the daemon's way: the submission's own pass (at 0) starts nothing, the release a second later waits 3 s
    # so do 3's (decided at 2's end at 7, released at 8, the pass at 7 just held) and 4's (decided at 3's end at 12,
    # served by the pass at 13 that the release asks for)
    _, _, starts, _ = run(SchedPasses(interval_s=3.0, tick_s=1.0, release_lag_s=1.0))
    assert starts == pytest.approx({1: 3.0, 2: 3.0, 3: 10.0, 4: 13.0})


def test_no_interval_starts_on_the_next_tick():
    _, _, starts, _ = run(SchedPasses(interval_s=0.0, tick_s=1.0))
    assert starts == pytest.approx({1: 0.0, 2: 1.0, 3: 5.0, 4: 10.0})


def test_sched_passes_in_a_simulation_config_and_its_bad_values():
    config = SimConfig.model_validate({"trace": "t.swf", "sched_passes": {"interval_s": 3, "release_lag_s": 1}})
    assert config.sched_passes.interval_s == 3.0 and config.sched_passes.tick_s == 1.0
    for bad in ({"interval_s": -1}, {"tick_s": 0}, {"lag_s": 1}):
        with pytest.raises((ConfigError, ValueError), match="sched_passes"):
            SimConfig.model_validate({"trace": "t.swf", "sched_passes": bad})
    with pytest.raises(ValueError, match="tick_s"):
        SchedPasses(tick_s=0.0)
