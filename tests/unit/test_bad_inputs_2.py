"""Bad inputs, second tour: one regression test per case (``test_bad_input_<id>_...``), fixed by class.

Every command ends on bad input at one error boundary (``cli._run_command``):
one ``wattsched: error: FILE: what is wrong`` (or ``--option: ...``) line,
exit status 2, no traceback (that only with ``-vv``). The tests run the real
command in-process through :func:`wattsched.cli.main` with an argv, as the
property tests in ``tests/fuzz/test_fuzz_config_cli.py`` do, and a few in a subprocess.
"""

from __future__ import annotations

import random
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builders import BUNDLED_KTH, kth_excerpt
from wattsched.cli import main

ERROR_LINE = re.compile(r"^wattsched: error: (\S+:\d+: |\S+: |--[\w-]+: |WATTSCHED_\w+: )")


def run(capsys, *argv) -> tuple[int, str, str]:
    """``wattsched ARGV`` in this process: exit status, stdout, stderr."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def refused(result: tuple[int, str, str], *expected: str) -> str:
    """Exit 2, no traceback, one ``wattsched: error:`` line in the one shape, each expected text in it."""
    rc, _, err = result
    assert rc == 2, (rc, err)
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("wattsched: error:")]
    assert len(errors) == 1 and ERROR_LINE.match(errors[0]), err
    for text in expected:
        assert text in errors[0], (text, err)
    return errors[0]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The bundled KTH excerpt's header and its first 200 jobs."""
    return kth_excerpt(tmp_path_factory.mktemp("bad2"))


def daemon_config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "d.yaml"
    path.write_text(f"slurm: {{backend: sim}}\nstate_dir: {tmp_path / 'st'}\nmetrics: {{port: 0}}\n"
                    f"poll_interval_s: 0.01\n{extra}")
    return path


# --------------------------------------------------------------------------- the boundary itself


def test_the_boundary_shows_the_traceback_only_at_vv(capsys, tmp_path):
    bad = tmp_path / "u.swf"
    bad.write_bytes(b"; MaxProcs: 8\n1 0 0 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n\xff\xfe\n")
    rc, _, err = run(capsys, "traces", "info", bad)
    assert rc == 2 and "Traceback" not in err
    rc, _, err = run(capsys, "-vv", "traces", "info", "/nonexistent/t.swf")
    assert rc == 2 and err.rstrip().splitlines()[-1].startswith("wattsched: error: /nonexistent/t.swf")
    assert "Traceback (most recent call last)" in err  # only at -vv


def test_memory_exhausted_by_an_input_names_it(capsys, tmp_path, base, monkeypatch):
    import wattsched.workload.swf as swf

    def exhausted(*args, **kwargs):
        raise MemoryError("Unable to allocate 1.47 TiB for an array with shape (201863462912,)")

    monkeypatch.setattr(swf, "trace_info", exhausted)
    refused(run(capsys, "traces", "info", base), "base.swf: not enough memory (Unable to allocate 1.47 TiB")


# --------------------------------------------------------------------------- daemon state


def damaged_store(tmp_path: Path, capsys) -> Path:
    """A state store the daemon wrote, then 5 % of its bytes after the first page randomised."""
    config = daemon_config(tmp_path)
    assert run(capsys, "daemon", "-c", config, "--cycles", 2)[0] == 0
    db = tmp_path / "st" / "state.db"
    data = bytearray(db.read_bytes())
    rng = random.Random(1)
    for i in range(4096, len(data)):
        if rng.random() < 0.05:
            data[i] = rng.randrange(256)
    db.write_bytes(bytes(data))
    for wal in (tmp_path / "st").glob("state.db-*"):
        wal.unlink()
    return config


def test_bad_input_84_damaged_state_store_status_and_audit(capsys, tmp_path):
    config = damaged_store(tmp_path, capsys)
    before = (tmp_path / "st" / "state.db").read_bytes()
    for command in (["status"], ["audit", "--since", "7d", "--limit", "3"]):
        line = refused(run(capsys, *command, "-c", config), "state.db: the SQLite database is damaged (")
        assert "not a wattsched state store" not in line
    assert (tmp_path / "st" / "state.db").read_bytes() == before


