"""Job units: several jobs sharing a node by cores, GPUs, MICs and memory, in the guard, the engine and ls."""

from __future__ import annotations

import pytest

from builders import snapshot
from wattsched.model.guard import plan_problems
from wattsched.model.job import Job, Unit
from wattsched.model.plan import Evict, Plan, SetNodeCap, Start
from wattsched.model.platform import Node, NodePowerModel, Platform
from wattsched.model.units import format_units, parse_units, place
from wattsched.policies.base import BasePolicy
from wattsched.policies.prb import LsPolicy
from wattsched.sim.engine import Engine
from wattsched.workload.records import TraceJob

PM = NodePowerModel(idle_w=100.0, busy_w=260.0, cap_min_w=100.0, cap_max_w=300.0)


def plat(n: int = 2, gpus: int = 0, mics: int = 0, mem_mb: int = 0) -> Platform:
    return Platform([Node(i, f"n{i}", cores=16, gpus=gpus, mem_mb=mem_mb, power=PM, mics=mics) for i in range(n)])


def ujob(jid: int, *units: Unit, walltime: float = 200.0) -> Job:
    return Job(jid, 0.0, walltime, len(units), units=units)


def utj(jid: int, runtime: float, *units: Unit, submit: float = 0.0) -> TraceJob:
    return TraceJob(jid, submit, runtime, 200.0, sum(u.cores for u in units), len(units), units=units)


# ---------------------------------------------------------------- text form
@pytest.mark.parametrize("text", ["8c", "2*8c1g4096M;4c", "1c2m512M;16c2g16384M", "3*1c"])
def test_text_form_round_trips(text):
    assert format_units(parse_units(text)) == text


def test_text_form_reads_gigabytes_and_spaces():
    assert parse_units(" 2 * 4c1g2G ; 1m ") == (Unit(4, 1, 0, 2048), Unit(4, 1, 0, 2048), Unit(0, 0, 1, 0))


@pytest.mark.parametrize(("text", "message"), [
    ("4x", "not of the form"), ("4c4c", "twice"), ("0*4c", "positive"), ("2G", "asks no cores"),
    ("200000*1c", "more than"),
])
def test_text_form_errors_say_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message):
        parse_units(text)


def test_place_packs_first_fit_and_respects_every_resource():
    p = plat(2, gpus=2, mem_mb=16384)
    assert place([Unit(8, 1), Unit(8, 1), Unit(8, 1)], [0, 1], p, {}) == (0, 0, 1)
    assert place([Unit(4, 3)], [0, 1], p, {}) is None  # 3 GPUs: no node has them
    assert place([Unit(4, 0, 0, 9000), Unit(4, 0, 0, 9000)], [0, 1], p, {}) == (0, 1)  # memory splits them
    assert place([Unit(1, 0, 1)], [0, 1], p, {}) is None  # no MICs on this platform


# ---------------------------------------------------------------- guard
def test_guard_lets_units_share_nodes_within_their_capacity():
    p = plat(2)
    s = snapshot(p, [ujob(1, Unit(8)), ujob(2, Unit(8)), ujob(3, Unit(8), Unit(8))])
    assert plan_problems(s, Plan([Start(1, (0,)), Start(2, (0,)), Start(3, (1, 1))])) == []
    over = plan_problems(s, Plan([Start(1, (0,)), Start(2, (0,)), Start(3, (0, 1))]))
    assert len(over) == 1 and "unit 0 (8c) does not fit on node n0 (free: 0 cores" in over[0]


def test_guard_checks_units_on_the_fast_path_too():
    s = snapshot(plat(2), [ujob(1, Unit(32))])
    assert any("does not fit" in m for m in plan_problems(s, Plan([Start(1, (0,))])))


def test_guard_keeps_whole_node_jobs_and_units_apart():
    p = plat(3)
    whole = Job(5, 0.0, 100.0, 1)
    s = snapshot(p, [ujob(1, Unit(4)), whole], [(ujob(9, Unit(8)), 0.0, (2,))])
    assert s.node_free == {2: (8, 0, 0, -0)}
    assert plan_problems(s, Plan([Start(1, (2,))])) == []  # room left beside job 9's unit
    assert any("double-booked" in m for m in plan_problems(s, Plan([Start(1, (0,)), Start(5, (0,))])))
    assert any("which is busy" in m for m in plan_problems(s, Plan([Start(5, (2,))])))
    assert any("with a cap or frequency" in m for m in plan_problems(s, Plan([Start(1, (0,), cap_w=200.0)])))
    assert any("has 1 units, plan gives 2" in m for m in plan_problems(s, Plan([Start(1, (0, 1))])))


