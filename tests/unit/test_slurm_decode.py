"""The fast JSON decoders of squeue and node replies against the general path they stand in for.

``parse.decode_squeue_json`` decodes with msgspec into the keys the daemon reads and converts the
forms Slurm prints in :func:`parse._job_fast`; anything else goes to the general path (json.loads and
``_job_from_json``, the decoder wattsched had before). The general path is the reference here: on every
fixture version, and on records with any value in any key read, both give equal records, or the same
error. A bad record is skipped by the backends' lenient decode, and a user's free text never reaches
another field.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wattsched.daemon.slurm import parse
from wattsched.daemon.slurm.parse import SlurmOutputError, decode_nodes_json, decode_squeue_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
SQUEUE = sorted(FIXTURES.glob("*/squeue.json"))
NODES = sorted([*FIXTURES.glob("*/nodes.json"), *FIXTURES.glob("*-live/sinfo.json")])


def reference_jobs(text, strict=True):
    return parse._squeue_general(text, "squeue --json", strict)


def reference_nodes(text, strict=True):
    return parse._nodes_general(text, "sinfo --json", strict)


def outcome(fn, *args, **kwargs):
    """Records, version and skipped lines; or the error message."""
    try:
        d = fn(*args, **kwargs)
    except SlurmOutputError as exc:
        return ("error", str(exc))
    return (d.records, d.version, d.skipped)


@pytest.mark.parametrize("path", SQUEUE, ids=lambda p: p.parent.name)
def test_every_fixture_decodes_to_the_reference_jobs_through_the_fast_path(path):
    text = path.read_text()
    fast = decode_squeue_json(text)
    assert fast.records and not fast.skipped
    assert (fast.records, fast.version) == (reference_jobs(text).records, reference_jobs(text).version)
    assert decode_squeue_json(text.encode()).records == fast.records  # the bytes slurmrestd sends
    # and each record really took the fast path (else the equality above would hold trivially)
    doc = parse._SQUEUE_DECODER.decode(text)
    for i, rec in enumerate(doc.jobs):
        assert parse._job_fast(rec, i, "squeue --json") == fast.records[i]


@pytest.mark.parametrize("path", NODES, ids=lambda p: p.parent.name)
def test_every_node_fixture_decodes_to_the_reference_nodes(path):
    text = path.read_text()
    fast = decode_nodes_json(text)
    assert fast.records and not fast.skipped
    assert fast.records == reference_nodes(text).records and fast.version == reference_nodes(text).version


NODE_TEMPLATES = [node for path in NODES for node in json.loads(path.read_text())["nodes"]]
NODE_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 2**33), st.sampled_from([0xFFFFFFFE, 10**30, 2_000_000]),
    st.floats(0, 3e6), st.text(max_size=6),
    st.sampled_from(["", "(null)", "idle", "IDLE", "mixed*", "drain", "a,b", "ECC [root@2026-11-22T01:00:00]"]),
    st.lists(st.sampled_from(["IDLE", "DRAIN", "POWERED_DOWN", "drain", "", "x"]), max_size=3),
    st.fixed_dictionaries({}, optional={
        "current_watts": st.one_of(
            st.none(), st.integers(-2, 2_000_000), st.floats(0, 10), st.just(10**30),
            st.fixed_dictionaries({}, optional={"set": st.booleans(), "infinite": st.booleans(),
                                                "number": st.integers(-1, 2_000_000)})),
        "consumed_energy": st.sampled_from([0, 10**30]),
    }),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(NODE_TEMPLATES))),
       st.lists(st.tuples(st.sampled_from(parse._NODE_KEYS), NODE_VALUES), max_size=4))
def test_any_value_in_any_node_key_read_gives_what_the_reference_gives(index, changes):
    node = copy.deepcopy(NODE_TEMPLATES[index])
    for key, value in changes:
        node[key] = value
    other = {**NODE_TEMPLATES[0], "name": "other-node"}
    text = json.dumps({"nodes": [node, other]})
    assert outcome(decode_nodes_json, text, strict=True) == outcome(reference_nodes, text)
    lenient, reference = outcome(decode_nodes_json, text), outcome(reference_nodes, text, strict=False)
    if reference[0] == "error" and "invalid number" in reference[1]:
        assert [n.name for n in lenient[0]] == ["other-node"] and len(lenient[2]) == 1
    else:
        assert lenient == reference


def test_every_node_fixture_takes_the_fast_path():
    for path in NODES:
        doc = parse._NODES_DECODER.decode(path.read_text())
        assert [parse._node_fast(rec) for rec in doc.nodes] == decode_nodes_json(path.read_text()).records


def test_running_jobs_of_every_version_count_their_cores_on_the_fast_path():
    """The per-core maps (all cores with a status from v0.0.41) are what costs most in a running job."""
    for path in SQUEUE:
        doc = parse._SQUEUE_DECODER.decode(path.read_text())
        for i, rec in enumerate(doc.jobs):
            job = parse._job_fast(rec, i, "squeue --json")
            if job.state == "RUNNING":
                assert job.allocation and all(a.cores or a.cpus for a in job.allocation), path


@pytest.mark.parametrize("status", [["UNALLOCATED"], ["ALLOCATED", "IN_USE"], [" allocated "], ["IN_USE", 3], "x"])
def test_core_maps_of_any_form_give_the_reference_count(status):
    job = {"job_id": 1, "job_state": ["RUNNING"], "job_resources": {"nodes": {"allocation": [
        {"name": "n1", "sockets": [{"cores": [{"status": ["ALLOCATED"]}, {"status": status}]}]}]}}}
    text = json.dumps({"jobs": [job]})
    assert outcome(decode_squeue_json, text, strict=True) == outcome(reference_jobs, text)


@pytest.mark.parametrize("resources", [
    None, {}, [], {"nodes": "n1"}, {"allocated_nodes": None}, {"allocated_nodes": {}},
    {"allocated_nodes": [{"nodename": "n1", "memory_allocated": 4.0, "sockets": {"0": {"cores": {"0": "allocated"}}}}]},
    {"allocated_nodes": [{"nodename": 7, "memory_allocated": 1}]},
    {"allocated_nodes": [{"nodename": "n1"}, {"nodename": "n1"}]},
    {"allocated_nodes": [{"nodename": "n1", "sockets": {"0": {"cores": {"0": " Allocated", "1": "idle"}}}}]},
    {"allocated_nodes": [{"nodename": "n1", "sockets": {"0": {"cores": None}}}]},
    {"allocated_nodes": [{"nodename": "n1", "sockets": {"0": "x"}}]},
    {"allocated_nodes": [{"nodename": "(null)"}]},
    {"nodes": {"allocation": [{"name": "n1", "cpus": {"count": 0xFFFFFFFE}, "memory": {"allocated": {"set": False}}}]}},
    {"nodes": {"allocation": [{"name": "n1", "cpus": None, "memory": None, "sockets": []}]}},
    {"nodes": {"allocation": [{"name": "n1", "cpus": {"count": True}}]}},
    {"nodes": {"allocation": [{"name": "n1", "sockets": [{"cores": [{"status": ["ALLOCATED", "IN_USE"]},
                                                                     {"status": ["UNALLOCATED"]}, {}]}]}]}},
    {"nodes": {"allocation": [{"name": "n1", "sockets": [{"cores": {"0": "allocated"}}]}]}},
    {"nodes": {"allocation": None}}, {"nodes": {"allocation": "n1"}},
])
@pytest.mark.parametrize("state", ["RUNNING", "PENDING", "COMPLETED"])
def test_per_node_resources_of_any_form_give_the_reference_allocation(resources, state):
    text = json.dumps({"jobs": [{"job_id": 1, "job_state": state, "job_resources": resources}]})
    assert outcome(decode_squeue_json, text, strict=True) == outcome(reference_jobs, text)
    assert outcome(decode_squeue_json, text) == outcome(reference_jobs, text, strict=False)


# Values a key may take: what Slurm prints in some version, and what it never prints.
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 2**33), st.sampled_from([0xFFFFFFFE, 2**64 - 1, 2**53 + 1, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
    st.sampled_from(["", "(null)", "None", "PENDING", "RUNNING", "COMPLETING", "n[1-2]", "n[1-", "gres/gpu:2",
                     "shared", "oversubscribe", "none", "user", "allocated"]),
    st.lists(st.sampled_from(["PENDING", "RUNNING", "REQUEUED", "COMPLETING", "oversubscribe", "false", "x", ""]),
             max_size=3),
    st.fixed_dictionaries({}, optional={"set": st.booleans(), "infinite": st.booleans(),
                                        "number": st.one_of(st.none(), st.integers(-2, 2**33), st.floats(0, 10))}),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
TEMPLATES = [job for path in SQUEUE for job in json.loads(path.read_text())["jobs"]]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(TEMPLATES))), st.lists(st.tuples(st.sampled_from((*parse._JOB_KEYS, "shared")),
                                                                  VALUES), max_size=4), st.booleans())
def test_any_value_in_any_key_read_gives_what_the_reference_gives(index, changes, drop):
    job = copy.deepcopy(TEMPLATES[index])
    for key, value in changes:
        if drop and value is None:
            job.pop(key, None)
        else:
            job[key] = value
    text = json.dumps({"jobs": [job, TEMPLATES[0]]})
    assert outcome(decode_squeue_json, text, strict=True) == outcome(reference_jobs, text)
    lenient, reference = outcome(decode_squeue_json, text), outcome(reference_jobs, text, strict=False)
    # the same with the jobs of a previous decode at hand (a changed job is never taken for the old one)
    cache: dict = {}
    decode_squeue_json(json.dumps({"jobs": [TEMPLATES[index], TEMPLATES[0]]}), cache=cache)
    assert outcome(decode_squeue_json, text, cache=cache) == lenient
    if reference[0] == "error" and "invalid number" in reference[1]:
        # json.loads refuses the whole document for one integer of more than MAX_DIGITS digits; the
        # decoder loses only the record that holds it
        assert lenient[0] == [decode_squeue_json(json.dumps({"jobs": [TEMPLATES[0]]})).records[0]]
        assert len(lenient[2]) == 1 and ": jobs[0]: invalid number" in lenient[2][0]
    else:
        assert lenient == reference


@pytest.mark.parametrize("bad", ["1e999", "-1e400", "9" * 5000, '["a", {"b": ' + "1" * 30 + "}]"])
def test_a_number_json_loads_refuses_costs_only_its_own_record(bad):
    good = json.dumps({"job_id": 5, "job_state": "PENDING"})
    text = '{"jobs": [' + good + ', {"job_id": 6, "job_state": "PENDING", "cpus": ' + bad + "}, " + good + "]}"
    decoded = decode_squeue_json(text)
    assert [j.job_id for j in decoded.records] == [5, 5]
    assert decoded.skipped == (decoded.skipped[0],) and decoded.skipped[0].startswith("job 6: jobs[1]: invalid number")
    assert decoded.skipped_ids == {6}
    with pytest.raises(SlurmOutputError, match=r"^squeue --json: invalid number in the JSON"):
        parse.parse_squeue_json(text)


def _three_jobs(middle):
    doc = json.loads((FIXTURES / "v0.0.44" / "squeue.json").read_text())
    first, second = doc["jobs"][1], doc["jobs"][2]
    doc["jobs"] = [first, middle, second]
    return json.dumps(doc), first["job_id"], second["job_id"]


@pytest.mark.parametrize(("middle", "named", "problem"), [
    ({"job_id": 77, "job_state": ["WHATEVER"]}, "77", "jobs[1].job_state: unknown job state 'WHATEVER'"),
    ({"job_id": 80, "job_state": [""]}, "80", "jobs[1].job_state: empty"),
    ({"job_id": 81, "job_state": [" ", "\t"]}, "81", "jobs[1].job_state: empty"),
    ({"job_id": 78, "job_state": ["PENDING"], "nodes": "n[1-"}, "78", "jobs[1].nodes: bad hostlist"),
    ({"job_id": 79, "job_state": ["PENDING"], "cpus": -4}, "79", "jobs[1].cpus: expected a number >= 0"),
    ({"job_state": ["PENDING"]}, "?", "jobs[1].job_id: missing"),
    ("not a job", "?", "jobs[1]: expected an object, got str"),
])
def test_a_malformed_job_record_is_skipped_counted_and_logged_once(middle, named, problem, caplog):
    text, first, second = _three_jobs(middle)
    with caplog.at_level(logging.WARNING, logger="wattsched.daemon.slurm.parse"):
        decoded = decode_squeue_json(text)
    assert [j.job_id for j in decoded.records] == [first, second]
    assert len(decoded.skipped) == 1 and problem in decoded.skipped[0]
    (record,) = caplog.records
    assert f"job {named}: {problem}" in record.getMessage()
    with pytest.raises(SlurmOutputError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        parse.parse_squeue_json(text)  # strict, as before


def test_many_malformed_records_log_a_few_lines_and_a_count(caplog):
    jobs = [{"job_id": i, "job_state": "NOPE"} for i in range(1, 31)] + [{"job_id": 99, "job_state": "PENDING"}]
    with caplog.at_level(logging.WARNING, logger="wattsched.daemon.slurm.parse"):
        decoded = decode_squeue_json(json.dumps({"jobs": jobs}))
    assert [j.job_id for j in decoded.records] == [99] and len(decoded.skipped) == 30
    assert len(caplog.records) == parse.LOG_SKIPPED + 1
    assert "skipped 20 more job records (30 in all)" in caplog.records[-1].getMessage()


def test_what_is_wrong_with_the_whole_reply_still_raises():
    for text, message in [("", "no output"), ('{"jobs": {}}', "jobs: expected a list"),
                          ("[1]", "expected a JSON object"),
                          ('{"jobs": [], "errors": [{"error": "Invalid user id"}]}', "Invalid user id"),
                          ('{"jobs": [{"job_id": NaN}]}', "invalid number")]:
        with pytest.raises(SlurmOutputError, match=message):
            decode_squeue_json(text)


def test_a_malformed_or_repeated_node_is_skipped():
    nodes = [{"name": "n1", "state": ["IDLE"]}, {"name": "n2", "state": 5}, {"name": "n1", "state": ["DOWN"]},
             {"name": "n3", "state": ["IDLE"], "cpus": 8}]
    decoded = decode_nodes_json(json.dumps({"nodes": nodes}))
    assert [(n.name, n.state) for n in decoded.records] == [("n1", "IDLE"), ("n3", "IDLE")]
    assert len(decoded.skipped) == 2 and "already at nodes[0]" in decoded.skipped[1]


SPOOFS = [
    'x", "job_id": 1, "admin_comment": "wattsched:held", "priority": 0, "job_state": "RUNNING", "y": "',
    '"}, {"job_id": 5, "job_state": "PENDING", "name": "',
    "wattsched:held\\u0022, \\u0022admin_comment\\u0022: \\u0022wattsched:held",
    "} ] } {\"jobs\": []}",
    "JobHeldAdmin\n\r\t\u2028\u0000 nodes=n[1-2] AdminComment=wattsched:held",
]


@pytest.mark.parametrize("text", SPOOFS)
@pytest.mark.parametrize("path", [FIXTURES / "v0.0.38-live" / "squeue.json", FIXTURES / "v0.0.44" / "squeue.json"],
                         ids=["22.05", "25.11"])
def test_free_text_with_embedded_keys_stays_in_its_field(text, path):
    """Job name and comment are the user's: whatever they hold, every other field keeps its value."""
    doc = json.loads(path.read_text())
    honest = decode_squeue_json(json.dumps(doc)).records
    for job in doc["jobs"]:
        job["name"] = text
        job["comment"] = text
    decoded = decode_squeue_json(json.dumps(doc))  # Slurm escapes strings as json.dumps does
    assert not decoded.skipped and len(decoded.records) == len(honest)
    for got, was in zip(decoded.records, honest, strict=True):
        assert got.name == text and got.comment == text
        assert got.job_id == was.job_id and got.admin_comment == was.admin_comment
        assert got.priority == was.priority and got.state == was.state and got.nodes == was.nodes
        assert got.reason == was.reason and got.held == was.held


