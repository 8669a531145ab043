"""Every class of bad input answered clearly: one test per case of the bad-input tour (F1-F34).

Each test feeds the input the way a user meets it (the ``wattsched`` command in a
subprocess, or the library function a command calls) and pins the answer: an error
in the one shape ``FILE:LINE: KEY: message`` (``--option: message`` for the command
line) after one ``wattsched: error:`` prefix, exit status 2 and no traceback, or a
documented behaviour. The node agent's cases (F33, F34) are in test_agent_server.py,
next to its munged fixture.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import resource
import sqlite3
import subprocess
import sys
import time
from importlib.resources import files
from pathlib import Path

import pytest

from builders import kth_excerpt
from wattsched.config import SimConfig, load_config, read_yaml
from wattsched.config.daemon import DaemonConfig
from wattsched.config.platform import load_platform, platform_from_procs
from wattsched.daemon.slurm.parse import (
    SlurmOutputError,
    parse_nodes_json,
    parse_scontrol_jobs_text,
    parse_scontrol_nodes_text,
    parse_squeue_json,
)
from wattsched.daemon.store import Store
from wattsched.errors import ConfigError, TraceError
from wattsched.sim.engine import Engine, EngineOptions
from wattsched.sim.metrics import format_summary_table
from wattsched.workload.records import TraceJob
from wattsched.workload.swf import read_swf, trace_info
from wattsched.workload.tables import read_job_table

ERROR_LINE = re.compile(r"^wattsched: error: (\S+:\d+: |\S+: |--[\w-]+: |WATTSCHED_\w+: )")


def job_line(i: int, submit: int, *, run: object = 100, procs: object = 4, user: object = 1, id_: object = None) -> str:
    """One SWF job line (18 fields)."""
    return (f"{i if id_ is None else id_} {submit} 0 {run} {procs} -1 -1 {procs} 200 -1 1 {user} 1 -1 1 -1 -1 -1")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The bundled KTH excerpt's header and its first 200 jobs."""
    return kth_excerpt(tmp_path_factory.mktemp("bad"))


def header_swf(tmp_path: Path, jobs: list[str], name: str = "t.swf", max_procs: str = "8") -> Path:
    path = tmp_path / name
    path.write_text(f"; MaxProcs: {max_procs}\n" + "".join(j + "\n" for j in jobs))
    return path


def cli(*args, cwd: Path, timeout: float = 120, limit_mb: int | None = None) -> subprocess.CompletedProcess:
    """The real ``wattsched`` command, as a user runs it."""
    def limit():  # bounded memory: a blow-up fails instead of swapping the machine
        size = limit_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    return subprocess.run([sys.executable, "-m", "wattsched", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=limit if limit_mb else None)


def refused(proc: subprocess.CompletedProcess, *expected: str) -> str:
    """Exit 2, no traceback, one ``wattsched: error:`` line in the one shape, and each expected text present."""
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, err)
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("wattsched: error:")]
    assert len(errors) == 1 and ERROR_LINE.match(errors[0]), err  # one prefix, one shape
    for text in expected:
        assert text in err, (text, err)
    return err


# --------------------------------------------------------------------------- traces


def test_f1_truncated_or_corrupt_gzip(base, tmp_path):
    data = gzip.compress(base.read_bytes())
    trunc = tmp_path / "trunc.swf.gz"
    trunc.write_bytes(data[:3000])
    err = refused(cli("traces", "info", trunc, cwd=tmp_path), "truncated gzip data")
    assert re.search(r"trunc\.swf\.gz:\d+: truncated gzip data", err)
    refused(cli("simulate", "--trace", trunc, "-q", "--out", tmp_path / "r", cwd=tmp_path), "truncated gzip")
    corrupt = tmp_path / "corrupt.swf.gz"
    corrupt.write_bytes(data[:100] + bytes(200) + data[300:])
    with pytest.raises(TraceError, match=r"corrupt\.swf\.gz"):
        list(read_swf(corrupt).jobs)
    table = tmp_path / "t.csv.gz"
    rows = "".join(f"{i},{i},5,1\n" for i in range(1, 5000)).encode()
    table.write_bytes(gzip.compress(b"id,submit_s,runtime_s,nodes\n" + rows)[:2000])
    with pytest.raises(TraceError, match=r"t\.csv\.gz: truncated gzip data"):
        read_job_table(table)


