"""The registered ``parm`` policy (Sarood et al. 2014): the ILP's answer as a plan on an overprovisioned platform.

Node caps before starts, node counts in the moldable range, the budget with and without the idle nodes,
shrinks before the starts that take their nodes, the version's node counts, the hint kept in the state, a
cap below the running jobs, and jobs too large to ever start.
"""

from __future__ import annotations

import pytest

from builders import snapshot
from wattsched.config.platform import load_platform
from wattsched.model.constraints import CapSchedule
from wattsched.model.guard import plan_problems
from wattsched.model.job import Job
from wattsched.model.plan import Reshape, SetNodeCap, Start
from wattsched.policies import make_policy
from wattsched.policies.parm import ParmState

pytest.importorskip("ortools")

TESTBED = load_platform("sarood-testbed")
NODE_W = TESTBED.base_w + TESTBED.mem_w  # 56 W: base and memory power of a node
IDLE_W = TESTBED.nodes[0].power.idle_w  # 69.5 W


def mold(jid: int, nodes: int, lo: int, app: str = "leanmd", submit: float = 0.0, walltime: float = 3600.0,
         malleable: bool = False) -> Job:
    return Job(jid, submit, walltime, nodes, min_nodes=lo, max_nodes=nodes, app=app, malleable=malleable)


def caps_and_starts(plan):
    """{job: (nodes, cap of each node)} of the plan's starts, and the index of each action."""
    caps = {a.node: a.cap_w for a in plan.actions if type(a) is SetNodeCap}
    return {a.job_id: (a.nodes, {caps.get(n) for n in a.nodes}) for a in plan.actions if type(a) is Start}


def planned_power(snap, plan, count_idle: bool) -> float:
    """Platform power once the plan is applied, each node given to a job at its cap (base + memory + level)."""
    caps = dict(snap.node_cap_w)
    caps.update({a.node: a.cap_w for a in plan.actions if type(a) is SetNodeCap})
    busy = {n for r in snap.running.values() for n in r.nodes}
    busy |= {n for a in plan.actions if type(a) is Start for n in a.nodes}
    idle = (len(TESTBED.nodes) - len(busy)) * IDLE_W if count_idle else 0.0
    return idle + sum(caps[n] for n in busy)


@pytest.mark.parametrize("count_idle", [True, False])
def test_jobs_start_in_their_range_with_their_nodes_capped_first_within_the_budget(count_idle):
    jobs = [mold(i, 20, 8, app, submit=float(i)) for i, app in enumerate(["leanmd", "wave2d", "lulesh", "amr"], 1)]
    snap = snapshot(TESTBED, jobs, now=10.0)
    policy = make_policy("parm", {"version": "noSE", "count_idle": count_idle})
    plan = policy.decide(snap, policy.init_state())
    assert plan_problems(snap, plan) == []
    starts = caps_and_starts(plan)
    assert starts, plan.reasons
    for jid, (nodes, caps) in starts.items():
        assert 8 <= len(nodes) <= 20
        assert len(caps) == 1 and None not in caps  # one level for all its nodes
        (cap,) = caps
        assert cap - NODE_W in TESTBED.cpu_power_levels_w
        # the caps come before the job's start in the plan
        first_start = next(i for i, a in enumerate(plan.actions) if type(a) is Start and a.job_id == jid)
        assert all(i < first_start for i, a in enumerate(plan.actions) if type(a) is SetNodeCap and a.node in nodes)
    assert planned_power(snap, plan, count_idle) <= TESTBED.budget_w + 1e-6


def test_counting_the_idle_nodes_plans_less_power_for_the_jobs_than_the_papers_eq_5():
    jobs = [mold(i, 38, 8, submit=float(i)) for i in range(1, 6)]
    snap = snapshot(TESTBED, jobs, now=10.0)

    def jobs_power(count_idle):
        policy = make_policy("parm", {"version": "noSE", "count_idle": count_idle})
        plan = policy.decide(snap, policy.init_state())
        return planned_power(snap, plan, False)

    with_idle, paper = jobs_power(True), jobs_power(False)
    # Eq. 5 alone fills the budget with the jobs' nodes; with the idle nodes counted the jobs get less
    assert paper > TESTBED.budget_w - 116.0
    assert with_idle < paper