def test_bad_input_84_a_value_changed_outside_wattsched_names_the_store_and_key(capsys, tmp_path):
    config = daemon_config(tmp_path)
    assert run(capsys, "daemon", "-c", config, "--cycles", 1)[0] == 0
    con = sqlite3.connect(tmp_path / "st" / "state.db")
    con.execute("UPDATE kv SET value = 'not json' WHERE key = 'cycle'")
    con.commit()
    con.close()
    refused(run(capsys, "status", "-c", config), "state.db: kv 'cycle': not JSON (")


def test_bad_input_86_daemon_refuses_a_damaged_store(capsys, tmp_path):
    config = damaged_store(tmp_path, capsys)
    start = time.monotonic()
    refused(run(capsys, "daemon", "-c", config, "--cycles", 3), "state.db: the SQLite database is damaged (")
    assert time.monotonic() - start < 10


def test_bad_input_87_one_daemon_per_state_directory(capsys, tmp_path):
    config = daemon_config(tmp_path)
    cmd = [sys.executable, "-m", "wattsched", "daemon", "-c", str(config), "--cycles", "100000"]
    first = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        lock = tmp_path / "st" / "daemon.lock"
        deadline = time.monotonic() + 30
        while not (lock.exists() and lock.read_text().strip() == str(first.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        refused(run(capsys, "daemon", "-c", config, "--cycles", 1),
                f"daemon.lock: another wattsched daemon (pid {first.pid}) is running on state directory")
    finally:
        first.terminate()
        first.wait(timeout=30)
    # the lock goes with the process: the next daemon runs
    assert run(capsys, "daemon", "-c", config, "--cycles", 1)[0] == 0
    assert run(capsys, "daemon", "-c", config, "--cycles", 1)[0] == 0


def test_bad_input_120_cap_step_beyond_any_calendar(capsys, tmp_path):
    (tmp_path / "caps.csv").write_text("start_s,cap_w\n0,20000\n1e300,15000\n")
    config = daemon_config(tmp_path, f"cap_schedule: {tmp_path / 'caps.csv'}\n")
    assert run(capsys, "check-config", config)[0] == 0
    assert run(capsys, "daemon", "-c", config, "--cycles", 1)[0] == 0
    rc, out, err = run(capsys, "status", "-c", config)
    assert rc == 0, err
    assert "next cap change: never (1e+300 s, beyond year 9999) to 15,000 W" in out


def test_bad_input_139_sacct_nodelist_expanding_beyond_any_cluster(capsys, tmp_path):
    config = daemon_config(tmp_path, "telemetry: {source: prometheus, url: 'http://127.0.0.1:9'}\n")
    times = "2026-11-02T10:00:00|2026-11-02T10:01:00|2026-11-02T11:00:00"
    good = f"101|alice|batch|2|node[0001-0002]|{times}|120|COMPLETED"
    huge = f"102|bob|batch|4|node[0003-1000000000]|{times}|60|COMPLETED"
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(f"{good}\n{huge}\n")
    start = time.monotonic()
    refused(run(capsys, "history", "import", "-c", config, "--since", "2026-11-01", "--sacct-file", sacct, "-q"),
            "sacct.txt:2: NodeList: hostlist 'node[0003-1000000000]' expands to more than")
    assert time.monotonic() - start < 10
    sacct.write_bytes(good.encode() + b"\n\xff\xfe|x\n")
    refused(run(capsys, "history", "import", "-c", config, "--since", "2026-11-01", "--sacct-file", sacct, "-q"),
            "--sacct-file: ", "sacct.txt: not UTF-8 text")


# --------------------------------------------------------------------------- sweeps


def test_bad_input_134_more_slices_than_the_trace_holds(capsys, tmp_path):
    sweep = tmp_path / "sw.yaml"
    sweep.write_text(f"kind: sweep\nname: s\nbase: {{procs: 100}}\naxes:\n  slices:\n    trace: {BUNDLED_KTH}\n"
                     "    count: 1000000\n    length_h: 1\n    warmup_h: 0\n    t0: load\n"
                     "  policies: [easy]\nout: o\n")
    refused(run(capsys, "traces", "slice", sweep), "sw.yaml:5: axes.slices: the trace holds only",
            "1000000 asked")


def sweep_results(directory: Path) -> Path:
    """A results store with two finished runs, as a sweep leaves it."""
    from wattsched.sweep.store import Store

    store = Store(directory)
    store.set_meta("sweep", {"name": "s", "axes": ["policy"], "keys": ["a", "b"]})
    store.add("a", {"policy": "easy"}, {"status": "ok", "mean_wait_s": 10.0})
    store.add("b", {"policy": "fcfs"}, {"status": "ok", "mean_wait_s": 20.0})
    store.close()
    return directory / "results.sqlite"


def test_bad_input_65_sweep_report_row_not_json(capsys, tmp_path):
    db = sweep_results(tmp_path / "o")
    assert run(capsys, "sweep", "report", tmp_path / "o")[0] == 0
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET row = 'not json' WHERE key = 'a'")
    con.execute("""UPDATE runs SET row = '{"status": "ok", "mean_wait_s": "abc"}' WHERE key = 'b'""")
    con.commit()
    con.close()
    refused(run(capsys, "sweep", "report", tmp_path / "o"),
            "o/results.sqlite: runs row 'a': row: not JSON (Expecting value")
    con = sqlite3.connect(db)
    con.execute("""UPDATE runs SET row = '[1, 2]' WHERE key = 'a'""")
    con.execute("""UPDATE meta SET value = '"x"'""")
    con.commit()
    con.close()
    refused(run(capsys, "sweep", "report", tmp_path / "o"), "results.sqlite: meta 'sweep': not a sweep description")


@pytest.mark.parametrize("content", [b"", b"SQLite format 3\x00" + bytes(200), b"not a database at all\n" * 50])
def test_bad_input_66_sweep_report_on_a_file_that_is_no_sweep_store(capsys, tmp_path, content):
    out = tmp_path / "o"
    out.mkdir()
    (out / "results.sqlite").write_bytes(content)
    refused(run(capsys, "sweep", "report", out), "o/results.sqlite: not a sweep results store")
    assert (out / "results.sqlite").read_bytes() == content  # no schema written into it
    assert sorted(p.name for p in out.iterdir()) == ["results.sqlite"]
    # a foreign database is not taken over by a sweep either
    con = sqlite3.connect(tmp_path / "foreign.sqlite")
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    (out / "results.sqlite").write_bytes((tmp_path / "foreign.sqlite").read_bytes())
    from wattsched.errors import RunDirError
    from wattsched.sweep.store import Store

    with pytest.raises(RunDirError, match=r"results\.sqlite: not a sweep results store \(tables t\)"):
        Store(out)


def test_bad_input_66_a_damaged_sweep_store_is_called_damaged(capsys, tmp_path):
    db = sweep_results(tmp_path / "o")
    con = sqlite3.connect(db)
    con.executemany("INSERT INTO runs VALUES (?, 'ok', 0, '{}', ?)", [(f"k{i}", "{}" * 200) for i in range(300)])
    con.commit()
    con.close()
    data = bytearray(db.read_bytes())
    rng = random.Random(3)
    for i in range(4096, len(data)):
        if rng.random() < 0.05:
            data[i] = rng.randrange(256)
    db.write_bytes(bytes(data))
    refused(run(capsys, "sweep", "report", tmp_path / "o"), "o/results.sqlite: the SQLite database is damaged (")


def small_sweep(tmp_path: Path, base: Path) -> Path:
    sweep = tmp_path / "sw.yaml"
    sweep.write_text(f"kind: sweep\nname: s\nbase: {{procs: 100}}\naxes:\n  traces: [{base}]\n  policies: [easy]\n"
                     f"out: {tmp_path / 'o'}\n")
    return sweep


def test_bad_input_61_scheduler_not_listening(capsys, tmp_path, base, monkeypatch):
    pytest.importorskip("distributed")
    import wattsched.sweep.execute as execute

    assert execute.SCHEDULER_TIMEOUT_S <= 10
    monkeypatch.setattr(execute, "SCHEDULER_TIMEOUT_S", 2.0)
    start = time.monotonic()
    refused(run(capsys, "sweep", small_sweep(tmp_path, base), "--scheduler", "tcp://127.0.0.1:9", "-q"),
            "--scheduler: cannot reach the Dask scheduler at tcp://127.0.0.1:9 within 2 s")
    assert time.monotonic() - start < 15


@pytest.mark.parametrize("address", ["not a url at all", "tcp://host", "tcp://host:99999", "http://host:8786",
                                     "tcp://:8786", "tcp://host:8786/path"])
def test_bad_input_62_scheduler_not_an_address(capsys, tmp_path, base, address):
    start = time.monotonic()
    refused(run(capsys, "sweep", small_sweep(tmp_path, base), "--scheduler", address, "-q"),
            f"--scheduler: {address!r} is not a scheduler address")
    assert time.monotonic() - start < 2
    assert not (tmp_path / "o").exists()  # refused before anything is written


# --------------------------------------------------------------------------- run directories


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, base) -> Path:
    """A finished simulation of the 200 jobs, with its tables as CSV only (the Parquet copies removed)."""
    out = tmp_path_factory.mktemp("run") / "r"
    assert main(["simulate", "--trace", str(base), "--out", str(out), "-q", "--no-report"]) == 0
    for p in out.glob("*.parquet"):
        p.unlink()
    return out


def tampered(run_dir: Path, tmp_path: Path, line: int, column: str, value: str) -> Path:
    """A copy of the run whose jobs.csv has ``column`` of data line ``line`` (2 = first job) set to ``value``."""
    import csv
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    rows = list(csv.reader((copy / "jobs.csv").open()))
    rows[line - 1][rows[0].index(column)] = value
    with (copy / "jobs.csv").open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    return copy


@pytest.mark.parametrize(("column", "value", "message"), [
    ("nodes", "0", "jobs.csv:7: nodes: 0 nodes (job "),
    ("nodes", "-3", "jobs.csv:7: nodes: -3 nodes"),
    ("state", "BOGUS", "jobs.csv:7: state: 'BOGUS' is not a job state"),
    ("id", "FIRST", "jobs.csv:7: id: job FIRST appears more than once"),
    ("end_s", "-500", "jobs.csv:7: end_s: job "),
])
def test_bad_input_73_export_of_a_tampered_run(capsys, tmp_path, run_dir, column, value, message):
    assert run(capsys, "export", run_dir, "--format", "batsim", "--out", tmp_path / "ok.csv")[0] == 0
    if value == "FIRST":  # the id of the first job
        value = (run_dir / "jobs.csv").read_text().splitlines()[1].split(",")[0]
        message = message.replace("FIRST", value)
    bad = tampered(run_dir, tmp_path, 7, column, value)
    for fmt in ("batsim", "swf"):
        refused(run(capsys, "export", bad, "--format", fmt, "--out", tmp_path / "b.out"), message,
                "the table was changed after the run")
        assert not (tmp_path / "b.out").exists()


# --------------------------------------------------------------------------- plugin parameters


def test_bad_input_101_dec_time_step_refused_before_any_allocation(capsys, tmp_path, base, monkeypatch):
    pytest.importorskip("ortools")
    start = time.monotonic()
    refused(run(capsys, "simulate", "--trace", base, "--cap", "60%", "--out", tmp_path / "r", "-q", "--no-report",
                "--policy", "dec", "--param", "time_step_s=1e-6", "--param", "horizon_jobs=1"),
            "--param: time_step_s: Input should be greater than or equal to 1")
    assert time.monotonic() - start < 10 and not (tmp_path / "r").exists()
    # a step the model admits, with requested times that make the schedule too long: refused, never allocated
    from wattsched.policies import cp

    monkeypatch.setattr(cp, "MAX_HORIZON_STEPS", 100)
    refused(run(capsys, "simulate", "--trace", base, "--cap", "60%", "--out", tmp_path / "r", "-q", "--no-report",
                "--policy", "dec", "--param", "time_step_s=1", "--param", "horizon_jobs=1"),
            "params.time_step_s: 1 s gives a schedule of", "more than the limit of 100")


def test_bad_input_106_learned_random_state_out_of_range(capsys, tmp_path, base):
    pytest.importorskip("sklearn")
    for value in ("-1", str(2**32)):
        refused(run(capsys, "simulate", "--trace", base, "--cap", "60%", "--policy", "easy-pc", "--out",
                    tmp_path / "r", "-q", "--no-report", "--predictor", "learned",
                    "--predictor-param", "model=random_forest", "--predictor-param", f"random_state={value}"),
                "random_state: Input should be")
    refused(run(capsys, "predict", "evaluate", "--trace", base, "--predictor", "learned", "--param",
                "learned.random_state=-1", "--out", tmp_path / "pe", "-q"), "random_state: Input should be")


# --------------------------------------------------------------------------- daemon config


@pytest.mark.parametrize("key", ["cert", "key", "ca_file"])
def test_bad_input_35_openadr2_files_that_do_not_exist(capsys, tmp_path, key):
    pem = tmp_path / "real.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    files = {"cert": pem, "key": pem, "ca_file": pem, key: tmp_path / "missing.pem"}
    block = ", ".join(f"{k}: {v}" for k, v in files.items())
    config = daemon_config(tmp_path, "demand_response:\n  openadr2: {vtn_url: 'https://vtn.example/OpenADR2/Simple/"
                           f"2.0b', ven_name: hpc, {block}}}\n")
    line = 6
    for argv in (["check-config", config], ["daemon", "-c", config, "--cycles", 1]):
        refused(run(capsys, *argv), f"d.yaml:{line}: demand_response.openadr2.{key}: no such file",
                "missing.pem")
    files[key] = tmp_path
    block = ", ".join(f"{k}: {v}" for k, v in files.items())
    config = daemon_config(tmp_path, "demand_response:\n  openadr2: {vtn_url: 'https://vtn.example/OpenADR2/Simple/"
                           f"2.0b', ven_name: hpc, {block}}}\n")
    refused(run(capsys, "check-config", config), f"demand_response.openadr2.{key}: ", "is not a file")


def test_bad_input_86_a_store_damaged_while_the_daemon_runs_stops_it(capsys, tmp_path, monkeypatch):
    from wattsched.daemon.loop import Daemon

    config = daemon_config(tmp_path)
    calls = []

    def damaged(self):
        calls.append(self.cycle_no)
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(Daemon, "cycle", damaged)
    refused(run(capsys, "daemon", "-c", config, "--cycles", 5),
            "state.db: the SQLite database is damaged (database disk image is malformed)")
    assert len(calls) == 1  # stopped at once, not a traceback in every cycle


@pytest.mark.parametrize(("column", "value", "message"), [
    ("start_s", "-100", "jobs.csv:7: start_s: job "),
    ("runtime_s", "nan", "jobs.csv:7: runtime_s: "),
    ("state", "BOGUS", "jobs.csv:7: state: 'BOGUS' is not a job state"),
    ("nodes", "0", "jobs.csv:7: nodes: 0 nodes (job "),
])
def test_bad_input_72_swf_export_of_a_tampered_run(capsys, tmp_path, run_dir, column, value, message):
    # case 72 wrote "200 jobs" with a 0-processor job, BOGUS/NaN rows as -1 and a duplicate id; now refused
    bad = tampered(run_dir, tmp_path, 7, column, value)
    refused(run(capsys, "export", bad, "--format", "swf", "--out", tmp_path / "s.swf"), message)
    assert not (tmp_path / "s.swf").exists()
