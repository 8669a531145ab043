"""The classes of bad input the CLI's one error boundary answers, as properties over the real commands.

Each class (undecodable text, a damaged SQLite file, an operating-system error
on a path, a parser's complaint) is drawn at random over the commands that
meet it, run in-process through :func:`wattsched.cli.main`: the command ends
with exit status 2, one ``wattsched: error:`` line that names the file (or
option), and no traceback; or, where the input may be harmless (damage SQLite
does not notice, a hostlist that parses), it succeeds.
"""

from __future__ import annotations

import gzip
import os
import random
import shutil
import tempfile
from importlib.resources import files
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from wattsched.cli import main

BUNDLED = files("wattsched") / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SACCT = "101|alice|batch|2|{nodes}|2026-11-02T10:00:00|2026-11-02T10:01:00|2026-11-02T11:00:00|120|COMPLETED\n"


def answer(capsys, argv) -> tuple[int, str]:
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


def error_line(rc: int, err: str, *named: str) -> str:
    """The one error line of a refused command, checked: exit 2, no traceback, each of ``named`` in it."""
    assert rc == 2, (rc, err)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("wattsched: error:")]
    assert len(lines) == 1, err
    for text in named:
        assert text in lines[0], (text, err)
    return lines[0]


@pytest.fixture(scope="module")
def work():
    """Valid inputs of every kind a command reads, and the outputs of a run, a daemon and a sweep."""
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        lines = gzip.decompress(BUNDLED.read_bytes()).decode().splitlines()
        jobs = [x for x in lines if not x.startswith(";")][:50]
        (d / "t.swf").write_text("\n".join([x for x in lines if x.startswith(";")] + jobs) + "\n")
        (d / "sim.yaml").write_text(f"kind: simulation\ntrace: {d / 't.swf'}\npolicy: easy\nseed: 3\n")
        (d / "d.yaml").write_text(f"kind: daemon\nslurm: {{backend: sim}}\nstate_dir: {d / 'st'}\n"
                                  "metrics: {port: 0}\npoll_interval_s: 0.01\n"
                                  "telemetry: {source: prometheus, url: 'http://127.0.0.1:9'}\n")
        (d / "plat.yaml").write_text("kind: platform\nname: p\nnode_groups:\n  - {name: a, count: 4}\n")
        (d / "caps.csv").write_text("start_s,cap_w\n0,20000\n3600,15000\n")
        (d / "ev.csv").write_text("notice_s,start_s,end_s,cap_w,label\n0,100,900,45%,peak\n")
        (d / "sacct.txt").write_text(SACCT.format(nodes="node[0001-0002]"))
        assert main(["simulate", "--trace", str(d / "t.swf"), "--out", str(d / "run"), "-q", "--no-report"]) == 0
        assert main(["daemon", "-c", str(d / "d.yaml"), "--cycles", "2"]) == 0
        from wattsched.sweep.store import Store

        store = Store(d / "sweep")
        store.set_meta("sweep", {"name": "s", "axes": ["policy"], "keys": [f"k{i}" for i in range(200)]})
        for i in range(200):
            store.add(f"k{i}", {"policy": "easy"}, {"status": "ok", "mean_wait_s": float(i), "pad": "x" * 100})
        store.close()
        yield d


# --------------------------------------------------------------------------- undecodable text

TEXT_READERS = {
    "sim.yaml": lambda d, p: ["check-config", p],
    "d.yaml": lambda d, p: ["check-config", p],
    "plat.yaml": lambda d, p: ["check-config", p],
    "caps.csv": lambda d, p: ["simulate", "--trace", d / "t.swf", "--cap-schedule", p, "-q", "--out", d / "r"],
    "ev.csv": lambda d, p: ["simulate", "--trace", d / "t.swf", "--dr-events", p, "-q", "--out", d / "r"],
    "sacct.txt": lambda d, p: ["history", "import", "-c", d / "d.yaml", "--since", "2026-11-01", "--sacct-file", p,
                               "-q"],
}
BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\x80", b"\xc3\x28", b"\xe2\x82\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]


