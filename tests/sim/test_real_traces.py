"""The six real PWA traces in ``shared/traces``: what the reader makes of them, and full replays.

Expected numbers come from the "Data quirks" table of ``shared/traces/SOURCES.md``
(measured on the raw files). That table counts job *lines*; the reader's counts
are of jobs it *keeps*, so where cleaning drops jobs the two differ by the
dropped ones. This happens only on LLNL-Atlas, whose 4,571 jobs without a
processor count all have run time 0, and 1,939 of them also lack a requested time:

* run time = 0:   7,178 lines = 2,607 kept + 4,571 dropped
* req. time missing: 8,233 lines = 6,294 kept (walltime from runtime) + 1,939 dropped

Loading all six takes about 3 s (RICC, 447,794 jobs, about 1.5 s). The
replays are marked ``slow``: each trace except RICC under ``fcfs`` and
``easy`` (about 12 s in all), and RICC under ``easy`` only (about 20 s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from wattsched.config.platform import platform_from_procs
from wattsched.policies import make_policy
from wattsched.sim.engine import Engine, EngineOptions
from wattsched.workload.swf import read_swf, trace_info


@dataclass(frozen=True)
class Expected:
    file: str
    # SOURCES.md "Staged traces" table
    lines: int
    max_procs: int
    max_nodes: int
    span_days: float
    offered_load: float
    # SOURCES.md "Data quirks" table (job lines of the raw file)
    req_time_missing: int
    zero_runtime: int
    runtime_exceeds_walltime: int
    procs_missing: int
    status_values: frozenset[int]
    # what the reader keeps of them (differs only where cleaning drops jobs; see the module docstring)
    kept_zero_runtime: int | None = None
    kept_req_time_missing: int | None = None

    @property
    def kept(self) -> int:
        return self.lines - self.procs_missing


TRACES = {
    "NASA-iPSC": Expected(
        "NASA-iPSC-1993-3.1-cln.swf.gz", 18_239, 128, 128, 92.0, 0.47,
        req_time_missing=18_239, zero_runtime=173, runtime_exceeds_walltime=0, procs_missing=0,
        status_values=frozenset({-1}),
    ),
    "KTH-SP2": Expected(
        "KTH-SP2-1996-2.1-cln.swf", 28_476, 100, 100, 332.9, 0.70,
        req_time_missing=0, zero_runtime=8, runtime_exceeds_walltime=475, procs_missing=1,
        status_values=frozenset({0, 1}),
    ),
    "SDSC-Par": Expected(
        "SDSC-Par-1996-3.1-cln.swf", 32_135, 400, 400, 370.5, 0.75,
        req_time_missing=32_135, zero_runtime=7, runtime_exceeds_walltime=0, procs_missing=0,
        status_values=frozenset({0, 1}),
    ),
    "OSC-Clust": Expected(
        "OSC-Clust-2000-3.1-cln.swf.gz", 36_097, 178, 57, 677.1, 0.13,
        req_time_missing=36_097, zero_runtime=505, runtime_exceeds_walltime=0, procs_missing=0,
        status_values=frozenset({1}),
    ),
    "LLNL-Atlas": Expected(
        "LLNL-Atlas-2006-2.1-cln.swf.gz", 43_778, 9_216, 1_152, 193.0, 0.70,
        req_time_missing=8_233, zero_runtime=7_178, runtime_exceeds_walltime=3_351, procs_missing=4_571,
        status_values=frozenset({0, 1, 5}),
        kept_zero_runtime=7_178 - 4_571, kept_req_time_missing=8_233 - 1_939,
    ),
    "RICC": Expected(
        "RICC-2010-2.swf.gz", 447_794, 8_192, 1_024, 153.0, 0.89,
        req_time_missing=2, zero_runtime=10, runtime_exceeds_walltime=7_092, procs_missing=0,
        status_values=frozenset({1, 5}),
    ),
}
NO_REQUESTED_TIMES = ("NASA-iPSC", "SDSC-Par", "OSC-Clust")


def load(traces_dir, name: str):
    return read_swf(traces_dir / TRACES[name].file)


# ---------------------------------------------------------------- loading


@pytest.mark.parametrize("name", list(TRACES))
def test_trace_loads_with_the_documented_counts(traces_dir, name):
    exp = TRACES[name]
    w = load(traces_dir, name)
    assert (w.max_procs, w.max_nodes) == (exp.max_procs, exp.max_nodes)

    n = zero = over = from_runtime = 0
    statuses: set[int] = set()
    ids: set[int] = set()
    last = 0.0
    for job in w.jobs:
        n += 1
        assert job.submit_s >= last  # sorted, rebased: never negative
        last = job.submit_s
        assert 0 < job.procs <= exp.max_procs and job.nodes == job.procs
        assert job.runtime_s >= 0 and job.walltime_s > 0
        ids.add(job.id)
        statuses.add(job.status)
        zero += job.runtime_s == 0
        over += job.runtime_s > job.walltime_s
        from_runtime += job.walltime_s == (job.runtime_s if job.runtime_s > 0 else 1.0)
    assert len(ids) == n  # job ids are unique: the engine needs that

    kept_zero = exp.zero_runtime if exp.kept_zero_runtime is None else exp.kept_zero_runtime
    kept_no_req = exp.req_time_missing if exp.kept_req_time_missing is None else exp.kept_req_time_missing
    r = w.report
    assert r.read == exp.lines
    assert r.kept == n == exp.kept
    assert r.skipped_lines == 0
    assert r.dropped == ({"procs_missing": exp.procs_missing} if exp.procs_missing else {})
    adjusted = {}
    if kept_no_req:
        adjusted["walltime_from_runtime"] = kept_no_req
    if exp.runtime_exceeds_walltime:
        adjusted["runtime_exceeds_walltime"] = exp.runtime_exceeds_walltime
    assert r.adjusted == adjusted
    assert over == exp.runtime_exceeds_walltime
    assert zero == kept_zero
    assert statuses == exp.status_values
    if name in NO_REQUESTED_TIMES:
        assert from_runtime == n  # every job's walltime is its runtime (1 s for zero-runtime jobs)
    else:
        assert from_runtime >= kept_no_req


@pytest.mark.parametrize("name", list(TRACES))
def test_trace_info_matches_sources_md(traces_dir, name):
    exp = TRACES[name]
    info = trace_info(load(traces_dir, name))
    assert info["jobs"] == exp.kept
    assert info["span_days"] == pytest.approx(exp.span_days, abs=0.05)
    assert info["offered_load"] == pytest.approx(exp.offered_load, abs=0.005)
    assert info["runtime_exceeds_walltime"] == exp.runtime_exceeds_walltime


def test_kth_is_rebased_to_its_first_job(traces_dir):
    w = load(traces_dir, "KTH-SP2")
    first = next(w.jobs)
    # The cleaned log dropped jobs <= 14: job 15 is first, submitted ~600,000 s after UnixStartTime.
    assert (first.id, first.submit_s) == (15, 0.0)
    raw_submit = w.origin_unix_s - int(w.header["UnixStartTime"])
    assert raw_submit == 599_850
    assert w.origin_unix_s == 843_480_031 + 599_850


def test_only_nasa_has_the_start_time_note(traces_dir):
    for name in TRACES:
        notes = load(traces_dir, name).notes
        if name == "NASA-iPSC":
            assert len(notes) == 1 and "submit times are start times" in notes[0]
        else:
            assert notes == [], name


def test_ricc_header_has_no_version_line(traces_dir):
    w = load(traces_dir, "RICC")
    assert "Version" not in w.header
    assert w.header["Computer"] == "Fujitsu RX200S5 Cluster"
    assert int(w.header["MaxJobs"]) == TRACES["RICC"].lines


# ---------------------------------------------------------------- replays


def truth(traces_dir, name: str) -> dict[str, np.ndarray]:
    """The trace's jobs as arrays sorted by id, the order of ``SimResult.jobs``."""
    rows = [(j.id, j.submit_s, j.runtime_s, j.walltime_s, j.nodes) for j in load(traces_dir, name).jobs]
    a = np.array(rows, dtype=np.float64)
    a = a[np.argsort(a[:, 0], kind="stable")]
    return dict(zip(("id", "submit_s", "runtime_s", "walltime_s", "nodes"), a.T))