def test_f2_machine_size_sanity_bound(base, tmp_path):
    huge = tmp_path / "huge.swf"
    huge.write_text(re.sub(r"; MaxProcs: *\d+", "; MaxProcs: 1000000000000", base.read_text()))
    start = time.monotonic()
    refused(cli("simulate", "--trace", huge, "-q", "--out", tmp_path / "r", cwd=tmp_path, limit_mb=1500),
            f"{huge.name}: MaxProcs: a machine of 1,000,000,000,000 nodes is more than the sanity limit of 200,000",
            "--max-nodes")
    refused(cli("simulate", "--trace", base, "--procs", 100_000_000, "-q", cwd=tmp_path, limit_mb=1500),
            "wattsched: error: --procs: a machine of 100,000,000 nodes")
    assert time.monotonic() - start < 60
    plat = tmp_path / "p.yaml"
    plat.write_text("name: x\nnode_groups:\n  - {name: a, count: 100000000}\n")
    with pytest.raises(ConfigError, match=r"p\.yaml:3: node_groups\[0\]\.count: a machine of 100,000,000 nodes"):
        load_platform(plat)
    # the limit is a sanity bound, not a ceiling: max_nodes raises it
    with pytest.raises(ConfigError, match=r"<config>: procs: a machine of 50 nodes .*max_nodes"):
        SimConfig(trace="t.swf", procs=50, max_nodes=40).build_platform()
    assert len(SimConfig(trace="t.swf", procs=50, max_nodes=60).build_platform()) == 50
    assert len(platform_from_procs(20, max_nodes=20)) == 20


def test_f3_max_procs_zero(base, tmp_path):
    zero = tmp_path / "zero.swf"
    zero.write_text(re.sub(r"; MaxProcs: *\d+", "; MaxProcs: 0", base.read_text()))
    refused(cli("simulate", "--trace", zero, "-q", cwd=tmp_path),
            "zero.swf: MaxProcs: '0' is not a positive number of processors", "--procs N")
    info = trace_info(read_swf(zero))
    assert info["jobs"] == 200 and "larger_than_machine" not in info["cleaning"]["dropped"]
    assert "the header's MaxProcs ('0') is not a positive number of processors" in info["notes"][-1]


def test_f4_empty_or_header_only_workloads(base, tmp_path):
    only_header = tmp_path / "h.swf"
    only_header.write_text("".join(x + "\n" for x in base.read_text().splitlines() if x.startswith(";")))
    refused(cli("simulate", "--trace", only_header, "-q", "--out", tmp_path / "r", cwd=tmp_path),
            "h.swf: no jobs: the file is empty or has only its header")
    (tmp_path / "e.swf").write_text("")
    refused(cli("simulate", "--trace", "e.swf", "--procs", 4, "-q", "--out", tmp_path / "r", cwd=tmp_path),
            "e.swf: no jobs")
    refused(cli("traces", "synth", "--jobs", 0, "--out", tmp_path / "s.csv", cwd=tmp_path),
            "wattsched: error: --jobs: expected a number of jobs between 1 and 10,000,000, got 0")
    assert not (tmp_path / "s.csv").exists()


def test_f5_byte_order_mark_before_swf(base, tmp_path):
    bom = tmp_path / "bom.swf"
    bom.write_bytes(b"\xef\xbb\xbf" + base.read_bytes())
    workload = read_swf(bom)
    jobs = list(workload.jobs)
    assert len(jobs) == 200 and jobs[0].id == 15 and workload.max_procs == 100


def test_f6_duplicate_job_ids(tmp_path):
    path = header_swf(tmp_path, [job_line(1, 0), job_line(2, 5), job_line(1, 500)])
    with pytest.raises(TraceError, match=rf"^{re.escape(str(path))}:4: job_number: job number 1 already appears on "
                                         r"line 2 \(field 1\)$"):
        list(read_swf(path).jobs)
    kept = list(read_swf(path, skip_bad_lines=True).jobs)
    assert [j.id for j in kept] == [1, 2]
    table = tmp_path / "d.csv"
    table.write_text("id,submit_s,runtime_s,nodes\n1,0,5,1\n1,3,5,1\n")
    with pytest.raises(TraceError, match=r"d\.csv:3: id: duplicate job id 1 \(first on line 2\)"):
        read_job_table(table)


