"""Engine tests with energies and times worked out by hand (see builders.SIMPLE_POWER: idle 100 W, busy 300 W)."""

from __future__ import annotations

import math

import pytest

from builders import SIMPLE_POWER, platform, tj
from wattsched.errors import PlanViolation
from wattsched.model.constraints import CapSchedule
from wattsched.model.plan import Evict, Plan, PowerDown, PowerUp, Reshape, SetNodeCap, SetNodeFreq, Start
from wattsched.model.response import LinearResponse
from wattsched.policies import make_policy
from wattsched.policies.base import BasePolicy
from wattsched.sim.engine import Engine, EngineOptions


class Scripted(BasePolicy):
    """Plays back a fixed plan at given times; starts pending jobs FCFS otherwise if ``auto``."""

    name = "scripted"

    def __init__(self, script: dict[float, list], auto: bool = True):
        super().__init__()
        self.script = script
        self.auto = auto
        self.calls: list[float] = []

    def decide(self, snapshot, state=None):
        self.calls.append(snapshot.now_s)
        actions = list(self.script.get(snapshot.now_s, []))
        if self.auto and not actions:
            free = list(snapshot.free_nodes)
            for job in snapshot.pending.values():
                if job.nodes > len(free):
                    break
                actions.append(Start(job.id, tuple(free[-job.nodes :])))
                del free[-job.nodes :]
        return Plan(actions)


def run(jobs, policy=None, n=2, **kw):
    options = EngineOptions(**{k: v for k, v in kw.items() if k in EngineOptions.__dataclass_fields__})
    extra = {k: v for k, v in kw.items() if k not in EngineOptions.__dataclass_fields__}
    return Engine(platform(n), jobs, policy or make_policy("fcfs"), options=options, **extra).run()


def row(result, job_id):
    i = list(result.jobs["id"]).index(job_id)
    return {k: v[i] for k, v in result.jobs.items()}


def test_energy_of_one_job_is_exact():
    r = run([tj(1, 0.0, 10.0)])
    job = row(r, 1)
    assert job["start_s"] == 0.0 and job["end_s"] == 10.0 and job["state"] == "COMPLETED"
    assert job["energy_j"] == pytest.approx(300.0 * 10)
    # platform: one node busy (300 W) and one idle (100 W) for 10 s
    assert r.info["energy_j"] == pytest.approx(400.0 * 10)
    assert list(r.timeline["t_s"]) == [0.0, 10.0, 10.0]
    assert list(r.timeline["power_w"]) == [400.0, 200.0, 200.0]
    assert r.info["node_seconds_by_state"]["busy"] == pytest.approx(10.0)
    assert r.info["node_seconds_by_state"]["idle"] == pytest.approx(10.0)


def test_job_power_from_trace_overrides_platform_busy_power():
    r = run([tj(1, 0.0, 10.0, nodes=2, mean_w=250.0)])
    assert row(r, 1)["energy_j"] == pytest.approx(2 * 250.0 * 10)
    assert r.info["energy_j"] == pytest.approx(500.0 * 10)


def test_kill_at_walltime_or_let_finish():
    killed = run([tj(1, 0.0, 20.0, walltime=10.0)])
    assert row(killed, 1)["end_s"] == 10.0 and row(killed, 1)["state"] == "TIMEOUT"
    finished = run([tj(1, 0.0, 20.0, walltime=10.0)], kill_at_walltime=False)
    assert row(finished, 1)["end_s"] == 20.0 and row(finished, 1)["state"] == "COMPLETED"


def test_cap_at_start_slows_job_through_its_response_model():
    # CPU-bound job (F = 1): half the power, twice the time, the same energy.
    policy = Scripted({0.0: [Start(1, (0,), cap_w=150.0)]})
    r = run([tj(1, 0.0, 10.0, walltime=100.0, app_class="cpu")], policy)
    job = row(r, 1)
    assert job["end_s"] == pytest.approx(20.0)
    assert job["energy_j"] == pytest.approx(150.0 * 20)