def replay(traces_dir, name: str, policy: str):
    w = load(traces_dir, name)
    platform = platform_from_procs(w.max_procs)
    return Engine(platform, w, make_policy(policy), options=EngineOptions(kill_at_walltime=True)).run()


def check_invariants(result, t: dict[str, np.ndarray], name: str) -> None:
    exp = TRACES[name]
    jobs, tl = result.jobs, result.timeline
    n_nodes = len(result.platform)
    assert n_nodes == exp.max_procs
    assert result.info["submitted"] == exp.kept and "not_submitted" not in result.info
    assert result.info["cleaning"]["kept"] == exp.kept

    # every kept job ran to an end
    assert result.n_jobs == exp.kept
    np.testing.assert_array_equal(jobs["id"], t["id"])
    states = set(jobs["state"])
    assert states <= {"COMPLETED", "TIMEOUT"}, states
    assert np.isfinite(jobs["start_s"]).all() and np.isfinite(jobs["end_s"]).all()

    # no job starts before it is submitted
    np.testing.assert_array_equal(jobs["submit_s"], t["submit_s"])
    assert (jobs["start_s"] >= jobs["submit_s"]).all()
    assert (jobs["wait_s"] >= 0).all()

    # kill at walltime: TIMEOUT exactly for the jobs that run longer than they asked
    over = t["runtime_s"] > t["walltime_s"]
    timeout = jobs["state"] == "TIMEOUT"
    assert int(timeout.sum()) == int(over.sum()) == exp.runtime_exceeds_walltime
    np.testing.assert_array_equal(timeout, over)
    np.testing.assert_allclose(jobs["runtime_s"], np.minimum(t["runtime_s"], t["walltime_s"]), rtol=1e-9, atol=1e-6)
    np.testing.assert_array_equal(jobs["nodes"], t["nodes"])

    # node usage never exceeds the machine
    assert (np.diff(tl["t_s"]) >= 0).all()
    assert tl["busy_nodes"].min() >= 0
    assert tl["busy_nodes"].max() <= n_nodes

    # energy is the integral of the timeline power (piecewise constant, last row marks the end)
    integral = math.fsum(tl["power_w"][:-1] * np.diff(tl["t_s"]))
    assert result.info["energy_j"] == pytest.approx(integral, rel=1e-9)
    assert result.info["energy_j"] == pytest.approx(sum(result.info["energy_j_by_state"].values()), rel=1e-9)
    idle_w = result.platform.nodes[0].power.idle_w
    assert result.info["energy_j"] >= idle_w * n_nodes * (tl["t_s"][-1] - tl["t_s"][0]) * (1 - 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in TRACES if n != "RICC"])
def test_replay_fcfs_and_easy(traces_dir, name):
    t = truth(traces_dir, name)
    mean_wait = {}
    for policy in ("fcfs", "easy"):
        result = replay(traces_dir, name, policy)
        check_invariants(result, t, name)
        mean_wait[policy] = float(result.jobs["wait_s"].mean())
    assert mean_wait["easy"] <= mean_wait["fcfs"], mean_wait


@pytest.mark.slow
def test_replay_ricc_easy(traces_dir):
    name = "RICC"
    t = truth(traces_dir, name)
    result = replay(traces_dir, name, "easy")
    check_invariants(result, t, name)