def test_no_mm_keeps_the_requested_count_and_no_se_may_choose_fewer():
    jobs = [mold(1, 38, 10), mold(2, 38, 10, app="wave2d", submit=1.0)]
    snap = snapshot(TESTBED, jobs, now=5.0)
    nomm = make_policy("parm", {"version": "noMM"}).decide(snap, ParmState())
    nose = make_policy("parm", {"version": "noSE"}).decide(snap, ParmState())
    assert {len(a.nodes) for a in nomm.starts()} <= {38}
    assert len(nose.starts()) == 2  # both fit only below their request
    assert all(10 <= len(a.nodes) < 38 for a in nose.starts())


def test_wse_shrinks_a_running_malleable_job_before_the_start_that_takes_its_nodes():
    big = mold(1, 38, 8, malleable=True)
    pending = mold(2, 20, 8, submit=100.0)
    nodes = tuple(range(38))
    snap = snapshot(TESTBED, [pending], [(big, 0.0, nodes)], now=1000.0,
                    node_cap_w=dict.fromkeys(nodes, NODE_W + 30.0))
    policy = make_policy("parm", {"version": "wSE", "count_idle": False})
    state = policy.init_state()
    plan = policy.decide(snap, state)
    assert plan_problems(snap, plan) == []
    kinds = [type(a) for a in plan.actions]
    shrink = next(a for a in plan.actions if type(a) is Reshape)
    start = next(a for a in plan.actions if type(a) is Start)
    assert set(shrink.nodes) < set(nodes) and kinds.index(Reshape) < kinds.index(Start)
    assert set(start.nodes) <= set(nodes) - set(shrink.nodes)
    assert shrink.overhead_s == 0.0  # a shrink boots nothing and the trace's jobs move no memory
    assert state.reshaped_at == {1: 1000.0}
    # within f_se_s of that reshape the job keeps its count
    later = snapshot(TESTBED, [mold(3, 20, 8, submit=1100.0)], [(big, 0.0, shrink.nodes), (pending, 1000.0,
                     start.nodes)], now=1200.0)
    again = policy.decide(later, state)
    assert not any(type(a) is Reshape and a.job_id == 1 for a in again.actions)


def test_noSE_and_a_cluster_that_cannot_reshape_never_reshape():
    big = mold(1, 38, 8, malleable=True)
    snap = snapshot(TESTBED, [mold(2, 20, 8, submit=100.0)], [(big, 0.0, tuple(range(38)))], now=1000.0,
                    can_reshape=False)
    for version in ("wSE", "noSE"):
        plan = make_policy("parm", {"version": version, "count_idle": False}).decide(snap, ParmState())
        assert not any(type(a) is Reshape for a in plan.actions)
        assert plan_problems(snap, plan) == []


def test_the_answer_is_kept_as_the_next_decisions_hint_and_the_state_round_trips():
    jobs = [mold(i, 20, 8, submit=float(i)) for i in range(1, 4)]
    snap = snapshot(TESTBED, jobs, now=10.0)
    policy = make_policy("parm")
    state = policy.init_state()
    plan = policy.decide(snap, state)
    started = {a.job_id: len(a.nodes) for a in plan.starts()}
    assert {j: n for j, (n, _) in state.hint.items()} == started
    assert ParmState.from_json(state.to_json()) == state


def test_a_cap_below_what_the_running_jobs_need_puts_them_on_their_least_power_and_starts_nothing():
    nodes = tuple(range(30))
    running = mold(1, 30, 30)
    snap = snapshot(TESTBED, [mold(2, 4, 4, submit=1.0)], [(running, 0.0, nodes)], now=10.0,
                    cap=CapSchedule.constant(2000.0), node_cap_w=dict.fromkeys(nodes, NODE_W + 55.0))
    plan = make_policy("parm").decide(snap, ParmState())
    assert plan.starts() == []
    lowest = NODE_W + 30.0  # leanmd's p_l is 30 W, the testbed's lowest level
    assert {a.cap_w for a in plan.actions if type(a) is SetNodeCap} == {lowest}
    assert {a.node for a in plan.actions if type(a) is SetNodeCap} == set(nodes)
    assert plan_problems(snap, plan) == []


def test_a_job_larger_than_the_usable_nodes_waits_with_that_reason():
    snap = snapshot(TESTBED, [Job(1, 0.0, 60.0, 40), mold(2, 4, 2, submit=1.0)], now=5.0)
    plan = make_policy("parm").decide(snap, ParmState())
    assert "needs 40 nodes, more than the 38 usable" in plan.reason_for(1)
    assert [a.job_id for a in plan.starts()] == [2]