def test_f7_huge_values_refused_and_formatted(tmp_path):
    path = header_swf(tmp_path, [job_line(1, 0, run="1e300")])
    with pytest.raises(TraceError, match=r":2: run_time: 1e300 is out of range \(at most 1e15\)"):
        list(read_swf(path).jobs)
    table = format_summary_table({"n_jobs": 10, "makespan_s": 3e300, "energy_j": 4e305, "utilization": 7e299,
                                  "mean_power_w": 2e301})
    assert max(len(line) for line in table.splitlines()) < 60, table
    assert "e+" in table


@pytest.mark.parametrize(("line", "message"), [
    (job_line(1, 0, id_="99.7"), r":2: job_number: expected a whole number, got 99.7"),
    (job_line(1, 0, procs="4.5"), r":2: allocated_procs: expected a whole number, got 4.5"),
    (job_line(1, 0, id_="-3"), r":2: job_number: a job number must be >= 0, got -3"),
    (job_line(1, 0, user="-5"), r":2: user_id: expected -1 \(missing\) or a number >= 0, got -5"),
], ids=["fractional-id", "fractional-procs", "negative-id", "negative-user"])
def test_f8_fractions_and_negatives_in_swf(tmp_path, line, message):
    path = header_swf(tmp_path, [line])
    with pytest.raises(TraceError, match=message):
        list(read_swf(path).jobs)


@pytest.mark.parametrize(("row", "message"), [
    ("1,0,5,1,5000,10", r":2: mean_w: mean power 5000.0 W is above max_w 10.0 W"),
    ("1,0,5,1,1e300,", r":2: mean_w: 1e\+300 W per node is out of range"),
    ("1,-4,5,1,,", r":2: submit_s: submit time -4.0 is negative"),
], ids=["mean-above-max", "mean-huge", "negative-submit"])
def test_f9_job_table_values(tmp_path, row, message):
    path = tmp_path / "t.csv"
    path.write_text(f"id,submit_s,runtime_s,nodes,mean_w,max_w\n{row}\n")
    with pytest.raises(TraceError, match=message):
        read_job_table(path)


def test_f9_job_table_sizes_and_walltime(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,submit_s,runtime_s,walltime_s,nodes,min_nodes,max_nodes\n"
                    "1,0,5,0,2,,\n2,1,5,10,100000,,\n3,2,5,10,1,,\n")
    workload = read_job_table(path, machine_nodes=100)
    jobs = list(workload.jobs)
    assert [j.id for j in jobs] == [1, 3]
    assert jobs[0].walltime_s == 5.0  # 0 means "not given", as in SWF: the run time
    assert workload.report.as_dict()["dropped"] == {"larger_than_machine": 1}
    path.write_text("id,submit_s,runtime_s,nodes,min_nodes,max_nodes\n1,0,5,2,8,4\n")
    with pytest.raises(TraceError, match=r"t\.csv:2: min_nodes: min_nodes 8 is above max_nodes 4"):
        read_job_table(path)


# --------------------------------------------------------------------------- configs

BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


@pytest.mark.parametrize("where", ["top", "params"])
def test_f10_yaml_alias_bomb(tmp_path, where):
    path = tmp_path / "bomb.yaml"
    bomb = BOMB if where == "top" else BOMB.replace("i: &i", "params: {x: &i") + "}\n"
    text = "trace: t.swf\n" + bomb
    path.write_text(text)
    start = time.monotonic()
    err = refused(cli("check-config", path, cwd=tmp_path, limit_mb=400, timeout=60),
                  "aliases expand to more than 100,000 values")
    assert re.match(r"wattsched: error: \S*bomb\.yaml:\d+: aliases expand", err)
    assert time.monotonic() - start < 30
    # a few aliases are fine, and keep their lines
    data, lines = read_yaml(tmp_path / "ok.yaml", text="x: &a [1, 2]\ny: *a\nz: 3\n")
    assert data == {"x": [1, 2], "y": [1, 2], "z": 3} and lines[("z",)] == 3


