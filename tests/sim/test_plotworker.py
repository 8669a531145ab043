"""The plot worker: a fresh process that draws a run's plots, reports its failures and dies with its parent."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from wattsched.cli import main
from wattsched.sim import plotworker
from wattsched.sim.plotworker import PlotWorker
from wattsched.sim.report import PLOTS, load_run, write_plots

SWF = """; MaxProcs: 8
1 100 0 50 4 -1 -1 4 60 -1 1 1 1 -1 1 -1 -1 -1
2 110 0 30 8 -1 -1 8 40 -1 1 2 1 -1 1 -1 -1 -1
3 120 0 10 2 -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1
4 130 0 100 2 -1 -1 2 50 -1 1 3 1 -1 1 -1 -1 -1
"""


@pytest.fixture
def run_dir(tmp_path):
    trace = tmp_path / "tiny.swf"
    trace.write_text(SWF)
    out = tmp_path / "run"
    assert main(["simulate", "--trace", str(trace), "--out", str(out), "-q", "--seed", "1"]) == 0
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too (its parent has not reaped it yet)
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def _wait_dead(pid: int, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def test_simulate_plots_match_plots_drawn_in_process(run_dir, tmp_path):
    run, summary = load_run(run_dir)
    here = tmp_path / "here"
    here.mkdir()
    write_plots(run, here, summary.get("bsld_threshold_s") or 10.0)
    for name in PLOTS:
        assert (run_dir / name).read_bytes() == (here / name).read_bytes(), name


def test_worker_draws_what_it_is_sent(run_dir, tmp_path):
    run, _ = load_run(run_dir)
    run.platform = range(run.info["nodes"])  # len() of it is what the worker is told
    out = tmp_path / "drawn"
    out.mkdir()
    worker = PlotWorker.start()
    try:
        worker.send(run, out, 10.0)
        assert worker.wait() is None
    finally:
        worker.close()
    for name in PLOTS:
        assert (out / name).read_bytes() == (run_dir / name).read_bytes(), name


def test_worker_writes_the_tables_as_the_run_would(run_dir, tmp_path):
    from wattsched.sim.report import TABLE_FILES

    run, _ = load_run(run_dir)
    run.platform = range(run.info["nodes"])
    out = tmp_path / "tables"
    out.mkdir()
    worker = PlotWorker.start()
    try:
        worker.send(run, out, 10.0, tables=True)
        assert worker.wait() is None
    finally:
        worker.close()
    assert sorted(p.name for p in out.iterdir()) == sorted([*PLOTS, *TABLE_FILES])  # no partial file left
    for name in TABLE_FILES:
        assert (out / name).read_bytes() == (run_dir / name).read_bytes(), name


def test_simulate_starts_the_worker_first_and_ends_it_when_the_config_fails(tmp_path, monkeypatch, capsys):
    from wattsched.sim import plotworker

    started = []
    real_start = plotworker.PlotWorker.start.__func__

    def start(cls):
        started.append(real_start(cls))
        return started[-1]

    monkeypatch.setattr(plotworker.PlotWorker, "start", classmethod(start))
    # the config fails before the run starts (a missing config file), then the run itself (a missing trace)
    for argv, what in ((["--config", str(tmp_path / "missing.yaml")], "missing.yaml"),
                       (["--trace", str(tmp_path / "missing.swf")], "missing.swf")):
        started.clear()
        assert main(["simulate", *argv, "--out", str(tmp_path / "run"), "-q"]) == 2
        assert what in capsys.readouterr().err
        assert len(started) == 1
        assert started[0].proc.poll() is not None  # ended, not left waiting for a request
        assert not (tmp_path / "run").exists()


def test_a_failed_worker_says_why(run_dir, tmp_path):
    run, _ = load_run(run_dir)
    run.platform = range(run.info["nodes"])
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    worker = PlotWorker.start()
    try:
        worker.send(run, blocker / "run", 10.0)  # a file where the directory should be
        problem = worker.wait()
    finally:
        worker.close()
    assert problem is not None and problem.startswith("the plot worker failed: ")
    assert "blocker" in problem and "Traceback" not in problem


def test_a_worker_killed_mid_run_is_reported_and_the_plots_drawn_anyway(run_dir, tmp_path, monkeypatch, capsys):
    trace = tmp_path / "tiny.swf"
    out = tmp_path / "again"
    from wattsched.sim import plotworker

    started = []
    real_start = plotworker.PlotWorker.start.__func__

    def start_then_kill(cls):
        worker = real_start(cls)
        started.append(worker)
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait()
        return worker

    monkeypatch.setattr(plotworker.PlotWorker, "start", classmethod(start_then_kill))
    assert main(["simulate", "--trace", str(trace), "--out", str(out), "-q", "--seed", "1"]) == 0
    err = capsys.readouterr().err
    assert "warning: the plot worker failed: killed by signal 9; drawing the plots in this process" in err
    for name in PLOTS:
        assert (out / name).read_bytes() == (run_dir / name).read_bytes(), name
    load_run(out)


def _through_a_pipe(message: dict, *, limit: int | None = None, monkeypatch=None):
    """``message`` framed, written to a real pipe by a thread and read back as the worker reads it."""
    if limit is not None:  # a kernel that takes at most ``limit`` bytes of a frame per call
        real = os.writev
        monkeypatch.setattr(plotworker.os, "writev", lambda fd, views: real(fd, _first_bytes(views, limit)))
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (plotworker._write_all(w, plotworker._frame(message)), os.close(w)))
    writer.start()
    with os.fdopen(r, "rb") as stream:
        got = plotworker._read_frame(stream)
        rest = stream.read()
    writer.join()
    assert rest == b""  # one frame, read to its end and no further
    return got


def _first_bytes(views, limit: int) -> list:
    out, left = [], limit
    for v in views:
        if left <= 0:
            break
        out.append(v[:left])
        left -= len(out[-1])
    return out


def _message() -> dict:
    rng = np.random.default_rng(3)
    return {
        "jobs": {"start_s": rng.random(200_000), "id": np.arange(50_000), "user": np.array(["u1", "u22"] * 500)},
        "timeline": {"t_s": np.linspace(0.0, 1.0, 70_001)[::2], "empty": np.empty(0)},  # a strided view
        "info": {"trace": "KTH", "nodes": 100}, "out_dir": "/tmp/x", "tables": True,
    }


def _same(a, b) -> None:
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    else:
        assert a == b


def test_a_request_crosses_the_pipe_whole_with_its_arrays_outside_the_pickle():
    message = _message()
    _same(_through_a_pipe(message), message)
    del message["timeline"]["t_s"]  # a strided view has no memory of its own to send: it goes in the pickle
    _, data, *buffers = plotworker._frame(message)
    assert len(buffers) == 4  # the contiguous arrays (text ones too), each sent from its own memory
    assert len(data) < 1_000 < 1_000_000 < sum(b.nbytes for b in buffers)  # and not copied into the pickle


@pytest.mark.parametrize("limit", [1, 7, 4096, 65_537])
def test_a_frame_the_kernel_takes_in_pieces_arrives_whole(monkeypatch, limit):
    message = _message() if limit > 1 else {"small": np.arange(300), "text": "x" * 50}
    _same(_through_a_pipe(message, limit=limit, monkeypatch=monkeypatch), message)


@pytest.mark.parametrize("cut", [0, 5, 16, 30, -1])
def test_a_stream_that_ends_within_a_frame_is_an_end_of_file(cut):
    frame = b"".join(bytes(p) for p in plotworker._frame({"a": np.arange(1000), "b": "text"}))
    stream = io.BufferedReader(io.BytesIO(frame[:cut] if cut >= 0 else frame[:-1]))
    with pytest.raises(EOFError):
        plotworker._read_frame(stream)


def test_worker_without_a_request_exits_quietly():
    worker = PlotWorker.start()
    worker.proc.stdin.close()  # the parent gave up before the result was known
    assert worker.proc.wait(timeout=60) == 0
    assert worker.proc.stderr.read() == b""
    worker.close()


def test_close_ends_a_running_worker():
    worker = PlotWorker.start()
    pid = worker.proc.pid
    worker.close()
    assert not _alive(pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_worker_dies_with_a_killed_parent(tmp_path):
    # the parent starts a worker, prints its pid and is then killed outright (no cleanup runs)
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from wattsched.sim.plotworker import PlotWorker\n"
         "w = PlotWorker.start(); print(w.proc.pid, flush=True); time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        pid = int(parent.stdout.readline())
        assert _alive(pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert _wait_dead(pid), "the plot worker outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork and two cores")
def test_a_plot_drawn_beside_reports_success_and_failure(tmp_path):
    from wattsched.sim.plotworker import _draw_beside, _succeeded

    target = tmp_path / "drawn"
    pid = _draw_beside(lambda: target.write_text("ok"))
    assert pid is not None and _succeeded(pid)
    assert target.read_text() == "ok"  # the child's work is visible to the worker
    pid = _draw_beside(lambda: 1 / 0)
    assert pid is not None and not _succeeded(pid)  # the worker then draws that plot itself


def test_a_worker_that_does_not_finish_in_time_is_stopped(run_dir, tmp_path):
    run, _ = load_run(run_dir)
    run.platform = range(run.info["nodes"])
    worker = PlotWorker.start()
    pid = worker.proc.pid
    try:
        worker.send(run, tmp_path, 10.0)
        problem = worker.wait(timeout_s=0.001)  # still importing matplotlib
    finally:
        worker.close()
    assert problem == "the plot worker did not finish within 0.001 s and was stopped"
    assert _wait_dead(pid)


def test_reading_the_workers_stderr_ends_with_the_pipe_or_at_the_deadline():
    import threading

    from wattsched.sim.plotworker import _read_to_end

    r, w = os.pipe()
    with os.fdopen(r, "rb") as stream:
        def write_then_close():
            os.write(w, b"last ")
            time.sleep(0.2)
            os.write(w, b"words")
            os.close(w)

        threading.Thread(target=write_then_close).start()
        t0 = time.monotonic()
        assert _read_to_end(stream, t0 + 30) == b"last words"
        assert time.monotonic() - t0 < 10  # at the end of the pipe, not at the deadline
    r, w = os.pipe()
    try:
        with os.fdopen(r, "rb") as stream:
            t0 = time.monotonic()
            assert _read_to_end(stream, t0 + 0.1) is None  # still open: the deadline ends it
            assert 0.09 <= time.monotonic() - t0 < 10
    finally:
        os.close(w)


def test_worker_imports_the_plotting_code_without_3d_axes_and_3d_imports_after():
    # a fresh interpreter: this test process may have imported matplotlib already
    code = """
import sys, warnings
warnings.simplefilter("error")
from wattsched.sim.plotworker import _without_3d
with _without_3d():
    import wattsched.sim.plots
print("mplot3d" if "mpl_toolkits.mplot3d" in sys.modules else "no mplot3d")
from mpl_toolkits.mplot3d import Axes3D
print(Axes3D.name)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "MPLBACKEND": "Agg"})
    assert out.stdout.split() == ["no", "mplot3d", "3d"], out.stderr
