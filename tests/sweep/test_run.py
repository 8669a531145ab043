"""``wattsched sweep`` end to end through the CLI, on a real Dask LocalCluster in real subprocesses."""

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from helpers_sweep import SMALL, WATTSCHED

pytestmark = pytest.mark.slow


def _sweep(*args, check=True, timeout=300):
    proc = subprocess.run([*WATTSCHED, "sweep", *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _counts(stdout: str) -> tuple[int, int, int, int]:
    m = re.search(r"(\d+) runs: (\d+) already done, (\d+) executed \((\d+) failed\)", stdout)
    assert m, stdout
    return tuple(int(x) for x in m.groups())


def _stored(out) -> int:
    path = out / "results.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as db:
            return db.execute("SELECT count(*) FROM runs WHERE status = 'ok'").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0


def test_dry_run_prints_the_count_and_a_sample(write_sweep, tmp_path):
    proc = _sweep(write_sweep(SMALL), "--dry-run", "--out", tmp_path / "out")
    assert "10 runs; axes: trace, slice, t0_s, policy, policy.check, cap" in proc.stdout
    assert "... 5 more" in proc.stdout
    assert not (tmp_path / "out").exists()


def test_sweep_runs_reports_and_a_rerun_skips_everything(write_sweep, tmp_path):
    out = tmp_path / "out"
    path = write_sweep(SMALL)
    proc = _sweep(path, "--out", out, "-q")
    assert _counts(proc.stdout) == (10, 0, 10, 0)
    html = (out / "report.html").read_text()
    assert "Median [IQR] per combination" in html and html.count("<img src=\"data:image/png;base64,") >= 3
    lines = (out / "aggregate.csv").read_text().splitlines()
    assert len(lines) == 1 + 5  # 5 combinations, each aggregated over the 2 slices
    assert lines[0].startswith("trace,policy,policy.check,cap,runs,mean_turnaround_s_median")
    assert all(",2," in line for line in lines[1:])
    runs = (out / "runs.csv").read_text().splitlines()
    assert len(runs) == 11
    # the cap binds: in the window, easy-pc at 50 % never draws more than easy on the same slice, and where easy
    # goes over the cap easy-pc keeps under it (the jobs' power fluctuates around the history predictor's
    # estimates, so a check is no guarantee in general)
    import csv

    with open(out / "runs.csv") as fh:
        rows = list(csv.DictReader(fh))
    peak = {(r["slice"], r["policy"], r["policy.check"], r["cap"]): float(r["window_max_power_w"]) for r in rows}
    cap_w = {(r["slice"], r["cap"]): float(r["cap_w"]) for r in rows}
    over = [s for s in {k[0] for k in peak} if peak[(s, "easy", "", "50%")] > cap_w[(s, "50%")]]
    assert over, "easy never went over the 50 % cap: the test's slices no longer show the cap binding"
    for s in {k[0] for k in peak}:
        for check in ("mean", "gaussian_99"):
            assert peak[(s, "easy-pc", check, "50%")] <= peak[(s, "easy", "", "50%")]
            if s in over:
                assert peak[(s, "easy-pc", check, "50%")] <= cap_w[(s, "50%")]
    proc = _sweep(path, "--out", out, "-q")
    assert _counts(proc.stdout) == (10, 10, 0, 0)
    # a changed file only adds the new runs
    proc = _sweep(write_sweep(SMALL.replace('["50%", "70%"]', '["50%", "70%", "90%"]'), "b.yaml"), "--out", out,
                  "-q")
    assert _counts(proc.stdout) == (16, 10, 6, 0)


def test_sigkill_halfway_then_restart_runs_only_the_remaining(write_sweep, tmp_path):
    out = tmp_path / "out"
    text = SMALL.replace("count: 2, length_h: 24", "count: 4, length_h: 72")  # 20 runs, slower ones
    path = write_sweep(text)
    proc = subprocess.Popen([*WATTSCHED, "sweep", str(path), "--out", str(out), "-q", "--no-report"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _stored(out) < 6:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the killed client's Dask workers (its process group)
            os.killpg(proc.pid, signal.SIGKILL)
    done = _stored(out)
    assert 6 <= done < 20, f"{done} runs were stored before the kill: too fast to test"
    proc = _sweep(path, "--out", out, "-q", "--no-report")
    total, skipped, executed, failed = _counts(proc.stdout)
    assert (total, skipped, failed) == (20, done, 0)
    assert executed == 20 - done
    assert _stored(out) == 20


def test_ctrl_c_prints_one_line_and_exits_130(write_sweep, tmp_path):
    """A terminal's Ctrl-C reaches the client and its Dask workers (one process group): no traceback."""
    out = tmp_path / "out"
    path = write_sweep(SMALL.replace("count: 2, length_h: 24", "count: 4, length_h: 72"))  # 20 runs
    proc = subprocess.Popen([*WATTSCHED, "sweep", str(path), "--out", str(out), "-q", "--no-report"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _stored(out) < 1:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    done = _stored(out)
    assert proc.returncode == 130, stderr
    assert stdout == ""
    assert stderr == f"interrupted: {done} of 20 runs saved in {out}; rerun the same command to resume\n"
    assert 1 <= done < 20


def test_a_failing_run_is_recorded_and_the_others_finish(write_sweep, tmp_path):
    (tmp_path / "metric.py").write_text(
        "def extra(result, run):\n"
        "    if run['spec']['sim']['seed'] == 7001:\n"
        "        raise RuntimeError('boom on slice 1')\n"
        "    return {'n_ids': int(len(result.jobs['id']))}\n")
    out = tmp_path / "out"
    proc = _sweep(write_sweep(SMALL + "metrics: [metric.py:extra]\n"), "--out", out, "-q", check=False)
    assert proc.returncode == 1
    assert _counts(proc.stdout) == (10, 0, 10, 5)
    assert "boom on slice 1" in proc.stdout + proc.stderr
    html = (out / "report.html").read_text()
    assert "Failed runs" in html and "RuntimeError: boom on slice 1" in html
    with sqlite3.connect(out / "results.sqlite") as db:
        statuses = dict(db.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall())
    assert statuses == {"ok": 5, "failed": 5}


def test_without_dask_the_sweep_says_what_to_install(write_sweep, tmp_path):
    code = ("import sys\n"
            "for m in ('dask', 'distributed', 'dask_jobqueue'): sys.modules[m] = None\n"
            "from wattsched.cli import main\n"
            f"sys.exit(main(['sweep', {str(write_sweep(SMALL))!r}, '--out', {str(tmp_path / 'o')!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "pip install 'wattsched[sweep]'" in proc.stderr
    # validation and --dry-run need no Dask
    code = code.replace("'--out'", "'--dry-run', '--out'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "10 runs" in proc.stdout


def test_bad_file_fails_before_any_run(write_sweep, tmp_path):
    proc = _sweep(write_sweep(SMALL.replace("  caps:", "  capz:")), "--out", tmp_path / "out", check=False)
    assert proc.returncode == 2
    assert re.search(r"sweep\.yaml:\d+: axes\.capz: unknown key; did you mean 'caps'\?", proc.stderr)
    assert not (tmp_path / "out").exists()


def test_an_existing_scheduler_runs_the_sweep(write_sweep, tmp_path):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as cluster, Client(cluster) as client:
        proc = _sweep(write_sweep(SMALL), "--out", tmp_path / "out", "-q", "--no-report",
                      "--scheduler", cluster.scheduler_address)
        assert _counts(proc.stdout) == (10, 0, 10, 0)
        # the runs executed on this cluster's worker, which now holds the slice cut in its memory
        cached = client.run(lambda: len(__import__("wattsched.sweep.execute", fromlist=["_PREPARED"])._PREPARED))
        assert list(cached.values()) == [2]


def test_check_config_knows_sweep_files(write_sweep):
    proc = subprocess.run([*WATTSCHED, "check-config", str(write_sweep(SMALL))], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "valid sweep file (10 runs)" in proc.stdout
    bad = write_sweep(SMALL.replace("  caps:", "  capz:"), "b.yaml")
    proc = subprocess.run([*WATTSCHED, "check-config", str(bad)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "axes.capz: unknown key" in proc.stderr


def test_dr_events_energy_budgets_and_response_axes(write_sweep, tmp_path):
    text = """\
    kind: sweep
    base: {procs: 100, predictor: oracle, policy: easy-pc, params: {check: max}}
    axes:
      slices: {trace: "{trace}", count: 1, length_h: 24, warmup_h: 12, t0: load}
      caps: ["80%"]
      dr_events:
        - [{start_s: 3600, end_s: 7200, cap_w: "10%", label: event}]
        - [{start_s: 3600, end_s: 7200, cap_w: "60%", label: event}]
      energy_budgets:
        - [{start_s: 0, end_s: 86400, energy_j: 1.0e12}]
      response: [{cpu: {model: linear, f: 0.8}}]
    """
    out = tmp_path / "out"
    proc = _sweep(write_sweep(text), "--out", out, "-q", "--workers", "1")
    assert _counts(proc.stdout) == (2, 0, 2, 0)
    import csv

    with open(out / "runs.csv") as fh:
        rows = {r["dr_events"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"0", "1"} and {r["response"] for r in rows.values()} == {"cpu:f=0.8/model=linear"}
    # the window metrics are those of the event, which lowers the cap (oracle values, max check: never above)
    caps = {k: 100 * (95.0 + f * (190.738 - 95.0)) for k, f in (("0", 0.1), ("1", 0.6))}  # default platform
    for k, r in rows.items():
        assert (float(r["window_start_s"]), float(r["window_end_s"])) == (12 * 3600 + 3600, 12 * 3600 + 7200)
        assert float(r["window_max_power_w"]) <= caps[k] + 1e-6
        assert float(r["max_overshoot_w"]) < 1e-6
    assert float(rows["0"]["window_mean_power_w"]) < float(rows["1"]["window_mean_power_w"])
    bad = text.replace("model: linear, f: 0.8", "model: quadratic")
    proc = _sweep(write_sweep(bad, "bad.yaml"), "--dry-run", check=False)
    assert proc.returncode == 2 and "axes.response[0].cpu: unknown response model 'quadratic'" in proc.stderr