def test_cap_mid_run_rescales_the_remaining_work():
    policy = Scripted({0.0: [Start(1, (0,))], 5.0: [SetNodeCap(0, 150.0)]}, auto=False)
    r = run([tj(1, 0.0, 10.0, walltime=100.0, app_class="cpu")], policy, tick_s=5.0)
    job = row(r, 1)
    # 5 s at full speed, the 5 s of work left at half speed take 10 s
    assert job["end_s"] == pytest.approx(15.0)
    assert job["energy_j"] == pytest.approx(300.0 * 5 + 150.0 * 10)


def test_frequency_mid_run_uses_the_response_model():
    # Frequency halved on a node running a job with F = 0.5: duration multiplier max(1, 0.5/0.5) = 1.
    classes = {"half": LinearResponse(f=0.5)}
    policy = Scripted({0.0: [Start(1, (0,))], 4.0: [SetNodeFreq(0, 1.0e9)]}, auto=False)
    r = run([tj(1, 0.0, 10.0, walltime=100.0, app_class="half")], policy, tick_s=4.0, response_classes=classes)
    job = row(r, 1)
    assert job["end_s"] == pytest.approx(10.0)
    assert job["energy_j"] == pytest.approx(300.0 * 4 + 150.0 * 6)


def test_walltime_kill_is_in_wall_time_even_when_slowed():
    policy = Scripted({0.0: [Start(1, (0,), cap_w=150.0)]})
    r = run([tj(1, 0.0, 10.0, walltime=15.0, app_class="cpu")], policy)
    assert row(r, 1)["end_s"] == pytest.approx(15.0)
    assert row(r, 1)["state"] == "TIMEOUT"


def test_evict_with_requeue_wastes_work_and_energy_then_reruns():
    policy = Scripted({5.0: [Evict(1, requeue=True)]})
    r = run([tj(1, 0.0, 10.0, walltime=100.0)], policy, tick_s=5.0)
    job = row(r, 1)
    assert job["evictions"] == 1
    assert job["wasted_node_s"] == pytest.approx(5.0)
    assert job["wasted_j"] == pytest.approx(1500.0)
    # evicted at 5, restarted at the next call (tick at 10), runs its full 10 s again
    assert job["start_s"] == pytest.approx(10.0) and job["end_s"] == pytest.approx(20.0)
    assert job["energy_j"] == pytest.approx(1500.0 + 3000.0)
    assert job["state"] == "COMPLETED"


def test_evict_with_cancel_ends_the_job():
    policy = Scripted({5.0: [Evict(1, requeue=False)]})
    r = run([tj(1, 0.0, 10.0, walltime=100.0)], policy, tick_s=5.0)
    job = row(r, 1)
    assert job["state"] == "CANCELLED" and job["end_s"] == pytest.approx(5.0)
    assert job["wasted_j"] == pytest.approx(1500.0)


def test_requeued_job_keeps_its_place_in_the_queue():
    # Job 1 is evicted at 5 while job 2 (submitted later) waits: job 1 must come back first.
    policy = Scripted({5.0: [Evict(1, requeue=True)]})
    r = run([tj(1, 0.0, 10.0, nodes=2, walltime=100.0), tj(2, 1.0, 10.0, nodes=2, walltime=100.0)], policy,
            tick_s=5.0)
    assert row(r, 1)["start_s"] == pytest.approx(10.0)
    assert row(r, 2)["start_s"] == pytest.approx(20.0)


