"""`wattsched traces import`: Slurm accounting parsers on real captured output, the job table they make, bad input."""

from __future__ import annotations

import contextlib
import copy
import json
from datetime import timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wattsched.cli import main
from wattsched.daemon.slurm.sacct import (
    SACCT_FORMAT,
    SACCT_REQUIRED,
    SUPPORTED_DATA_PARSERS,
    parse_sacct_json,
    parse_sacct_text,
)
from wattsched.daemon.traceimport import hash_user, import_accounting, read_recorded
from wattsched.errors import OptionError, TelemetryError, TraceError
from wattsched.telemetry.prometheus import PrometheusSource
from wattsched.workload.tables import read_job_table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sacct"

# What was submitted (tests/fixtures/sacct/README.md): name -> (nodes, time limit s, state, ran)
SUBMITTED = {
    "one": (1, 120.0, "COMPLETED"),
    "two": (2, 180.0, "COMPLETED"),
    "fails": (1, 60.0, "FAILED"),
    "timeout": (1, 60.0, "TIMEOUT"),
    "cancelled": (1, 300.0, "CANCELLED"),
    "after": (1, 600.0, "COMPLETED"),
    "nolimit": (1, None, "COMPLETED"),
}
# the docker cluster's captures, one directory per schema version (energy-v0.0.38 is the namespace cluster's)
VERSIONS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name.startswith("v"))
ENERGY = FIXTURES / "energy-v0.0.38"
TEXT_VERSIONS = [v for v in VERSIONS if (FIXTURES / v / "sacct-P.txt").exists()]


def _by_name(jobs):
    return {j.name: j for j in jobs}


def _check_submitted(jobs):
    named = _by_name(jobs)
    assert set(named) == set(SUBMITTED)
    for name, (nodes, limit, state) in SUBMITTED.items():
        job = named[name]
        assert (job.nodes, job.time_limit_s, job.state) == (nodes, limit, state), name
        assert len(job.node_names) == nodes and set(job.node_names) <= {"c1", "c2"}
        assert job.partition == "normal" and job.user == "root"
        assert job.submit <= job.start < job.end
        assert job.energy_j is None  # no energy plugin on the docker cluster
    assert named["two"].node_names == ("c1", "c2") and named["two"].node_list == "c[1-2]"
    # the timeout job ran its whole minute before Slurm killed it
    assert named["timeout"].end - named["timeout"].start >= 60
    assert named["one"].end - named["one"].start == pytest.approx(5, abs=1)


@pytest.mark.parametrize("version", VERSIONS)
def test_sacct_json_fixture(version):
    jobs, got = parse_sacct_json((FIXTURES / version / "sacct.json").read_text(), "sacct.json")
    assert got == version
    _check_submitted(jobs)


@pytest.mark.parametrize("version", TEXT_VERSIONS)
def test_sacct_text_fixture_agrees_with_json(version):
    text_jobs = parse_sacct_text((FIXTURES / version / "sacct-P.txt").read_text(), tz=timezone.utc)
    _check_submitted(text_jobs)
    json_jobs, _ = parse_sacct_json((FIXTURES / version / "sacct.json").read_text())
    assert sorted(text_jobs, key=lambda j: j.job_id) == sorted(json_jobs, key=lambda j: j.job_id)


@pytest.mark.parametrize("version", TEXT_VERSIONS)
def test_sacct_text_with_step_lines_folds_steps_into_jobs(version):
    steps = parse_sacct_text((FIXTURES / version / "sacct-P-steps.txt").read_text(), tz=timezone.utc)
    jobs = parse_sacct_text((FIXTURES / version / "sacct-P.txt").read_text(), tz=timezone.utc)
    assert steps == jobs


@pytest.mark.parametrize("version", [v for v in VERSIONS if (FIXTURES / v / "slurmrestd-jobs.json").exists()])
def test_slurmrestd_reply_parses_like_sacct(version):
    rest, got = parse_sacct_json((FIXTURES / version / "slurmrestd-jobs.json").read_text())
    assert got == version
    cli, _ = parse_sacct_json((FIXTURES / version / "sacct.json").read_text())
    assert sorted(rest, key=lambda j: j.job_id) == sorted(cli, key=lambda j: j.job_id)


