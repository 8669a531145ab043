"""Figures made ahead (with their ticks) draw exactly as new ones; the BLAS threads wattsched asks for."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from wattsched.model.platform import Platform
from wattsched.sim import plots
from wattsched.sim.result import SimResult


def _result(n_jobs: int, span_s: float, seed: int) -> SimResult:
    """A run's tables as the engine gives them: jobs with waits, a piecewise-constant timeline."""
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0, span_s, n_jobs))
    wait = np.where(rng.random(n_jobs) < 0.3, 0.0, rng.exponential(span_s / 50, n_jobs))
    run = rng.exponential(span_s / 100, n_jobs) + 1.0
    t = np.sort(np.concatenate(([0.0], rng.uniform(0, span_s, 3 * n_jobs), [span_s])))
    busy = rng.integers(0, 17, t.size).astype(float)
    jobs = {"id": np.arange(n_jobs), "submit_s": submit, "start_s": submit + wait, "end_s": submit + wait + run,
            "wait_s": wait, "runtime_s": run, "work_s": run}
    timeline = {"t_s": t, "power_w": 100.0 * busy + 50.0, "cap_w": np.full(t.size, 1500.0), "busy_nodes": busy,
                "pending_jobs": rng.integers(0, 40, t.size).astype(float), "off_nodes": np.zeros(t.size)}
    return SimResult(jobs=jobs, timeline=timeline, platform=Platform.homogeneous_cluster(16),
                     info={"trace": "synthetic", "policy": "easy"})


@pytest.mark.parametrize("n_jobs, span_s, seed", [(40, 3000.0, 1), (3000, 30 * 86400.0, 2), (5, 50.0, 3)])
def test_a_figure_made_ahead_draws_the_same_png(tmp_path, n_jobs, span_s, seed):
    result = _result(n_jobs, span_s, seed)
    draw = {"power": plots.plot_power, "utilization": plots.plot_utilization,
            "wait_slowdown": plots.plot_wait_slowdown}
    plots._AHEAD.clear()
    for kind, plot in draw.items():
        plot(result, tmp_path / f"new-{kind}.png")
    plots.prepare_figures()
    assert sorted(k for k, v in plots._AHEAD.items() if v) == sorted(draw)
    made = {kind: plots._AHEAD[kind][-1][0] for kind in draw}
    for kind, plot in draw.items():
        plot(result, tmp_path / f"ahead-{kind}.png")
    assert not any(plots._AHEAD.values())  # each plot took its figure
    for kind in draw:
        assert made[kind].axes[0].xaxis.majorTicks  # ticks were made ahead on the figure the plot drew
        assert (tmp_path / f"ahead-{kind}.png").read_bytes() == (tmp_path / f"new-{kind}.png").read_bytes(), kind


def test_prepared_figures_hold_their_ticks_before_any_plot():
    plots._AHEAD.clear()
    plots.prepare_figures()
    try:
        for kind, axes_ticks in plots._TICKS_AHEAD.items():
            (_fig, axes), = plots._AHEAD[kind]
            for ax, (x_major, y_major, x_minor) in zip(axes, axes_ticks, strict=True):
                assert len(ax.xaxis.majorTicks) >= x_major and len(ax.yaxis.majorTicks) >= y_major
                assert len(ax.xaxis.minorTicks) >= x_minor
    finally:
        plots._AHEAD.clear()


CHILD_THREADS = r"""
import os, sys, time
from wattsched import cli
try:
    cli.main(["--version"])
except SystemExit:
    pass
print(os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.parametrize("given, expected", [(None, "1"), ("2", "2")])
def test_wattsched_asks_for_one_blas_thread_unless_told(given, expected):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", CHILD_THREADS], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == expected


def test_the_plot_worker_runs_one_blas_thread(monkeypatch):
    from wattsched.sim.plotworker import PlotWorker

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")  # the worker's own is 1 whatever the caller's
    worker = PlotWorker.start()
    try:
        deadline = time.monotonic() + 60
        proc = Path(f"/proc/{worker.proc.pid}")
        while b"wattsched.sim.plotworker" not in proc.joinpath("cmdline").read_bytes():  # until it has exec'd
            assert time.monotonic() < deadline
            time.sleep(0.01)
        environ = proc.joinpath("environ").read_bytes().split(b"\0")
        assert b"OPENBLAS_NUM_THREADS=1" in environ and b"OPENBLAS_NUM_THREADS=3" not in environ
    finally:
        worker.close()