@SETTINGS
@given(name=st.sampled_from(sorted(TEXT_READERS)), where=st.floats(0, 1), bad=st.sampled_from(BAD_UTF8))
def test_undecodable_text_names_the_file(work, capsys, name, where, bad):
    data = (work / name).read_bytes()
    at = int(where * len(data))
    path = work / f"u-{name}"
    path.write_bytes(data[:at] + bad + data[at:])
    rc, err = answer(capsys, TEXT_READERS[name](work, path))
    error_line(rc, err, path.name, "not UTF-8 text: byte 0x")
    assert not (work / "r").exists()


# --------------------------------------------------------------------------- damaged SQLite files

SQLITE_READERS = {
    "status": (Path("st/state.db"), lambda d: ["status", "-c", d / "d.yaml"]),
    "audit": (Path("st/state.db"), lambda d: ["audit", "-c", d / "d.yaml", "--since", "7d"]),
    "sweep report": (Path("sweep/results.sqlite"), lambda d: ["sweep", "report", d / "sweep"]),
}


@SETTINGS
@given(command=st.sampled_from(sorted(SQLITE_READERS)), seed=st.integers(0, 2**32 - 1),
       share=st.sampled_from([0.001, 0.01, 0.05, 0.3]), skip_header=st.booleans())
@example(command="audit", seed=150, share=0.05, skip_header=False)  # SQLite's message quotes a damaged schema
@example(command="status", seed=1274, share=0.001, skip_header=False)  # a damaged page met while reading
def test_damaged_sqlite_is_called_damaged_or_read(work, capsys, command, seed, share, skip_header):
    rel, argv = SQLITE_READERS[command]
    original = work / rel
    copy = work / "damaged"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(original.parent, copy / original.parent.name)
    db = copy / rel
    data = bytearray(db.read_bytes())
    rng = random.Random(seed)
    for i in range(4096 if skip_header else 0, len(data)):
        if rng.random() < share:
            data[i] = rng.randrange(256)
    db.write_bytes(bytes(data))
    before = db.read_bytes()
    config = copy / "d.yaml"
    config.write_text((work / "d.yaml").read_text().replace(str(work / "st"), str(copy / "st")))
    args = [copy / "sweep" if a == work / "sweep" else config if a == work / "d.yaml" else a for a in argv(work)]
    rc, err = answer(capsys, args)
    if rc != 0:  # damage SQLite does not notice is read as it is
        line = error_line(rc, err, db.name)
        assert "damaged" in line or "not a" in line, line
    assert db.read_bytes() == before  # read-only commands never write into it


# --------------------------------------------------------------------------- OS errors on paths

PATH_COMMANDS = {
    "traces info": lambda d, p: ["traces", "info", p],
    "check-config": lambda d, p: ["check-config", p],
    "simulate --trace": lambda d, p: ["simulate", "--trace", p, "-q", "--out", d / "r"],
    "simulate --config": lambda d, p: ["simulate", "--config", p, "-q", "--out", d / "r"],
    "--cap-schedule": lambda d, p: ["simulate", "--trace", d / "t.swf", "--cap-schedule", p, "-q", "--out", d / "r"],
    "--dr-events": lambda d, p: ["simulate", "--trace", d / "t.swf", "--dr-events", p, "-q", "--out", d / "r"],
    "--platform": lambda d, p: ["simulate", "--trace", d / "t.swf", "--platform", p, "-q", "--out", d / "r"],
    "report": lambda d, p: ["report", p],
    "export": lambda d, p: ["export", p, "--format", "swf", "--out", d / "x.swf"],
    "sweep report": lambda d, p: ["sweep", "report", p],
    "--sacct-file": lambda d, p: ["history", "import", "-c", d / "d.yaml", "--since", "2026-11-01",
                                  "--sacct-file", p, "-q"],
    "traces augment": lambda d, p: ["traces", "augment", p, "--out", d / "x.csv"],
    "sweep": lambda d, p: ["sweep", p, "--dry-run"],
}