def test_slurm_energy_from_step_tres():
    """The 22.05 layout with energy accounting: a step's energy is its TRESUsageInTot (``requested.total``)."""
    doc = json.loads((FIXTURES / "v0.0.38" / "slurmrestd-jobs.json").read_text())
    two = next(j for j in doc["jobs"] if j["name"] == "two")
    for entry in two["steps"][0]["tres"]["requested"]["total"]:
        if entry["type"] == "energy":
            entry["count"] = 4000
    jobs, _ = parse_sacct_json(json.dumps(doc))
    by = _by_name(jobs)
    assert by["two"].energy_j == 4000 and by["one"].energy_j is None
    imported = import_accounting(jobs, power="auto")
    row = {j.id: k for k, j in enumerate(imported.jobs)}[by["two"].job_id]
    runtime = by["two"].end - by["two"].start
    assert imported.jobs[row].mean_w == pytest.approx(4000 / (2 * runtime))
    assert imported.record["power_source"][1][row] == "slurm-energy"
    assert imported.record["energy_j"][1][row] == 4000
    assert imported.sources == {"slurm-energy": 1, "none": len(jobs) - 1}


def _consumed_energy_raw(path: Path) -> dict[str, int]:
    """``JobIDRaw -> ConsumedEnergyRaw`` of a ``sacct -P`` file, read without the parser under test."""
    header, *rows = path.read_text().splitlines()
    col = header.split("|")
    return {r.split("|")[col.index("JobIDRaw")]: int(r.split("|")[col.index("ConsumedEnergyRaw")]) for r in rows}


def test_real_slurm_energy_of_the_namespace_cluster():
    """Jobs of a slurmd gathering energy (acct_gather_energy/ibmaem, jobs with an extern step): the job table's
    energy is the ConsumedEnergyRaw sacct printed, from sacct --json, sacct -P and sacct -P with step lines."""
    slurm = _consumed_energy_raw(ENERGY / "sacct-P.txt")
    steps = _consumed_energy_raw(ENERGY / "sacct-P-steps.txt")
    assert sorted(slurm) == ["5", "6", "7", "8"]
    # the job's energy is its extern step's, over all its nodes; the batch step's covers the first node only
    for job in slurm:
        assert slurm[job] == steps[job] == steps[f"{job}.extern"] >= steps[f"{job}.batch"] > 0
    assert steps["6.extern"] > 1.5 * steps["6.batch"] and steps["7.extern"] > 2.5 * steps["7.batch"]
    json_jobs, version = parse_sacct_json((ENERGY / "sacct.json").read_text())
    assert version == "v0.0.38"
    for jobs in (json_jobs, parse_sacct_text((ENERGY / "sacct-P.txt").read_text(), tz=timezone.utc),
                 parse_sacct_text((ENERGY / "sacct-P-steps.txt").read_text(), tz=timezone.utc)):
        assert {str(j.job_id): j.energy_j for j in jobs} == slurm
        for power in ("slurm-energy", "auto"):
            imported = import_accounting(jobs, power=power)
            assert imported.sources == {"slurm-energy": 4}
            by_id = {str(j.job_id): j for j in jobs}
            for row, tj in enumerate(imported.jobs):
                job = by_id[str(tj.id)]
                assert imported.record["energy_j"][1][row] == slurm[str(tj.id)]
                assert tj.mean_w == pytest.approx(slurm[str(tj.id)] / (job.nodes * (job.end - job.start)))
                assert imported.record["power_source"][1][row] == "slurm-energy"
    # a 3-node job of 5 s at the emulator's busy 250 W: its energy is about that of three nodes, not one
    three = next(j for j in json_jobs if j.name == "three")
    assert three.nodes == 3 and three.end - three.start == 5
    assert three.energy_j / (3 * 5) == pytest.approx(250, rel=0.05)


def test_real_step_energy_without_an_extern_step():
    """Jobs that ran before the cluster had extern steps: Slurm records no job energy, only the batch step's
    (ConsumedEnergyRaw 2344 J and 1573 J in ``sacct -P`` when captured). The JSON has it as the step's
    ``requested.total`` (TRESUsageInTot); ``consumed.total`` (TRESUsageOutTot) holds another figure."""
    doc = json.loads((ENERGY / "sacct-steps-no-extern.json").read_text())
    for job in doc["jobs"]:
        assert [t["count"] for t in job["tres"]["allocated"] if t["type"] == "energy"] == [None]
        consumed = [t["count"] for s in job["steps"] for t in s["tres"]["consumed"]["total"] if t["type"] == "energy"]
        assert consumed == [33]
    jobs, _ = parse_sacct_json(json.dumps(doc))
    assert {j.job_id: j.energy_j for j in jobs} == {1: 2344, 2: 1573}


