"""SWF reader: header, field fallbacks, cleaning rules, rebasing, malformed lines, streaming.

Every trace here is a few lines written to ``tmp_path``; the real traces are in
``tests/sim/test_real_traces.py``.
"""

from __future__ import annotations

import gzip
import re

import pytest

from wattsched.errors import TraceError
from wattsched.workload import swf
from wattsched.workload.swf import read_header, read_swf, trace_info

HEADER = """\
; Version: 2.2
; Computer: Test cluster
; UnixStartTime: 1000000000
; MaxNodes: 4
; MaxProcs: 16
"""


def line(
    job: int = 1,
    submit: float = 0,
    run: float = 10,
    alloc: int = 1,
    req_procs: int = -1,
    req_time: float = 100,
    *,
    wait: float = 0,
    status: int = 1,
    user: int = 1,
    group: int = 1,
    queue: int = -1,
    partition: int = -1,
) -> str:
    """One SWF job line: the 18 fields with ``-1`` for those the reader ignores."""
    fields = (
        job, submit, wait, run, alloc, -1, -1, req_procs, req_time, -1, status, user, group, -1, queue,
        partition, -1, -1,
    )
    return " ".join(str(f) for f in fields)


def write(tmp_path, lines=(), header: str = HEADER, name: str = "t.swf", gz: bool = False):
    text = header + "".join(f"{x}\n" for x in lines)
    path = tmp_path / name
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def jobs_of(path, **kw):
    w = read_swf(path, **kw)
    return w, list(w.jobs)


HEADER_LINES = HEADER.count("\n")


def lineno(i: int) -> int:
    """Line number (1-based, header included) of the ``i``-th job line (0-based) in a file with HEADER."""
    return HEADER_LINES + i + 1


# ---------------------------------------------------------------- header


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_header_gives_machine_size_and_start_time(tmp_path, gz):
    path = write(tmp_path, [line()], name="t.swf.gz" if gz else "t.swf", gz=gz)
    header = read_header(path)
    assert header["Version"] == "2.2" and header["Computer"] == "Test cluster"
    w, jobs = jobs_of(path)
    assert (w.max_procs, w.max_nodes) == (16, 4)
    assert w.name == "t"
    assert w.header == header
    assert len(jobs) == 1 and w.origin_unix_s == 1_000_000_000


def test_gzip_is_detected_by_content_not_name(tmp_path):
    path = write(tmp_path, [line()], name="compressed.swf", gz=True)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    w, jobs = jobs_of(path)
    assert w.max_procs == 16 and len(jobs) == 1


def test_header_values_with_trailing_text_and_repeated_keys(tmp_path):
    header = """\
; Version: 2.2
; MaxNodes: 400 (48 interactive, 352 batch, 6 service, 10 I/O)
; MaxProcs: 400
; EndTime:   Fri Aug 29 10:55:01 CEST 1997
; MaxQueues: 2
; Queue:  0  interactive
; Queue:  1  batch
"""
    path = write(tmp_path, [line()], header=header)
    h = read_header(path)
    assert h["Queue"] == "0  interactive\n1  batch"
    assert h["EndTime"] == "Fri Aug 29 10:55:01 CEST 1997"
    w = read_swf(path)
    assert (w.max_procs, w.max_nodes) == (400, 400)


def test_header_without_version_line_as_riccs(tmp_path):
    header = """\
; Computer: Fujitsu RX200S5 Cluster
; Installation: RICC: RIKEN Integrated Cluster of Clusters
; MaxJobs: 2
; UnixStartTime: 1272639895
; MaxNodes: 1024
; MaxProcs: 8192
; MaxQueues: 2
; Queue:  1
; Queue:  2 0
;
"""
    path = write(tmp_path, [line(1, 100), line(2, 150)], header=header)
    h = read_header(path)
    assert "Version" not in h
    assert h["Installation"] == "RICC: RIKEN Integrated Cluster of Clusters"
    w, jobs = jobs_of(path)
    assert (w.max_procs, w.max_nodes) == (8192, 1024)
    assert [j.submit_s for j in jobs] == [0.0, 50.0]
    assert w.origin_unix_s == 1272639895 + 100


