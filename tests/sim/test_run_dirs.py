"""Run directories are written whole or not at all: failures, Ctrl-C and SIGTERM leave the previous run as it was."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builders import TINY_SWF, read_summary, tiny_trace
from wattsched.cli import main
from wattsched.sim.report import MARKER, load_run, write_html_report


@pytest.fixture
def trace(tmp_path):
    """The tiny four-job trace, written to this test's directory."""
    return tiny_trace(tmp_path)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def leftovers(parent: Path) -> list[str]:
    return [p.name for p in parent.iterdir() if ".partial-" in p.name or ".old-" in p.name]


@pytest.fixture
def previous(trace, tmp_path):
    """A completed run directory and its bytes."""
    out = tmp_path / "runs" / "run"
    assert main(["simulate", "--trace", str(trace), "--out", str(out), "-q", "--seed", "1"]) == 0
    assert (out / MARKER).is_file()
    return out, snapshot(out)


def test_a_completed_run_has_its_marker_and_row_counts(previous):
    out, files = previous
    marker = json.loads(files[MARKER])
    doc = json.loads(files["summary.json"])
    assert marker["jobs_rows"] == doc["info"]["tables"]["jobs_rows"] == 4
    assert marker["timeline_rows"] == doc["info"]["tables"]["timeline_rows"] > 1
    assert {"jobs.parquet", "jobs.csv", "timeline.parquet", "timeline.csv", "report.html"} <= set(files)
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask  # a directory as mkdir makes it, not a private temp dir
    assert leftovers(out.parent) == []


def test_failed_run_leaves_the_previous_run_untouched(previous, tmp_path, capsys):
    out, files = previous
    bad = tmp_path / "bad.swf"
    bad.write_text(TINY_SWF + "5 140 0 10 two -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1\n")  # fails as the stream reaches it
    assert main(["simulate", "--trace", str(bad), "--out", str(out), "-q", "--seed", "2"]) == 2
    err = capsys.readouterr().err
    assert f"{out}: the run failed; the previous run there is untouched" in err
    assert "bad.swf:8" in err
    assert snapshot(out) == files
    assert leftovers(out.parent) == []


def test_interrupted_run_leaves_the_previous_run_untouched(previous, trace, monkeypatch, capsys):
    out, files = previous
    from wattsched.sim import engine

    class Interrupted:  # the compiled Engine is a final type: replaced whole, not patched
        def __init__(self, *args, **kwargs):
            pass

        def run(self):
            raise KeyboardInterrupt

    monkeypatch.setattr(engine, "Engine", Interrupted)
    assert main(["simulate", "--trace", str(trace), "--out", str(out), "-q", "--seed", "3"]) == 130
    assert f"{out}: the run interrupted; the previous run there is untouched" in capsys.readouterr().err
    assert snapshot(out) == files
    assert leftovers(out.parent) == []


def test_a_failed_first_run_writes_nothing(trace, tmp_path, monkeypatch, capsys):
    out = tmp_path / "fresh"
    from wattsched.sim import report

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "write_marker", broken)
    assert main(["simulate", "--trace", str(trace), "--out", str(out), "-q"]) == 2  # the error boundary
    err = capsys.readouterr().err
    assert "the run failed; nothing was written there" in err
    assert "wattsched: error: [Errno 28] No space left on device" in err and "Traceback" not in err
    assert not out.exists() and leftovers(tmp_path) == []


def test_rerun_replaces_the_previous_run_whole(previous, trace):
    out, _ = previous
    (out / "notes.txt").write_text("from the previous run")
    assert main(["simulate", "--trace", str(trace), "--out", str(out), "-q", "--seed", "5", "--no-report"]) == 0
    assert not (out / "notes.txt").exists() and not (out / "report.html").exists()
    assert read_summary(out)["info"]["seed"] == 5
    assert leftovers(out.parent) == []


def _big_swf(path: Path, n: int) -> None:
    lines = ["; MaxProcs: 64", "; UnixStartTime: 1000000"]
    lines += [f"{i} {i * 7} 0 {50 + i % 400} {1 + i % 16} -1 -1 {1 + i % 16} {500} -1 1 {i % 50} 1 -1 1 -1 -1 -1"
              for i in range(1, n + 1)]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_sigterm_mid_run_leaves_the_previous_run_untouched(previous, tmp_path):
    out, files = previous
    big = tmp_path / "big.swf"
    _big_swf(big, 400_000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "wattsched", "simulate", "--trace", str(big), "--out", str(out), "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while not leftovers(out.parent) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be interrupted: " + proc.stderr.read()
    time.sleep(0.5)  # well inside the simulation
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert f"{out}: the run interrupted; the previous run there is untouched" in err
    assert "Traceback" not in err
    assert snapshot(out) == files
    assert leftovers(out.parent) == []
    load_run(out)  # still a valid run


def test_out_pointing_at_a_file_is_refused_before_the_run(trace, tmp_path, capsys):
    target = tmp_path / "results.txt"
    target.write_text("keep me")
    assert main(["simulate", "--trace", str(trace), "--out", str(target), "-q"]) == 2
    assert f"--out: {target} is a file, not a directory" in capsys.readouterr().err
    assert target.read_text() == "keep me"


def test_out_in_an_unwritable_place_is_refused_before_the_run(trace, tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    assert main(["simulate", "--trace", str(trace), "--out", str(blocker / "run"), "-q"]) == 2
    assert f"--out: cannot create {blocker}" in capsys.readouterr().err


def test_out_at_a_directory_of_other_files_is_refused(trace, tmp_path, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious")
    assert main(["simulate", "--trace", str(trace), "--out", str(home), "-q"]) == 2
    assert f"--out: {home} exists and is not a run directory" in capsys.readouterr().err
    assert (home / "thesis.tex").read_text() == "precious"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["simulate", "--trace", str(trace), "--out", str(empty), "-q"]) == 0


def test_report_refuses_a_directory_without_its_marker(previous, capsys):
    out, _ = previous
    (out / MARKER).unlink()
    assert main(["report", str(out)]) == 2
    assert f"{out}: incomplete run directory (no {MARKER})" in capsys.readouterr().err


def test_report_refuses_tables_that_disagree_with_the_summary(previous, capsys):
    import pyarrow.parquet as pq

    out, _ = previous
    table = pq.read_table(out / "jobs.parquet")
    pq.write_table(table.slice(0, 3), out / "jobs.parquet")
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert "summary.json: jobs_rows: says 4 but jobs has 3 rows" in err


def test_report_reads_the_csv_tables_when_parquet_is_gone(previous):
    out, _ = previous
    run, _ = load_run(out)
    (out / "jobs.parquet").unlink()
    (out / "timeline.parquet").unlink()
    again, _ = load_run(out)
    for col, values in run.jobs.items():
        assert again.jobs[col].astype(str).tolist() == values.astype(str).tolist(), col
    assert write_html_report(out).is_file()


def test_a_run_in_a_thread_draws_its_plots_itself(trace, tmp_path):
    import threading

    from wattsched.config import SimConfig
    from wattsched.sim.report import PLOTS
    from wattsched.sim.run import run_simulation

    out = tmp_path / "threaded"
    config = SimConfig(trace=str(trace), out=str(out))
    outcomes, errors = [], []

    def work():
        try:
            outcomes.append(run_simulation(config, progress=False))
        except Exception as exc:  # reported below
            errors.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(60)
    assert not errors and not worker.is_alive() and outcomes[0].out_dir == out
    for name in PLOTS:
        assert (out / name).read_bytes()[:4] == b"\x89PNG", name
    load_run(out)