@pytest.mark.parametrize("version", VERSIONS)
def test_cli_import_writes_a_table_simulate_reads(tmp_path, version, capsys):
    out = tmp_path / "jobs.csv"
    assert main(["traces", "import", "--sacct-json", str(FIXTURES / version / "sacct.json"), "-o", str(out),
                 "--hash-users", "--salt", "pepper", "-q"]) == 0
    said = capsys.readouterr().out
    assert f"wrote 7 jobs from {FIXTURES / version / 'sacct.json'} (data_parser {version})" in said
    assert "power: 7 none" in said
    wl = read_job_table(str(out))
    jobs = list(wl.jobs)
    assert len(jobs) == 7 and {j.user for j in jobs} == {hash_user("root", "pepper")}
    assert sorted(j.nodes for j in jobs) == [1, 1, 1, 1, 1, 1, 2]
    assert {j.status for j in jobs} == {0, 1, 5}
    assert any("ignored columns: start_s, end_s" in n for n in wl.notes)
    rec = read_recorded(str(out))
    raw, _ = parse_sacct_json((FIXTURES / version / "sacct.json").read_text())
    assert {(r.job_id, r.start, r.end, r.nodes) for r in rec} == {(j.job_id, j.start, j.end, j.node_names)
                                                                  for j in raw}


def test_jobs_without_a_user_are_noted():
    """22.05's sacct --json names a job's user through its association: null for a user without one (seen on the
    namespace cluster before its users were given an account)."""
    doc = json.loads((FIXTURES / "v0.0.38" / "sacct.json").read_text())
    for job in doc["jobs"][:2]:
        job["user"] = None
    jobs, _ = parse_sacct_json(json.dumps(doc))
    assert sum(1 for j in jobs if j.user == "") == 2
    notes = import_accounting(jobs, power="none").notes
    said = "2 jobs have no user (Slurm's JSON names the user of jobs with an association only"
    assert any(n.startswith(said) for n in notes), notes
    assert not any("no user" in n for n in import_accounting(parse_sacct_json(
        (FIXTURES / "v0.0.38" / "sacct.json").read_text())[0], power="none").notes)


# --------------------------------------------------------------------------- bad input, one per class


def test_malformed_json_names_file_and_line():
    text = (FIXTURES / "v0.0.38" / "sacct.json").read_text()
    broken = text[: len(text) // 2]
    with pytest.raises(TraceError, match=r"^jobs\.json:\d+: not valid JSON") as err:
        parse_sacct_json(broken, "jobs.json")
    assert err.value.line > 1


def test_unknown_data_parser_version_names_the_key():
    doc = json.loads((FIXTURES / "v0.0.38" / "sacct.json").read_text())
    doc["meta"]["plugin"]["type"] = "openapi/dbv0.0.35"
    with pytest.raises(TraceError, match=r"meta\.plugin\.data_parser: unknown data_parser version 'v0\.0\.35'"):
        parse_sacct_json(json.dumps(doc), "old.json")
    del doc["meta"]
    with pytest.raises(TraceError, match=r"meta\.plugin\.data_parser: names no data_parser version"):
        parse_sacct_json(json.dumps(doc), "old.json")


def test_missing_json_field_names_its_path():
    doc = json.loads((FIXTURES / "v0.0.38" / "sacct.json").read_text())
    del doc["jobs"][2]["time"]["start"]
    with pytest.raises(TraceError, match=r"^x\.json: jobs\[2\]\.time\.start: missing"):
        parse_sacct_json(json.dumps(doc), "x.json")


def test_missing_column_names_it_and_the_format():
    text = (FIXTURES / "v0.0.38" / "sacct-P.txt").read_text()
    header, *rows = text.splitlines()
    cols = header.split("|")
    k = cols.index("TimelimitRaw")
    cut = "\n".join("|".join(c for i, c in enumerate(line.split("|")) if i != k) for line in [header, *rows])
    with pytest.raises(TraceError, match=rf"^p\.txt:1: TimelimitRaw: missing column TimelimitRaw; run sacct .*"
                       rf"--format={SACCT_FORMAT}"):
        parse_sacct_text(cut, "p.txt")
    with pytest.raises(TraceError, match=r"^p\.txt:3: NNodes: not a node count: 'two'"):
        parse_sacct_text(text.replace("|2|c[1-2]|", "|two|c[1-2]|"), "p.txt", tz=timezone.utc)


def test_unreachable_prometheus_names_the_url():
    jobs, _ = parse_sacct_json((FIXTURES / "v0.0.38" / "sacct.json").read_text())
    dead = PrometheusSource("http://127.0.0.1:9", "node_power_watts", timeout_s=2)
    with pytest.raises(TelemetryError, match=r"cannot reach Prometheus at http://127\.0\.0\.1:9"):
        import_accounting(jobs, prometheus=dead)


def test_unreachable_slurmrestd_and_option_errors(tmp_path, capsys):
    token = tmp_path / "token"
    token.write_text("SLURM_JWT=abc\n")
    assert main(["traces", "import", "--slurmrestd", "http://127.0.0.1:9", "--token-file", str(token),
                 "-o", str(tmp_path / "x.csv")]) == 2
    assert "cannot reach slurmrestd at http://127.0.0.1:9" in capsys.readouterr().err
    assert main(["traces", "import", "-o", str(tmp_path / "x.csv")]) == 2
    assert ("give exactly one of --sacct-json FILE, --sacct FILE, --slurmrestd URL or --shadow-record DIR"
            in capsys.readouterr().err)
    assert main(["traces", "import", "--sacct", "x", "--hash-users", "-o", str(tmp_path / "x.csv")]) == 2
    assert "--hash-users: needs --salt" in capsys.readouterr().err
    with pytest.raises(OptionError, match="prometheus needs --prometheus URL"):
        import_accounting([], power="prometheus")


# --------------------------------------------------------------------------- properties

_json_doc = json.loads((FIXTURES / "v0.0.38" / "sacct.json").read_text())


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_parsed_or_refused_with_a_trace_error(text):
    """Whatever sacct --json or sacct -P input is given, the parsers return jobs or raise TraceError, nothing else."""
    for parse in (parse_sacct_json, lambda t: parse_sacct_text(t, tz=timezone.utc)):
        with contextlib.suppress(TraceError):
            parse(text)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["time.start", "time.end", "time.submission", "time.limit", "state.current", "job_id",
                        "nodes", "allocation_nodes"]),
       st.one_of(st.none(), st.text(max_size=5), st.integers(-5, 2**65), st.floats(),
                 st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.sampled_from(["set", "infinite", "number"]),
                                 st.one_of(st.booleans(), st.integers(0, 10**10)))),
       st.integers(0, 6))