def test_a_job_of_no_pass_application_runs_on_its_request_at_the_highest_level():
    snap = snapshot(TESTBED, [Job(1, 0.0, 600.0, 6, min_nodes=2, max_nodes=6)], now=5.0)
    plan = make_policy("parm").decide(snap, ParmState())
    ((nodes, caps),) = caps_and_starts(plan).values()
    assert len(nodes) == 6 and caps == {NODE_W + max(TESTBED.cpu_power_levels_w)}


def test_the_live_platform_carries_a_platform_files_budget_and_levels_so_parm_plans_caps_live():
    from wattsched.config.platform import load_platform_config
    from wattsched.daemon.slurm.records import SlurmNode
    from wattsched.daemon.view import PowerModels, build_platform

    models = PowerModels.from_platform_config(load_platform_config("sarood-testbed")[0])
    nodes = [SlurmNode(f"pc{i}", "IDLE", cpus=6) for i in range(4)]
    live = build_platform(nodes, models)
    assert live.overprovisioned and live.budget_w == 3300.0 and live.cpu_power_levels_w == (30, 32, 34, 39, 45, 55)
    plain = build_platform(nodes, PowerModels.uniform(TESTBED.nodes[0].power))
    assert not plain.overprovisioned
    snap = snapshot(live, [mold(1, 4, 2)], now=1.0)
    plan = make_policy("parm").decide(snap, ParmState())
    assert {type(a) for a in plan.actions} == {SetNodeCap, Start}


def test_a_cluster_that_can_only_shrink_gets_shrinks_that_keep_the_first_node_and_no_growth():
    small = mold(1, 38, 4, malleable=True)  # running on 4 of its 4..38: in wSE it would grow into the free nodes
    nodes = (5, 6, 7, 8)
    free_run = snapshot(TESTBED, [], [(small, 0.0, nodes)], now=1000.0)
    grows = make_policy("parm", {"count_idle": False}).decide(free_run, ParmState())
    assert any(type(a) is Reshape and len(a.nodes) > 4 for a in grows.actions)
    live = snapshot(TESTBED, [], [(small, 0.0, nodes)], now=1000.0, reshape_shrink_only=True)
    plan = make_policy("parm", {"count_idle": False}).decide(live, ParmState())
    assert not any(type(a) is Reshape for a in plan.actions) and plan_problems(live, plan) == []
    big = mold(2, 38, 8, malleable=True)
    held = tuple(range(38))
    crowded = snapshot(TESTBED, [mold(3, 20, 8, submit=10.0)], [(big, 0.0, held)], now=1000.0,
                       reshape_shrink_only=True)
    plan = make_policy("parm", {"count_idle": False}).decide(crowded, ParmState())
    shrink = next(a for a in plan.actions if type(a) is Reshape)
    assert shrink.nodes[0] == held[0] and len(shrink.nodes) < 38
    assert plan_problems(crowded, plan) == []


def test_a_slurm_jobs_comment_names_its_application_and_parm_moulds_it_live():
    from wattsched.daemon.slurm.records import SlurmJob
    from wattsched.daemon.view import to_job

    slurm = SlurmJob(5, "PENDING", node_count=8, max_nodes=38, time_limit_s=3600.0, submit_time=1.0,
                     comment="wattsched:app=leanmd wattsched:malleable")
    job = to_job(slurm)
    assert (job.app, job.min_nodes, job.max_nodes, job.nodes) == ("leanmd", 8, 38, 8)
    assert to_job(SlurmJob(6, "PENDING", node_count=2, comment="wattsched:app=$(rm)")).app == ""
    other = mold(7, 38, 8, app="wave2d", submit=0.5)
    plan = make_policy("parm", {"version": "noSE"}).decide(snapshot(TESTBED, [other, job], now=10.0), ParmState())
    assert plan_problems(snapshot(TESTBED, [other, job], now=10.0), plan) == []
    counts = {a.job_id: len(a.nodes) for a in plan.starts()}
    assert set(counts) == {5, 7} and all(8 <= n < 38 for n in counts.values())


def test_a_job_larger_than_the_testbed_is_timed_as_the_engine_times_it_so_fewer_nodes_cost_time():
    """The ILP's model of a 3,800-node LeanMD job is the engine's (A scaled to 12,800, see test_ledger_pass): on
    760 nodes it takes t(760)/t(3800) = 4.7236 times its 3,600 s, not the same time as with A = 128."""
    policy = make_policy("parm", {"version": "noSE"})
    model, is_pass = policy._model_of(mold(1, 3800, 760), True, 60.0)
    assert is_pass and model.A == 12800.0
    assert model.time(3800, model.p_h) == pytest.approx(3600.0)
    assert model.time(760, model.p_h) == pytest.approx(3600.0 * 4.7236, rel=1e-4)
