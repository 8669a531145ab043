"""Which jobs are the daemon's and what the policy sees, on ``squeue``/``sinfo --json`` captured from a live Slurm.

The capture (tests/fixtures/slurm/v0.0.38-live/README.md): job 1 running on wsn1-2,
job 2 held by an admin, job 3 held by its user, job 4 pending pinned to wsn4;
wsn3 drained, wsn4 powering down.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from wattsched.daemon.slurm.backend import MARKER
from wattsched.daemon.slurm.parse import parse_nodes_json, parse_squeue_json
from wattsched.daemon.slurm.records import ClusterState, SlurmJob, SlurmNode
from wattsched.daemon.view import ClassRule, build_view, classify
from wattsched.model.job import PowerEstimate
from wattsched.model.platform import NodePowerModel, NodeState

LIVE = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "v0.0.38-live"
POWER = NodePowerModel(idle_w=100.0, busy_w=300.0, off_w=10.0, switch_on_w=150.0, switch_off_w=120.0)
NO_CAP = lambda _platform: math.inf  # noqa: E731


@pytest.fixture(scope="module")
def live() -> ClusterState:
    jobs, _ = parse_squeue_json((LIVE / "squeue.json").read_text())
    nodes, _ = parse_nodes_json((LIVE / "sinfo.json").read_text())
    return ClusterState(tuple(jobs), tuple(nodes), version="22.05.8", read_at=1795314600.0)


def ids(jobs: list[SlurmJob]) -> list[int]:
    return [j.job_id for j in jobs]


def with_job(state: ClusterState, job_id: int, **changes) -> ClusterState:
    return replace(state, jobs=tuple(replace(j, **changes) if j.job_id == job_id else j for j in state.jobs))


def with_node(state: ClusterState, name: str, **changes) -> ClusterState:
    return replace(state, nodes=tuple(replace(n, **changes) if n.name == name else n for n in state.nodes))


def view(state: ClusterState, holds=None, starts=None, partitions=(), cap_w=NO_CAP, estimator=None,
         include_adopted=False, take_user_holds=False):
    return build_view(
        state, partitions=frozenset(partitions), holds=holds or {}, starts=starts or {}, power=POWER, cap_w=cap_w,
        estimator=estimator, epoch=1, include_adopted=include_adopted, platform_cache={},
        take_user_holds=take_user_holds,
    )


# --------------------------------------------------------------------------- classification


def test_fixture_is_what_the_capture_says(live):
    assert {j.job_id: (j.state, j.held) for j in live.jobs} == {
        1: ("RUNNING", False), 2: ("PENDING", True), 3: ("PENDING", True), 4: ("PENDING", False)}
    assert [n.name for n in live.nodes] == ["wsn1", "wsn2", "wsn3", "wsn4"]


def test_holds_of_others_are_never_ours(live):
    c = classify(live, frozenset(), holds={}, starts={})
    assert ids(c.others_held) == [2, 3]  # JobHeldAdmin without our marker, JobHeldUser
    assert ids(c.adopt) == [4]
    assert ids(c.running) == [1]
    assert c.ours == [] and c.starting == []


def test_with_the_lua_gate_a_user_hold_is_taken_over_and_an_admin_hold_is_not(live):
    # the gate refuses a user's release in a managed partition while the heartbeat is
    # fresh, and holds a job its user moves in without the marker (Slurm 22.05 refuses it)
    c = classify(live, frozenset(), holds={}, starts={}, take_user_holds=True)
    assert ids(c.others_held) == [2]  # JobHeldAdmin without our marker
    assert ids(c.adopt) == [3, 4]  # 3: JobHeldUser
    assert ids(view(live, take_user_holds=True).classified.adopt) == [3, 4]
    marked = with_job(live, 3, admin_comment=MARKER)
    assert ids(classify(marked, frozenset(), holds={}, starts={}, take_user_holds=True).ours) == [3]


def test_the_marker_in_admin_comment_makes_an_admin_hold_ours(live):
    state = with_job(live, 2, admin_comment=f"site-note {MARKER}")
    c = classify(state, frozenset(), holds={}, starts={})
    assert ids(c.ours) == [2]
    assert ids(c.others_held) == [3]
    # a marker-like word is not the marker
    state = with_job(live, 2, admin_comment=f"{MARKER}x")
    assert ids(classify(state, frozenset(), holds={}, starts={}).ours) == []


def test_a_recorded_hold_makes_a_held_job_ours_but_not_an_unheld_one(live):
    c = classify(live, frozenset(), holds={2: ("daemon", ""), 4: ("daemon", "")}, starts={})
    assert ids(c.ours) == [2]  # held, and the store says we held it
    assert 4 not in ids(c.ours)  # in the store but not held: released by someone, not ours
    assert ids(c.adopt) == [4]


def test_a_released_job_awaiting_its_start_is_starting_not_adopted(live):
    c = classify(live, frozenset(), holds={}, starts={4: (("wsn4",), 1795314590.0, 0)})
    assert ids(c.starting) == [4] and c.adopt == []


def test_partitions_filter_jobs_and_nodes(live):
    state = replace(
        with_job(live, 3, partition="debug"),
        nodes=(*live.nodes, SlurmNode(name="dbg1", state="IDLE", cpus=2, partitions=("debug",))),
    )
    batch = view(state, partitions=["batch"])
    assert ids(batch.classified.others_held) == [2]  # job 3 is in debug now: not managed
    assert batch.node_names == ["wsn1", "wsn2", "wsn3", "wsn4"]
    debug = view(state, partitions=["debug"])
    assert ids(debug.classified.others_held) == [3]
    assert debug.classified.running == [] and debug.classified.adopt == []
    assert debug.node_names == ["dbg1"] and debug.snapshot.free_nodes == [0]
    # a job submitted to several partitions is managed if one of them is
    multi = with_job(state, 4, partition="other,debug")
    assert ids(view(multi, partitions=["debug"]).classified.adopt) == [4]
    everything = view(state)
    assert len(everything.node_names) == 5 and ids(everything.classified.others_held) == [2, 3]


# --------------------------------------------------------------------------- the snapshot


def test_node_states_in_the_snapshot(live):
    snap = view(live).snapshot
    assert snap.node_state == [NodeState.BUSY, NodeState.BUSY, NodeState.DRAINED, NodeState.SWITCHING_OFF]
    assert snap.free_nodes == []
    assert list(snap.running) == [1] and snap.running[1].nodes == (0, 1)
    assert snap.running[1].start_s == 1795314538.0
    assert snap.running[1].expected_end_s == 1795314538.0 + 600.0
    assert snap.pending == {}  # nothing of ours; job 4 only with include_adopted
    assert snap.now_s == 1795314600.0


def test_free_nodes_exclude_busy_drained_and_switching_ones(live):
    state = with_node(live, "wsn4", flags=frozenset())  # power-down finished... and came back idle
    state = replace(state, nodes=(*state.nodes, SlurmNode(name="wsn5", state="IDLE", cpus=2, partitions=("batch",)),
                                  SlurmNode(name="wsn6", state="DOWN", cpus=2, partitions=("batch",)),
                                  SlurmNode(name="wsn7", state="IDLE", flags=frozenset({"POWERED_DOWN"}), cpus=2,
                                            partitions=("batch",))))
    snap = view(state).snapshot
    assert snap.node_state[3:] == [NodeState.IDLE, NodeState.IDLE, NodeState.DOWN, NodeState.OFF]
    assert sorted(snap.free_nodes) == [3, 4]


def test_a_node_being_resumed_is_switching_on_though_its_slurmd_does_not_answer_yet(live):
    # Slurm 22.05 right after `scontrol update state=power_up`, before the resume program's slurmd registers:
    # IDLE + NOT_RESPONDING + POWERING_UP. Read as down, a budget policy would wake another node every cycle.
    def node(name, state, *flags):
        return SlurmNode(name=name, state=state, flags=frozenset(flags), cpus=2, partitions=("batch",))

    state = replace(live, nodes=(*live.nodes, node("wsn5", "IDLE", "NOT_RESPONDING", "POWERING_UP"),
                                 node("wsn6", "IDLE", "NOT_RESPONDING"), node("wsn7", "DOWN", "POWERING_UP")))
    snap = view(state).snapshot
    assert snap.node_state[4:] == [NodeState.SWITCHING_ON, NodeState.DOWN, NodeState.DOWN]
    assert 4 not in snap.free_nodes


def test_nodes_are_in_natural_order():
    nodes = tuple(SlurmNode(name=n, state="IDLE", cpus=1, partitions=("b",)) for n in ("n10", "n2", "n1"))
    v = view(ClusterState((), nodes, read_at=1.0))
    assert v.node_names == ["n1", "n2", "n10"]


def test_adopted_jobs_are_queued_only_when_asked(live):
    state = with_job(live, 2, admin_comment=MARKER)
    assert list(view(state).snapshot.pending) == [2]
    assert list(view(state, include_adopted=True).snapshot.pending) == [2, 4]
    job = view(state).snapshot.pending[2]
    assert (job.nodes, job.walltime_s, job.procs) == (1, 1800.0, 1)


def test_platform_power_of_the_live_capture(live):
    snap = view(live).snapshot
    # job 1 on two nodes at busy power, wsn3 drained (idle power), wsn4 switching off
    assert snap.jobs_power_w == 2 * 300.0
    assert snap.platform_power_w == 2 * 300.0 + 100.0 + 120.0
    assert snap.running[1].power_w == 600.0


def test_a_released_job_counts_as_running_on_its_planned_nodes(live):
    state = with_node(live, "wsn4", flags=frozenset())
    before = view(state).snapshot
    assert before.free_nodes == [3]
    v = view(state, starts={4: (("wsn4",), 1795314590.0, 1)})
    snap = v.snapshot
    assert ids(v.classified.starting) == [4]
    assert snap.free_nodes == [] and snap.node_state[3] == NodeState.BUSY
    assert set(snap.running) == {1, 4}
    assert snap.running[4].nodes == (3,) and snap.running[4].start_s == 1795314590.0
    assert snap.running[4].expected_end_s == 1795314590.0 + 300.0
    assert snap.platform_power_w == before.platform_power_w - 100.0 + 300.0  # idle wsn4 -> busy
    assert snap.jobs_power_w == 900.0


def test_estimates_set_running_power_and_are_attached(live):
    state = with_job(live, 2, admin_comment=MARKER)
    asked = []

    def estimator(jobs):
        asked.extend(j.id for j in jobs)
        return [PowerEstimate(250.0, 280.0, 10.0) for _ in jobs]

    snap = view(state, estimator=estimator).snapshot
    assert sorted(asked) == [1, 2]
    assert snap.estimates[2] == PowerEstimate(250.0, 280.0, 10.0)
    assert snap.running[1].power_w == 500.0
    assert snap.platform_power_w == 500.0 + 100.0 + 120.0


def test_cap_is_resolved_on_the_managed_platform(live):
    seen = []

    def cap(platform):
        seen.append(len(platform))
        return 1234.0

    snap = view(live, cap_w=cap).snapshot
    assert seen == [4] and snap.cap_w == 1234.0


def test_a_draining_node_running_a_job_is_not_counted_twice(live):
    # wsn2 drained while job 1 still runs on it (Slurm: ALLOCATED+DRAIN, "draining")
    state = with_node(live, "wsn2", flags=frozenset({"DRAIN"}))
    snap = view(state).snapshot
    assert snap.node_state[1] == NodeState.DRAINED and 1 not in snap.free_nodes
    assert snap.jobs_power_w == 600.0
    # two busy nodes (job 1), wsn3 drained idle, wsn4 switching off: the same as before the drain
    assert snap.platform_power_w == 2 * 300.0 + 100.0 + 120.0


# --------------------------------------------------------------------------- application classes


def test_jobs_take_the_configured_class_unless_their_comment_names_one(live):
    state = with_job(with_job(live, 2, admin_comment=MARKER, comment="wattsched:class=memory"),
                     3, admin_comment=MARKER)
    snap = build_view(state, partitions=frozenset(), holds={2: 0, 3: 0}, starts={}, power=POWER, cap_w=NO_CAP,
                      estimator=None, epoch=1, include_adopted=False, platform_cache={},
                      default_class="cpu").snapshot
    assert {i: j.app_class for i, j in snap.pending.items()} == {2: "memory", 3: "cpu"}
    assert snap.running[1].job.app_class == "cpu"
    # the class gives the job its response model (dvfs slows only jobs that have one)
    assert snap.response_for(snap.pending[3]) is snap.platform.response_classes["cpu"]
    # without a configured class a job has none, as before
    assert view(state, holds={2: 0, 3: 0}).snapshot.pending[3].app_class == ""


def _declaring(live):
    """Job 1 (running, alice, account climate) declares memory; 2 (bob, climate) memory; 3 (bob, physics) mixed;
    the configured class for jobs that declare none is tested above."""
    state = with_job(live, 1, user="alice", account="climate", comment="wattsched:class=memory")
    state = with_job(state, 2, user="bob", account="climate", admin_comment=MARKER,
                     comment="run 7 wattsched:class=memory")
    return with_job(state, 3, user="bob", account="physics", admin_comment=MARKER, comment="wattsched:class=mixed")


def _classes(state, rule):
    snap = build_view(state, partitions=frozenset(), holds={2: 0, 3: 0}, starts={}, power=POWER,
                      cap_w=NO_CAP, estimator=None, epoch=1, include_adopted=False, platform_cache={},
                      default_class=rule).snapshot
    running = {i: r.job.app_class for i, r in snap.running.items()}
    return {**{i: j.app_class for i, j in snap.pending.items()}, **running}


def test_a_declared_class_is_used_as_the_site_policy_says(live, caplog):
    state = _declaring(live)
    # trusted (the default): as declared, whoever declares it
    assert _classes(state, ClassRule("cpu")) == {1: "memory", 2: "memory", 3: "mixed"}
    assert _classes(state, ClassRule("cpu", "trusted")) == {1: "memory", 2: "memory", 3: "mixed"}
    # ignored: the configured class for every job
    assert _classes(state, ClassRule("cpu", "ignored")) == {1: "cpu", 2: "cpu", 3: "cpu"}
    # validated: alice may declare memory; the climate account may declare memory, not mixed
    rule = ClassRule("cpu", "validated", users={"alice": frozenset({"memory"})},
                     accounts={"climate": frozenset({"memory"})})
    assert _classes(state, rule) == {1: "memory", 2: "memory", 3: "cpu"}
    only_alice = ClassRule("", "validated", users={"alice": frozenset({"memory", "mixed"})})
    assert _classes(state, only_alice) == {1: "memory", 2: "", 3: ""}


def test_a_declared_class_not_used_is_logged_once_per_job(live, caplog):
    state = _declaring(live)
    rule = ClassRule("cpu", "validated", accounts={"climate": frozenset({"memory"})})
    with caplog.at_level("WARNING", logger="wattsched.daemon"):
        for _ in range(3):
            _classes(state, rule)
    told = [r.getMessage() for r in caplog.records if "declared class" in r.getMessage()]
    assert told == ["job 3 (user bob): declared class 'mixed' not used (job_class_allowed lists it neither for "
                    "user 'bob' nor for account 'physics'); it gets 'cpu'"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="wattsched.daemon"):
        _classes(state, ClassRule("", "ignored"))
    assert sorted(r.getMessage().split(" (")[0] for r in caplog.records) == ["job 1", "job 2", "job 3"]
    assert "job_class_from_comment is ignored); it gets no class" in caplog.records[0].getMessage()
    # a job gone from Slurm is forgotten: the set of jobs logged for stays bounded
    gone = replace(state, jobs=tuple(j for j in state.jobs if j.job_id != 3))
    _classes(gone, rule)
    assert rule._told == set()


def test_the_job_cache_reuses_a_queued_job_only_while_slurm_reports_it_unchanged(live):
    state = with_job(with_job(live, 2, admin_comment=MARKER), 3, admin_comment=MARKER)
    cache, platforms = {}, {}

    def pending(state, default_class=""):
        return build_view(state, partitions=frozenset(), holds={2: 0, 3: 0}, starts={}, power=POWER,
                          cap_w=NO_CAP, estimator=None, epoch=1, include_adopted=False, platform_cache=platforms,
                          default_class=default_class, job_cache=cache).snapshot.pending

    first = pending(state)
    again = pending(state)  # the same records (a backend reuses a record it decoded unchanged)
    assert again[2] is first[2] and again[3] is first[3]
    changed = with_job(state, 3, time_limit_s=7200.0)  # a new record for job 3: its job is built again
    third = pending(changed)
    assert third[2] is first[2] and third[3] is not first[3] and third[3].walltime_s == 7200.0
    assert pending(changed, default_class="memory")[2].app_class == "memory"  # another class: built again
    assert set(cache) == {2, 3}
    # the same records with the cache give the very jobs a view without it gives
    assert pending(changed) == view(changed, holds={2: 0, 3: 0}).snapshot.pending


@pytest.mark.parametrize("predicted", [False, True])
def test_the_running_totals_and_ends_kept_by_the_ledger_are_those_of_the_running_jobs(live, predicted):
    # The ledger keeps them as it observes the running jobs (as the engine does when it starts them); the view
    # hands them on as they are, so they must be what the running jobs and their estimates add up to.
    state = with_node(with_job(live, 2, admin_comment=MARKER), "wsn4", flags=frozenset())

    def estimator(jobs):
        return [PowerEstimate(200.0 + j.id, 260.0 + j.id, 5.0 * j.id) for j in jobs]

    snap = view(state, starts={4: (("wsn4",), 1795314590.0, 1)}, estimator=estimator if predicted else None).snapshot
    assert set(snap.running) == {1, 4}
    fresh = replace(snap, running_estimate=None, ends=None, queue_index=None, end_table=None)
    assert list(snap.running_estimate) == fresh._running_totals()
    assert snap.ends == sorted((r.expected_end_s, len(r.nodes), jid) for jid, r in snap.running.items())
    m, x, v = snap.running_estimate
    if predicted:  # job 1 on two nodes, job 4 on one, at their predictions
        assert (m, x, v) == (2 * 201.0 + 204.0, 2 * 261.0 + 264.0, (2 * 5.0) ** 2 + 20.0 ** 2)
    else:  # at the nodes' busy power
        assert (m, x) == (3 * 300.0, 3 * 300.0)
    built = snap.with_indexes()
    assert built.end_table is not None and built.queue_index is not None