def test_any_field_value_is_read_or_refused_naming_its_path(key, value, index):
    doc = copy.deepcopy(_json_doc)
    cur = doc["jobs"][index]
    *parents, last = key.split(".")
    for p in parents:
        cur = cur[p]
    cur[last] = value
    try:
        parse_sacct_json(json.dumps(doc))
    except TraceError as exc:
        assert f"jobs[{index}]" in str(exc)
    except ValueError:  # a float NaN/inf cannot be written as JSON by the strict encoder: not a Slurm output
        pass


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SUPPORTED_DATA_PARSERS), st.sampled_from(["data_parser/", ""]))
def test_every_supported_version_name_is_accepted(version, prefix):
    doc = copy.deepcopy(_json_doc)
    doc["meta"] = {"plugin": {"type": "", "data_parser": prefix + version}}
    jobs, got = parse_sacct_json(json.dumps(doc))
    assert got == version and len(jobs) == 7


def test_newer_layouts_time_objects_and_state_lists():
    """v0.0.40+ layouts: {set, infinite, number} times and limits, the state a list of base state and flags."""
    doc = copy.deepcopy(_json_doc)
    doc["meta"] = {"plugin": {"type": "", "data_parser": "v0.0.41"}}
    for job in doc["jobs"]:
        for k in ("submission", "start", "end"):
            job["time"][k] = {"set": True, "infinite": False, "number": job["time"][k]}
        limit = job["time"]["limit"]
        job["time"]["limit"] = ({"set": False, "infinite": True, "number": 0} if limit is None
                                else {"set": True, "infinite": False, "number": limit})
        job["state"]["current"] = [job["state"]["current"], "REQUEUED"][:1 + (job["name"] == "one")]
    jobs, got = parse_sacct_json(json.dumps(doc))
    assert got == "v0.0.41"
    _check_submitted(jobs)


def test_required_columns_are_documented():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "simulator.md").read_text()
    assert f"--format={SACCT_FORMAT}" in doc
    assert all(c in SACCT_FORMAT for c in SACCT_REQUIRED)


# --------------------------------------------------------------------------- platform fit (pure)