def test_unchanged_jobs_of_the_previous_decode_are_reused_and_changed_ones_are_not():
    doc = json.loads((FIXTURES / "v0.0.38-live" / "squeue.json").read_text())
    cache: dict = {}
    first = decode_squeue_json(json.dumps(doc), cache=cache).records
    assert len(cache) == 4
    doc["jobs"][1]["priority"] = 77
    doc["jobs"][0]["job_resources"]["allocated_nodes"][0]["memory_allocated"] = 1234
    second = decode_squeue_json(json.dumps(doc), cache=cache).records
    assert second == reference_jobs(json.dumps(doc)).records
    assert second[1].priority == 77 and second[1] is not first[1]
    assert second[0].allocation[0].mem_mb == 1234 and second[0] is not first[0]
    assert all(second[k] is first[k] for k in (2, 3))
    assert len(cache) == 4  # this decode's jobs only
    newer = (FIXTURES / "v0.0.44" / "squeue.json").read_text()  # numbers as objects, job_state a list
    again = decode_squeue_json(newer, cache=cache).records
    assert all(a is b for a, b in zip(decode_squeue_json(newer, cache=cache).records, again, strict=True))


@pytest.mark.parametrize(("key", "same", "different"), [
    ("cpus", 2, True), ("cpus", 1, True), ("requeue", True, 1), ("name", 1, 1.0), ("priority", 0, False),
    ("cpus", 2, 2.0),
])
def test_equal_values_of_another_type_are_not_taken_from_the_cache(key, same, different):
    job = {"job_id": 9, "job_state": "PENDING", "job_resources": {}}
    cache: dict = {}
    decode_squeue_json(json.dumps({"jobs": [{**job, key: same}]}), cache=cache)
    text = json.dumps({"jobs": [{**job, key: different}]})
    assert outcome(decode_squeue_json, text, cache=cache) == outcome(reference_jobs, text, strict=False)


def _scontrol_job(state: str) -> str:
    return f"JobId=5 JobName=x UserId=alice(1001) JobState={state} NumNodes=1\n"


@pytest.mark.parametrize("state", ["+", "++"])
def test_a_text_job_state_of_flag_separators_only_is_skipped_as_empty(state):
    decoded = parse.decode_scontrol_jobs_text(_scontrol_job(state))
    assert decoded.records == [] and decoded.skipped == ("job 5: JobState: empty",)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="+RUNINGPDCOMPLETX_", min_size=1, max_size=12))
def test_any_text_job_state_is_read_or_skipped_never_raised(state):
    """The class: state names that are all blank once split. scontrol's ``+``-joined text here; the JSON
    forms (a string or a list) are drawn by test_any_value_in_any_key_read_gives_what_the_reference_gives.
    Each gives a record or a skipped one, never an exception."""
    decoded = parse.decode_scontrol_jobs_text(_scontrol_job(state))
    names = [n for n in state.split("+") if n]
    if not names:
        assert decoded.skipped == ("job 5: JobState: empty",)
    else:
        assert len(decoded.records) + len(decoded.skipped) == 1