def test_continuation_lines_join_the_key_above(tmp_path):
    # As in the real NASA, KTH and LLNL headers: indented lines continue a value;
    # a URL on its own line is not a key "http"; a filter with a time in it is not a key.
    header = """\
; Information: http://www.nas.nasa.gov/
;              http://www.cs.huji.ac.il/labs/parallel/workload/
;
; Note: There is no information on wait times - the given submit
;       times are actually start times
; Note: THIS IS A CLEANED VERSION OF THE LOG!
;       The filters used to produce it were
;         submit<=2006-12-18 00:00:00 (1434 jobs removed)
;
;       a stray comment after an empty line
; MaxProcs: 8
"""
    path = write(tmp_path, [line()], header=header)
    h = read_header(path)
    assert set(h) == {"Information", "Note", "MaxProcs"}
    assert h["Information"] == "http://www.nas.nasa.gov/ http://www.cs.huji.ac.il/labs/parallel/workload/"
    assert h["Note"] == (
        "There is no information on wait times - the given submit times are actually start times\n"
        "THIS IS A CLEANED VERSION OF THE LOG! The filters used to produce it were "
        "submit<=2006-12-18 00:00:00 (1434 jobs removed)"
    )
    assert h["MaxProcs"] == "8"


def test_header_reading_stops_at_the_first_job(tmp_path):
    path = write(tmp_path, [line(1, 0), "; MaxProcs: 2", line(2, 5, alloc=8)])
    assert read_header(path)["MaxProcs"] == "16"
    w, jobs = jobs_of(path)
    assert [j.id for j in jobs] == [1, 2]  # a comment between jobs is skipped, not a new header
    assert w.report.read == 2


def test_no_machine_size_in_header_means_no_size_rule(tmp_path):
    path = write(tmp_path, [line(1, 0, alloc=100_000)], header="; Version: 2.2\n")
    w, jobs = jobs_of(path)
    assert w.max_procs is None and w.max_nodes is None and w.origin_unix_s is None
    assert [j.procs for j in jobs] == [100_000]
    assert w.report.dropped == {}


# ---------------------------------------------------------------- fields


def test_minus_one_means_missing(tmp_path):
    path = write(tmp_path, [
        line(1, 0, status=-1, user=-1, group=-1),
        line(2, 1, queue=3),
        line(3, 2, queue=3, partition=2),
    ])
    _, (a, b, c) = jobs_of(path)
    assert (a.status, a.user, a.group, a.partition) == (-1, "-1", "-1", "")
    assert b.partition == "3"  # no partition: the queue stands in
    assert c.partition == "2"
    assert all(j.walltime_s == 100 for j in (a, b, c))


def test_requested_processors_fall_back_to_allocated(tmp_path):
    path = write(tmp_path, [
        line(1, 0, alloc=4, req_procs=8),  # both: field 8 wins
        line(2, 1, alloc=4, req_procs=-1),  # no request: allocated
        line(3, 2, alloc=-1, req_procs=6),  # no allocation: requested
    ])
    _, jobs = jobs_of(path)
    assert [j.procs for j in jobs] == [8, 4, 6]


@pytest.mark.parametrize("missing", [-1, 0])
def test_requested_time_falls_back_to_runtime(tmp_path, missing):
    path = write(tmp_path, [line(1, 0, run=250, req_time=missing), line(2, 1, run=0, req_time=missing),
                            line(3, 2, run=30, req_time=60)])
    w, jobs = jobs_of(path)
    assert [(j.runtime_s, j.walltime_s) for j in jobs] == [(250, 250), (0, 1.0), (30, 60)]
    assert w.report.adjusted == {"walltime_from_runtime": 2}


