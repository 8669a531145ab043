"""The format registry (wattsched.workload.open): a trace is claimed by its name or its first bytes, read the same
whichever name it has, and refused with one error that lists the formats when nothing claims it."""

import gzip
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wattsched.errors import TraceError
from wattsched.workload.open import FORMATS, format_of, machine_procs, open_trace, trace_stem

KTH = Path(__file__).resolve().parents[2] / "src" / "wattsched" / "data" / "traces" / \
    "KTH-SP2-1996-2.1-cln-first5000.swf.gz"


def _jobs(workload):
    return [(j.id, j.submit_s, j.runtime_s, j.nodes) for j in workload.jobs]


@pytest.mark.parametrize("name, fmt", [("a.swf", "swf"), ("A.SWF.GZ", "swf"), ("t.csv", "table"),
                                       ("t.csv.gz", "table"), ("t.parquet", "table"), ("t.pq", "table")])
def test_a_name_claims_its_format_without_reading_the_file(name, fmt):
    assert format_of(name).name == fmt  # the file does not exist: nothing is read


def test_an_swf_trace_under_another_name_is_read_by_content_as_the_same_jobs(tmp_path):
    renamed = tmp_path / "kth.log"
    renamed.write_bytes(gzip.decompress(KTH.read_bytes()))
    assert format_of(renamed).name == "swf"
    assert machine_procs(renamed) == machine_procs(KTH) == 100
    first = _jobs(open_trace(KTH, machine_nodes=100))[:300]
    assert _jobs(open_trace(renamed, machine_nodes=100))[:300] == first
    compressed = tmp_path / "kth.data"
    shutil.copyfile(KTH, compressed)
    assert format_of(compressed).name == "swf"  # gzip: sniffed on the decompressed bytes


def test_a_csv_table_under_another_name_is_read_by_content(tmp_path):
    path = tmp_path / "jobs.txt"
    path.write_text("job_id,submit_time,run_time,num_nodes\n1,0,60,2\n2,5,30,1\n", encoding="utf-8")
    assert format_of(path).name == "table"
    assert machine_procs(path) is None  # a table states no machine size
    assert _jobs(open_trace(path)) == [(1, 0.0, 60.0, 2), (2, 5.0, 30.0, 1)]


def test_a_parquet_table_under_another_name_is_read_by_its_magic(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "jobs.bin"
    pq.write_table(pa.table({"id": [7], "submit_s": [1.0], "runtime_s": [9.0], "nodes": [3]}), path)
    assert format_of(path).name == "table"
    assert _jobs(open_trace(path)) == [(7, 1.0, 9.0, 3)]


def test_a_file_no_format_claims_gets_one_error_naming_it_and_every_format(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("dear diary\nthe cluster was busy today\n", encoding="utf-8")
    with pytest.raises(TraceError) as err:
        format_of(path)
    message = str(err.value)
    assert str(path) in message and "not a workload format" in message
    assert all(f.description in message for f in FORMATS)


def test_a_missing_file_without_a_known_suffix_says_so(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        format_of(tmp_path / "absent")


@pytest.mark.parametrize("name, stem", [("KTH-SP2.swf.gz", "KTH-SP2"), ("m100.parquet", "m100"),
                                        ("jobs.csv.gz", "jobs"), ("odd.name", "odd.name")])
def test_trace_stem_drops_the_format_suffix(name, stem):
    assert trace_stem(f"/some/dir/{name}") == stem


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_any_bytes_are_claimed_by_one_format_or_refused_with_a_trace_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("sniff") / "blob"
    path.write_bytes(data)
    try:
        fmt = format_of(path)
    except TraceError as exc:
        assert str(path) in str(exc)
    else:
        assert fmt in FORMATS