def test_guard_frees_an_evicted_jobs_units():
    p = plat(1)
    s = snapshot(p, [Job(5, 0.0, 100.0, 1), ujob(1, Unit(16))], [(ujob(9, Unit(8)), 0.0, (0,))])
    assert plan_problems(s, Plan([Evict(9), Start(5, (0,))])) == []  # the node empties: a whole-node job fits
    assert plan_problems(s, Plan([Evict(9), Start(1, (0,))])) == []
    assert any("does not fit" in m for m in plan_problems(s, Plan([Start(1, (0,))])))


# ---------------------------------------------------------------- engine
class _Fixed(BasePolicy):
    """Starts the given jobs on the given nodes, with the given node caps, once each."""

    name = "fixed-test"

    def __init__(self, starts, caps=()):
        super().__init__()
        self.starts, self.caps, self.done = starts, caps, set()

    def decide(self, snapshot, state=None):
        actions = [Start(j, nodes) for j, nodes in self.starts if j in snapshot.pending and j not in self.done]
        self.done |= {a.job_id for a in actions}
        if actions and self.caps:
            actions += [SetNodeCap(n, c) for n, c in self.caps]
            self.caps = ()
        return Plan(actions)


def test_engine_shares_a_node_and_counts_its_idle_power_once():
    jobs = [utj(1, 100.0, Unit(8)), utj(2, 100.0, Unit(8)), utj(3, 50.0, Unit(8), Unit(8))]
    e = Engine(plat(2), jobs, LsPolicy())
    r = e.run()
    assert list(r.jobs["start_s"]) == [0.0, 0.0, 0.0] and list(r.jobs["end_s"]) == [100.0, 100.0, 50.0]
    # node 0: jobs 1 and 2 (idle 100 W + 2 × 80 W for 100 s); node 1: job 3 (100 + 160 W for 50 s, then idle)
    assert e.energy_j == pytest.approx(260.0 * 100 + 260.0 * 50 + 100.0 * 50)
    # each job: half a node's idle power (8 of 16 cores per unit) and its units' dynamic power
    assert list(r.jobs["energy_j"]) == pytest.approx([130.0 * 100, 130.0 * 100, 260.0 * 50])
    assert e.stats["plans_rejected"] == 0


def test_a_cap_on_a_shared_node_slows_every_job_on_it_and_lifts_as_they_leave():
    # node 0 capped at 180 W: 80 W of dynamic power for two units asking 80 W each: half each, F=1 doubles
    # their time; job 2 (runtime 50) ends at 100; job 1 then has the node's 80 W alone and runs at full speed
    jobs = [utj(1, 100.0, Unit(8), submit=0.0), utj(2, 50.0, Unit(8), submit=0.0)]
    from wattsched.model.response import LinearResponse

    p = Platform(plat(1).nodes, response_classes={"": LinearResponse(f=1.0)})
    e = Engine(p, jobs, _Fixed([(1, (0,)), (2, (0,))], caps=[(0, 180.0)]))
    e.begin()
    e.advance_to(120.0)
    assert e.node_power_w() == [180.0] and e.running[1].speed == 1.0  # job 1 alone: its 80 W fit the cap
    e.advance_to(150.0)
    assert e.energy_j == pytest.approx(180.0 * 150)
    r = e.finish()
    assert e.now == pytest.approx(150.0)  # job 1's end at 200 (before job 2 left) is superseded
    assert list(r.jobs["end_s"]) == pytest.approx([150.0, 100.0])
    assert list(r.jobs["energy_j"]) == pytest.approx([90.0 * 100 + 130.0 * 50, 90.0 * 100])
    assert e.stats["plans_rejected"] == 0 and e.node_power_w() == [100.0]


def test_ls_packs_units_onto_the_most_loaded_node():
    p = plat(3)
    s = snapshot(p, [ujob(1, Unit(4)), ujob(2, Unit(8), Unit(8))], [(ujob(9, Unit(8)), 0.0, (2,))])
    plan = LsPolicy().decide(s)
    assert plan_problems(s, plan) == []
    starts = {a.job_id: a.nodes for a in plan.starts()}
    # job 1 (smaller demand first) beside job 9 on node 2; job 2 fills node 0 with both units
    assert starts == {1: (2,), 2: (0, 0)}


def test_ls_says_why_a_unit_that_fits_no_node_waits():
    s = snapshot(plat(2), [ujob(1, Unit(4, 1))])
    plan = LsPolicy().decide(s)
    assert not plan.actions and "do not fit on the usable nodes even when they are empty" in plan.reason_for(1)
    two = snapshot(plat(1), [ujob(2, Unit(12), Unit(12))])  # each fits a node, both not on the one node
    assert "do not fit" in LsPolicy().decide(two).reason_for(2)


