"""Readers of workloads and configs under fuzzing: a result or a WattschedError, never another exception."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fuzz.strategies import VALUES, swf_text, table_text
from wattsched.config import SimConfig, load_cap_schedule, load_config, read_yaml
from wattsched.daemon.config import DaemonConfig
from wattsched.errors import WattschedError
from wattsched.sim.platforms import load_platform
from wattsched.sim.swf import read_swf, trace_info
from wattsched.sim.tables import read_job_table

WORK = Path(tempfile.mkdtemp(prefix="wattsched-fuzz-"))


def answered(fn, *args, **kwargs):
    """Call ``fn``: a result, or a WattschedError whose message is one line per problem and names its source."""
    try:
        return fn(*args, **kwargs)
    except WattschedError as exc:
        text = str(exc)
        assert text and "Traceback" not in text
        return exc


@given(swf_text(), st.booleans(), st.sampled_from(["plain", "gzip", "truncated", "bom"]))
def test_swf_reader(text, skip, form):
    path = WORK / ("t.swf.gz" if form in ("gzip", "truncated") else "t.swf")
    data = text.encode()
    if form == "bom":
        data = b"\xef\xbb\xbf" + data
    if form in ("gzip", "truncated"):
        data = gzip.compress(data)
        if form == "truncated":
            data = data[: max(2, len(data) // 2)]
    path.write_bytes(data)
    result = answered(lambda: trace_info(read_swf(path, skip_bad_lines=skip, cores_per_node=2)))
    if isinstance(result, dict):
        assert result["jobs"] == result["cleaning"]["kept"] >= 0


@given(st.binary(max_size=400), st.sampled_from(["t.swf", "t.swf.gz", "t.csv", "t.csv.gz"]))
def test_readers_on_random_bytes(data, name):
    path = WORK / name
    path.write_bytes(data)
    if name.startswith("t.swf"):
        answered(lambda: list(read_swf(path).jobs))
    else:
        answered(lambda: list(read_job_table(path, machine_nodes=50).jobs))


@given(table_text(), st.sampled_from(["t.csv", "t.csv.gz"]), st.integers(1, 4))
def test_job_table_reader(text, name, cores):
    path = WORK / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    result = answered(read_job_table, path, cores_per_node=cores, machine_nodes=64)
    if not isinstance(result, WattschedError):
        jobs = list(result.jobs)
        assert all(j.nodes >= 1 and j.runtime_s >= 0 and j.walltime_s >= 0 for j in jobs)
        assert len({j.id for j in jobs}) == len(jobs)


CAP_ENTRY = st.fixed_dictionaries(
    {}, optional={"start_s": VALUES, "end_s": VALUES, "cap_w": VALUES, "label": VALUES, "extra": VALUES})


@given(st.lists(CAP_ENTRY, max_size=5) | VALUES, st.sampled_from(["list", "yaml", "csv"]))
def test_cap_schedules(entries, form):
    if form == "list":
        if isinstance(entries, list) and all(isinstance(e, dict) for e in entries):
            answered(load_cap_schedule, entries)
        return
    if form == "yaml":
        path = WORK / "cap.yaml"
        path.write_text(yaml.safe_dump(entries))
    else:
        path = WORK / "cap.csv"
        rows = entries if isinstance(entries, list) else [entries]
        keys = ["start_s", "end_s", "cap_w", "label"]
        lines = [",".join(keys)] + [",".join(str(e.get(k, "")) if isinstance(e, dict) else str(e) for k in keys)
                                    for e in rows]
        path.write_text("\n".join(lines) + "\n")
    answered(load_cap_schedule, path)


SIM_KEYS = [*SimConfig.model_fields, "bogus"]
DAEMON_KEYS = [*DaemonConfig.model_fields, "bogus"]


@given(st.dictionaries(st.sampled_from(SIM_KEYS), VALUES, max_size=6))
def test_sim_configs(raw):
    path = WORK / "sim.yaml"
    path.write_text(yaml.safe_dump({"trace": "t.swf", **raw}))
    config = answered(load_config, path, SimConfig)
    if isinstance(config, SimConfig) and (config.platform is None or config.platform in ("default", "marconi100")):
        answered(lambda: config.build_cap_schedule(config.build_platform() if config.procs or config.platform
                                                   else None))


@given(st.dictionaries(st.sampled_from(DAEMON_KEYS), VALUES, max_size=6))
def test_daemon_configs(raw):
    path = WORK / "daemon.yaml"
    path.write_text(yaml.safe_dump({"slurm": {"backend": "sim"}, **raw}))
    answered(load_config, path, DaemonConfig)


@given(st.text(max_size=300))
def test_yaml_text(text):
    answered(read_yaml, WORK / "any.yaml", text=text)
    path = WORK / "p.yaml"
    path.write_text(text)
    answered(load_platform, path)


@given(st.integers(1, 9), st.integers(1, 9), st.booleans())
def test_nested_aliases_stay_bounded(width, depth, in_params):
    """Aliases nested ``depth`` deep, ``width`` wide: refused past the limit, read otherwise; never expanded."""
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    for d in range(1, depth):
        lines.append(f"a{d}: &a{d} [{', '.join([f'*a{d - 1}'] * width)}]")
    text = "\n".join(lines) + "\n"
    if in_params:
        text = "trace: t.swf\nparams:\n" + "".join("  " + x + "\n" for x in lines)
    result = answered(read_yaml, WORK / "alias.yaml", text=text)
    if isinstance(result, WattschedError):
        assert "aliases expand to more than" in str(result)
        assert width ** depth > 50_000


@pytest.mark.parametrize("doc", [{"x": 1}, [1, 2], None])
def test_plain_documents_still_read(doc):
    data, _ = read_yaml(WORK / "plain.yaml", text=json.dumps(doc))
    assert data == doc


