"""Run directories: exact round trip of the tables, and the self-contained HTML report."""

import html
import json
import math

import numpy as np
import pytest

from wattsched.errors import WattschedError
from wattsched.model.platform import Platform
from wattsched.sim.metrics import summarize, summary_rows
from wattsched.sim.report import PLOTS, load_run, write_html_report, write_run
from wattsched.sim.result import JOB_COLUMNS, TIMELINE_COLUMNS, SimResult

INF = math.inf
NAN = math.nan


def small_result() -> SimResult:
    # Floats that print long (0.1 + 0.2) check the exact reload; job 3 never started.
    jobs = {
        "id": np.array([1, 2, 3], dtype=np.int64),
        "user": np.array(["alice", "bob, jr", "c\"d"], dtype=object),
        "submit_s": np.array([0.0, 0.1 + 0.2, 5.0]),
        "start_s": np.array([0.0, 10.0, NAN]),
        "end_s": np.array([30.0, 12.5, NAN]),
        "wait_s": np.array([0.0, 10.0 - (0.1 + 0.2), NAN]),
        "runtime_s": np.array([30.0, 2.5, NAN]),
        "walltime_s": np.array([60.0, 60.0, 60.0]),
        "nodes": np.array([1, 1, 2], dtype=np.int64),
        "energy_j": np.array([4000.0, 1.0 / 3.0, 0.0]),
        "wasted_j": np.array([0.0, 0.0, 0.0]),
        "wasted_node_s": np.array([0.0, 0.0, 0.0]),
        "evictions": np.array([0, 0, 0], dtype=np.int64),
        "state": np.array(["COMPLETED", "COMPLETED", "PENDING"], dtype=object),
        "work_s": np.array([30.0, 0.1 + 0.2 + 2.0, NAN]),
    }
    timeline = {
        "t_s": np.array([0.0, 5.0, 10.0, 30.0]),
        "power_w": np.array([100.0, 100.0, 300.0, 300.0]),
        "cap_w": np.array([INF, 200.0, 200.0, 200.0]),
        "busy_nodes": np.array([1.0, 1.0, 2.0, 0.0]),
        "off_nodes": np.array([0.0, 0.0, 0.0, 0.0]),
        "pending_jobs": np.array([1.0, 1.0, 1.0, 1.0]),
    }
    info = {"trace": "tiny.swf", "policy": "easy", "params": {"depth": 3}, "seed": 7,
            "platform": "cluster", "nodes": 2, "cap": [[5.0, 200.0, "cap <b>"]]}
    return SimResult(jobs, timeline, Platform.homogeneous_cluster(2), info)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    result = small_result()
    out = tmp_path_factory.mktemp("run")
    write_run(result, out, summarize(result))
    return out


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind in "fc":
        return np.array_equal(a, b, equal_nan=True)
    return np.array_equal(a.astype(str), np.asarray(b).astype(str))


def test_round_trip_is_exact(run_dir):
    original = small_result()
    run, summary = load_run(run_dir)
    assert set(run.jobs) == set(JOB_COLUMNS) and set(run.timeline) == set(TIMELINE_COLUMNS)
    for col in JOB_COLUMNS:
        assert same(np.asarray(run.jobs[col]), original.jobs[col]), col
    for col in TIMELINE_COLUMNS:
        assert same(np.asarray(run.timeline[col]), original.timeline[col]), col
    assert run.jobs["submit_s"][1] == 0.1 + 0.2  # bit for bit, not just close
    assert run.info["trace"] == "tiny.swf" and run.info["seed"] == 7
    assert summary == json.loads(json.dumps(summarize(original)))
    # The reloaded run gives the same metrics as the original.
    assert summarize(run) == summarize(original)


def test_run_directory_files(run_dir):
    for name in ("jobs.csv", "timeline.csv", "summary.json", *PLOTS):
        assert (run_dir / name).is_file(), name
    doc = json.loads((run_dir / "summary.json").read_text())
    assert doc["summary"]["energy_above_cap_j"] == 2000.0
    assert doc["info"]["policy"] == "easy"


def test_html_report_is_self_contained_and_shows_the_summary(run_dir):
    path = write_html_report(run_dir)
    assert path == run_dir / "report.html"
    page = path.read_text()
    assert page.count('src="data:image/png;base64,') == len(PLOTS)
    assert "<img" in page and 'src="power.png"' not in page  # nothing refers to a side file
    _, summary = load_run(run_dir)
    for _, label, value in summary_rows(summary):
        assert html.escape(value) in page, (label, value)
    assert "tiny.swf" in page and "easy" in page
    assert "<b>" not in page  # text from the run is escaped


def test_missing_plot_is_regenerated(tmp_path):
    result = small_result()
    write_run(result, tmp_path, summarize(result), plots=False)
    assert not any((tmp_path / p).exists() for p in PLOTS)
    page = write_html_report(tmp_path).read_text()
    for p in PLOTS:
        assert (tmp_path / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.count("data:image/png;base64,") == len(PLOTS)


def test_not_a_run_directory(tmp_path):
    with pytest.raises(WattschedError, match="not a run directory"):
        load_run(tmp_path)


def test_run_directory_without_work_s_still_loads(tmp_path):
    # A run directory written before jobs had `work_s`: the column reads as NaN.
    result = small_result()
    del result.jobs["work_s"]
    summary = summarize(result)
    write_run(result, tmp_path, summary, plots=False)
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "jobs.parquet").drop(["work_s"])
    pq.write_table(table, tmp_path / "jobs.parquet")
    run, _ = load_run(tmp_path)
    assert np.isnan(run.jobs["work_s"]).all()
    assert list(run.jobs["id"]) == [1, 2, 3]


def test_every_field_of_the_run_reaches_the_page_escaped(tmp_path):
    """Names from the trace, the platform, the policy, its params and the verdicts are text, never markup."""
    script, img = "<script>alert(1)</script>", '"><img src=x onerror=alert(2)>'
    result = small_result()
    result.jobs["user"] = np.array([script, img, "carol"], dtype=object)
    result.info.update(trace=f"w{script}.csv", policy=f"easy{img}", params={"depth": script},
                       platform=f"pl{img}", predictor=f"pr{script}", notes=[f"note {img}"])
    write_run(result, tmp_path, summarize(result), plots=False)
    from wattsched.sim.verdicts import verdicts as judge

    run, summary = load_run(tmp_path)
    verdicts = judge(summary, run.info, run.timeline, run.jobs)
    verdicts["queue"]["text"] += f" {script}"
    verdicts.setdefault("warnings", []).append({"kind": "x onmouseover=alert(3)", "message": f"warned {img}"})
    page = write_html_report(tmp_path, verdicts=verdicts).read_text()
    assert script not in page and img not in page
    assert "onerror=alert(2)>" not in page
    assert "<li class=warn data-kind=x onmouseover" not in page  # an unquoted attribute would take a second one
    for shown in (f"w{script}.csv", f"easy{img}", f"pl{img}", f"pr{script}", f"note {img}", f"warned {img}"):
        assert html.escape(shown) in page, shown