def test_dec_packs_units_and_orders_by_weighted_queue_time():
    pytest.importorskip("ortools")
    from wattsched.policies.cp import DecPolicy

    p = plat(1)
    wide = Job(1, 0.0, 600.0, 1, units=(Unit(16),))
    short = [Job(2, 1.0, 60.0, 1, units=(Unit(8),)), Job(3, 2.0, 60.0, 1, units=(Unit(8),))]
    s = snapshot(p, [wide, *short])
    starts, _ = DecPolicy().solve(s, [wide, *short])
    # the two short jobs share the node first (weighted wait 10 steps less than the wide job first)
    assert starts == {1: 1, 2: 0, 3: 0}
    plan = DecPolicy().decide(s)
    assert plan_problems(s, plan) == [] and {a.job_id: a.nodes for a in plan.starts()} == {2: (0,), 3: (0,)}
    # a running unit holds half the node: one short job fits beside it now, the other waits for it
    busy = snapshot(p, short, [(ujob(9, Unit(8), walltime=120.0), 0.0, (0,))])
    plan = DecPolicy().decide(busy)
    assert plan_problems(busy, plan) == [] and [a.job_id for a in plan.starts()] == [2]


def test_a_superseded_end_neither_moves_the_clock_nor_adds_energy():
    # a whole-node job slowed by a cap that a second start lifts: its first end (t=200) is superseded
    from wattsched.model.response import LinearResponse

    class CapThenLift(BasePolicy):
        name = "cap-then-lift-test"

        def decide(self, snapshot, state=None):
            if 1 in snapshot.pending:
                return Plan([Start(1, (0,)), SetNodeCap(0, 180.0)])
            if 2 in snapshot.pending:
                return Plan([Start(2, (1,)), SetNodeCap(0, None)])
            return Plan([])

    p = Platform(plat(2).nodes, response_classes={"": LinearResponse(f=1.0)})
    jobs = [TraceJob(1, 0.0, 100.0, 400.0, 16, 1), TraceJob(2, 50.0, 10.0, 400.0, 16, 1)]
    e = Engine(p, jobs, CapThenLift())
    r = e.run()
    # job 1: 50 s at 180/260 of its speed (F = 1), the rest of its 100 s of work at full speed; the run ends
    # with it (its end under the cap, at 144 s, is superseded)
    end = 50.0 + 100.0 - 50.0 * 180.0 / 260.0
    assert list(r.jobs["end_s"]) == pytest.approx([end, 60.0])
    assert e.now == pytest.approx(end)
    assert e.energy_j == pytest.approx(180.0 * 50 + 260.0 * (end - 50) + 100.0 * 50 + 260.0 * 10 + 100.0 * (end - 60))


def test_dynshare_sees_a_shared_nodes_draw_as_the_sum_of_its_units():
    from wattsched.model.constraints import CapSchedule
    from wattsched.model.job import RunningJob
    from wattsched.model.units import unit_dynamic_w
    from wattsched.policies.rapl import shared_node_caps

    p = plat(2)
    a, b = ujob(1, Unit(8)), ujob(2, Unit(8))
    s = snapshot(p, [], [], cap=CapSchedule.constant(400.0), desired_node_cap_w={0: 200.0, 1: 200.0})
    # two units on node 0, each measured at half the node's idle power and 80 W of its own
    s.running = {1: RunningJob(a, 0.0, (0,), 200.0, 130.0), 2: RunningJob(b, 0.0, (0,), 200.0, 130.0)}
    s.node_state[0] = 1
    s.free_nodes = [1]
    assert unit_dynamic_w(p, s.running[1]) == [(0, 80.0)]
    caps = shared_node_caps(s, set(), 10.0, 0.02)
    # node 0 draws 100 + 2 x 80 = 260 W, above its 200 W: it takes what idle node 1 (kept at 110 W) leaves
    assert caps == {1: 110.0, 0: 290.0}


def test_a_unit_that_fits_no_node_is_refused_with_the_job_and_the_largest_node():
    from wattsched.errors import TraceError

    jobs = [utj(1, 10.0, Unit(8)), utj(2, 10.0, Unit(4, 1))]
    with pytest.raises(TraceError, match=r"units: job 2: unit 4c1g fits no node .*at most 16 cores, 0 GPUs"):
        Engine(plat(2), jobs, LsPolicy()).run()


def test_ls_does_not_give_units_a_node_a_whole_node_job_just_took():
    # job 1's unit (a GPU) fits nowhere, so ls has looked at the nodes for units before job 2 takes node 0
    gpu_unit = Job(1, 0.0, 10.0, 1, units=(Unit(1, 1),))
    whole = Job(2, 0.0, 100.0, 1)
    wide_unit = Job(3, 0.0, 200.0, 1, units=(Unit(16),))
    s = snapshot(plat(2), [gpu_unit, whole, wide_unit])
    plan = LsPolicy().decide(s)
    assert plan_problems(s, plan) == []
    assert {a.job_id: a.nodes for a in plan.starts()} == {2: (0,), 3: (1,)}