def test_requested_time_falls_back_to_a_configured_default(tmp_path):
    path = write(tmp_path, [line(1, 0, run=250, req_time=-1), line(2, 1, run=5000, req_time=-1),
                            line(3, 2, run=30, req_time=60)])
    w, jobs = jobs_of(path, default_walltime=3600)
    assert [j.walltime_s for j in jobs] == [3600, 3600, 60]
    assert w.report.adjusted == {"walltime_default": 2, "runtime_exceeds_walltime": 1}


@pytest.mark.parametrize("bad", [0, -5, float("nan")])
def test_default_walltime_must_be_runtime_or_positive(tmp_path, bad):
    path = write(tmp_path, [line()])
    with pytest.raises(ValueError, match="default_walltime must be 'runtime' or positive seconds"):
        read_swf(path, default_walltime=bad)
    with pytest.raises(ValueError):
        read_swf(path, default_walltime="forever")


def test_runtime_exceeding_walltime_is_kept_and_counted(tmp_path):
    path = write(tmp_path, [line(1, 0, run=150, req_time=100), line(2, 1, run=100, req_time=100),
                            line(3, 2, run=101, req_time=100)])
    w, jobs = jobs_of(path)
    assert [(j.runtime_s, j.walltime_s) for j in jobs] == [(150, 100), (100, 100), (101, 100)]
    assert w.report.adjusted == {"runtime_exceeds_walltime": 2}
    assert w.report.dropped == {}
    assert trace_info(read_swf(path))["runtime_exceeds_walltime"] == 2


@pytest.mark.parametrize(("procs", "cores_per_node", "nodes"), [
    (1, 8, 1), (8, 8, 1), (9, 8, 2), (17, 8, 3), (16, 1, 16), (3, 2, 2),
])
def test_nodes_are_procs_over_cores_rounded_up(tmp_path, procs, cores_per_node, nodes):
    path = write(tmp_path, [line(alloc=procs)])
    _, (job,) = jobs_of(path, cores_per_node=cores_per_node, machine_procs=64)
    assert (job.procs, job.nodes) == (procs, nodes)


def test_cores_per_node_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="cores_per_node"):
        read_swf(write(tmp_path, [line()]), cores_per_node=0)


# ---------------------------------------------------------------- cleaning rules


@pytest.mark.parametrize(("bad_line", "rule"), [
    (line(2, 5, run=-1), "runtime_missing"),
    (line(2, 5, alloc=-1, req_procs=-1), "procs_missing"),
    (line(2, 5, alloc=0, req_procs=-1), "procs_nonpositive"),
    (line(2, 5, alloc=4, req_procs=0), "procs_nonpositive"),
    (line(2, 5, alloc=-1, req_procs=-3), "procs_nonpositive"),
    (line(2, 5, alloc=17), "larger_than_machine"),
    (line(2, 5, alloc=1, req_procs=17), "larger_than_machine"),
], ids=["runtime", "procs-missing", "alloc-zero", "req-zero", "req-negative", "alloc-too-big", "req-too-big"])
def test_each_cleaning_rule_drops_and_counts(tmp_path, bad_line, rule):
    path = write(tmp_path, [line(1, 0), bad_line, line(3, 9)])
    w, jobs = jobs_of(path)
    assert [j.id for j in jobs] == [1, 3]
    assert w.report.dropped == {rule: 1}
    assert (w.report.read, w.report.kept, w.report.skipped_lines) == (3, 2, 0)


def test_a_job_as_large_as_the_machine_is_kept(tmp_path):
    w, jobs = jobs_of(write(tmp_path, [line(alloc=16)]))
    assert [j.procs for j in jobs] == [16] and w.report.dropped == {}


