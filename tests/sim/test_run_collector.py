"""Runs read their trace without the cyclic collector's passes, keep the jobs out of them, and leave none frozen."""

from __future__ import annotations

import gc

import pytest

from wattsched.cli import main
from wattsched.sim.collector import frozen, read_whole

SWF = """; MaxProcs: 8
1 100 0 50 4 -1 -1 4 60 -1 1 1 1 -1 1 -1 -1 -1
2 110 0 30 8 -1 -1 8 40 -1 1 2 1 -1 1 -1 -1 -1
3 120 0 10 2 -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1
"""


class Tracked:
    """An object the collector tracks, as it tracks a trace's jobs."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


@pytest.fixture
def collections():
    """The generations of the collections that start while the test runs."""
    seen: list[int] = []

    def count(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    yield seen
    gc.callbacks.remove(count)


def test_jobs_are_read_without_collections_then_frozen(collections):
    assert gc.isenabled()
    list(Tracked([i]) for i in range(20_000))
    assert collections, "reading this many objects with the collector on runs collections"
    collections.clear()
    before = gc.get_freeze_count()
    try:
        jobs = read_whole(Tracked([i]) for i in range(20_000))
        assert collections == []
        assert len(jobs) == 20_000 and jobs[-1].value == [19_999]
        assert gc.get_freeze_count() >= before + 20_000  # the jobs, their lists and the rest alive
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_a_list_is_taken_as_it_is():
    jobs = [Tracked(1)]
    before = gc.get_freeze_count()
    assert read_whole(jobs) is jobs
    assert gc.get_freeze_count() == before


def test_the_collector_stays_off_when_it_was_off(collections):
    gc.disable()
    try:
        read_whole(Tracked(i) for i in range(10))
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_run_leaves_nothing_frozen_and_the_collector_on(tmp_path):
    trace = tmp_path / "tiny.swf"
    trace.write_text(SWF)
    assert gc.get_freeze_count() == 0
    assert main(["simulate", "--trace", str(trace), "--out", str(tmp_path / "run"), "-q", "--no-report"]) == 0
    assert (tmp_path / "run" / "workload.csv.gz").is_file()  # the whole-trace path: the workload is written
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()


def test_frozen_unfreezes_what_it_froze_and_what_was_read_in_it():
    assert gc.get_freeze_count() == 0
    with frozen():
        assert gc.get_freeze_count() > 0
        read_whole(Tracked(i) for i in range(100))
    assert gc.get_freeze_count() == 0


def test_a_sweep_run_leaves_nothing_frozen(tmp_path):
    from wattsched.sweep.execute import run_one
    from wattsched.sweep.expand import expand
    from wattsched.sweep.spec import load_sweep

    trace = tmp_path / "tiny.swf"
    trace.write_text(SWF)
    path = tmp_path / "sweep.yaml"
    path.write_text(f"kind: sweep\nname: tiny\nbase: {{procs: 8}}\naxes:\n  traces: [{str(trace)!r}]\n"
                    "  policies: [easy, fcfs]\n")
    runs = expand(load_sweep(path))
    assert len(runs) == 2
    for run in runs:
        row = run_one(run.spec)
        assert row["status"] == "ok" and row["n_jobs"] == 3
        assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_imports_are_made_without_collections_then_frozen(collections):
    from wattsched.sim.collector import imports_paused

    before = gc.get_freeze_count()
    try:
        with imports_paused():
            made = [Tracked([i]) for i in range(20_000)]  # as many objects as an import of matplotlib makes
        assert collections == []
        assert gc.isenabled()
        assert gc.get_freeze_count() >= before + 20_000
        assert made[-1].value == [19_999]
    finally:
        gc.unfreeze()


def test_sparse_collections_still_find_cycles_and_restore_the_thresholds(collections):
    import threading

    from wattsched.sim.collector import sparse

    before = gc.get_threshold()
    with sparse(5_000):
        assert gc.get_threshold() == (5_000, *before[1:])
        for _ in range(2_000):  # a cycle per step, as a policy might make: fewer than 5,000 new objects
            a = Tracked(None)
            a.value = a
        assert collections == []
        for _ in range(20_000):
            a = Tracked(None)
            a.value = a
        assert collections, "past the threshold, the collector runs (and frees the cycles)"
        with sparse(100):  # nested, and never lowered
            assert gc.get_threshold()[0] == 5_000
        assert gc.get_threshold()[0] == 5_000
    assert gc.get_threshold() == before
    # runs in threads: the thresholds are restored once the last one leaves, whatever the order
    entered, leave = threading.Barrier(3), threading.Event()

    def run():
        with sparse(7_000):
            entered.wait()
            leave.wait()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    entered.wait()
    assert gc.get_threshold()[0] == 7_000
    leave.set()
    for t in threads:
        t.join()
    assert gc.get_threshold() == before


def test_a_run_leaves_the_collector_thresholds_as_they_were(tmp_path):
    trace = tmp_path / "tiny.swf"
    trace.write_text(SWF)
    before = gc.get_threshold()
    assert main(["simulate", "--trace", str(trace), "--out", str(tmp_path / "run"), "-q", "--no-report"]) == 0
    assert gc.get_threshold() == before