def test_f11_missing_files_named_by_key(tmp_path):
    (tmp_path / "s1.yaml").write_text("trace: t.swf\nplatform: nope.yaml\n")
    refused(cli("check-config", "s1.yaml", cwd=tmp_path), "s1.yaml:2: platform: no such file 'nope.yaml'")
    (tmp_path / "s2.yaml").write_text("trace: t.swf\nprocs: 4\ncap_schedule: nope.csv\n")
    refused(cli("check-config", "s2.yaml", cwd=tmp_path), "s2.yaml:3: cap_schedule: no such file")
    (tmp_path / "d.yaml").write_text("slurm: {backend: sim}\nsim: {trace: /nonexistent.swf}\n")
    refused(cli("check-config", "d.yaml", cwd=tmp_path), "d.yaml:2: sim.trace: no such file '/nonexistent.swf'")


def test_f12_unknown_augment_option(base, tmp_path):
    (tmp_path / "s.yaml").write_text(f"trace: {base}\nprocs: 100\naugment: {{bogus_param: 3}}\n")
    err = refused(cli("check-config", "s.yaml", cwd=tmp_path), "s.yaml:3: augment.bogus_param: unknown key")
    assert "pydantic" not in err and "errors.pydantic.dev" not in err
    refused(cli("simulate", "--config", "s.yaml", "-q", cwd=tmp_path), "s.yaml:3: augment.bogus_param: unknown key")


def test_f13_out_of_range_options_name_the_option(base, tmp_path):
    err = refused(cli("simulate", "--trace", base, "--seed", "99999999999999999999999999", "-q", cwd=tmp_path),
                  "wattsched: error: --seed: expected a seed between 0 and 4,294,967,295")
    assert "e.g." not in err and "augment(" not in err
    refused(cli("traces", "synth", "--window", "-5", "--out", "s.csv", cwd=tmp_path),
            "wattsched: error: --window: expected a number > 0, got -5")


def test_f14_option_values_named_by_option(base, tmp_path):
    err = refused(cli("simulate", "--trace", base, "--param", "unknown=1", "-q", cwd=tmp_path),
                  "wattsched: error: --param: unknown: unknown key (valid keys: order) (policy 'easy')")
    assert "<config>" not in err
    refused(cli("simulate", "--trace", base, "--bsld-threshold", "-1", "-q", cwd=tmp_path),
            "wattsched: error: --bsld-threshold: expected a number > 0")


