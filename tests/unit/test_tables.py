"""Job tables: CSV/Parquet round trips, errors naming file/line/column, sorting, aliases."""

from __future__ import annotations

import csv
import gzip
import math
import sys
from datetime import datetime, timezone

import pytest

from wattsched.errors import TraceError, WattschedError
from wattsched.workload.records import TraceJob
from wattsched.workload.tables import (
    COLUMNS,
    MissingDependencyError,
    PackedSeries,
    format_power_series,
    parse_power_series,
    read_job_table,
    write_job_table,
)


def sample_jobs() -> list[TraceJob]:
    """Jobs exercising every column, awkward floats and strings that need CSV quoting."""
    return [
        TraceJob(1, 0.0, 0.1, 0.30000000000000004, 16, 1, user="alice", group="g,1", partition="batch",
                 mean_w=123.456789012345, max_w=190.738, std_w=1e-300, app_class="cpu",
                 power_series=((0.0, 350.5), (600.25, 420.0)), gpus_per_node=2, min_nodes=1, max_nodes=4,
                 malleable=True),
        TraceJob(2, 1.5e-7, 3600.0, 7200.0, 1, 1, user='bob "the builder"', status=0),
        TraceJob(2**40, 12345678.901234567, 2.0 / 3.0, 1.0, 8, 2, user="", partition="gpu\nnode",
                 mean_w=100.0, max_w=None, std_w=None, status=5, app_class="memory"),
        TraceJob(4, 12345678.901234567, 0.0, 0.0, 3, 3, mean_w=0.0, max_w=0.0, std_w=0.0),
    ]


