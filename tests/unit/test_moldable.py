"""Moldable and malleable jobs in the workload: the PARM rule, job-table columns, config and command line."""

from __future__ import annotations

import csv
import gzip
import math
import re
import textwrap

import pytest
from pydantic import ValidationError

from builders import cli, kth_excerpt, read_summary
from wattsched.config import SimConfig, load_config
from wattsched.errors import ConfigError, TraceError
from wattsched.model.job import Unit
from wattsched.workload.moldable import MoldableParams, app_of, moldable, pass_apps
from wattsched.workload.records import TraceJob
from wattsched.workload.synthetic import generate
from wattsched.workload.tables import read_job_table, write_job_table


def rigid(n_jobs: int, nodes=lambda i: 1 + i % 97) -> list[TraceJob]:
    return [TraceJob(i, float(i), 60.0, 120.0, nodes(i), nodes(i), user=f"u{i % 7}") for i in range(1, n_jobs + 1)]


# --------------------------------------------------------------------------- the rule


def test_ranges_follow_the_paper_rule():
    jobs = list(moldable(rigid(3000), MoldableParams(), seed=5))
    for j in jobs:
        n = j.nodes
        assert j.max_nodes == n
        assert 1 <= j.min_nodes <= n
        # min = ceil(θ·n) with θ in [0.2, 0.6]
        assert max(1, math.ceil(0.2 * n)) <= j.min_nodes <= max(1, math.ceil(0.6 * n)), (n, j.min_nodes)
        assert j.malleable is False
        assert app_of(j) in pass_apps()
    # θ spreads over its range: the implied θ of large jobs comes near both ends
    thetas = [j.min_nodes / j.nodes for j in jobs if j.nodes >= 80]
    assert min(thetas) < 0.23 and max(thetas) > 0.57


def test_a_fixed_theta_gives_hand_checked_minimums():
    sizes = {1: 1, 2: 1, 3: 2, 5: 3, 10: 5, 11: 6}  # ceil(0.5 n), at least 1
    jobs = [TraceJob(i, 0.0, 1.0, 1.0, n, n) for i, n in enumerate(sizes, 1)]
    out = list(moldable(jobs, MoldableParams(theta=(0.5, 0.5), malleable=True), seed=0))
    assert [(j.nodes, j.min_nodes, j.max_nodes, j.malleable) for j in out] == [
        (n, m, n, True) for n, m in sizes.items()]


def test_seeded_and_per_job():
    a = [(j.min_nodes, app_of(j)) for j in moldable(rigid(500), MoldableParams(), seed=1)]
    b = [(j.min_nodes, app_of(j)) for j in moldable(rigid(500), MoldableParams(), seed=1)]
    c = [(j.min_nodes, app_of(j)) for j in moldable(rigid(500), MoldableParams(), seed=2)]
    d = [(j.min_nodes, app_of(j)) for j in moldable(rigid(500), MoldableParams(seed=2), seed=1)]
    assert a == b
    assert a != c
    assert d == c  # the block's own seed replaces the run's
    # a job's draws depend on the seed and its id only, not on the jobs around it
    alone = next(moldable([rigid(500)[321]], MoldableParams(), seed=1))
    assert (alone.min_nodes, app_of(alone)) == a[321]


def test_fraction_decides_which_jobs_are_moldable():
    big = lambda i: 50  # noqa: E731  (every job large enough that a range is visible)
    none = list(moldable(rigid(400, big), MoldableParams(fraction=0.0), seed=3))
    assert all(j.min_nodes == 0 and j.max_nodes == 0 and not j.malleable for j in none)
    assert all(app_of(j) for j in none)  # applications are given either way
    half = list(moldable(rigid(4000, big), MoldableParams(fraction=0.5, malleable=True), seed=3))
    share = sum(j.max_nodes == 50 for j in half) / len(half)
    assert 0.46 < share < 0.54
    assert all(j.malleable == (j.max_nodes == 50) for j in half)


def test_every_app_drawn_and_apps_restrict():
    apps = [app_of(j) for j in moldable(rigid(1000), MoldableParams(), seed=9)]
    assert set(apps) == set(pass_apps()) == {"amr", "jacobi2d", "leanmd", "lulesh", "wave2d"}
    two = {app_of(j) for j in moldable(rigid(200), MoldableParams(apps=("leanmd", "wave2d")), seed=9)}
    assert two == {"leanmd", "wave2d"}