def test_f15_infinite_cap_and_cap_below_idle(base, tmp_path):
    refused(cli("simulate", "--trace", base, "--cap", "inf", "-q", cwd=tmp_path),
            "wattsched: error: --cap: a cap must be a finite number of watts, got 'inf'")
    proc = cli("simulate", "--trace", base, "--cap", "1", "--policy", "easy-pc", "-q", "--no-report", "--out",
               tmp_path / "r", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    warning = "the cap of 1 W is below the platform's idle power (9,500 W for 100 nodes)"
    assert warning in proc.stderr.splitlines()[0]  # before the run, first thing the user sees
    assert warning in json.dumps(json.loads((tmp_path / "r" / "summary.json").read_text()), ensure_ascii=False)


def test_f16_cap_schedule_windows_and_empty_schedules(tmp_path):
    (tmp_path / "neg.yaml").write_text("- {start_s: -500, end_s: 100, cap_w: 5000}\n")
    with pytest.raises(ConfigError, match=r"neg\.yaml:1: \[0\]\.start_s: must be >= 0"):
        SimConfig(trace="t.swf", procs=4, cap_schedule=str(tmp_path / "neg.yaml"))
    (tmp_path / "e.yaml").write_text("[]\n")
    (tmp_path / "e.csv").write_text("start_s,cap_w\n")
    for name in ("e.yaml", "e.csv"):
        with pytest.raises(ConfigError, match=rf"{name.replace('.', '[.]')}(:1)?: the schedule has no entries"):
            SimConfig(trace="t.swf", procs=4, cap_schedule=str(tmp_path / name))


def test_f17_check_config_knows_platform_files(tmp_path):
    plat = Path(str(files("wattsched") / "data" / "platforms" / "default.yaml"))
    proc = cli("check-config", plat, cwd=tmp_path)
    assert proc.returncode == 0 and "valid platform config (128 nodes)" in proc.stdout, proc.stderr
    (tmp_path / "k.yaml").write_text("kind: platform\nname: x\nnode_groups: [{name: a, count: 3}]\n")
    proc = cli("check-config", "k.yaml", cwd=tmp_path)
    assert proc.returncode == 0 and "k.yaml: valid platform config (3 nodes)" in proc.stdout, proc.stderr


def test_f19_tick_and_job_count_bounds(base, tmp_path):
    start = time.monotonic()
    refused(cli("simulate", "--trace", base, "--tick", "0.01", "-q", "--out", tmp_path / "r", cwd=tmp_path),
            "wattsched: error: --tick: a tick of 0.01 s over the trace's", "--max-ticks N")
    assert time.monotonic() - start < 30 and not (tmp_path / "r" / "timeline.csv").exists()
    refused(cli("traces", "synth", "--jobs", 100_000_000, "--out", "s.csv", cwd=tmp_path), "--jobs: expected a")
    # the engine's own bound, for workloads whose span is not known before the run
    jobs = [TraceJob(1, 0.0, 500.0, 500.0, 1, 1)]
    engine = Engine(platform_from_procs(2), jobs, _policy(), options=EngineOptions(tick_s=1.0, max_ticks=10))
    with pytest.raises(ConfigError, match=r"tick_s: the run reached 10 ticks of 1 s .*--max-ticks"):
        engine.run()


def _policy():
    from wattsched.policies import make_policy

    return make_policy("easy")


def test_f23_predict_evaluate_on_header_only_trace(base, tmp_path):
    only_header = tmp_path / "h.swf"
    only_header.write_text("".join(x + "\n" for x in base.read_text().splitlines() if x.startswith(";")))
    refused(cli("predict", "evaluate", "--trace", only_header, "-q", "--out", tmp_path / "p", cwd=tmp_path),
            "h.swf: no jobs")


def test_f24_predictor_param_prefix(base, tmp_path):
    err = refused(cli("predict", "evaluate", "--trace", base, "--param", "nosuch.alpha=1", "-q", cwd=tmp_path),
                  "wattsched: error: --param: nosuch.alpha=1: 'nosuch' is not a predictor being evaluated (history)")
    assert "NAME.nosuch" not in err


def test_f25_daemon_node_power_and_sim_nodes(tmp_path):
    (tmp_path / "d.yaml").write_text("slurm: {backend: cli}\nnode_power: {idle_w: 300, busy_w: 100}\n")
    refused(cli("check-config", "d.yaml", cwd=tmp_path), "d.yaml:2: node_power.idle_w: must be ≤ busy_w (100 W)")
    (tmp_path / "s.yaml").write_text("slurm: {backend: sim}\nsim: {nodes: 1000000}\n")
    refused(cli("check-config", "s.yaml", cwd=tmp_path),
            "s.yaml:2: sim.nodes: 1000000 nodes, but platform 'default' has only 128")


def test_f26_heartbeat_file_is_a_directory(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(f"slurm: {{backend: cli}}\nheartbeat_file: {tmp_path}\n")
    with pytest.raises(ConfigError, match=r"d\.yaml:2: heartbeat_file: .* is a directory; name a file"):
        load_config(path, DaemonConfig)


def test_f28_node_map_regular_expression(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text('slurm: {backend: cli}\ntelemetry: {node_map: "(unclosed"}\n')
    with pytest.raises(ConfigError, match=r"d\.yaml:2: telemetry\.node_map: not a regular expression: missing \)"):
        load_config(path, DaemonConfig)
    path.write_text('slurm: {backend: cli}\ntelemetry: {node_map: "^(?P<host>.*)$"}\n')
    with pytest.raises(ConfigError, match=r"telemetry\.node_map: the regular expression needs a named group"):
        load_config(path, DaemonConfig)


def daemon_config(tmp_path: Path, state: Path) -> Path:
    path = tmp_path / "d.yaml"
    path.write_text(f"slurm: {{backend: sim}}\nstate_dir: {state}\n")
    return path


def test_f29_corrupt_schema_version(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    db = sqlite3.connect(state / "state.db")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema_version', 'abc')")
    db.commit()
    db.close()
    refused(cli("audit", "-c", daemon_config(tmp_path, state), cwd=tmp_path),
            "state.db: meta.schema_version: 'abc' is not a schema version")


def test_f30_read_only_commands_never_write_the_store(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    empty = state / "state.db"
    empty.write_bytes(b"")
    config = daemon_config(tmp_path, state)
    refused(cli("audit", "-c", config, cwd=tmp_path), "state.db: not a wattsched state store")
    refused(cli("status", "-c", config, cwd=tmp_path), "state.db: not a wattsched state store")
    assert empty.stat().st_size == 0 and sorted(p.name for p in state.iterdir()) == ["state.db"]
    refused(cli("audit", "-c", config, "--limit", "-1", cwd=tmp_path), "wattsched: error: --limit: expected a")
    refused(cli("status", "-c", config, "--limit", "-1", cwd=tmp_path), "wattsched: error: --limit: expected a")
    # a real store: read-only access reads it and leaves its bytes alone
    empty.unlink()
    store = Store(empty)
    store.add_hold(7, "wattsched", "over the cap", now=1.0)
    store.close()
    before = empty.read_bytes()
    refused(cli("audit", "-c", config, "--action", "bogus", cwd=tmp_path),
            "wattsched: error: --action: unknown action 'bogus'")
    proc = cli("audit", "-c", config, "--action", "hold", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ro = Store(empty, read_only=True)
    assert ro.holds() == {7: ("wattsched", "over the cap")}
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        ro.add_hold(8, "wattsched")
    ro.close()
    assert empty.read_bytes() == before


# --------------------------------------------------------------------------- Slurm output


@pytest.mark.parametrize("text", [
    '{"jobs": [{"job_id": Infinity, "job_state": "PENDING"}]}',
    '{"jobs": [{"job_id": NaN, "job_state": "PENDING"}]}',
    '{"jobs": [{"job_id": ' + "9" * 5000 + ', "job_state": "PENDING"}]}',
    '{"jobs": [{"job_id": 1e999, "job_state": "PENDING"}]}',
    '{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}",
], ids=["infinity", "nan", "5000-digits", "float-overflow", "deep-nesting"])
def test_f31_unparseable_numbers_and_nesting(text):
    with pytest.raises(SlurmOutputError, match=r"^squeue --json: (invalid number|the JSON is nested too deeply)"):
        parse_squeue_json(text)
    with pytest.raises(SlurmOutputError, match=r"^sinfo --json: "):
        parse_nodes_json(text.replace('"jobs"', '"nodes"'))


def _job(**fields) -> str:
    return json.dumps({"jobs": [{"job_id": 1, "job_state": "PENDING", **fields}]})


def _node(name="n1", **fields) -> dict:
    return {"name": name, "state": ["IDLE"], **fields}


@pytest.mark.parametrize(("text", "message"), [
    (_job(job_id=-5), r"jobs\[0\]\.job_id: expected a number >= 0, got -5"),
    (_job(job_id=5.7), r"jobs\[0\]\.job_id: expected a whole number, got 5\.7"),
    (_job(job_id=1e30), r"jobs\[0\]\.job_id: 1e\+30 is out of range"),
    (_job(node_count=-3), r"jobs\[0\]\.node_count: expected a number >= 0, got -3"),
    (_job(time_limit=-5), r"jobs\[0\]\.time_limit: expected a number >= 0, got -5"),
    (_job(job_state="FOOBAR"), r"jobs\[0\]\.job_state: unknown job state 'FOOBAR'"),
    (_job(cpus=-8), r"jobs\[0\]\.cpus: expected a number >= 0, got -8"),
], ids=["negative-id", "fractional-id", "huge-id", "negative-nodes", "negative-limit", "unknown-state",
        "negative-cpus"])
def test_f32_implausible_job_values(text, message):
    with pytest.raises(SlurmOutputError, match=message):
        parse_squeue_json(text)


@pytest.mark.parametrize(("nodes", "message"), [
    ([_node(energy={"current_watts": -500})], r"nodes\[0\]\.energy\.current_watts: expected a number >= 0"),
    ([_node(energy={"current_watts": 1e308})], r"nodes\[0\]\.energy\.current_watts: 1e\+308 is out of range"),
    ([_node(energy={"current_watts": 5e6})], r"nodes\[0\]\.energy\.current_watts: 5e\+06 W is not a node's power"),
    ([_node(), _node()], r"nodes\[1\]\.name: node 'n1' already at nodes\[0\]"),
], ids=["negative-watts", "huge-watts", "megawatts", "duplicate-names"])
def test_f32_implausible_node_values(nodes, message):
    with pytest.raises(SlurmOutputError, match=message):
        parse_nodes_json(json.dumps({"nodes": nodes}))


@pytest.mark.parametrize(("text", "message"), [
    ("JobId=1 JobState=FOOBAR", r"^scontrol -o show jobs:1: JobState: unknown job state 'FOOBAR'"),
    ("JobId=1 JobState=PENDING NumCPUs=-8", r"^scontrol -o show jobs:1: NumCPUs: expected a number >= 0"),
    ("JobId=0 JobState=PENDING", r"^scontrol -o show jobs:1: JobId: not a job id"),
    ("JobId=1 JobState=PENDING TimeLimit=" + "9" * 5000, r"^scontrol -o show jobs:1: TimeLimit: expected a time"),
])
def test_f32_implausible_text_job_values(text, message):
    with pytest.raises(SlurmOutputError, match=message):
        parse_scontrol_jobs_text(text)


@pytest.mark.parametrize(("text", "message"), [
    ("NodeName=n1 State=IDLE CurrentWatts=nan", r"^scontrol -o show nodes:1: CurrentWatts: nan W is not"),
    ("NodeName=n1 State=IDLE CurrentWatts=-500", r"^scontrol -o show nodes:1: CurrentWatts: -500 W is not"),
    ("NodeName=n1 State=IDLE\nNodeName=n1 State=IDLE", r"^scontrol -o show nodes:2: NodeName: node 'n1' already"),
    ("NodeName=n1 State=IDLE CPUTot=" + "9" * 5000, r"^scontrol -o show nodes:1: CPUTot: 9+ is out of range"),
])
def test_f32_implausible_text_node_values(text, message):
    with pytest.raises(SlurmOutputError, match=message):
        parse_scontrol_nodes_text(text)


def test_f31_a_failed_cycle_is_one_log_line(caplog):
    """What the daemon does with SlurmOutputError: one error line per failed cycle, no traceback."""
    import logging

    from wattsched.errors import WattschedError

    log = logging.getLogger("wattsched.daemon")
    with caplog.at_level(logging.ERROR, logger="wattsched.daemon"):
        try:
            parse_squeue_json('{"jobs": [{"job_id": NaN}]}')
        except WattschedError as exc:  # as Daemon.run logs it
            log.error("cycle %d failed: %s", 3, exc, exc_info=not isinstance(exc, WattschedError))
    (record,) = caplog.records
    assert not record.exc_info and record.getMessage().startswith("cycle 3 failed: squeue --json: invalid")


def test_every_error_has_one_prefix_and_shape(base, tmp_path):
    """A sample across the commands: every message is ``wattsched: error:`` then a located line."""
    (tmp_path / "bad.yaml").write_text("trace: t.swf\nprocs: 4\ncap_w: lots\n")
    for args in (["check-config", "bad.yaml"], ["simulate", "--trace", "missing.swf", "-q"],
                 ["simulate", "--bogus"], ["simulate", "--trace", base, "--procs", "x"],
                 ["agent", "--port", "99999"], ["traces", "info", "nope.swf"]):
        proc = cli(*args, cwd=tmp_path)
        refused(proc)
        assert "usage:" not in proc.stderr
    env = {**os.environ, "WATTSCHED_SEED": "many"}
    proc = subprocess.run([sys.executable, "-m", "wattsched", "simulate", "--trace", str(base), "-q"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=60)
    refused(proc, "wattsched: error: WATTSCHED_SEED: Input should be a valid integer")


def test_f28_daemon_policy_parameters_named_in_the_file(tmp_path):
    (tmp_path / "d.yaml").write_text(f"slurm: {{backend: sim}}\npolicy: easy\nparams: {{bogus: 1}}\n"
                                     f"state_dir: {tmp_path / 'state'}\nmetrics: {{port: 0}}\n")
    refused(cli("daemon", "-c", "d.yaml", "--cycles", 1, cwd=tmp_path),
            "wattsched: error: d.yaml:3: params.bogus: unknown key (valid keys: order) (policy 'easy')")


def test_f25_daemon_sim_nodes_beyond_its_platform(tmp_path):
    (tmp_path / "d.yaml").write_text(f"slurm: {{backend: sim}}\nsim: {{nodes: 100000}}\n"
                                     f"state_dir: {tmp_path / 'state'}\nmetrics: {{port: 0}}\n")
    refused(cli("daemon", "-c", "d.yaml", "--cycles", 1, cwd=tmp_path),
            "wattsched: error: sim.nodes: 100000 nodes, but platform 'default' has only 128")