@pytest.mark.parametrize(("machine_procs", "kept", "dropped"), [
    (None, [4, 8, 16], 1),  # header MaxProcs 16
    (8, [4, 8], 2),  # override smaller than the header
    (32, [4, 8, 16, 32], 0),  # override larger than the header
])
def test_machine_procs_overrides_the_header(tmp_path, machine_procs, kept, dropped):
    path = write(tmp_path, [line(i, i, alloc=p) for i, p in enumerate((4, 8, 16, 32), 1)])
    w, jobs = jobs_of(path, machine_procs=machine_procs)
    assert [j.procs for j in jobs] == kept
    assert w.report.dropped == ({"larger_than_machine": dropped} if dropped else {})
    assert w.max_procs == 16  # the header's value is still what the workload reports


def test_report_counts_add_up(tmp_path):
    path = write(tmp_path, [
        line(1, 0, run=-1), line(2, 1, alloc=-1), line(3, 2, alloc=99), line(4, 3), line(5, 4, alloc=0),
        line(6, 5, run=200, req_time=100), line(7, 6, req_time=-1), "8 oops",
    ])
    w, jobs = jobs_of(path, skip_bad_lines=True)
    r = w.report
    assert [j.id for j in jobs] == [4, 6, 7]
    assert r.as_dict() == {
        "read": 8,
        "kept": 3,
        "dropped": {"runtime_missing": 1, "procs_missing": 1, "larger_than_machine": 1, "procs_nonpositive": 1},
        "adjusted": {"runtime_exceeds_walltime": 1, "walltime_from_runtime": 1},
        "skipped_lines": 1,
    }
    assert r.read == r.kept + sum(r.dropped.values()) + r.skipped_lines


# ---------------------------------------------------------------- time origin


def test_time_is_rebased_to_the_first_kept_job(tmp_path):
    # The first line is dropped (no runtime): the origin is the second one's submit.
    path = write(tmp_path, [line(1, 600_000, run=-1), line(2, 600_010), line(3, 600_010), line(4, 600_500)])
    w, jobs = jobs_of(path)
    assert [j.submit_s for j in jobs] == [0.0, 0.0, 490.0]
    assert w.origin_unix_s == 1_000_000_000 + 600_010


def test_origin_is_unknown_without_unix_start_time(tmp_path):
    w, jobs = jobs_of(write(tmp_path, [line(1, 50), line(2, 80)], header="; MaxProcs: 4\n"))
    assert [j.submit_s for j in jobs] == [0.0, 30.0]
    assert w.origin_unix_s is None


def test_an_empty_trace_has_no_jobs(tmp_path):
    w, jobs = jobs_of(write(tmp_path, []))
    assert jobs == [] and w.origin_unix_s is None and w.report.read == 0
    info = trace_info(read_swf(write(tmp_path, [line(1, 0, run=-1)])))
    assert info["jobs"] == 0 and info["span_s"] == 0.0 and info["cleaning"]["dropped"] == {"runtime_missing": 1}


# ---------------------------------------------------------------- notes


START_TIME_NOTE = (
    "; Note: There is no information on wait times - the given submit\n"
    ";       times are actually start times\n"
)


@pytest.mark.parametrize("note", [
    START_TIME_NOTE,  # NASA's header, split over two lines
    "; Note: the given submit times are actually start times\n",
])
def test_submit_times_that_are_start_times_are_noted(tmp_path, note):
    w = read_swf(write(tmp_path, [line()], header=HEADER + note))
    assert len(w.notes) == 1 and "submit times are start times" in w.notes[0]


def test_other_notes_are_not_start_time_notes(tmp_path):
    w = read_swf(write(tmp_path, [line()], header=HEADER + "; Note: uses the EASY scheduler\n"))
    assert w.notes == []


# ---------------------------------------------------------------- malformed lines


def where(path, i: int, field: str | None = None) -> str:
    """Regex for the start of a TraceError message about job line ``i`` of a HEADER file."""
    s = f"{path}:{lineno(i)}"
    if field:
        s += f": {field}"
    return "^" + re.escape(s + ": ")


