"""One config, one run: ``wattsched simulate`` and a one-cell ``wattsched sweep`` of the same settings replay the
same jobs on the same machine and write byte-identical job tables (both assemble it with
:func:`wattsched.sim.build.build_run`)."""

import json
import sqlite3
import subprocess

import pytest
import yaml
from helpers_sweep import KTH, WATTSCHED

pytestmark = pytest.mark.slow

SETTINGS = {"trace": str(KTH), "policy": "easy-pc", "params": {"check": "gaussian_99"}, "predictor": "history",
            "cap_schedule": [{"start_s": 1209600, "end_s": 1814400, "cap_w": "60%"}], "seed": 1,
            "time_limit_s": 2_000_000}


def _run(*args, cwd):
    proc = subprocess.run([*WATTSCHED, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize("machine", [{}, {"platform": "eurora"}], ids=["kth-header-machine", "eurora-two-groups"])
def test_simulate_and_a_one_cell_sweep_write_the_same_jobs(tmp_path, machine):
    settings = {**SETTINGS, **machine}
    (tmp_path / "sim.yaml").write_text(yaml.safe_dump({"kind": "simulation", **settings}))
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(
        {"kind": "sweep", "name": "one", "base": settings, "run_tables": True, "cluster": {"workers": 1},
         "out": str(tmp_path / "sweep")}))

    sim = _run("simulate", "--config", "sim.yaml", "--out", "sim", "--no-report", "-q", cwd=tmp_path)
    _run("sweep", "sweep.yaml", "--no-report", "-q", cwd=tmp_path)

    tables = sorted((tmp_path / "sweep" / "runs").glob("*/jobs.parquet"))
    assert len(tables) == 1, tables
    simulated = (tmp_path / "sim" / "jobs.parquet").read_bytes()
    assert tables[0].read_bytes() == simulated
    assert (tables[0].parent / "timeline.parquet").read_bytes() == (tmp_path / "sim" / "timeline.parquet").read_bytes()

    # the machine is derived once and said in both outputs: the SWF header's 100 nodes, or Eurora's two groups
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())["summary"]
    with sqlite3.connect(tmp_path / "sweep" / "results.sqlite") as db:
        rows = [json.loads(row) for (row,) in db.execute("SELECT row FROM runs")]
    assert [r["machine"] for r in rows] == [summary["machine"]]
    assert f"machine: {summary['machine']}" in sim.stdout
    if machine:
        assert "gpu" in summary["machine"] and "mic" in summary["machine"]
    else:
        assert summary["machine"] == "100 nodes × 1 core (SWF header MaxProcs 100)"


def test_simulate_and_a_sweep_make_the_same_moldable_jobs_and_naive_machine(tmp_path):
    """The moldable block and naive_cpu_w reach a sweep's runs as they reach simulate's: parm on the PARM testbed
    with the jobs made moldable by the run, and the naive strategy's machine, give the same tables."""
    _run("traces", "synth", "--jobs", "40", "--window", "900", "--max-nodes", "38", "--median-runtime", "300",
         "--seed", "4", "-o", "jobs.csv", cwd=tmp_path)
    base = {"trace": str(tmp_path / "jobs.csv"), "platform": "sarood-testbed", "seed": 2,
            "moldable": {"malleable": True, "theta": [0.3, 0.5]}}
    cells = {"parm": {**base, "policy": "parm", "params": {"version": "wSE"}},
             "naive": {**base, "policy": "easy", "naive_cpu_w": 39}}
    for name, settings in cells.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"kind": "simulation", **settings}))
        _run("simulate", "--config", f"{name}.yaml", "--out", f"sim-{name}", "--no-report", "-q", cwd=tmp_path)
        (tmp_path / f"sweep-{name}.yaml").write_text(yaml.safe_dump(
            {"kind": "sweep", "name": name, "base": settings, "run_tables": True, "cluster": {"workers": 1},
             "out": str(tmp_path / f"sweep-{name}")}))
        _run("sweep", f"sweep-{name}.yaml", "--no-report", "-q", cwd=tmp_path)
        (swept,) = (tmp_path / f"sweep-{name}" / "runs").glob("*/jobs.parquet")
        assert swept.read_bytes() == (tmp_path / f"sim-{name}" / "jobs.parquet").read_bytes(), name
        with sqlite3.connect(tmp_path / f"sweep-{name}" / "results.sqlite") as db:
            (row,) = [json.loads(r) for (r,) in db.execute("SELECT row FROM runs")]
        machine = json.loads((tmp_path / f"sim-{name}" / "summary.json").read_text())["summary"]["machine"]
        assert row["machine"] == machine
    assert machine.startswith("34 nodes")  # the naive machine: 3,300 W // (38 + 18 + 39) W