def test_power_down_and_up_go_through_switching_states():
    # SIMPLE_POWER: off 10 W, switch off 5 s at 120 W, switch on 20 s at 150 W, idle 100 W.
    policy = Scripted({0.0: [PowerDown(1)], 10.0: [PowerUp(1)]}, auto=False)
    r = Engine(platform(2), [tj(1, 0.0, 40.0, walltime=100.0)], policy,
               options=EngineOptions(tick_s=10.0, time_limit_s=40.0)).run()
    by_state = r.info["node_seconds_by_state"]
    assert by_state["switching_off"] == pytest.approx(5.0)
    assert by_state["off"] == pytest.approx(5.0)
    assert by_state["switching_on"] == pytest.approx(20.0)
    energy = r.info["energy_j_by_state"]
    assert energy["switching_off"] == pytest.approx(5 * 120.0)
    assert energy["off"] == pytest.approx(5 * 10.0)
    assert energy["switching_on"] == pytest.approx(20 * 150.0)
    # node 0 idle all 40 s (job 1 never started: auto off), node 1 idle from 30 to 40
    assert by_state["idle"] == pytest.approx(40.0 + 10.0)
    assert r.info["energy_j"] == pytest.approx(sum(energy.values()))


def test_guard_violation_is_an_error_in_strict_mode_and_dropped_otherwise():
    policy = Scripted({0.0: [Start(1, (0,)), Start(2, (0,))]})
    jobs = [tj(1, 0.0, 10.0), tj(2, 0.0, 10.0)]
    with pytest.raises(PlanViolation, match="double-booked"):
        run(jobs, policy)
    policy = Scripted({0.0: [Start(1, (0,)), Start(2, (0,))]})
    r = run([tj(1, 0.0, 10.0), tj(2, 0.0, 10.0)], policy, strict=False)
    assert r.info["plans_rejected"] == 1
    assert "double-booked" in r.info["rejected_plans"][0]


def test_reshape_malleable_job_rescales_work_with_overhead():
    policy = Scripted({0.0: [Start(1, (0,))], 4.0: [Reshape(1, (0, 1))]}, auto=False)
    jobs = [tj(1, 0.0, 10.0, walltime=100.0, malleable=True, min_nodes=1, max_nodes=2)]
    r = run(jobs, policy, tick_s=4.0, reshape_overhead=lambda job, old, new: 1.0)
    # 6 s of work left spread over 2 nodes = 3 s, plus 1 s overhead
    assert row(r, 1)["end_s"] == pytest.approx(8.0)
    assert row(r, 1)["energy_j"] == pytest.approx(300.0 * 4 + 600.0 * 4)


def test_same_time_events_are_one_policy_call_and_zero_runtime_jobs_finish():
    policy = Scripted({})
    r = run([tj(1, 0.0, 0.0), tj(2, 0.0, 5.0), tj(3, 0.0, 0.0)], policy)
    assert [row(r, j)["end_s"] for j in (1, 2, 3)] == [0.0, 5.0, 0.0]
    # t=0: submits (one call), t=0: zero-runtime ends, job 3 starts (second call), t=0 job 3 ends (third)
    assert policy.calls[0] == 0.0
    assert row(r, 3)["start_s"] == 0.0


def test_cap_schedule_changes_call_the_policy_and_are_in_the_timeline():
    policy = Scripted({})
    r = run([tj(1, 0.0, 100.0)], policy, cap=CapSchedule.window(20.0, 50.0, 350.0))
    assert 20.0 in policy.calls and 50.0 in policy.calls
    caps = dict(zip(r.timeline["t_s"], r.timeline["cap_w"]))
    assert caps[20.0] == 350.0 and math.isinf(caps[50.0])


def test_power_profile_steps_are_integrated():
    jobs = [tj(1, 0.0, 10.0, power_series=((0.0, 200.0), (4.0, 280.0)))]
    r = run(jobs)
    assert row(r, 1)["energy_j"] == pytest.approx(200.0 * 4 + 280.0 * 6)


def test_snapshot_hides_ground_truth():
    seen = []

    class Peek(BasePolicy):
        name = "peek"

        def decide(self, snapshot, state=None):
            for job in snapshot.pending.values():
                seen.append(job)
            for r in snapshot.running.values():
                seen.append(r)
            return Plan([Start(j.id, (n,)) for j, n in zip(snapshot.pending.values(), snapshot.free_nodes)])

    run([tj(1, 0.0, 7.0, walltime=50.0)], Peek())
    for obj in seen:
        assert not hasattr(obj, "runtime_s")
        assert 7.0 not in [getattr(obj, f, None) for f in getattr(obj, "__slots__", ())]