def write_csv(path, header, rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_csv_round_trip_is_exact(tmp_path, suffix):
    jobs = sample_jobs()
    path = tmp_path / f"jobs{suffix}"
    assert write_job_table(jobs, path) == len(jobs)
    wl = read_job_table(path)
    assert list(wl.jobs) == jobs
    assert wl.name == "jobs"
    assert wl.report.read == wl.report.kept == len(jobs)
    assert not [n for n in wl.notes if "sorted" in n]


def test_parquet_round_trip_is_exact(tmp_path):
    pytest.importorskip("pyarrow")
    jobs = sample_jobs()
    path = tmp_path / "jobs.parquet"
    write_job_table(iter(jobs), path)
    assert list(read_job_table(path).jobs) == jobs


def test_parquet_dictionary_encodes_text_columns_only(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    jobs = [TraceJob(i, float(i), 60.0 + i / 7, 120.0, 1, 1, user=f"u{i % 3}", mean_w=100.0 + i / 7, max_w=200.0,
                     std_w=1.0, app_class="cpu") for i in range(1, 500)]
    path = tmp_path / "jobs.parquet"
    write_job_table(jobs, path)
    meta = pq.ParquetFile(path).metadata
    encodings = {meta.schema.column(i).name: meta.row_group(0).column(i).encodings for i in range(meta.num_columns)}
    dictionary = {name for name, enc in encodings.items() if any("DICTIONARY" in e for e in enc)}
    assert {"user", "app_class"} <= dictionary
    assert not dictionary & {"submit_s", "runtime_s", "mean_w"}
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert list(read_job_table(path).jobs) == jobs


def test_parquet_round_trip_spans_several_batches(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    import wattsched.workload.tables as tables

    monkeypatch.setattr(tables, "_PARQUET_BATCH", 3)
    jobs = [TraceJob(i, float(i), 1.0 + i / 7, 10.0, 1, 1, user=f"u{i % 3}") for i in range(10)]
    write_job_table(jobs, tmp_path / "jobs.pq")
    assert list(read_job_table(tmp_path / "jobs.pq").jobs) == jobs


def test_csv_header_is_the_documented_column_order(tmp_path):
    path = tmp_path / "jobs.csv"
    write_job_table(sample_jobs(), path)
    assert path.read_text(encoding="utf-8").splitlines()[0] == ",".join(COLUMNS)


def test_gzipped_csv_is_gzip_and_reproducible(tmp_path):
    a, b = tmp_path / "a.csv.gz", tmp_path / "b.csv.gz"
    write_job_table(sample_jobs(), a)
    write_job_table(sample_jobs(), b)
    assert a.read_bytes() == b.read_bytes()
    with gzip.open(a, "rt", encoding="utf-8") as fh:
        assert fh.readline().startswith("id,submit_s,")


def test_empty_table_round_trips(tmp_path):
    write_job_table([], tmp_path / "e.csv")
    wl = read_job_table(tmp_path / "e.csv")
    assert list(wl.jobs) == []
    assert wl.has_power is False


def test_has_power_needs_mean_w_on_every_job(tmp_path):
    with_power = [TraceJob(1, 0.0, 1.0, 1.0, 1, 1, mean_w=150.0), TraceJob(2, 1.0, 1.0, 1.0, 1, 1, mean_w=160.0)]
    write_job_table(with_power, tmp_path / "p.csv")
    assert read_job_table(tmp_path / "p.csv").has_power is True

    partial = [with_power[0], TraceJob(2, 1.0, 1.0, 1.0, 1, 1)]
    write_job_table(partial, tmp_path / "q.csv")
    wl = read_job_table(tmp_path / "q.csv")
    assert wl.has_power is False
    assert any("1 of 2 jobs have no mean_w" in n for n in wl.notes)

    write_csv(tmp_path / "r.csv", ["id", "submit_s", "runtime_s", "nodes"], [[1, 0, 5, 1]])
    assert read_job_table(tmp_path / "r.csv").has_power is False


def test_unsorted_rows_are_sorted_stably_with_a_note(tmp_path):
    path = tmp_path / "u.csv"
    write_csv(path, ["id", "submit_s", "runtime_s", "nodes"],
              [[1, 50, 1, 1], [2, 10, 1, 1], [3, 50, 1, 1], [4, 10, 1, 1], [5, 70, 1, 1]])
    wl = read_job_table(path)
    assert [j.id for j in wl.jobs] == [2, 4, 1, 3, 5]
    assert any("not sorted" in n for n in wl.notes)


def test_sizes_from_procs_or_nodes(tmp_path):
    path = tmp_path / "s.csv"
    write_csv(path, ["id", "submit_s", "runtime_s", "procs", "nodes"],
              [[1, 0, 1, 33, ""], [2, 1, 1, "", 3], [3, 2, 1, 5, 7], [4, 3, 1, 32, ""]])
    jobs = list(read_job_table(path, cores_per_node=16).jobs)
    assert [(j.procs, j.nodes) for j in jobs] == [(33, 3), (48, 3), (5, 7), (32, 2)]

    write_csv(path, ["id", "submit_s", "runtime_s", "procs"], [[1, 0, 1, 3]])
    (job,) = read_job_table(path).jobs
    assert (job.procs, job.nodes) == (3, 3)


def test_missing_walltime_defaults(tmp_path):
    path = tmp_path / "w.csv"
    write_csv(path, ["id", "submit_s", "runtime_s", "walltime_s", "nodes"], [[1, 0, 30, "", 1], [2, 1, 40, 100, 1]])
    assert [j.walltime_s for j in read_job_table(path).jobs] == [30.0, 100.0]
    wl = read_job_table(path, default_walltime_s=3600)
    assert [j.walltime_s for j in wl.jobs] == [3600.0, 100.0]
    assert any("1 jobs have no requested time" in n for n in wl.notes)

    write_csv(path, ["id", "submit_s", "runtime_s", "nodes"], [[1, 0, 30, 1]])
    assert next(read_job_table(path, default_walltime_s=60.0).jobs).walltime_s == 60.0


def test_optional_cells_take_defaults_and_status_names_map(tmp_path):
    path = tmp_path / "o.csv"
    write_csv(path, ["id", "submit_s", "runtime_s", "nodes", "status", "malleable", "user"],
              [[1, 0, 1, 1, "", "", 42], [2, 1, 1, 1, "CANCELLED by 1234", "yes", ""],
               [3, 2, 1, 1, "timeout", "0", "x"], [4, 3, 1, 1, "0", "False", "y"]])
    jobs = list(read_job_table(path).jobs)
    assert [j.status for j in jobs] == [1, 5, 0, 0]
    assert [j.malleable for j in jobs] == [False, True, False, False]
    assert jobs[0].user == "42"


def test_marconi100_aliases(tmp_path):
    path = tmp_path / "pm100.csv"
    t0 = datetime(2020, 5, 1, 0, 0, 5, tzinfo=timezone.utc)
    write_csv(
        path,
        ["job_id", "submit_time", "run_time", "time_limit", "num_nodes_alloc", "num_cores_alloc",
         "num_gpus_alloc", "user_id", "group_id", "job_state", "partition", "qos"],
        [[7, "2020-05-01T00:00:35+00:00", 100, 30, 2, 64, 6, 17, 3, "COMPLETED", 1, "normal"],
         [8, "2020-05-01T00:00:05Z", 50, "INFINITE", 1, 32, 0, 18, 3, "FAILED", 1, "normal"]],
    )
    wl = read_job_table(path, default_walltime_s=86400)
    job8, job7 = list(wl.jobs)  # the file lists them out of order
    assert [(j.id, j.submit_s) for j in (job8, job7)] == [(8, 0.0), (7, 30.0)]
    assert wl.origin_unix_s == t0.timestamp()
    assert job7.walltime_s == 30 * 60.0
    assert job8.walltime_s == 86400.0  # INFINITE: missing, so the default
    assert (job7.nodes, job7.procs, job7.gpus_per_node) == (2, 64, 3)
    assert (job7.user, job7.group, job7.status, job8.status) == ("17", "3", 1, 0)
    assert job7.partition == "1"
    notes = " | ".join(wl.notes)
    for alias, col in [("job_id", "id"), ("time_limit", "walltime_s"), ("num_nodes_alloc", "nodes"),
                       ("user_id", "user")]:
        assert f"column {alias!r} read as {col!r}" in notes
    assert "ignored columns: qos" in notes


def test_canonical_column_wins_over_alias(tmp_path):
    path = tmp_path / "c.csv"
    write_csv(path, ["id", "job_id", "submit_s", "runtime_s", "nodes"], [[1, 99, 0, 1, 1]])
    assert next(read_job_table(path).jobs).id == 1


def test_headers_are_case_and_space_insensitive(tmp_path):
    path = tmp_path / "h.csv"
    write_csv(path, [" ID", "Submit_S ", "RUNTIME_S", "Nodes", "Mean_W"], [[1, 0, 5, 2, 150.5]])
    wl = read_job_table(path)
    (job,) = wl.jobs
    assert (job.id, job.nodes, job.mean_w) == (1, 2, 150.5)
    assert wl.has_power


# ----------------------------------------------------------------------------- errors


def test_invalid_cell_names_file_line_and_column(tmp_path):
    path = tmp_path / "bad.csv"
    write_csv(path, ["id", "submit_s", "runtime_s", "nodes"], [[1, 0, 5, 1], [2, 1, "abc", 1]])
    with pytest.raises(TraceError, match=r"bad\.csv:3: runtime_s: 'abc' is not a number") as info:
        read_job_table(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 3, "runtime_s")
    assert isinstance(info.value, WattschedError)


def test_line_numbers_count_quoted_newlines(tmp_path):
    path = tmp_path / "nl.csv"
    write_csv(path, ["id", "submit_s", "runtime_s", "nodes", "user"],
              [[1, 0, 5, 1, "two\nlines"], [2, 1, 5, -4, "x"]])
    with pytest.raises(TraceError, match=r"nl\.csv:4: nodes: nodes must be >= 1, got -4"):
        read_job_table(path)


def test_error_names_the_alias_column(tmp_path):
    path = tmp_path / "a.csv"
    write_csv(path, ["job_id", "submit_time", "run_time", "num_nodes"], [[1, 0, 5, "two"]])
    with pytest.raises(TraceError, match=r"a\.csv:2: num_nodes: 'two' is not an integer"):
        read_job_table(path)


@pytest.mark.parametrize(
    ("header", "row", "pattern"),
    [
        (["id", "submit_s", "runtime_s", "nodes"], [1, "", 5, 1], r":2: submit_s: missing submit time"),
        (["id", "submit_s", "runtime_s", "nodes"], [1, 0, -5, 1], r":2: runtime_s: .*negative"),
        (["id", "submit_s", "runtime_s", "nodes"], [1, 0, "inf", 1], r":2: runtime_s: .*not a finite"),
        (["id", "submit_s", "runtime_s", "nodes"], [1.5, 0, 5, 1], r":2: id: '1.5' is not an integer"),
        (["id", "submit_s", "runtime_s", "procs", "nodes"], [1, 0, 5, "", ""], r":2: nodes: missing size"),
        (["id", "submit_s", "runtime_s", "nodes", "mean_w"], [1, 0, 5, 1, "-3"], r":2: mean_w: .*negative"),
        (["id", "submit_s", "runtime_s", "nodes", "malleable"], [1, 0, 5, 1, "maybe"], r":2: malleable"),
        (["id", "submit_s", "runtime_s", "nodes", "status"], [1, 0, 5, 1, "RUNNIN"], r":2: status.*Slurm"),
        (["id", "submit_s", "runtime_s", "nodes", "power_series"], [1, 0, 5, 1, "0:350;600"],
         r":2: power_series: .*offset_s:watts"),
        (["id", "submit_s", "runtime_s", "nodes", "power_series"], [1, 0, 5, 1, "0:350;5:300;5:200"],
         r":2: power_series: .*offsets must increase"),
    ],
)
def test_invalid_values_raise_trace_errors(tmp_path, header, row, pattern):
    path = tmp_path / "t.csv"
    write_csv(path, header, [row])
    with pytest.raises(TraceError, match=r"t\.csv" + pattern):
        read_job_table(path)


def test_missing_required_column(tmp_path):
    path = tmp_path / "m.csv"
    write_csv(path, ["id", "submit_s", "nodes"], [[1, 0, 1]])
    with pytest.raises(TraceError, match=r"m\.csv:1: runtime_s: missing required column 'runtime_s' "
                                         r"\(or 'run_time'\)"):
        read_job_table(path)
    write_csv(path, ["id", "submit_s", "runtime_s"], [[1, 0, 1]])
    with pytest.raises(TraceError, match="give 'procs' or 'nodes'"):
        read_job_table(path)


def test_duplicate_ids_and_ragged_rows(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(path, ["id", "submit_s", "runtime_s", "nodes"], [[1, 0, 1, 1], [1, 2, 1, 1]])
    with pytest.raises(TraceError, match=r"d\.csv:3: id: duplicate job id 1 \(first on line 2\)"):
        read_job_table(path)
    path.write_text("id,submit_s,runtime_s,nodes\n1,0,1,1\n2,1,1\n", encoding="utf-8")
    with pytest.raises(TraceError, match=r"d\.csv:3: expected 4 fields as in the header, found 3"):
        read_job_table(path)


def test_mixed_timestamps_and_seconds_rejected(tmp_path):
    path = tmp_path / "x.csv"
    write_csv(path, ["job_id", "submit_time", "run_time", "num_nodes"],
              [[1, "2020-05-01T00:00:00", 1, 1], [2, "12", 1, 1]])
    with pytest.raises(TraceError, match=r"x\.csv:3: submit_time: mixes timestamps"):
        read_job_table(path)


def test_unknown_suffix_empty_file_and_missing_file(tmp_path):
    with pytest.raises(TraceError, match=r"jobs\.txt: no such file"):
        read_job_table(tmp_path / "jobs.txt")
    write_csv(tmp_path / "jobs.txt", ["job_id", "submit_time", "run_time", "num_nodes"], [[1, 0, 5, 2]])
    assert [j.nodes for j in read_job_table(tmp_path / "jobs.txt").jobs] == [2]  # a table named otherwise: by content
    (tmp_path / "empty.csv").write_text("", encoding="utf-8")
    with pytest.raises(TraceError, match=r"empty\.csv: empty file"):
        read_job_table(tmp_path / "empty.csv")
    with pytest.raises(TraceError, match=r"nope\.csv: no such file"):
        read_job_table(tmp_path / "nope.csv")


def test_parquet_errors_name_the_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({"id": [1, 2, 3], "submit_s": [0.0, 1.0, 2.0], "runtime_s": [1.0, None, 1.0],
                      "nodes": [1, 1, 1]})
    pq.write_table(table, tmp_path / "p.parquet")
    with pytest.raises(TraceError, match=r"p\.parquet:2: runtime_s: missing run time"):
        read_job_table(tmp_path / "p.parquet")


def test_parquet_timestamps_and_only_needed_columns(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    t = [datetime(2021, 1, 1, 12, 0, 10), datetime(2021, 1, 1, 12, 0, 0)]
    table = pa.table({
        "job_id": pa.array([10, 11], pa.int64()),
        "submit_time": pa.array(t, pa.timestamp("s")),
        "run_time": [5, 6],
        "time_limit": [2, 3],
        "num_nodes": [1, 2],
        "power_consumption": pa.array([[1.0, 2.0], [3.0]], pa.list_(pa.float64())),
    })
    pq.write_table(table, tmp_path / "pm.parquet")
    wl = read_job_table(tmp_path / "pm.parquet")
    jobs = list(wl.jobs)
    assert [(j.id, j.submit_s, j.walltime_s) for j in jobs] == [(11, 0.0, 180.0), (10, 10.0, 120.0)]
    assert wl.origin_unix_s == datetime(2021, 1, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()
    assert any("power_consumption" in n for n in wl.notes)


def test_missing_pyarrow_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(MissingDependencyError, match=r"wattsched\[parquet\]"):
        write_job_table(sample_jobs(), tmp_path / "x.parquet")
    (tmp_path / "y.parquet").write_bytes(b"PAR1")
    with pytest.raises(ImportError, match=r"pip install 'wattsched\[parquet\]'"):
        read_job_table(tmp_path / "y.parquet")


# ----------------------------------------------------------------------------- power series


def test_power_series_parse_and_format_are_inverse():
    series = ((0.0, 350.0), (0.1, 1e-9), (600.5, 420.25), (1e6, 0.0))
    assert parse_power_series(format_power_series(series)) == series
    assert parse_power_series(" 0 : 350 ; 600:420 ") == ((0.0, 350.0), (600.0, 420.0))


def _series_lists():
    from hypothesis import strategies as st

    number = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False)
    step = st.tuples(number, number)
    return st.lists(st.none() | st.just(()) | st.lists(step, min_size=1, max_size=6).map(tuple), max_size=30)


def test_packed_series_cells_are_the_text_format_power_series_writes():
    """Packed for another process and formatted there, each job's series is the text of the job's own
    (``None`` for a job without one), for any finite steps: shortest reprs, subnormals, huge values."""
    from hypothesis import given, settings

    @settings(max_examples=300, deadline=None)
    @given(_series_lists())
    def check(series):
        assert PackedSeries.of(series).cells() == [format_power_series(s) or None for s in series]

    check()
    assert PackedSeries.of([((0.0, 350.0), (600.0, 420.5)), None, ((0.1, 5e-324),)]).cells() == [
        "0.0:350.0;600.0:420.5", None, "0.1:5e-324"]


@pytest.mark.parametrize("text", ["0:350;", "a:1", "-1:350", "0:-5", "0:nan", "0:1;5:1;5:2", "0=350", "5:100"])
def test_power_series_rejects_malformed(text):
    with pytest.raises(ValueError):
        parse_power_series(text)


def test_floats_survive_csv_exactly(tmp_path):
    values = [math.pi, 1 / 3, 2.0**-1074, 987654.3210987654, 0.1 + 0.2]  # within the sanity bounds
    jobs = [TraceJob(i, v, v, v, 1, 1, mean_w=v, max_w=v, std_w=v) for i, v in enumerate(values)]
    write_job_table(jobs, tmp_path / "f.csv")
    got = sorted(read_job_table(tmp_path / "f.csv").jobs, key=lambda j: j.id)
    assert [(j.submit_s, j.runtime_s, j.mean_w) for j in got] == [(v, v, v) for v in values]


def test_excel_style_bom_is_tolerated(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffid,submit_s,runtime_s,nodes\r\n1,0,5,2\r\n".encode())
    (job,) = read_job_table(path).jobs
    assert (job.id, job.runtime_s, job.nodes) == (1, 5.0, 2)


@pytest.mark.parametrize("values", [
    ["alice", "bob", "", "carol"],  # ASCII: joined and encoded once
    ["zoë", "bob", "", "李"],  # not ASCII: one by one
    ["alice", None, "bob"],  # a missing value
    [1, "bob", 2.5],  # not all strings
    [],
])
def test_string_columns_hold_what_they_were_given(values):
    import numpy as np

    from wattsched.workload.tables import arrow_column

    expected = [None if v is None else str(v) for v in values]
    assert arrow_column(values, "string").to_pylist() == expected
    assert arrow_column(np.array(values, dtype=object), "string").to_pylist() == expected


# ----------------------------------------------------------------------------- job units


def unit_jobs() -> list[TraceJob]:
    """Jobs of units (a mix of unit shapes, GPUs, MICs, memory) between whole-node jobs."""
    from wattsched.model.units import parse_units

    return [
        TraceJob(1, 0.0, 10.0, 20.0, 16, 1, user="a"),
        TraceJob(2, 1.0, 10.0, 20.0, 20, 3, user="b", units=parse_units("2*8c1g4G;4c"), mean_w=150.0, max_w=180.0,
                 std_w=2.5),
        TraceJob(3, 2.0, 10.0, 20.0, 0, 1, units=parse_units("2m512M")),
        TraceJob(4, 3.0, 10.0, 20.0, 32, 2, user="c"),
    ]


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_units_round_trip_exactly(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    jobs = unit_jobs()
    path = tmp_path / f"u{suffix}"
    write_job_table(jobs, path)
    back = list(read_job_table(path, cores_per_node=16).jobs)
    assert back == jobs
    assert [len(j.units) for j in back] == [0, 3, 1, 0]


def test_units_column_is_written_only_when_a_job_has_units(tmp_path):
    plain = [j for j in unit_jobs() if not j.units]
    write_job_table(plain, tmp_path / "plain.csv")
    write_job_table(unit_jobs(), tmp_path / "units.csv")
    assert (tmp_path / "plain.csv").read_text().splitlines()[0] == ",".join(COLUMNS)
    header, *rows = (tmp_path / "units.csv").read_text().splitlines()
    assert header == ",".join([*COLUMNS, "units"])
    # whole-node jobs have an empty cell; the text form runs equal units together
    assert [r.rsplit(",", 1)[1] for r in rows] == ["", '"2*8c1g4096M;4c"', '"2m512M"', ""]


def test_units_set_nodes_and_procs(tmp_path):
    path = tmp_path / "u.csv"
    write_csv(path, ["id", "submit_s", "runtime_s", "procs", "nodes", "units"], [
        [1, 0, 5, "", "", "3*4c2G;16c1g"],  # nodes and procs from the units
        [2, 1, 5, 7, 4, "3*4c2G;16c1g"],  # a matching nodes; procs as given
        [3, 2, 5, "", 2, ""],  # whole nodes
        [4, 3, 5, "", "", " 1g "],  # GPUs only: 0 procs
    ])
    jobs = list(read_job_table(path, cores_per_node=16).jobs)
    assert [(j.nodes, j.procs, len(j.units)) for j in jobs] == [(4, 28, 4), (4, 7, 4), (2, 32, 0), (1, 0, 1)]
    assert jobs[0].units[0].mem_mb == 2048 and jobs[0].units[3].gpus == 1 and jobs[0].units[3].mem_mb == 0
    # a table sized by units alone
    write_csv(path, ["id", "submit_s", "runtime_s", "units"], [[1, 0, 5, "2*8c"]])
    (job,) = read_job_table(path).jobs
    assert (job.nodes, job.procs) == (2, 16)
    write_csv(path, ["id", "submit_s", "runtime_s", "units"], [[1, 0, 5, ""]])
    with pytest.raises(TraceError, match=r"u\.csv:2: units: missing size: give procs or nodes or units"):
        read_job_table(path)


@pytest.mark.parametrize(
    ("nodes", "units", "pattern"),
    [
        (2, "3*4c", r"units: 3 units but nodes is 2"),
        ("", "4x", r"units: '4x': unit '4x' is not of the form"),
        ("", "0c", r"units: '0c': unit '0c' asks no cores, GPUs or MICs"),
        ("", "0*4c", r"units: '0\*4c': unit repetition '0' is not a positive whole number"),
        ("", "4c2c", r"units: '4c2c': unit '4c2c' gives 'c' twice"),
    ],
)
def test_bad_units_name_file_line_and_column(tmp_path, nodes, units, pattern):
    path = tmp_path / "bu.csv"
    write_csv(path, ["id", "submit_s", "runtime_s", "nodes", "units"], [[1, 0, 5, 1, ""], [2, 1, 5, nodes, units]])
    with pytest.raises(TraceError, match=r"bu\.csv:3: " + pattern) as info:
        read_job_table(path)
    assert (info.value.line, info.value.field) == (3, "units")


def test_parquet_units_errors_name_the_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [1, 2], "submit_s": [0.0, 1.0], "runtime_s": [1.0, 1.0],
                             "units": ["2*4c", "4c;;"]}), tmp_path / "p.parquet")
    with pytest.raises(TraceError, match=r"p\.parquet:2: units: '4c;;'"):
        read_job_table(tmp_path / "p.parquet")
    pq.write_table(pa.table({"id": [1], "submit_s": [0.0], "runtime_s": [1.0], "units": [4]}), tmp_path / "p.parquet")
    with pytest.raises(TraceError, match=r"p\.parquet:1: units: 4 is not a units string"):
        read_job_table(tmp_path / "p.parquet")


def test_jobs_of_units_are_not_dropped_as_larger_than_the_machine(tmp_path):
    path = tmp_path / "big.csv"
    write_csv(path, ["id", "submit_s", "runtime_s", "nodes", "units"], [[1, 0, 5, 8, ""], [2, 1, 5, "", "8*1c"]])
    wl = read_job_table(path, machine_nodes=4)
    assert [(j.id, j.nodes) for j in wl.jobs] == [(2, 8)]
    assert wl.report.dropped == {"larger_than_machine": 1}


def test_csv_text_of_integral_float_columns_is_arrows_own(tmp_path):
    """Float columns of integers are written through int64 (faster): the bytes must be those Arrow writes."""
    pa = pytest.importorskip("pyarrow")
    pacsv = pytest.importorskip("pyarrow.csv")
    import numpy as np

    from wattsched.workload.tables import _csv_bytes

    def arrows_own(table) -> bytes:
        sink = pa.BufferOutputStream()
        sink.write((",".join(table.column_names) + "\n").encode())
        pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=False))
        return sink.getvalue().to_pybytes()

    rng = np.random.default_rng(11)
    columns = {
        "small": rng.integers(-10**6, 10**6, 500).astype(float),
        "near_limit": rng.integers(10**9 - 1000, 10**9 - 1, 500).astype(float),
        "beyond": rng.integers(10**10, 10**12, 500).astype(float) * 10,  # Arrow writes some as 1e+11
        "fraction": rng.integers(0, 100, 500) + 0.5,
        "one_nan": np.append(np.arange(499.0), np.nan),
        "one_inf": np.append(np.arange(499.0), np.inf),
        "minus_zero": np.append(np.arange(1.0, 500.0), -0.0),
        "zero": np.zeros(500),
        "ints": rng.integers(0, 10, 500),
    }
    table = pa.table({k: pa.array(v) for k, v in columns.items()})
    assert _csv_bytes(table) == arrows_own(table)
    with_nulls = pa.table({"x": pa.array([1.0, None, 3.0], pa.float64())})
    assert _csv_bytes(with_nulls) == arrows_own(with_nulls)
    # the shortcut is taken where it can be (else this test would not test it)
    from wattsched.workload.tables import _integral_columns_as_int

    types = {f.name: str(f.type) for f in _integral_columns_as_int(table).schema}
    assert types["small"] == types["near_limit"] == types["zero"] == "int64"
    assert types["beyond"] == types["fraction"] == types["one_nan"] == types["minus_zero"] == "double"


def test_writing_csv_tables_does_not_import_pandas(tmp_path):
    """pandas, when installed, costs a fifth of a second and 40 MiB to import; writing a table needs none of it."""
    pytest.importorskip("pyarrow")
    import subprocess

    code = ("import sys, numpy as np\nfrom wattsched.workload.tables import arrow_column, write_csv_table\n"
            "import pyarrow as pa\n"
            "t = pa.Table.from_arrays([arrow_column(np.arange(9.0), 'float64'), arrow_column(np.arange(9.0) / 7, "
            "'float64')], names=['a', 'b'])\n"
            f"write_csv_table(t, {str(tmp_path / 't.csv')!r})\nprint('pandas' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "False", proc.stderr
    assert (tmp_path / "t.csv").read_text().splitlines()[:3] == ["a,b", "0,0", "1,0.14285714285714285"]


def test_number_columns_are_arrays_unless_a_value_is_missing():
    np = pytest.importorskip("numpy")
    from wattsched.workload.tables import job_columns

    jobs = sample_jobs()
    complete = [j for j in jobs if None not in (j.mean_w, j.max_w, j.std_w)]
    cols = job_columns(complete)
    assert list(cols) == list(COLUMNS)
    for name in ("id", "procs", "nodes", "status", "gpus_per_node"):
        assert isinstance(cols[name], np.ndarray) and cols[name].dtype == np.int64, name
    for name in ("submit_s", "runtime_s", "mean_w", "max_w", "std_w"):
        assert isinstance(cols[name], np.ndarray) and cols[name].dtype == np.float64, name
    assert cols["id"].tolist() == [j.id for j in complete]
    assert cols["std_w"].tolist() == [j.std_w for j in complete]  # 1e-300 kept exactly
    assert isinstance(cols["user"], list) and isinstance(cols["malleable"], list)
    # a job without power: that column stays a list holding its None (a null cell, not NaN)
    cols = job_columns(jobs)
    assert cols["mean_w"] == [j.mean_w for j in jobs] and None in cols["mean_w"]
    # a NaN also keeps the list, where it stays a NaN
    nan = TraceJob(5, 1.0, 1.0, 1.0, 1, 1, mean_w=math.nan, max_w=1.0, std_w=0.0)
    cols = job_columns([nan])
    assert isinstance(cols["mean_w"], list) and math.isnan(cols["mean_w"][0])
    assert isinstance(cols["max_w"], np.ndarray)
    # an id beyond 64 bits: a list (the writer then says it cannot write it)
    assert isinstance(job_columns([TraceJob(2**70, 0.0, 1.0, 1.0, 1, 1)])["id"], list)


@pytest.mark.parametrize("suffix", [".csv.gz", ".parquet"])
def test_number_columns_as_arrays_or_lists_write_the_same_bytes(tmp_path, suffix):
    np = pytest.importorskip("numpy")
    pytest.importorskip("pyarrow")
    from wattsched.workload.tables import job_table_columns, write_job_columns

    jobs = sample_jobs()
    complete = [j for j in jobs if None not in (j.mean_w, j.max_w, j.std_w)]
    cols = job_table_columns(complete)
    assert any(isinstance(v, np.ndarray) for v in cols.values())
    as_lists = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in cols.items()}
    write_job_columns(cols, tmp_path / f"arrays{suffix}")
    write_job_columns(as_lists, tmp_path / f"lists{suffix}")
    assert (tmp_path / f"arrays{suffix}").read_bytes() == (tmp_path / f"lists{suffix}").read_bytes()
    write_job_table(complete, tmp_path / f"table{suffix}")
    assert (tmp_path / f"table{suffix}").read_bytes() == (tmp_path / f"arrays{suffix}").read_bytes()