@pytest.mark.parametrize(("bad_line", "field", "message"), [
    (" ".join(line(2, 5).split()[:17]), None, "expected 18 fields, found 17"),
    (line(2, 5) + " 7", None, "expected 18 fields, found 19"),
    (line(2, 5, run="12:30"), "run_time", "not a number: '12:30'"),
    (line(2, "x", run=3), "submit_time", "not a number: 'x'"),
    (line(2, 5, alloc="four"), "allocated_procs", "not a number: 'four'"),
    (line(2, 5, req_time="nan"), "requested_time", "not a finite number: 'nan'"),
    (line(2, 5, alloc="inf"), "allocated_procs", "not a finite number: 'inf'"),
    (line(2, 3), "submit_time", "submit time 3 goes back in time"),
    (line(2, -4), "submit_time", "negative submit time -4"),
], ids=["17-fields", "19-fields", "run-time", "submit", "procs", "nan", "inf", "back-in-time", "negative-submit"])
def test_malformed_line_names_file_line_and_field(tmp_path, bad_line, field, message):
    path = write(tmp_path, [line(1, 4), bad_line, line(3, 9)])
    w = read_swf(path)  # the header is fine: nothing is raised until the line is reached
    jobs = w.jobs
    assert next(jobs).id == 1
    with pytest.raises(TraceError, match=where(path, 1, field) + re.escape(message)) as info:
        next(jobs)
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), lineno(1), field)

    w, kept = jobs_of(path, skip_bad_lines=True)
    assert [j.id for j in kept] == [1, 3]
    assert w.report.skipped_lines == 1 and w.report.read == 3 and w.report.kept == 2


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_bad_lines_are_skipped_and_counted(tmp_path, gz):
    lines = [line(1, 0), "garbage", line(3, 10), line(4, 5), line(5, 20, run="?"), line(6, 30)]
    path = write(tmp_path, lines, name="t.swf.gz" if gz else "t.swf", gz=gz)
    w, jobs = jobs_of(path, skip_bad_lines=True)
    assert [j.id for j in jobs] == [1, 3, 6]
    assert w.report.skipped_lines == 3 and w.report.dropped == {}
    # A skipped line does not move the ordering check: job 4 (t=5) is compared with job 3 (t=10).
    assert [j.submit_s for j in jobs] == [0.0, 10.0, 30.0]
    with pytest.raises(TraceError, match=where(path, 1)):
        list(read_swf(path).jobs)


def test_dropped_jobs_still_count_for_ordering(tmp_path):
    # Job 2 is dropped (no runtime) but its submit time still has to be in order.
    path = write(tmp_path, [line(1, 0), line(2, 50, run=-1), line(3, 40)])
    with pytest.raises(TraceError, match=where(path, 2, "submit_time") + "submit time 40 goes back"):
        list(read_swf(path).jobs)


def test_blank_lines_and_comments_between_jobs_are_ignored(tmp_path):
    path = write(tmp_path, [line(1, 0), "", "   ", ";", "; a comment", "  ; an indented comment", line(2, 5)])
    w, jobs = jobs_of(path)
    assert [j.id for j in jobs] == [1, 2] and w.report.read == 2 and w.report.skipped_lines == 0


def test_missing_file_is_a_trace_error(tmp_path):
    path = tmp_path / "nope.swf"
    with pytest.raises(TraceError, match=re.escape(f"{path}: no such file")):
        read_swf(path)


# ---------------------------------------------------------------- streaming


N_BIG = 60_000


def big_trace(tmp_path, gz: bool):
    """N_BIG good jobs, then one malformed line at the very end."""
    lines = [line(i, i, run=i % 500) for i in range(1, N_BIG + 1)]
    lines.append(line(N_BIG + 1, N_BIG + 1, run="boom"))
    return write(tmp_path, lines, name="big.swf.gz" if gz else "big.swf", gz=gz)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_jobs_are_streamed_and_errors_surface_only_when_reached(tmp_path, gz):
    path = big_trace(tmp_path, gz)
    w = read_swf(path)  # reads only the header
    assert w.report.read == 0
    first = next(w.jobs)
    assert (first.id, first.submit_s) == (1, 0.0)
    assert w.report.read == 1 and w.report.kept == 1
    for _ in range(999):
        next(w.jobs)
    assert w.report.read == 1000
    with pytest.raises(TraceError, match=where(path, N_BIG, "run_time") + "not a number: 'boom'"):
        for _ in w.jobs:
            pass
    assert w.report.kept == N_BIG