def test_deterministic():
    jobs = [tj(i, float(i % 7), float(3 + (i * 13) % 17), nodes=1 + i % 3, walltime=30.0) for i in range(60)]
    a = run(jobs, make_policy("easy"), n=4)
    b = run(jobs, make_policy("easy"), n=4)
    for col in ("start_s", "end_s", "energy_j"):
        assert list(a.jobs[col]) == list(b.jobs[col])


def test_time_limit_leaves_unfinished_jobs_marked():
    r = run([tj(1, 0.0, 100.0), tj(2, 0.0, 100.0, nodes=2)], time_limit_s=50.0)
    assert row(r, 1)["state"] == "RUNNING" and math.isnan(row(r, 1)["end_s"])
    assert row(r, 2)["state"] == "PENDING"
    assert r.timeline["t_s"][-1] == 50.0
    assert r.info["energy_j"] == pytest.approx(50.0 * 400.0)


def test_duplicate_job_ids_are_an_error():
    with pytest.raises(Exception, match="appears twice"):
        run([tj(1, 0.0, 100.0), tj(1, 1.0, 10.0)])


def test_simple_power_fixture_is_what_the_hand_computations_assume():
    assert (SIMPLE_POWER.idle_w, SIMPLE_POWER.busy_w) == (100.0, 300.0)


def test_clock_starts_at_the_first_event_even_a_cap_change_before_the_first_job():
    # Times not rebased (a job table): the cap window opens before the first submission.
    r = run([tj(1, 1000.0, 10.0)], cap=CapSchedule.window(500.0, 2000.0, 350.0))
    t, p = r.timeline["t_s"], r.timeline["power_w"]
    assert t[0] == 500.0
    assert r.info["energy_j"] == pytest.approx(float((p[:-1] * (t[1:] - t[:-1])).sum()))
    # 2 idle nodes from 500 to 1000, one busy from 1000 to 1010, both idle to 2000 (the window's end)
    assert r.info["node_seconds_by_state"]["idle"] == pytest.approx(2 * 500 + 10 + 2 * 990)
    assert r.info["energy_j"] == pytest.approx(200 * 500 + 400 * 10 + 200 * 990)


def test_free_nodes_stay_in_decreasing_index_order_whatever_order_nodes_are_freed_in():
    # Jobs on scattered nodes end at different times; a node powers down and comes back: the free list
    # policies see is always the idle nodes by decreasing index (the daemon lists them the same way).
    seen = []

    class Watching(Scripted):
        def decide(self, snapshot, state=None):
            seen.append((snapshot.now_s, list(snapshot.free_nodes)))
            idle = [i for i in range(len(snapshot.node_state) - 1, -1, -1) if snapshot.node_state[i] == 0]
            assert list(snapshot.free_nodes) == idle
            return super().decide(snapshot, state)

    policy = Watching({0.0: [Start(1, (4, 1)), Start(2, (0,)), Start(3, (2, 5)), Start(4, (6,)), PowerDown(3)],
                       10.0: [PowerUp(3)]}, auto=False)
    jobs = [tj(1, 0.0, 10.0, nodes=2), tj(2, 0.0, 5.0), tj(3, 0.0, 7.0, nodes=2), tj(4, 0.0, 40.0)]
    Engine(platform(7), jobs, policy, options=EngineOptions(tick_s=1.0, time_limit_s=35.0)).run()
    at = dict(seen)
    assert at[0.0] == [6, 5, 4, 3, 2, 1, 0]
    assert at[5.0] == [0]
    assert at[7.0] == [5, 2, 0]
    assert at[10.0] == [5, 4, 2, 1, 0]
    assert at[30.0] == [5, 4, 3, 2, 1, 0]  # node 3 back on (switching on takes 20 s)