def test_given_ranges_apps_and_units_are_kept():
    given = TraceJob(1, 0.0, 1.0, 1.0, 8, 8, min_nodes=8, max_nodes=16, extra={"app": "amr"})
    units = TraceJob(2, 0.0, 1.0, 1.0, 2, 2, units=(Unit(cores=2), Unit(cores=2)))
    src = [given, units]
    out = list(moldable(src, MoldableParams(), seed=0))
    assert (out[0].min_nodes, out[0].max_nodes, app_of(out[0])) == (8, 16, "amr")
    assert (out[1].min_nodes, out[1].max_nodes) == (0, 0) and app_of(out[1]) in pass_apps()
    assert units.extra == {}  # copies unless in_place


@pytest.mark.parametrize("spec, key, message", [
    ({"fraction": 1.5}, "fraction", "less than or equal to 1"),
    ({"fraction": -0.1}, "fraction", "greater than or equal to 0"),
    ({"theta": [0.6, 0.2]}, "theta", r"0 < lo ≤ hi ≤ 1, got \[0.6, 0.2\]"),
    ({"theta": [0.0, 0.5]}, "theta", r"0 < lo ≤ hi ≤ 1"),
    ({"theta": [0.2, 1.5]}, "theta", r"0 < lo ≤ hi ≤ 1"),
    ({"apps": ["leanmd", "namd"]}, "apps", "'namd' is not a packaged PASS application"),
    ({"apps": []}, "apps", "at least one application"),
    ({"thetas": [0.2, 0.6]}, "thetas", "Extra inputs"),
])
def test_bad_values_are_refused_naming_the_key(spec, key, message):
    with pytest.raises(ValidationError, match=message) as info:
        MoldableParams(**spec)
    assert info.value.errors()[0]["loc"][0] == key


def test_sim_config_names_the_file_line_and_key(tmp_path):
    path = tmp_path / "sim.yaml"
    path.write_text(textwrap.dedent("""\
        trace: t.swf
        platform: sarood-testbed
        moldable:
          fraction: 1
          theta: [0.7, 0.2]
        """))
    with pytest.raises(ConfigError, match=r"sim\.yaml:5: moldable\.theta: .*0 < lo ≤ hi ≤ 1"):
        load_config(path, SimConfig)
    assert SimConfig(trace="t.swf").moldable is None  # off by default
    assert SimConfig(trace="t.swf", moldable={}).moldable == MoldableParams()


# --------------------------------------------------------------------------- job tables


@pytest.mark.parametrize("name", ["t.csv", "t.csv.gz", "t.parquet"])
def test_job_table_round_trip_with_ranges_and_apps(tmp_path, name):
    jobs = list(moldable(rigid(40), MoldableParams(fraction=0.5, malleable=True), seed=4))
    jobs[0].extra["running_at_start"] = True
    path = tmp_path / name
    write_job_table(jobs, path)
    back = list(read_job_table(path).jobs)
    key = lambda j: (j.id, j.nodes, j.min_nodes, j.max_nodes, j.malleable, j.extra)  # noqa: E731
    assert [key(j) for j in back] == [key(j) for j in jobs]
    assert any(j.malleable for j in back) and any(not j.malleable for j in back)


def test_a_table_without_apps_has_no_app_column(tmp_path):
    path = tmp_path / "t.csv"
    write_job_table(rigid(3), path)
    assert "app" not in path.read_text().splitlines()[0].split(",")


def test_table_columns_default_to_the_requested_nodes(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,submit_s,runtime_s,nodes,min_nodes,max_nodes,malleable,app\n"
                    "1,0,5,4,,,,\n2,1,5,4,2,4,true,lulesh\n")
    a, b = read_job_table(path).jobs
    assert (a.min_nodes, a.max_nodes, a.malleable, app_of(a)) == (0, 0, False, "")
    assert (b.min_nodes, b.max_nodes, b.malleable, app_of(b)) == (2, 4, True, "lulesh")


@pytest.mark.parametrize("row, message", [
    ("1,0,5,4,6,8", r"t\.csv:2: min_nodes: min_nodes 6 is above the requested nodes 4"),
    ("1,0,5,4,1,3", r"t\.csv:2: max_nodes: max_nodes 3 is below the requested nodes 4"),
    ("1,0,5,4,5,", r"t\.csv:2: min_nodes: min_nodes 5 is above the requested nodes 4"),
])
def test_a_range_must_hold_the_requested_nodes(tmp_path, row, message):
    path = tmp_path / "t.csv"
    path.write_text(f"id,submit_s,runtime_s,nodes,min_nodes,max_nodes\n{row}\n")
    with pytest.raises(TraceError, match=message):
        read_job_table(path)