def test_first_job_reads_only_the_start_of_the_file(tmp_path, monkeypatch):
    path = big_trace(tmp_path, gz=False)
    size = path.stat().st_size
    assert size > 2_000_000
    opened = []
    real_open = swf._open_text

    def spy(p):
        fh = real_open(p)
        opened.append(fh)
        return fh

    monkeypatch.setattr(swf, "_open_text", spy)
    w = read_swf(path)
    assert len(opened) == 1 and opened[0].closed  # the header reader, already closed
    next(w.jobs)
    assert len(opened) == 2
    bytes_read = opened[1].buffer.raw.tell()
    assert 0 < bytes_read <= 64 * 1024, f"read {bytes_read} of {size} bytes for one job"
    w.jobs.close()
    assert opened[1].closed


def test_trace_info_describes_a_workload(tmp_path):
    path = write(tmp_path, [
        line(1, 100, run=0, alloc=2, user=1), line(2, 200, run=400, alloc=4, req_time=300, user=2),
        line(3, 1100, run=100, alloc=16, user=1), line(4, 1200, alloc=-1),
    ])
    info = trace_info(read_swf(path, cores_per_node=4))
    assert info["name"] == "t" and info["jobs"] == 3 and info["users"] == 2
    assert info["span_s"] == 1000.0 and info["max_procs"] == 16 and info["max_nodes"] == 4
    assert info["origin_unix_s"] == 1_000_000_100
    assert info["zero_runtime_jobs"] == 1 and info["runtime_exceeds_walltime"] == 1
    assert info["offered_load"] == pytest.approx((400 * 4 + 100 * 16) / (16 * 1000))
    assert info["cleaning"]["dropped"] == {"procs_missing": 1}
    assert info["notes"] == [] and info["has_power"] is False


# ---------------------------------------------------------------- the whole-file fast path

REGULAR = [
    line(1, 0, run=10, alloc=4, req_time=100, user=3, queue=2),
    line(2, 5, run=-1, alloc=2),  # runtime_missing
    line(3, 5, run=50, alloc=-1, req_procs=-1),  # procs_missing
    line(4, 7, run=20, alloc=0, req_procs=0),  # procs_nonpositive
    line(5, 9, run=200, alloc=4, req_time=100, user=12, partition=5),  # runtime_exceeds_walltime
    line(6, 9, run=0, alloc=64, req_time=-1),  # larger_than_machine (16 procs)
    line(7, 11, run=0, alloc=3, req_time=0, user=3, group=7),  # walltime from runtime (1 s)
    line(8, 30, run=35, alloc=1, req_procs=9, req_time=-1, status=0, queue=4, partition=-1),
]


def _fast_and_slow(path, monkeypatch, **kw):
    fast_w, fast = jobs_of(path, **kw)
    with monkeypatch.context() as m:
        m.setattr(swf, "_fast_table", lambda p: None)
        slow_w, slow = jobs_of(path, **kw)
    return (fast_w, fast), (slow_w, slow)


@pytest.mark.parametrize("kw", [{}, {"cores_per_node": 4, "default_walltime": 3600.0, "machine_procs": 8}])
@pytest.mark.parametrize("variant", ["plain", "gzip", "crlf", "tabs", "comments", "no_final_newline", "decimals",
                                     "bom", "blank_lines", "negative_zero"])
