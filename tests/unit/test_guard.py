import pytest

from builders import platform, snapshot
from wattsched.errors import PlanViolation
from wattsched.model.constraints import CapSchedule
from wattsched.model.guard import check_plan, plan_problems
from wattsched.model.job import Job
from wattsched.model.plan import Evict, Plan, PowerDown, PowerUp, Reshape, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import NodeState

P = platform(4)
J1 = Job(1, 0.0, 100.0, 2)
J2 = Job(2, 0.0, 100.0, 1)
RUN = Job(9, 0.0, 100.0, 1, malleable=True, min_nodes=1, max_nodes=3)


def snap(**kw):
    return snapshot(P, [J1, J2], [(RUN, 0.0, (3,))], now=10.0, **kw)


def problems(*actions, **kw):
    return plan_problems(snap(), Plan(list(actions), **kw))


def test_valid_plan_passes():
    assert problems(Start(1, (0, 1)), Start(2, (2,))) == []
    check_plan(snap(), Plan([Start(1, (0, 1)), Evict(9), Start(2, (3,))]))  # evicted node reused


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ((Start(1, (0, 1)), Start(2, (1,))), "double-booked"),
        ((Start(1, (0,)),), "needs 2 nodes, plan gives 1"),
        ((Start(1, (0, 0)),), "same node twice"),
        ((Start(2, (3,)),), "node0003, which is busy"),
        ((Start(2, (7,)),), "node 7, which does not exist"),
        ((Start(2, (-1,)),), "node -1, which does not exist"),
        ((Start(5, (0,)),), "job 5, which is not pending"),
        ((Start(2, (0,)), Start(2, (1,))), "job 2 appears twice"),
        ((Evict(1),), "Evict of job 1, which is not running"),
        ((Reshape(1, (0,)),), "Reshape of job 1, which is not running"),
        ((Reshape(9, (0, 1, 2, 3)),), "needs 1 to 3 nodes"),
        ((SetNodeCap(0, 10.0),), "outside [50.0, 300.0] W"),
        ((SetNodeFreq(0, 5e9),), "frequency 5000000000.0 Hz not available"),
        ((PowerUp(0),), "PowerUp on node node0000, which is idle"),
        ((PowerDown(3),), "PowerDown on node node0003, which is busy"),
        ((PowerDown(0), Start(2, (0,))), "node0000 double-booked"),
    ],
)
def test_each_violation_is_named(actions, message):
    found = problems(*actions)
    assert any(message in p for p in found), found
    with pytest.raises(PlanViolation, match="plan rejected by the guard"):
        check_plan(snap(), Plan(list(actions)))


def test_reshape_onto_own_and_free_nodes_is_fine():
    assert problems(Reshape(9, (3, 0))) == []


def test_a_shrinks_nodes_go_to_a_later_start_of_the_plan_and_not_to_an_earlier_one():
    wide = Job(8, 0.0, 100.0, 3, malleable=True, min_nodes=1, max_nodes=3)
    s = snapshot(P, [J2], [(wide, 0.0, (1, 2, 3))], now=10.0)
    assert plan_problems(s, Plan([Reshape(8, (1,)), Start(2, (3,))])) == []
    before = plan_problems(s, Plan([Start(2, (3,)), Reshape(8, (1,))]))
    assert any("node0003, which is busy" in p for p in before), before
    # a node the shrink keeps is still the job's
    kept = plan_problems(s, Plan([Reshape(8, (1,)), Start(2, (1,))]))
    assert any("double-booked" in p for p in kept), kept


def test_off_node_is_not_free():
    s = snap()
    s.node_state[0] = int(NodeState.OFF)
    s.free_nodes = [1, 2]
    assert any("node0000, which is off" in p for p in plan_problems(s, Plan([Start(2, (0,))])))


def test_plan_power_estimate_is_checked_against_the_cap_in_force():
    s = snap(cap=CapSchedule.window(0.0, 20.0, 1000.0))
    assert plan_problems(s, Plan([], power_estimate_w=999.0)) == []
    assert any("exceeds the cap 1000 W" in p for p in plan_problems(s, Plan([], power_estimate_w=1001.0)))
    s.now_s = 25.0  # window over: uncapped
    assert plan_problems(s, Plan([], power_estimate_w=5000.0)) == []


def test_a_shrink_only_cluster_refuses_a_reshape_that_adds_a_node():
    big = Job(8, 0.0, 100.0, 3, malleable=True, min_nodes=1, max_nodes=3)
    s = snapshot(P, [], [(big, 0.0, (0, 1))], now=10.0, reshape_shrink_only=True)
    found = plan_problems(s, Plan([Reshape(8, (0, 1, 2))]))
    assert found == ["Reshape of job 8 adds node0002: this cluster can only shrink a running job (Slurm cannot "
                     "give it nodes it does not hold)"]
    # where the source can move jobs (the simulator), the same plan is fine
    assert plan_problems(snapshot(P, [], [(big, 0.0, (0, 1))], now=10.0), Plan([Reshape(8, (0, 1, 2))])) == []


def test_a_shrink_only_cluster_allows_a_shrink_that_keeps_the_first_node():
    big = Job(8, 0.0, 100.0, 3, malleable=True, min_nodes=1, max_nodes=3)
    s = snapshot(P, [J2], [(big, 0.0, (0, 1, 2))], now=10.0, reshape_shrink_only=True)
    assert plan_problems(s, Plan([Reshape(8, (0, 2))])) == []
    assert plan_problems(s, Plan([Reshape(8, (1, 2))])) == [
        "Reshape of job 8 drops its first node node0000, the batch host Slurm keeps when it shrinks a job"]


def test_a_cluster_that_cannot_reshape_refuses_a_shrink():
    big = Job(8, 0.0, 100.0, 3, malleable=True, min_nodes=1, max_nodes=3)
    s = snapshot(P, [], [(big, 0.0, (0, 1, 2))], now=10.0, can_reshape=False, reshape_shrink_only=True)
    assert "Reshape of job 8: this cluster cannot move a running job" in plan_problems(s, Plan([Reshape(8, (0,))]))