def _bad_path(work: Path, kind: str) -> Path:
    if kind == "missing":
        return work / "no-such" / "file.yaml"
    if kind == "directory":
        (work / "a-directory.yaml").mkdir(exist_ok=True)
        return work / "a-directory.yaml"
    if kind == "under a file":
        return work / "t.swf" / "x.yaml"
    link = work / "dangling.yaml"
    if not link.is_symlink():
        os.symlink(work / "nowhere", link)
    return link


@SETTINGS
@given(command=st.sampled_from(sorted(PATH_COMMANDS)),
       kind=st.sampled_from(["missing", "directory", "under a file", "dangling link"]))
def test_os_errors_name_the_path(work, capsys, command, kind):
    path = _bad_path(work, kind)
    rc, err = answer(capsys, PATH_COMMANDS[command](work, path))
    error_line(rc, err, path.name)
    assert not (work / "r").exists() and not (work / "x.swf").exists() and not (work / "x.csv").exists()


# --------------------------------------------------------------------------- parsers' complaints

HOSTLIST = st.one_of(
    st.text(alphabet="node0123456789[]-,()| \t", max_size=40),
    st.builds(lambda a, b: f"n[{a}-{b}]", st.integers(0, 10**12), st.integers(0, 10**12)),
    st.builds(lambda a, b, c: f"r[{a}-{b}]n[0-{c}]", st.integers(0, 10**4), st.integers(0, 10**4),
              st.integers(0, 10**4)),
)


@SETTINGS
@given(nodes=HOSTLIST)
def test_hostlists_in_sacct_output_parse_or_name_file_line_and_field(work, capsys, nodes):
    path = work / "h-sacct.txt"
    path.write_text(SACCT.format(nodes=nodes))
    rc, err = answer(capsys, ["history", "import", "-c", work / "d.yaml", "--since", "2026-11-01",
                              "--sacct-file", path, "-q"])
    assert "Traceback" not in err, err
    if rc != 0:
        error_line(rc, err, "h-sacct.txt:1: ")


@SETTINGS
@given(address=st.one_of(
    st.text(max_size=30),
    st.builds(lambda s, h, p: f"{s}{h}:{p}", st.sampled_from(["", "tcp://", "tls://", "http://", "ws://"]),
              st.sampled_from(["127.0.0.1", "host", "", "[::1]", "a b"]),
              st.one_of(st.integers(-5, 70000).map(str), st.sampled_from(["", "x", "8786/p"])))))
def test_scheduler_addresses_are_checked_no_looser_than_dask(address):
    distributed = pytest.importorskip("distributed")
    from wattsched.errors import OptionError
    from wattsched.sweep.execute import check_scheduler_address

    try:
        check_scheduler_address(address)
    except OptionError as exc:
        assert str(exc).startswith(f"--scheduler: {address!r} is not a scheduler address")
        return
    scheme, location = distributed.comm.parse_address(address)
    if scheme != "inproc":
        host, port = distributed.comm.addressing.parse_host_port(location)
        assert host and 0 < int(port) < 65536


OUTPUT_COMMANDS = {
    "simulate --out": lambda d, p: ["simulate", "--trace", d / "t.swf", "-q", "--no-report", "--out", p],
    "traces synth -o": lambda d, p: ["traces", "synth", "--jobs", 10, "-o", p],
    "traces augment --out": lambda d, p: ["traces", "augment", d / "t.swf", "--out", p],
    "export --out": lambda d, p: ["export", d / "run", "--format", "swf", "--out", p],
    "dr-events generate -o": lambda d, p: ["dr-events", "generate", "--span", 3600, "-o", p],
    "predict evaluate --out": lambda d, p: ["predict", "evaluate", "--trace", d / "t.swf", "-q", "--out", p],
}


@SETTINGS
@given(command=st.sampled_from(sorted(OUTPUT_COMMANDS)), name=st.sampled_from(["out.csv", "a/b/out", "x.swf"]))
def test_outputs_under_a_regular_file_name_the_path(work, capsys, command, name):
    path = work / "t.swf" / name  # never creatable: its parent is a file
    rc, err = answer(capsys, OUTPUT_COMMANDS[command](work, path))
    line = error_line(rc, err)
    assert str(work / "t.swf") in line, line