def test_fit_platform_splits_idle_and_busy_by_recorded_jobs_and_groups_by_size():
    from wattsched.config.platform import PlatformConfig
    from wattsched.daemon.platformfit import fit_platform
    from wattsched.daemon.slurm.records import SlurmNode
    from wattsched.daemon.traceimport import RecordedJob

    # a, b: 32 cores; g: 64 cores and 4 GPUs. Jobs on a over [10, 20), on g over [0, 30).
    recorded = [RecordedJob(1, 10.0, 20.0, ("a",)), RecordedJob(2, 0.0, 30.0, ("g",))]
    series = {
        "a": [(t, 300.0 if 10 <= t < 20 else 100.0) for t in range(40)],
        "b": [(t, 102.0) for t in range(40)],
        "g": [(t, 900.0 + t if t < 30 else 200.0) for t in range(40)],
    }
    nodes = [SlurmNode("a", "IDLE", cpus=32), SlurmNode("b", "IDLE", cpus=32),
             SlurmNode("g", "IDLE", cpus=64, gres="gpu:a100:4")]
    platform, fits = fit_platform(series, recorded, name="site", node_info=nodes)
    by = {f.nodes: f for f in fits}
    cpu, gpu = by[("a", "b")], by[("g",)]
    assert (cpu.cores, cpu.idle_w, cpu.busy_w, cpu.busy_samples, cpu.idle_samples) == (32, 102.0, 300.0, 10, 70)
    assert (gpu.cores, gpu.gpus, gpu.idle_w) == (64, 4, 200.0)
    assert gpu.busy_min_w == pytest.approx(900 + 0.05 * 29) and gpu.busy_w == pytest.approx(900 + 0.95 * 29)
    config = PlatformConfig.model_validate(platform)  # the layout --platform FILE reads
    assert [g.count for g in config.node_groups] == [2, 1]
    with pytest.raises(TraceError, match=r"group nodes \(b\) has no busy sample; widen the window"):
        fit_platform({"b": series["b"]}, recorded)
    with pytest.raises(TraceError, match="no node power samples in the window"):
        fit_platform({}, recorded)


def test_fit_platform_reads_idle_and_busy_power_through_a_rate_window_on_a_busy_node():
    """Power read as ``rate(counter[W])`` tells the window before each sample: on a node whose gaps between jobs
    are short, the samples after each job's end read its power; left out for ``settle_s = W``, idle is idle."""
    from argparse import Namespace

    from wattsched.daemon.platformfit import fit_platform
    from wattsched.daemon.traceimport import RecordedJob
    from wattsched.daemon.twincommands import _settle_s

    window = 5
    jobs = [(0.0, 12.0), (18.0, 30.0), (37.0, 49.0), (55.0, 100.0)]  # gaps of 6 or 7 s, then 12 s idle
    drawn = [300.0 if any(a <= t < b for a, b in jobs) else 100.0 for t in range(112)]
    # a rate over the window: the mean power drawn over the W seconds before each 1 s step
    series = {"a": [(float(t), sum(drawn[t - window:t]) / window) for t in range(window, 112)]}
    recorded = [RecordedJob(k, a, b, ("a",)) for k, (a, b) in enumerate(jobs)]
    _, [naive] = fit_platform(series, recorded)
    _, [fit] = fit_platform(series, recorded, settle_s=window)
    assert naive.idle_w > 150.0, "the samples just after each end read the job"
    assert fit.idle_w == 100.0 and fit.busy_min_w == 300.0 and fit.busy_w == 300.0
    assert fit.idle_samples == 1 + 2 + 1 + 7 and fit.busy_samples == naive.busy_samples - 3 * window
    with pytest.raises(TraceError, match=r"has no idle sample \(samples within the 40 s rate window"):
        fit_platform(series, recorded, settle_s=40)
    # the command takes the window of a query read through rate(), none of a gauge's
    assert _settle_s(Namespace(power_query="rapl", rate_window="1m30s")) == 90.0
    assert _settle_s(Namespace(power_query="ipmi", rate_window="1m")) == 0.0
    with pytest.raises(OptionError, match=r"--rate-window: '5 s' is not a Prometheus duration"):
        _settle_s(Namespace(power_query='rate(x_joules_total[{range}])', rate_window="5 s"))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(SACCT_REQUIRED), st.sampled_from(TEXT_VERSIONS))
def test_any_missing_required_column_is_named(column, version):
    lines = (FIXTURES / version / "sacct-P.txt").read_text().splitlines()
    k = lines[0].split("|").index(column)
    cut = "\n".join("|".join(c for i, c in enumerate(line.split("|")) if i != k) for line in lines)
    with pytest.raises(TraceError, match=rf"^p\.txt:1: {column}: missing column {column};"):
        parse_sacct_text(cut, "p.txt")