def test_fast_path_gives_what_the_line_reader_gives(tmp_path, monkeypatch, variant, kw):
    lines = list(REGULAR)
    header = HEADER
    if variant == "tabs":
        lines = [x.replace(" ", "\t ") for x in lines]
    if variant == "comments":
        lines.insert(3, "; a comment between jobs")
        lines.insert(5, "   ;indented comment")
    if variant == "decimals":
        lines = [x.replace(" 100 ", " 100.0 ", 1) for x in lines] + [line(9, 31.5, run=2.25, alloc=2)]
    if variant == "bom":
        header = "\ufeff" + header
    if variant == "negative_zero":  # float() reads -0.0: the integer parser, which reads 0, is not used then
        lines.append(line(9, 31, run="-0", alloc=2))
    if variant == "blank_lines":
        lines[2:2] = ["", ""]
        lines.append("")
    path = write(tmp_path, lines, header=header, gz=variant == "gzip")
    if variant == "crlf":
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    if variant == "no_final_newline":
        path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert swf._fast_table(str(path)) is not None, "this file should take the fast path"
    (fast_w, fast), (slow_w, slow) = _fast_and_slow(path, monkeypatch, **kw)
    assert fast == slow and len(fast) >= 3
    for a, b in zip(fast, slow):
        assert [type(v) for v in vars_of(a)] == [type(v) for v in vars_of(b)]
        assert repr(vars_of(a)) == repr(vars_of(b))  # -0.0 is not 0.0 here
    assert fast_w.report.as_dict() == slow_w.report.as_dict()
    assert list(fast_w.report.dropped) == list(slow_w.report.dropped)  # same order in summary.json
    assert list(fast_w.report.adjusted) == list(slow_w.report.adjusted)
    assert fast_w.origin_unix_s == slow_w.origin_unix_s


def vars_of(job):
    from dataclasses import astuple

    return astuple(job)


@pytest.mark.parametrize("bad", [
    "1 0 0 10 1 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1",  # 17 fields
    "1 0 0 10 1 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1 -1 -1",  # 19 fields
    "1 0 0 ten 1 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1 -1",  # not a number
    "1 0 0 nan 1 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1 -1",  # NaN
    "1 0 0 10 1.5 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1 -1",  # not whole
    "1 0 0 10 1 -1 -1 -1 100 -1 1 -7 1 -1 -1 -1 -1 -1",  # code below -1
    "1 0 0 10 1 -1 -1 -1 1e16 -1 1 1 1 -1 -1 -1 -1 -1",  # out of range
    "1 0 0 10 1 -1 -1 -1 1000000000000001 -1 1 1 1 -1 -1 -1 -1 -1",  # out of range, an integer
    "1 0 0 10 1 -1 -1 -1 100 -1 1 1 1 -1 99999999999999999999 -1 -1 -1",  # beyond 64 bits
    "1 99 0 10 1 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1 -1",  # goes back in time (next line submits at 50)
    "2 0 0 10 1 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1 -1",  # duplicate id
    "1 0 0 10 1 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1 -1 ; trailing comment",
    "1 0 0 10 1 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1 \u00a0-1",  # a non-ASCII space
    "1 0 0 10 1 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1\x0b-1",  # a vertical tab
    "   ",  # a line of spaces between jobs
])
def test_irregular_files_go_line_by_line_with_located_errors(tmp_path, monkeypatch, bad):
    path = write(tmp_path, [bad, "2 50 0 10 1 -1 -1 -1 100 -1 1 1 1 -1 -1 -1 -1 -1"])
    if bad.strip():  # a line of spaces is skipped by both paths alike
        assert swf._fast_table(str(path)) is None
    for skip in (False, True):
        outcomes = []
        for fast_allowed in (True, False):
            with monkeypatch.context() as m:
                if not fast_allowed:
                    m.setattr(swf, "_fast_table", lambda p: None)
                try:
                    w, jobs = jobs_of(path, skip_bad_lines=skip)
                    outcomes.append(([vars_of(j) for j in jobs], w.report.as_dict()))
                except TraceError as exc:
                    outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1]