# --------------------------------------------------------------------------- synthetic workloads


def test_synthetic_moldable_leaves_the_other_aspects_unchanged():
    plain = list(generate(300, window_s=900, seed=4).jobs)
    mold = list(generate(300, window_s=900, seed=4, moldable=MoldableParams(malleable=True)).jobs)
    same = lambda j: (j.id, j.submit_s, j.runtime_s, j.walltime_s, j.nodes, j.user)  # noqa: E731
    assert [same(j) for j in mold] == [same(j) for j in plain]
    assert all(j.max_nodes == j.nodes and 1 <= j.min_nodes <= j.nodes and j.malleable for j in mold)
    assert any(j.min_nodes < j.nodes for j in mold)
    assert all(app_of(j) in pass_apps() for j in mold)
    assert all(j.min_nodes == 0 and not j.extra for j in plain)


# --------------------------------------------------------------------------- command line


def test_traces_augment_converts_swf_with_the_rule(tmp_path):
    swf = kth_excerpt(tmp_path, 200)
    out = tmp_path / "mold.csv.gz"
    proc = cli("traces", "augment", swf, "--seed", "1", "--moldable", "1", "--theta", "0.2,0.6", "--malleable",
               "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "moldable share 1" in proc.stdout
    header, *rows = gzip.decompress(out.read_bytes()).decode().splitlines()
    cols = header.split(",")
    assert cols[-1] == "app" and len(rows) == 200
    jobs = list(read_job_table(out).jobs)
    assert all(j.max_nodes == j.nodes and 1 <= j.min_nodes <= j.nodes and j.malleable for j in jobs)
    assert all(app_of(j) in pass_apps() for j in jobs)


@pytest.mark.parametrize("args, message", [
    (["--theta", "0.2,0.6"], "--theta: needs --moldable FRACTION"),
    (["--moldable", "2"], r"--moldable: a share of the jobs in \[0, 1\], got 2"),
    (["--moldable", "1", "--theta", "0.2"], "--theta: give two numbers LO,HI"),
    (["--moldable", "1", "--theta", "0.7,0.2"], r"--theta: must be \[lo, hi\] with 0 < lo ≤ hi ≤ 1"),
    (["--moldable", "1", "--apps", "leanmd,foo"], "--apps: 'foo' is not a packaged PASS application"),
])
def test_synth_options_refused_naming_the_option(tmp_path, capsys, args, message):
    from wattsched.cli import main

    assert main(["traces", "synth", "--jobs", "5", *args, "-o", str(tmp_path / "x.csv")]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "x.csv").exists()


def test_simulate_with_a_moldable_block_keeps_the_schedule(tmp_path):
    swf = kth_excerpt(tmp_path, 300)
    plain = tmp_path / "plain"
    assert cli("simulate", "--trace", swf, "--platform", "sarood-testbed", "--out", plain, "-q", "--no-report",
               cwd=tmp_path).returncode == 0
    config = tmp_path / "sim.yaml"
    config.write_text(f"trace: {swf}\nplatform: sarood-testbed\nout: {tmp_path / 'mold'}\n"
                      "moldable: {fraction: 1.0, theta: [0.2, 0.6], malleable: true}\n")
    proc = cli("simulate", "--config", config, "-q", "--no-report", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "moldable jobs (wattsched.workload.moldable) with seed 0" in proc.stdout + proc.stderr
    # easy starts every job on its requested nodes, uncapped: the ranges change no start or end; the jobs'
    # applications change their power (PASS on the testbed: base + memory + p_h per node), hence energy_j only
    def table(path):
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))

    mold, base = table(tmp_path / "mold" / "jobs.csv"), table(plain / "jobs.csv")
    assert [{k: v for k, v in r.items() if k != "energy_j"} for r in mold] == [
        {k: v for k, v in r.items() if k != "energy_j"} for r in base]
    assert any(a["energy_j"] != b["energy_j"] for a, b in zip(mold, base, strict=True))
    assert read_summary(tmp_path / "mold")["summary"]["n_jobs"] == read_summary(plain)["summary"]["n_jobs"] == 300
    jobs = list(read_job_table(tmp_path / "mold" / "workload.csv.gz").jobs)
    assert all(app_of(j) in pass_apps() and j.malleable for j in jobs)
    assert any(j.min_nodes < j.nodes for j in jobs)
