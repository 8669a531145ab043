"""Pure parsers for what the Slurm CLI prints: JSON of any supported data_parser version, and plain ``scontrol -o``.

Every function takes the captured text and returns :mod:`records` values; none
runs a command. Supported JSON (REFERENCE-slurm-power.md §1.1):

- Slurm 22.05 ``squeue --json`` / ``sinfo --json`` (openapi/v0.0.38 dumps,
  ``src/plugins/openapi/v0.0.38/{jobs,nodes}.c``): plain ints or ``null``,
  ``job_state`` a string, node ``state`` a lowercase string plus ``state_flags``,
  envelope ``meta.Slurm.version`` with int parts.
- data_parser v0.0.39 (23.02) to v0.0.44 (25.11), from ``squeue --json`` and
  ``scontrol show nodes --json`` (``src/plugins/data_parser/v0.0.4x/parsers.c``):
  NO_VAL-capable numbers become ``{"set", "infinite", "number"}``, timestamps do
  so from v0.0.40, ``job_state`` becomes a list of base state plus flags from
  v0.0.40, node ``state`` is an upper-case list, and 23.11+ moves the envelope
  to ``meta.slurm.version`` with string parts.

Normalisations every version shares (so the same cluster gives equal records):

- ``time_limit`` is minutes in Slurm's JSON and ``TimeLimit=`` is
  ``[days-]hh:mm:ss``; both become seconds, ``None`` when unlimited or unset.
- A timestamp of 0 (or ``Unknown``/``None`` in text) becomes ``None``.
- The reason ``None`` (Slurm's ``WAIT_NO_REASON``) becomes ``""``.
- ``current_watts`` of 0 becomes ``None``: Slurm reports 0 both without an
  energy plugin and before the first sample (live 23.11-25.11 outputs), and
  22.05 omits node energy from its JSON altogether.
- A node's ``reason`` loses the ``[user@time]`` suffix ``scontrol`` appends, and
  a job's text ``Reason=`` keeps only the code before the first comma
  (scontrol prints the state description there when one is set).
- 22.05 and v0.0.39 print one job-state string, which for a job with a state
  flag is the flag alone (``job_state_string()`` in ``src/common/slurm_protocol_defs.c``);
  see :data:`FLAG_ONLY_JOB_STATES` for how those map to a base state.
- A job may share its nodes when Slurm says so in its own words (22.05 ``shared``
  null or ``"shared"``, later ``[]`` or ``["oversubscribe"]``, text ``OverSubscribe=OK``
  or ``YES``); anything else, a mode not known here included, reads as whole nodes.
- What a job holds per node (``allocation``) is read for running, suspended and
  completing jobs only: the JSON's ``job_resources`` (allocated cores up to v0.0.40,
  also the CPU count from v0.0.41) and the ``Nodes= CPU_IDs= Mem=`` groups of
  ``scontrol -d`` (CPU ids). Ended jobs keep theirs in Slurm's record until MinJobAge.
- 22.05 prints ``cpus_per_task`` as null unless the job set a minimum CPU frequency; a pending
  job's is then taken as its CPUs over its tasks (see :func:`_cpus_per_task_json`).
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, tzinfo
from fractions import Fraction
from typing import Any

import msgspec

from wattsched.daemon.slurm import hostlist
from wattsched.daemon.slurm.records import (
    COMPLETING,
    PENDING,
    RUNNING,
    SUSPENDED,
    NodeAllocation,
    SlurmJob,
    SlurmNode,
)
from wattsched.errors import WattschedError

log = logging.getLogger(__name__)

__all__ = [
    "BASE_JOB_STATES",
    "BASE_NODE_STATES",
    "FLAG_ONLY_JOB_STATES",
    "Decoded",
    "SlurmOutputError",
    "decode_nodes_json",
    "decode_scontrol_jobs_text",
    "decode_scontrol_nodes_text",
    "decode_squeue_json",
    "parse_nodes_json",
    "parse_scontrol_jobs_text",
    "parse_scontrol_nodes_text",
    "parse_slurm_version",
    "parse_squeue_json",
    "parse_time_limit",
]


class SlurmOutputError(WattschedError):
    """Slurm printed something the parsers cannot read.

    The message names the source (the command), where the problem is (a JSON
    path such as ``jobs[3].job_state`` or a text line and key) and what is wrong.
    """

    def __init__(self, source: str, where: str | None, message: str):
        self.source = source
        self.where = where
        self.problem = message
        super().__init__(f"{source}: {where}: {message}" if where else f"{source}: {message}")


# Base job states, in the order of ``enum job_states`` (slurm.h).
BASE_JOB_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)

# A single state string (22.05, v0.0.39, ``JobState=``) naming a flag hides the
# base state; map it to the base state the flag implies. COMPLETING is kept as
# the state (``records.COMPLETING``) because the job may have ended in any of
# several states and still holds its nodes.
FLAG_ONLY_JOB_STATES: dict[str, str] = {
    "COMPLETING": COMPLETING,
    "CONFIGURING": RUNNING,
    "RESIZING": RUNNING,
    "SIGNALING": RUNNING,
    "STOPPED": RUNNING,
    "STAGE_OUT": "COMPLETED",
    "REQUEUED": PENDING,
    "REQUEUE_HOLD": PENDING,
    "REQUEUE_FED": PENDING,
    "SPECIAL_EXIT": PENDING,
    "RESV_DEL_HOLD": PENDING,
}

# Base node states (``enum node_states``, slurm.h); everything else is a flag.
BASE_NODE_STATES = frozenset({"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"})

# Short and sinfo-style spellings of node states: name -> (base, flags).
_NODE_STATE_ALIASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "ALLOC": ("ALLOCATED", ()),
    "MIX": ("MIXED", ()),
    "UNK": ("UNKNOWN", ()),
    "DRAIN": ("IDLE", ("DRAIN",)),
    "DRAINED": ("IDLE", ("DRAIN",)),
    "DRAINING": ("ALLOCATED", ("DRAIN",)),
    "DRNG": ("ALLOCATED", ("DRAIN",)),
}

# sinfo/scontrol state suffixes (sinfo(1), "NODE STATE CODES").
_NODE_STATE_SUFFIXES = {
    "*": "NOT_RESPONDING",
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "%": "POWERING_DOWN",
    "!": "POWER_DOWN",
    "@": "REBOOT_REQUESTED",
    "^": "REBOOT_ISSUED",
    "-": "PLANNED",
    "$": "MAINTENANCE",
}

# NO_VAL/INFINITE sentinels (slurm.h) that 22.05 sometimes prints as plain ints.
_SENTINELS = frozenset({0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF})

_NULL_STRINGS = frozenset({"(null)"})

# Plausibility bounds: Slurm's counters and ids fit in 64 bits and its sentinels are handled above, so a
# value beyond 2**53 (the integers a float holds exactly), a long run of digits or a node drawing more
# than a megawatt is damaged output, not data.
MAX_NUMBER = 2**53
MAX_DIGITS = 24
MAX_NODE_WATTS = 1e6
_JOB_STATES = BASE_JOB_STATES | {COMPLETING}


class _BadNumber(ValueError):
    """A JSON number Slurm never prints (NaN, Infinity, a huge integer)."""


def _json_constant(name: str):
    raise _BadNumber(f"{name} is not a number Slurm prints")


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise _BadNumber(f"an integer of {len(text.lstrip('-'))} digits is out of range")
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadNumber(f"{text[:40]} is out of range")
    return value


# --------------------------------------------------------------------------- JSON


def parse_squeue_json(text: str | bytes, source: str = "squeue --json") -> tuple[list[SlurmJob], str]:
    """Parse ``squeue --json`` (22.05 and data_parser v0.0.39-v0.0.44) into jobs and the Slurm version.

    Strict: the first bad job record raises. The daemon's backends read through
    :func:`decode_squeue_json`, which skips a bad record instead.

    Parameters
    ----------
    text : str or bytes
        The command's standard output.
    source : str
        How to name the output in error messages, e.g. the command line.

    Returns
    -------
    jobs : list of SlurmJob
        In Slurm's order.
    version : str
        Slurm's version such as ``"22.05.8"``; ``""`` when the envelope has none.

    Raises
    ------
    SlurmOutputError
        For text that is not JSON, JSON that is not an object with ``jobs``, a
        non-empty ``errors`` array, a job without ``job_id`` or ``job_state``,
        a field of the wrong type or a negative count, or a node twice in one
        job's ``job_resources``. The message gives the JSON path.
    """
    decoded = decode_squeue_json(text, source, strict=True)
    return decoded.records, decoded.version


def parse_nodes_json(text: str | bytes, source: str = "sinfo --json") -> tuple[list[SlurmNode], str]:
    """Parse per-node JSON into nodes and the Slurm version.

    Accepts 22.05 ``sinfo --json`` and ``scontrol show nodes --json`` of
    data_parser v0.0.39-v0.0.44 (both ``{"nodes": [...]}``). The aggregated
    ``sinfo --json`` of 23.02+ (top-level ``sinfo``) has no per-node records and
    is rejected. Strict, as :func:`parse_squeue_json`; see :func:`decode_nodes_json`.

    Raises
    ------
    SlurmOutputError
        As :func:`parse_squeue_json`; a node needs ``name`` and ``state``.
    """
    decoded = decode_nodes_json(text, source, strict=True)
    return decoded.records, decoded.version


# --------------------------------------------------------------------------- JSON decoding
#
# A 100,000-job ``squeue --json`` is some 250 MB (22.05) to 550 MB (25.11) of which the daemon reads about
# 35 keys per job out of 110-135. msgspec decodes straight into the typed records below: the keys not
# named are skipped without building a Python object, and the values named are plain JSON values (``Any``),
# checked here exactly as the general path (:func:`_job_from_json` on a dict) checks them. The fast
# conversion (:func:`_job_fast`) handles the forms Slurm prints; any other value makes it hand the record
# to the general path, so an unusual record gives the same job, or the same error, either way
# (benchmarks/squeue_decode.py measures the choice; tests/unit/test_slurm_decode.py holds the paths equal).
# A document msgspec refuses (not JSON, NaN, nesting, a wrong type at the top) is read again by the general
# path, whose error messages name line, column or JSON path. JSON strings are decoded, never scanned for
# keys: what a user writes in a job name or comment stays in that field (a duplicate key in one record
# keeps its last value, as json.loads does).

_JOB_KEYS = (
    "job_id", "job_state", "user_name", "account", "partition", "qos", "name", "state_reason", "priority",
    "submit_time", "start_time", "end_time", "eligible_time", "time_limit", "node_count", "max_nodes", "cpus",
    "nodes", "required_nodes", "excluded_nodes", "comment", "admin_comment", "requeue", "batch_flag", "restart_cnt",
    "tres_per_node", "gres", "features", "exclusive", "tasks", "tasks_per_node", "cpus_per_task",
    "memory_per_node", "memory_per_cpu", "job_resources",
)  # fmt: skip
_NODE_KEYS = (
    "name", "state", "state_flags", "features", "active_features", "energy", "cpus", "sockets", "cores",
    "threads", "real_memory", "partitions", "gres", "address", "reason",
)  # fmt: skip

# ``shared`` absent and ``shared: null`` differ (see _shared_json), hence UNSET for it alone.
_JobRecord = msgspec.defstruct(
    "_JobRecord", [(k, Any, None) for k in _JOB_KEYS] + [("shared", Any, msgspec.UNSET)], gc=False
)
_NodeRecord = msgspec.defstruct("_NodeRecord", [(k, Any, None) for k in _NODE_KEYS], gc=False)
_ENVELOPE = [("errors", Any, None), ("warnings", Any, None), ("meta", Any, None), ("last_update", Any, None)]
_SqueueDoc = msgspec.defstruct(
    "_SqueueDoc", [("jobs", list[_JobRecord] | msgspec.UnsetType, msgspec.UNSET), *_ENVELOPE], gc=False
)
_NodesDoc = msgspec.defstruct(
    "_NodesDoc", [("nodes", list[_NodeRecord] | msgspec.UnsetType, msgspec.UNSET), *_ENVELOPE], gc=False
)
_SQUEUE_DECODER = msgspec.json.Decoder(_SqueueDoc)
_NODES_DECODER = msgspec.json.Decoder(_NodesDoc)
_JOB_DECODER = msgspec.json.Decoder(_JobRecord)
_NODE_DECODER = msgspec.json.Decoder(_NodeRecord)
_SqueueRawDoc = msgspec.defstruct(
    "_SqueueRawDoc", [("jobs", list[msgspec.Raw] | msgspec.UnsetType, msgspec.UNSET), *_ENVELOPE], gc=False
)
_NodesRawDoc = msgspec.defstruct(
    "_NodesRawDoc", [("nodes", list[msgspec.Raw] | msgspec.UnsetType, msgspec.UNSET), *_ENVELOPE], gc=False
)

# At most this many skipped records get a log line of their own in one decode; the rest are counted.
LOG_SKIPPED = 10


@dataclass(frozen=True, slots=True)
class Decoded:
    """What one JSON reply of Slurm decoded to.

    ``records``: the jobs or nodes, in Slurm's order. ``version``: Slurm's version
    from the envelope, ``""`` without one. ``skipped``: one line per record left out
    because it could not be read (JSON path, job id or node name, and the problem).
    ``skipped_ids``: the job ids of the skipped job records that name one (a job the daemon
    must not take for gone: see ``ClusterState.skipped_jobs``).
    ``last_update``: the envelope's ``last_update`` (slurmctld's clock; jobs replies
    of data_parser v0.0.40 on), else ``None``. ``unchanged``: slurmrestd said nothing
    changed since the ``update_time`` asked for (its warning, 23.11 on).
    """

    records: list
    version: str = ""
    skipped: tuple[str, ...] = ()
    last_update: float | None = None
    unchanged: bool = False
    skipped_ids: frozenset[int] = frozenset()


class _Slow(Exception):
    """A value the fast conversion leaves to the general path."""


def _without_gc(decode: Callable[..., Decoded]) -> Callable[..., Decoded]:
    """Run a decode with the cyclic garbage collector paused.

    Decoding 100,000 jobs allocates millions of containers, none in a reference
    cycle; left on, the collector walks the growing heap again and again, which
    costs more than the decode itself (benchmarks/squeue_decode.py). It is
    switched back on (if it was on) however the decode ends.
    """

    def run(*args, **kwargs) -> Decoded:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return decode(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    run.__name__, run.__qualname__, run.__doc__ = decode.__name__, decode.__qualname__, decode.__doc__
    run.__wrapped__ = decode  # type: ignore[attr-defined]
    return run


@_without_gc
def decode_squeue_json(text: str | bytes, source: str = "squeue --json", *, strict: bool = False,
                       cache: dict | None = None) -> Decoded:
    """Decode ``squeue --json`` or slurmrestd's ``GET /slurm/vX/jobs`` reply.

    A job record that cannot be read is left out, counted in ``skipped`` and
    logged with its job id (``strict=True`` raises instead, as
    :func:`parse_squeue_json` does). What is wrong with the document as a whole
    (not JSON, no ``jobs`` list, Slurm's ``errors``) raises
    :class:`SlurmOutputError` in both modes.

    ``cache``: a dict the caller keeps from one decode to the next (initially
    empty). A job whose keys read hold the same values, of the same types, as a
    job of the previous decode gets that job's record again instead of a new one
    (a :class:`SlurmJob` is a pure function of those values); on return the
    cache holds the jobs of this decode.
    """
    try:
        doc = _SQUEUE_DECODER.decode(text)
    except msgspec.ValidationError:
        # A value msgspec cannot hold (a number beyond a double) or a job that is not an object:
        # decode the jobs one by one, so that only the record concerned is lost.
        doc = _one_by_one(text, _SqueueRawDoc, "jobs", _JOB_DECODER)
    except (msgspec.DecodeError, RecursionError):
        doc = None
    if doc is None or doc.jobs is msgspec.UNSET:
        return _squeue_general(text, source, strict)
    if doc.errors:
        _raise_on_errors({"errors": doc.errors}, source)
    jobs: list[SlurmJob] = []
    skipped: list[str] = []
    ids: set[int] = set()
    kept: dict = {}
    for i, rec in enumerate(doc.jobs):
        raw: dict[str, Any] = {}
        try:
            if type(rec) is not _Undecodable:
                key = None if cache is None else _cache_key(rec)
                if key is not None:
                    job = cache.get(key)  # type: ignore[union-attr]
                    if job is not None:
                        jobs.append(job)
                        kept[key] = job
                        continue
                try:
                    job = _job_fast(rec, i, source)
                    jobs.append(job)
                    if key is not None:
                        kept[key] = job
                    continue
                except (_Slow, ValueError, TypeError, SlurmOutputError):
                    pass  # an unusual value: the general path reads it or words the error
            raw = _record_dict(rec, f"jobs[{i}]", source)
            jobs.append(_job_from_json(raw, _Fields(raw, f"jobs[{i}]", source)))
        except SlurmOutputError as exc:
            if strict:
                _squeue_general(text, source, True)  # the error as the general path words it
                raise
            ident = raw.get("job_id") if raw else _raw_job_id(rec)
            skipped.append(_skip_line(exc, "job", ident))
            _add_id(ids, ident)
    _log_skipped(skipped, source, "job")
    if cache is not None:
        cache.clear()
        cache.update(kept)
    meta = {"meta": doc.meta}
    return Decoded(jobs, _envelope_version(meta), tuple(skipped), _plain_time(doc.last_update),
                   _says_unchanged(doc.warnings), frozenset(ids))


@_without_gc
def decode_nodes_json(text: str | bytes, source: str = "sinfo --json", *, strict: bool = False) -> Decoded:
    """Decode per-node JSON (see :func:`parse_nodes_json`); a node record that cannot be read, or a name
    already seen, is skipped, counted and logged (``strict=True`` raises instead)."""
    try:
        doc = _NODES_DECODER.decode(text)
    except msgspec.ValidationError:
        doc = _one_by_one(text, _NodesRawDoc, "nodes", _NODE_DECODER)
    except (msgspec.DecodeError, RecursionError):
        doc = None
    if doc is None or doc.nodes is msgspec.UNSET:
        return _nodes_general(text, source, strict)
    if doc.errors:
        _raise_on_errors({"errors": doc.errors}, source)
    nodes: list[SlurmNode] = []
    skipped: list[str] = []
    seen: dict[str, int] = {}
    for i, rec in enumerate(doc.nodes):
        raw: dict[str, Any] = {}
        try:
            node = None
            if type(rec) is not _Undecodable:
                with contextlib.suppress(_Slow, ValueError, TypeError):  # else the general path reads it
                    node = _node_fast(rec)
            if node is None:
                raw = _record_dict(rec, f"nodes[{i}]", source)
                node = _node_from_json(raw, _Fields(raw, f"nodes[{i}]", source))
            if node.name in seen:
                raise SlurmOutputError(source, f"nodes[{i}].name",
                                       f"node {node.name!r} already at nodes[{seen[node.name]}]")
        except SlurmOutputError as exc:
            if strict:
                _nodes_general(text, source, True)
                raise
            skipped.append(_skip_line(exc, "node", raw.get("name") if raw else getattr(rec, "name", None)))
            continue
        seen[node.name] = i
        nodes.append(node)
    _log_skipped(skipped, source, "node")
    return Decoded(nodes, _envelope_version({"meta": doc.meta}), tuple(skipped))


_KEY_ENCODER = msgspec.json.Encoder()


def _cache_key(rec: Any) -> bytes:
    """The record's keys read, encoded back to JSON: equal bytes are equal values of equal JSON types
    (``1``, ``1.0`` and ``true`` differ here, though equal as keys of a dict), so they read the same."""
    return _KEY_ENCODER.encode(rec)


def _record_dict(rec: Any, where: str, source: str) -> dict[str, Any]:
    """A decoded record as the dict json.loads would have given, restricted to the keys read.

    Raises :class:`SlurmOutputError` for a record that did not decode (see :func:`_one_by_one`) and for an
    integer of more digits than the general path's json.loads accepts (``MAX_DIGITS``), which msgspec reads.
    """
    if isinstance(rec, _Undecodable):
        try:
            value = _load_json_value(bytes(rec.raw).decode("utf-8", errors="replace"), source)
        except SlurmOutputError as exc:
            raise SlurmOutputError(source, where, exc.problem) from None
        raise SlurmOutputError(source, where, f"expected an object, got {type(value).__name__}")
    out = {}
    for key in rec.__struct_fields__:
        value = getattr(rec, key)
        if value is not msgspec.UNSET:
            out[key] = value
            _check_digits(value, source, where)
    return out


def _check_digits(value: Any, source: str, where: str, depth: int = 0) -> None:
    if type(value) is int:
        if not -10**MAX_DIGITS < value < 10**MAX_DIGITS:
            raise SlurmOutputError(source, where, f"invalid number in the JSON: an integer of "
                                                  f"{len(str(abs(value)))} digits is out of range")
    elif type(value) is dict and depth < 64:
        for item in value.values():
            _check_digits(item, source, where, depth + 1)
    elif type(value) is list and depth < 64:
        for item in value:
            _check_digits(item, source, where, depth + 1)


def _has_long_int(value: Any) -> bool:
    """Whether ``value`` holds an integer json.loads would refuse (see :func:`_check_digits`)."""
    if value is None or type(value) is str:
        return False
    try:
        _check_digits(value, "", "")
    except SlurmOutputError:
        return True
    return False


class _Undecodable:
    """A record msgspec refused on its own (see :func:`_one_by_one`); its text is kept for the message."""

    __slots__ = ("raw",)

    def __init__(self, raw: msgspec.Raw):
        self.raw = raw


def _one_by_one(text: str | bytes, doc_type: Any, key: str, decoder: msgspec.json.Decoder) -> Any:
    """The document with its records decoded one at a time; one that fails becomes :class:`_Undecodable`.

    ``None`` when the document itself is not an object with a list under ``key``.
    """
    try:
        doc = msgspec.json.decode(text, type=doc_type)
    except (msgspec.MsgspecError, RecursionError):
        return None
    items = getattr(doc, key)
    if items is msgspec.UNSET:
        return doc
    records = []
    for raw in items:
        try:
            records.append(decoder.decode(raw))
        except (msgspec.MsgspecError, RecursionError):
            records.append(_Undecodable(raw))
    setattr(doc, key, records)
    return doc


def _skip_line(exc: SlurmOutputError, what: str, ident: Any) -> str:
    name = repr(ident)[:40] if isinstance(ident, (str, int, float)) and not isinstance(ident, bool) else "?"
    return f"{what} {name}: {exc.where}: {exc.problem}" if exc.where else f"{what} {name}: {exc.problem}"


_RAW_JOB_ID = re.compile(rb'"job_id"\s*:\s*(\d{1,20})\s*[,}]')


def _raw_job_id(rec: Any) -> Any:
    """The job id of a record the fast path could not read: its field, or for a record msgspec refused
    whole, the first ``"job_id": N`` of its text (a string's quotes are escaped, so none comes from one)."""
    if isinstance(rec, _Undecodable):
        match = _RAW_JOB_ID.search(bytes(rec.raw))
        return int(match.group(1)) if match else None
    return getattr(rec, "job_id", None)


def _add_id(ids: set[int], ident: Any) -> None:
    """Add a skipped record's job id to ``ids`` when it reads as one (plain or ``{number}``)."""
    if isinstance(ident, dict):
        ident = ident.get("number")
    if isinstance(ident, str) and ident.isdigit() and len(ident) <= MAX_DIGITS:
        ident = int(ident)
    if type(ident) is int and 0 < ident <= MAX_NUMBER:
        ids.add(ident)


# The skipped records already warned about, by source (its path without a query) and kind of record: a
# record that stays unreadable is warned about once, not every cycle; once read again (or gone), it is
# forgotten, so that it is warned about again if it turns bad again. The daemon's metric counts every skip.
_WARNED: dict[tuple[str, str], frozenset[str]] = {}


def _log_skipped(skipped: list[str], source: str, what: str) -> None:
    key = (source.split("?", 1)[0], what)
    before = _WARNED.get(key, frozenset())
    _WARNED[key] = frozenset(skipped)
    new = [line for line in skipped if line not in before]
    for line in new[:LOG_SKIPPED]:
        log.warning("%s: skipped a %s record Slurm printed: %s", source, what, line)
    if len(new) > LOG_SKIPPED:
        log.warning("%s: skipped %d more %s records (%d in all)", source, len(new) - LOG_SKIPPED, what,
                    len(skipped))


def _plain_time(value: Any) -> float | None:
    """A timestamp of the envelope (plain or ``{set, infinite, number}``), ``None`` when absent or odd."""
    if isinstance(value, dict):
        if value.get("infinite") or value.get("set") is False:
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < MAX_NUMBER:
        return None
    return float(value)


def _says_unchanged(warnings: Any) -> bool:
    # openapi/slurmctld jobs.c (23.11+): resp_warn(..., "No job changes since update_time[%ld]=%s", ...)
    if not isinstance(warnings, list):
        return False
    return any(isinstance(w, dict) and "No job changes since update_time" in str(w.get("description", ""))
               for w in warnings)


def _text_of(text: str | bytes) -> str:
    return text.decode("utf-8", errors="replace") if isinstance(text, (bytes, bytearray)) else text


def _squeue_general(text: str | bytes, source: str, strict: bool) -> Decoded:
    """The general path: json.loads into dicts, every record checked by :func:`_job_from_json`."""
    doc = _load_json(_text_of(text), source)
    _raise_on_errors(doc, source)
    jobs = doc.get("jobs")
    if jobs is None:
        raise SlurmOutputError(source, None, f"no 'jobs' in the JSON (top-level keys: {_keys(doc)})")
    if not isinstance(jobs, list):
        raise SlurmOutputError(source, "jobs", f"expected a list, got {type(jobs).__name__}")
    out = []
    skipped: list[str] = []
    ids: set[int] = set()
    for i, raw in enumerate(jobs):
        path = f"jobs[{i}]"
        try:
            if not isinstance(raw, dict):
                raise SlurmOutputError(source, path, f"expected an object, got {type(raw).__name__}")
            out.append(_job_from_json(raw, _Fields(raw, path, source)))
        except SlurmOutputError as exc:
            if strict:
                raise
            ident = raw.get("job_id") if isinstance(raw, dict) else None
            skipped.append(_skip_line(exc, "job", ident))
            _add_id(ids, ident)
    _log_skipped(skipped, source, "job")
    return Decoded(out, _envelope_version(doc), tuple(skipped), _plain_time(doc.get("last_update")),
                   _says_unchanged(doc.get("warnings")), frozenset(ids))


def _nodes_general(text: str | bytes, source: str, strict: bool) -> Decoded:
    doc = _load_json(_text_of(text), source)
    if "sinfo" in doc and "nodes" not in doc:
        raise SlurmOutputError(
            source,
            None,
            "this is the aggregated 'sinfo --json' of Slurm 23.02+, which has no per-node records; "
            "use 'scontrol show nodes --json' on 23.02 and later ('sinfo --json' only on 22.05)",
        )
    _raise_on_errors(doc, source)
    nodes = doc.get("nodes")
    if nodes is None:
        raise SlurmOutputError(source, None, f"no 'nodes' in the JSON (top-level keys: {_keys(doc)})")
    if not isinstance(nodes, list):
        raise SlurmOutputError(source, "nodes", f"expected a list, got {type(nodes).__name__}")
    out = []
    skipped: list[str] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(nodes):
        path = f"nodes[{i}]"
        try:
            if not isinstance(raw, dict):
                raise SlurmOutputError(source, path, f"expected an object, got {type(raw).__name__}")
            node = _node_from_json(raw, _Fields(raw, path, source))
            if node.name in seen:
                raise SlurmOutputError(source, f"{path}.name",
                                       f"node {node.name!r} already at nodes[{seen[node.name]}]")
        except SlurmOutputError as exc:
            if strict:
                raise
            skipped.append(_skip_line(exc, "node", raw.get("name") if isinstance(raw, dict) else None))
            continue
        seen[node.name] = i
        out.append(node)
    _log_skipped(skipped, source, "node")
    return Decoded(out, _envelope_version(doc), tuple(skipped))


_NO_FLAGS: frozenset[str] = frozenset()
_NO_VAL32 = 0xFFFFFFFE


def _num(v: Any) -> int | None:
    """:meth:`_Fields.number` for the forms Slurm prints: a plain int or ``{set, infinite, number}``."""
    if type(v) is int:
        if 0 <= v < _NO_VAL32:
            return v
        if v in _SENTINELS:
            return None
        raise _Slow
    if v is None:
        return None
    if type(v) is dict and ("number" in v or "set" in v or "infinite" in v):
        if v.get("infinite") or v.get("set") is False:
            return None
        x = v.get("number")
        if type(x) is int:
            if 0 <= x < _NO_VAL32:
                return x
            if x in _SENTINELS:
                return None
        elif x is None:
            return None
    raise _Slow


def _str(v: Any) -> str:
    if type(v) is str:
        return "" if v == "(null)" else v
    if v is None:
        return ""
    raise _Slow


def _flag(v: Any, default: bool) -> bool:
    if v is None:
        return default
    if type(v) is bool:
        return v
    raise _Slow


def _hosts(v: Any) -> tuple[str, ...]:
    text = _str(v)
    return hostlist.expand(text) if text else ()


def _job_fast(rec: Any, i: int, source: str) -> SlurmJob:
    """:func:`_job_from_json` for the forms Slurm prints; raises :class:`_Slow` (or the general path's
    error) for anything else, and the caller then runs the general path on the record."""
    job_id = _num(rec.job_id)
    if job_id is None or job_id < 1:
        raise _Slow
    st = rec.job_state
    if type(st) is list and len(st) == 1:
        st = st[0]
    if type(st) is str and st in BASE_JOB_STATES:
        state, flags = st, _NO_FLAGS
    else:
        raise _Slow
    limit = _num(rec.time_limit)
    priority = _num(rec.priority)
    tres = _str(rec.tres_per_node) or _str(rec.gres)
    tasks = _num(rec.tasks) or 0
    cpus = _num(rec.cpus) or 0
    cpus_per_task = _num(rec.cpus_per_task)
    if not cpus_per_task:
        cpus_per_task = max(1, cpus // tasks) if state == PENDING and tasks else 1
    reason = _str(rec.state_reason)
    node_count = _num(rec.node_count)
    node_count = 1 if node_count is None else node_count
    max_nodes = (_num(rec.max_nodes) or 0) if state == PENDING else 0
    if max_nodes and max_nodes < node_count:
        raise _Slow  # the general path words the error
    if max_nodes == node_count:
        max_nodes = 0  # 2-2 (sbatch -N 2) is no range
    holds = state in (RUNNING, SUSPENDED, COMPLETING)
    # Values read only in some cases: as json.loads refuses an over-long integer anywhere, so must this.
    if _has_long_int(rec.gres) or _has_long_int(rec.exclusive) or (not holds and _has_long_int(rec.job_resources)):
        raise _Slow
    if state != PENDING and _has_long_int(rec.max_nodes):
        raise _Slow
    return SlurmJob(
        job_id=job_id,
        state=state,
        user=_str(rec.user_name),
        account=_str(rec.account),
        partition=_str(rec.partition),
        qos=_str(rec.qos),
        name=_str(rec.name),
        reason="" if reason == "None" else reason,
        flags=flags,
        priority=priority,
        submit_time=float(_num(rec.submit_time) or 0) or None,
        start_time=float(_num(rec.start_time) or 0) or None,
        end_time=float(_num(rec.end_time) or 0) or None,
        eligible_time=float(_num(rec.eligible_time) or 0) or None,
        time_limit_s=None if limit is None else limit * 60.0,
        node_count=node_count,
        max_nodes=max_nodes,
        cpus=cpus,
        nodes=_hosts(rec.nodes),
        required_nodes=_hosts(rec.required_nodes),
        excluded_nodes=_hosts(rec.excluded_nodes),
        comment=_str(rec.comment),
        admin_comment=_str(rec.admin_comment),
        requeue=_flag(rec.requeue, True),
        batch=_flag(rec.batch_flag, True),
        restart_count=_num(rec.restart_cnt) or 0,
        gpus_per_node=_gpus_per_node(tres) if tres else 0,
        features=_str(rec.features),
        shared=_shared_fast(rec),
        tasks=tasks,
        tasks_per_node=_num(rec.tasks_per_node) or 0,
        cpus_per_task=cpus_per_task,
        mem_per_node_mb=_num(rec.memory_per_node) or 0,
        mem_per_cpu_mb=_num(rec.memory_per_cpu) or 0,
        allocation=_allocation_fast(rec.job_resources) if holds else (),
    )


def _allocation_fast(res: Any) -> tuple[NodeAllocation, ...]:
    """:func:`_allocation_json` for the two layouts Slurm prints (``allocated_nodes[]`` up to v0.0.40,
    ``nodes.allocation[]`` from v0.0.41); raises :class:`_Slow` on anything else."""
    if res is None:
        return ()
    if type(res) is not dict:
        raise _Slow
    if not res:
        return ()
    nodes = res.get("nodes")
    v41 = type(nodes) is dict
    items = nodes.get("allocation") if v41 else res.get("allocated_nodes")
    if items is None:
        return ()
    if type(items) is not list:
        raise _Slow
    out = []
    seen: set[str] = set()
    name_key = "name" if v41 else "nodename"
    for item in items:
        if type(item) is not dict:
            raise _Slow
        name = item.get(name_key)
        if type(name) is not str or not name or name == "(null)" or name in seen:
            raise _Slow
        seen.add(name)
        if v41:
            cpus_obj, mem_obj = item.get("cpus"), item.get("memory")
            cpus = 0 if cpus_obj is None else _num(cpus_obj.get("count")) if type(cpus_obj) is dict else _slow()
            mem = 0 if mem_obj is None else _num(mem_obj.get("allocated")) if type(mem_obj) is dict else _slow()
        else:
            cpus, mem = 0, _num(item.get("memory_allocated"))
        cores = _allocated_cores_fast(item.get("sockets"))
        out.append(NodeAllocation(name, cpus=cpus or 0, cores=cores, mem_mb=mem or 0))
    return tuple(out)


def _strings(v: Any) -> tuple[str, ...]:
    """:meth:`_Fields.string_list` for a list of strings or 22.05's comma-separated string."""
    if v is None:
        return ()
    if type(v) is str:
        return _csv(v)
    if type(v) is list and all(type(x) is str for x in v):
        return tuple(x for x in v if x)
    raise _Slow


def _node_fast(rec: Any) -> SlurmNode:
    """:func:`_node_from_json` for the forms Slurm prints; raises :class:`_Slow` for anything else."""
    name = rec.name
    if type(name) is not str or not name or name == "(null)":
        raise _Slow
    st = rec.state
    if type(st) is str and st:
        names = [st, *_strings(rec.state_flags)]
    elif type(st) is list and st and all(type(x) is str for x in st):
        names = st
    else:
        raise _Slow
    state, flags = _node_state_from_names(names)
    # Values read only in some cases: as json.loads refuses an over-long integer anywhere, so must this.
    if _has_long_int(rec.state_flags) or _has_long_int(rec.active_features) or _has_long_int(rec.energy):
        raise _Slow
    energy = rec.energy
    watts = None
    if energy is not None:
        if type(energy) is not dict:
            raise _Slow
        value = _num(energy.get("current_watts"))
        if value:
            if value > MAX_NODE_WATTS:
                raise _Slow
            watts = float(value)
    reason = _str(rec.reason)
    threads = _num(rec.threads)
    return SlurmNode(
        name=name,
        state=state,
        flags=flags,
        cpus=_num(rec.cpus) or 0,
        sockets=_num(rec.sockets) or 0,
        cores_per_socket=_num(rec.cores) or 0,
        threads_per_core=1 if threads is None else threads,
        real_memory_mb=_num(rec.real_memory) or 0,
        features=_strings(rec.features) or _strings(rec.active_features),
        partitions=_strings(rec.partitions),
        gres=_str(rec.gres),
        address=_str(rec.address),
        reason=_strip_reason_stamp(reason) if reason else "",
        current_watts=watts,
    )


def _shared_fast(rec: Any) -> bool:
    """:func:`_shared_json` on a decoded record."""
    if rec.shared is msgspec.UNSET:
        return False
    shared = True
    for value, allowed in ((rec.shared, _SHARED_MODES), (rec.exclusive, _NOT_EXCLUSIVE)):
        if value is None:
            continue
        kind = type(value)
        if kind is int and -_NO_VAL32 < value < _NO_VAL32:
            shared = False
            continue
        if kind is str:
            names = (value,)
        elif kind is list and all(type(n) is str for n in value):
            names = value
        else:
            raise _Slow
        shared = shared and all(n.strip().lower() in allowed for n in names if n.strip())
    return shared


def _load_json(text: str, source: str) -> dict[str, Any]:
    doc = _load_json_value(text, source)
    if not isinstance(doc, dict):
        raise SlurmOutputError(source, None, f"expected a JSON object, got {type(doc).__name__}")
    return doc


def _load_json_value(text: str, source: str) -> Any:
    if not text or not text.strip():
        raise SlurmOutputError(source, None, "no output (expected JSON)")
    try:
        doc = json.loads(text, parse_constant=_json_constant, parse_int=_json_int, parse_float=_json_float)
    except _BadNumber as exc:
        raise SlurmOutputError(source, None, f"invalid number in the JSON: {exc}") from None
    except RecursionError:
        raise SlurmOutputError(source, None, "the JSON is nested too deeply") from None
    except json.JSONDecodeError as exc:
        # An error at the very end, or an unterminated string, usually means the output was cut off.
        truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated")
        hint = " (truncated output?)" if truncated else ""
        what = exc.msg.removesuffix(" at")  # "Unterminated string starting at"
        raise SlurmOutputError(
            source, None, f"not valid JSON at line {exc.lineno} column {exc.colno}: {what}{hint}"
        ) from None
    return doc


def _keys(doc: dict[str, Any]) -> str:
    return ", ".join(sorted(doc)) or "none"


def _raise_on_errors(doc: dict[str, Any], source: str) -> None:
    errors = doc.get("errors")
    if not errors:
        return
    if not isinstance(errors, list):
        errors = [errors]
    texts = []
    for err in errors:
        if isinstance(err, dict):
            # 22.05: {error, error_number|errno, description, source}; v0.0.39+: the same plus data_type.
            parts = [str(err[k]) for k in ("error", "description") if err.get(k)]
            number = err.get("error_number", err.get("errno"))
            if number is not None:
                parts.append(f"error_number {number}")
            if err.get("source"):
                parts.append(f"from {err['source']}")
            texts.append(", ".join(parts) or json.dumps(err))
        else:
            texts.append(str(err))
    raise SlurmOutputError(source, "errors", "Slurm reported: " + "; ".join(texts))


def _envelope_version(doc: dict[str, Any]) -> str:
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        return ""
    slurm = meta.get("slurm")  # 23.11+
    if not isinstance(slurm, dict):
        slurm = meta.get("Slurm")  # 22.05, 23.02
    if not isinstance(slurm, dict):
        return ""
    version = slurm.get("version")
    if isinstance(version, dict):
        try:
            major, minor, micro = (int(version[k]) for k in ("major", "minor", "micro"))
        except (KeyError, TypeError, ValueError):
            pass
        else:
            return f"{major}.{minor:02d}.{micro}"
    release = slurm.get("release")
    return release if isinstance(release, str) else ""


class _Fields:
    """Typed, path-aware access to one JSON record."""

    def __init__(self, raw: dict[str, Any], path: str, source: str):
        self.raw = raw
        self.path = path
        self.source = source

    def error(self, key: str, message: str) -> SlurmOutputError:
        return SlurmOutputError(self.source, f"{self.path}.{key}", message)

    def string(self, key: str) -> str:
        value = self.raw.get(key)
        if value is None:
            return ""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.error(key, f"expected a string, got {_describe(value)}")
        text = str(value)
        return "" if text in _NULL_STRINGS else text

    def number(self, key: str) -> int | float | None:
        """A number, or ``None`` when null, unset, infinite or a NO_VAL sentinel."""
        value = self.raw.get(key)
        if isinstance(value, dict) and ("number" in value or "set" in value or "infinite" in value):
            if value.get("infinite") or value.get("set") is False:
                return None
            value = value.get("number")
        if value is None:
            return None
        if isinstance(value, bool):
            raise self.error(key, f"expected a number, got {_describe(value)}")
        if isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise self.error(key, f"expected a number, got {value!r}") from None
        if not isinstance(value, (int, float)):
            raise self.error(key, f"expected a number, got {_describe(value)}")
        if value in _SENTINELS:
            return None
        if not math.isfinite(value) or abs(value) > MAX_NUMBER:
            raise self.error(key, f"{value!r:.40} is out of range")
        if value < 0:
            raise self.error(key, f"expected a number >= 0, got {value!r}")
        return value

    def integer(self, key: str, default: int) -> int:
        value = self.number(key)
        if value is None:
            return default
        if isinstance(value, float) and not value.is_integer():
            raise self.error(key, f"expected a whole number, got {value!r}")
        return int(value)

    def time(self, key: str) -> float | None:
        value = self.number(key)
        return None if not value else float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, (bool, int)):
            return bool(value)
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise self.error(key, f"expected true/false, got {_describe(value)}")

    def string_list(self, key: str) -> tuple[str, ...]:
        """A list of strings; also accepts 22.05's comma-separated string."""
        value = self.raw.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            return _csv(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(v for v in value if v)
        raise self.error(key, f"expected a list of strings, got {_describe(value)}")

    def nodes(self, key: str) -> tuple[str, ...]:
        value = self.string(key)
        try:
            return hostlist.expand(value)
        except ValueError as exc:
            raise self.error(key, str(exc)) from None


def _describe(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return type(value).__name__
    return repr(value)


def _csv(text: str) -> tuple[str, ...]:
    if text.strip() in ("", "(null)"):
        return ()
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _job_from_json(raw: dict[str, Any], f: _Fields) -> SlurmJob:
    if raw.get("job_id") is None:
        raise f.error("job_id", "missing")
    job_id = f.integer("job_id", 0)
    if job_id < 1:
        raise f.error("job_id", f"not a job id: {raw['job_id']!r}")
    if "job_state" not in raw or raw["job_state"] is None:
        raise f.error("job_state", "missing")
    state, flags = _job_state(raw["job_state"], f)
    if state not in _JOB_STATES:
        raise f.error("job_state", f"unknown job state {state!r:.60}")
    limit = f.number("time_limit")
    priority = f.number("priority")
    gpus = _gpus_per_node(f.string("tres_per_node") or f.string("gres"))
    node_count = f.integer("node_count", 1)
    max_nodes = _max_nodes(f.integer("max_nodes", 0), node_count, state, f.error) if state == PENDING else 0
    return SlurmJob(
        job_id=int(job_id),
        state=state,
        user=f.string("user_name"),
        account=f.string("account"),
        partition=f.string("partition"),
        qos=f.string("qos"),
        name=f.string("name"),
        reason=_reason(f.string("state_reason")),
        flags=flags,
        priority=None if priority is None else int(priority),
        submit_time=f.time("submit_time"),
        start_time=f.time("start_time"),
        end_time=f.time("end_time"),
        eligible_time=f.time("eligible_time"),
        time_limit_s=None if limit is None else float(limit) * 60.0,
        node_count=node_count,
        max_nodes=max_nodes,
        cpus=f.integer("cpus", 0),
        nodes=f.nodes("nodes"),
        required_nodes=f.nodes("required_nodes"),
        excluded_nodes=f.nodes("excluded_nodes"),
        comment=f.string("comment"),
        admin_comment=f.string("admin_comment"),
        requeue=f.boolean("requeue", True),
        batch=f.boolean("batch_flag", True),
        restart_count=f.integer("restart_cnt", 0),
        gpus_per_node=gpus,
        features=f.string("features"),
        shared=_shared_json(raw, f),
        tasks=f.integer("tasks", 0),
        tasks_per_node=f.integer("tasks_per_node", 0),
        cpus_per_task=_cpus_per_task_json(f, state),
        mem_per_node_mb=f.integer("memory_per_node", 0),
        mem_per_cpu_mb=f.integer("memory_per_cpu", 0),
        allocation=_allocation_json(raw, f) if _holds_nodes(state, flags) else (),
    )


def _max_nodes(max_nodes: int, node_count: int, state: str, error: Callable[[str, str], Exception],
               key: str = "max_nodes") -> int:
    """The top of a pending job's node range (``--nodes=MIN-MAX``), 0 for none; Slurm forgets the range of a job
    once it has nodes, so only a pending job has one. A top below the bottom is an unreadable record."""
    if state != PENDING or not max_nodes:
        return 0
    if max_nodes < node_count:
        raise error(key, f"node range {node_count}-{max_nodes} ends below its start")
    return max_nodes if max_nodes > node_count else 0  # 2-2 (sbatch -N 2) is no range


def _holds_nodes(state: str, flags: frozenset[str]) -> bool:
    """Whether a job in this state holds its nodes: running, suspended or completing (also a job that ended
    and still shows the ``COMPLETING`` flag). Slurm keeps the allocation of an ended job in its record until
    MinJobAge; that is history, not a hold."""
    return state in (RUNNING, SUSPENDED, COMPLETING) or COMPLETING in flags


def _cpus_per_task_json(f: _Fields, state: str) -> int:
    """``cpus_per_task``, 1 when unset.

    22.05 prints ``cpus_per_task`` only when the job has a minimum CPU frequency and null otherwise (the
    test in ``src/plugins/openapi/v0.0.38/jobs.c`` looks at ``cpu_freq_min``), so ``-c 2`` reads as null
    there. A pending job then asks ``cpus`` over ``tasks``: that quotient stands in for it. A running job's
    ``cpus`` is what it got, which Slurm may round up to whole cores, so it stays 1.
    """
    value = f.integer("cpus_per_task", 0)
    if value:
        return value
    tasks = f.integer("tasks", 0)
    if state == PENDING and tasks:
        return max(1, f.integer("cpus", 0) // tasks)
    return 1


# A job's ``shared`` modes that let it share nodes: 22.05 prints ``"shared"`` for JOB_SHARED_OK
# (src/plugins/openapi/v0.0.38/jobs.c), data_parser v0.0.39+ the flag ``oversubscribe``.
_SHARED_MODES = frozenset({"shared", "oversubscribe"})
# Values of v0.0.39-v0.0.41's ``exclusive`` flag list that leave the job shareable (``false`` is
# JOB_SHARED_OK; ``true``, ``user``, ``mcs``, ``topo`` are whole-node modes).
_NOT_EXCLUSIVE = frozenset({"false"})


def _shared_json(raw: dict[str, Any], f: _Fields) -> bool:
    """Whether the job may share its nodes.

    22.05's ``shared`` is null for a job that may (Slurm's default, NO_VAL16), ``"shared"`` for
    ``--oversubscribe`` and ``"none"``, ``"user"``, ``"mcs"`` for whole-node modes (a mode it has no name
    for is printed as a number). data_parser v0.0.39+ gives a flag list: ``[]`` by default,
    ``oversubscribe``, ``none``, ``user``, ``mcs``, ``topo``; some versions add an ``exclusive`` list that
    says the same (``true``, ``false``, ``user``, ``mcs``, ``topo``). Every whole-node mode, a number and
    any name not known here read as not shared: the job then counts as holding its nodes whole. A record
    without ``shared`` says nothing, and reads so too.
    """
    if "shared" not in raw:
        return False
    shared = True
    for key, allowed in (("shared", _SHARED_MODES), ("exclusive", _NOT_EXCLUSIVE)):
        value = raw.get(key)
        if value is None:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            shared = False  # 22.05 prints a mode it has no name for as its number
            continue
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(v, str) for v in names):
            raise f.error(key, f"expected a string or a list of strings, got {_describe(value)}")
        shared = shared and all(n.strip().lower() in allowed for n in names if n.strip())
    return shared


def _allocation_json(raw: dict[str, Any], f: _Fields) -> tuple[NodeAllocation, ...]:
    """What the job holds per node, from ``job_resources``.

    Up to v0.0.40 ``allocated_nodes[]`` gives ``nodename``, ``memory_allocated`` and a core map of the
    allocated cores only; from v0.0.41 ``nodes.allocation[]`` gives ``name``, ``cpus.count``,
    ``memory.allocated`` and a map of every core with its status.
    """
    res = raw.get("job_resources")
    if res is None or res == {}:
        return ()
    if not isinstance(res, dict):
        raise f.error("job_resources", f"expected an object, got {_describe(res)}")
    r = _Fields(res, f"{f.path}.job_resources", f.source)
    nodes = res.get("nodes")
    if isinstance(nodes, dict):
        r = _Fields(nodes, f"{r.path}.nodes", f.source)
        items, key = nodes.get("allocation"), "allocation"
    else:
        items, key = res.get("allocated_nodes"), "allocated_nodes"
    if items is None:
        return ()
    if not isinstance(items, list):
        raise r.error(key, f"expected a list, got {_describe(items)}")
    out: list[NodeAllocation] = []
    seen: set[str] = set()
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            raise r.error(f"{key}[{k}]", f"expected an object, got {_describe(item)}")
        g = _Fields(item, f"{r.path}.{key}[{k}]", f.source)
        name_key = "name" if key == "allocation" else "nodename"
        name = g.string(name_key)
        if not name:
            raise g.error(name_key, "missing")
        if name in seen:
            raise g.error(name_key, f"node {name!r:.60} twice in the job's allocation")
        seen.add(name)
        if key == "allocation":
            cpus = _Fields(_object(item, "cpus", g), f"{g.path}.cpus", f.source).integer("count", 0)
            mem = _Fields(_object(item, "memory", g), f"{g.path}.memory", f.source).integer("allocated", 0)
        else:
            cpus, mem = 0, g.integer("memory_allocated", 0)
        out.append(NodeAllocation(name, cpus=cpus, cores=_allocated_cores(item.get("sockets"), g), mem_mb=mem))
    return tuple(out)


def _object(raw: dict[str, Any], key: str, f: _Fields) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise f.error(key, f"expected an object, got {_describe(value)}")
    return value


# A core's status in the per-socket core maps: 22.05-v0.0.40 print "allocated" or "allocated_and_in_use"
# for the job's cores and leave the others out; v0.0.41+ list every core with flags such as
# ["ALLOCATED", "IN_USE"] or ["UNALLOCATED"].
_ALLOCATED_CORE = frozenset({"allocated", "allocated_and_in_use"})


def _allocated_cores(sockets: Any, f: _Fields) -> int:
    """Cores marked allocated in a per-socket core map: ``{"0": {"cores": {"1": "allocated"}}}`` (to v0.0.40)
    or ``[{"cores": [{"status": ["ALLOCATED"]}]}]`` (v0.0.41 on)."""
    if sockets is None:
        return 0
    if not isinstance(sockets, (dict, list)):
        raise f.error("sockets", f"expected an object or a list, got {_describe(sockets)}")
    count = 0
    for s_key, socket in sockets.items() if isinstance(sockets, dict) else enumerate(sockets):
        where = f"sockets[{s_key!r}]" if isinstance(sockets, dict) else f"sockets[{s_key}]"
        if not isinstance(socket, dict):
            raise f.error(where, f"expected an object, got {_describe(socket)}")
        cores = socket.get("cores")
        if cores is None:
            continue
        if not isinstance(cores, (dict, list)):
            raise f.error(f"{where}.cores", f"expected an object or a list, got {_describe(cores)}")
        for c_key, core in cores.items() if isinstance(cores, dict) else enumerate(cores):
            here = f"{where}.cores[{c_key!r}]" if isinstance(cores, dict) else f"{where}.cores[{c_key}]"
            if isinstance(core, str):
                count += core.strip().lower() in _ALLOCATED_CORE
                continue
            status = core.get("status") if isinstance(core, dict) else None
            if not isinstance(status, list) or not all(isinstance(n, str) for n in status):
                raise f.error(here, f"expected a status string or {{\"status\": [...]}}, got {_describe(core)}")
            count += any(n.strip().upper() == "ALLOCATED" for n in status)
    return count


# Core statuses as Slurm prints them, and whether each counts as allocated; any other form is left to
# _allocated_cores.
_CORE_STATUS_FAST = {"allocated": 1, "allocated_and_in_use": 1, ("ALLOCATED",): 1, ("ALLOCATED", "IN_USE"): 1,
                     ("UNALLOCATED",): 0, ("IN_USE",): 0}


def _allocated_cores_fast(sockets: Any) -> int:
    """:func:`_allocated_cores` for the maps Slurm prints; raises :class:`_Slow` on anything else."""
    if sockets is None:
        return 0
    count = 0
    fast = _CORE_STATUS_FAST
    for socket in sockets.values() if type(sockets) is dict else sockets:
        cores = socket.get("cores") if type(socket) is dict else _slow()
        if type(cores) is dict:
            for core in cores.values():
                count += fast[core] if type(core) is str and core in fast else _slow()
        elif type(cores) is list:
            for core in cores:
                status = core.get("status") if type(core) is dict else None
                key = tuple(status) if type(status) is list else None
                count += fast[key] if key in fast else _slow()
        elif cores is not None:
            raise _Slow
    return count


def _slow() -> int:
    raise _Slow


def _job_state(value: Any, f: _Fields) -> tuple[str, frozenset[str]]:
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        try:
            return _job_state_from_names(value)
        except ValueError as exc:
            raise f.error("job_state", str(exc)) from None
    raise f.error("job_state", f"expected a state string or a list of states, got {_describe(value)}")


def _job_state_from_names(names: list[str]) -> tuple[str, frozenset[str]]:
    """The base state and the flags of a job's state names; ``ValueError("empty")`` if every name is blank
    (``""``, ``[" "]``, scontrol's ``JobState=+``)."""
    upper = [n.strip().upper() for n in names if n.strip()]
    if not upper:
        raise ValueError("empty")
    base = next((n for n in upper if n in BASE_JOB_STATES), None)
    if base is None:
        # Only flags (22.05/v0.0.39 single string): derive the base from the first one.
        first = upper[0]
        base = FLAG_ONLY_JOB_STATES.get(first, first)
    flags = frozenset(n for n in upper if n != base or n in FLAG_ONLY_JOB_STATES)
    return base, flags


def _reason(text: str) -> str:
    return "" if text == "None" else text


def _gpus_per_node(tres: str) -> int:
    """GPUs per node from ``gres:gpu:4`` (22.05), ``gres/gpu:4`` (23.02+), ``gres/gpu=4``, ``gpu:a100:2``.

    >>> _gpus_per_node("gres/gpu:a100:2,gres/shard:1")
    2
    """
    total = 0
    for item in tres.split(","):
        item = item.strip()
        for prefix in ("gres:", "gres/"):
            if item.startswith(prefix):
                item = item[len(prefix) :]
        parts = re.split(r"[:=]", item)
        if parts[0] != "gpu":
            continue
        count = parts[-1] if len(parts) > 1 else "1"
        total += int(count) if count.isdigit() else 1
    return total


def _node_from_json(raw: dict[str, Any], f: _Fields) -> SlurmNode:
    name = f.string("name")
    if not name:
        raise f.error("name", "missing")
    state_value = raw.get("state")
    if state_value is None or state_value == [] or state_value == "":
        raise f.error("state", "missing")
    if isinstance(state_value, str):
        # 22.05: lower-case base state plus a separate state_flags list.
        names = [state_value, *f.string_list("state_flags")]
    elif isinstance(state_value, list) and all(isinstance(v, str) for v in state_value):
        names = list(state_value)
    else:
        raise f.error("state", f"expected a state string or a list of states, got {_describe(state_value)}")
    state, flags = _node_state_from_names(names)
    features = f.string_list("features") or f.string_list("active_features")
    energy = raw.get("energy")
    watts: float | None = None
    if isinstance(energy, dict):
        ef = _Fields(energy, f"{f.path}.energy", f.source)
        value = ef.number("current_watts")
        watts = float(value) if value else None
        if watts is not None and watts > MAX_NODE_WATTS:
            raise ef.error("current_watts", f"{watts:g} W is not a node's power")
    elif energy is not None:
        raise f.error("energy", f"expected an object, got {_describe(energy)}")
    return SlurmNode(
        name=name,
        state=state,
        flags=flags,
        cpus=f.integer("cpus", 0),
        sockets=f.integer("sockets", 0),
        cores_per_socket=f.integer("cores", 0),
        threads_per_core=f.integer("threads", 1),
        real_memory_mb=f.integer("real_memory", 0),
        features=features,
        partitions=f.string_list("partitions"),
        gres=f.string("gres"),
        address=f.string("address"),
        reason=_strip_reason_stamp(f.string("reason")),
        current_watts=watts,
    )


def _node_state_from_names(names: list[str]) -> tuple[str, frozenset[str]]:
    """Base state and flags from state names such as ``["IDLE", "POWERED_DOWN"]`` or ``["idle*", "drain"]``."""
    flags: set[str] = set()
    cleaned: list[str] = []
    for raw_name in names:
        name = raw_name.strip().upper()
        while name and name[-1] in _NODE_STATE_SUFFIXES:
            flags.add(_NODE_STATE_SUFFIXES[name[-1]])
            name = name[:-1]
        if name:
            cleaned.append(name)
    base = next((n for n in cleaned if n in BASE_NODE_STATES), None)
    for name in cleaned:
        if name == base:
            continue
        if name in _NODE_STATE_ALIASES:
            alias_base, extra = _NODE_STATE_ALIASES[name]
            base = base or alias_base
            flags.update(extra)
        else:
            flags.add(name)
    return base or "UNKNOWN", frozenset(flags)


def _strip_reason_stamp(reason: str) -> str:
    # scontrol prints "Reason=text [user@2026-11-22T01:00:00]"; JSON has the text only.
    return re.sub(r"\s*\[[^\[\]]*@[^\[\]]*\]\s*$", "", reason)


# --------------------------------------------------------------------------- plain text

# Keys whose value is free text and may contain " word=..." (scontrol prints them unquoted).
_FREE_TEXT_KEYS = frozenset(
    {"Reason", "Comment", "AdminComment", "SystemComment", "JobName", "Command", "OS", "Extra", "WorkDir"}
    | {"StdErr", "StdIn", "StdOut", "Features", "AvailableFeatures", "ActiveFeatures", "Dependency"}
)

# Keys scontrol prints for jobs and nodes (22.05-25.11). A token after a free-text key
# is only treated as a new key if it is one of these, so "Reason=bad slot=3" stays whole.
_KNOWN_KEY_NAMES = """
    JobId ArrayJobId ArrayTaskId ArrayTaskThrottle HetJobId HetJobOffset HetJobIdSet JobName UserId GroupId
    MCS_label Priority Nice Account QOS WCKey JobState Reason Dependency Requeue Restarts BatchFlag Reboot
    ExitCode DerivedExitCode RunTime TimeLimit TimeMin SubmitTime EligibleTime AccrueTime ResizeTime StartTime
    EndTime Deadline SuspendTime SecsPreSuspend LastSchedEval Scheduler Partition AllocNode:Sid ReqNodeList
    ExcNodeList NodeList SchedNodeList BatchHost NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T TRES ReqTRES
    AllocTRES Socks/Node NtasksPerN:B:S:C CoreSpec MinCPUsNode MinMemoryNode MinMemoryCPU MinTmpDiskNode Features
    Prefer ClusterFeatures BatchFeatures DelayBoot OverSubscribe Contiguous Licenses LicensesAlloc Network
    Command WorkDir AdminComment SystemComment Comment StdErr StdIn StdOut StdErrP StdInP StdOutP Power
    CpusPerTres MemPerTres TresBind TresFreq TresPerJob TresPerNode TresPerSocket TresPerTask NtasksPerTRES
    MailUser MailType Reservation Container ContainerID CpuFreqMin CpuFreqMax CpuFreqGov Switches Wait4Switch
    BurstBuffer BurstBufferState KillOInInvalidDependent SegmentSize CronJob CrontabSpec Extra FailedNode
    PreemptEligibleTime PreemptTime Tres NodeName Arch CoresPerSocket CPUAlloc CPUEfctv CPUTot
    CPULoad AvailableFeatures ActiveFeatures Gres GresDrain GresUsed NodeAddr NodeHostName Port Version OS
    RealMemory AllocMem FreeMem Sockets Boards State ThreadsPerCore TmpDisk Weight Owner Partitions BootTime
    SlurmdStartTime LastBusyTime ResumeAfterTime CfgTRES CapWatts CurrentWatts AveWatts LowestJoules
    ConsumedJoules ExtSensorsJoules ExtSensorsWatts ExtSensorsTemp InstanceId InstanceType CoreSpecCount
    CPUSpecList MemSpecLimit NextState GresDrained CpuBind MCS LastBusy ReservationName Topology
"""
_KNOWN_KEYS = frozenset(_KNOWN_KEY_NAMES.split())
# The job keys above are in the order scontrol prints them (slurm_sprint_job_info(), src/api/job_info.c in
# 22.05, src/scontrol/info_job.c from 25.05; the live 22.05 and 24.11 outputs under tests/fixtures follow it):
# ResizeTime after AccrueTime for a job that was resized, ReqTRES and AllocTRES (24.11) in place of TRES.
_KEY_RANK = {k: i for i, k in enumerate(_KNOWN_KEY_NAMES.split())}

# ``scontrol -d show job`` follows ``CoreSpec=`` with ``JOB_GRES=`` and one group ``Nodes=wsn[2-3] CPU_IDs=0-1
# Mem=200 GRES=`` per set of nodes with the same layout (slurm_sprint_job_info(), src/api/job_info.c;
# src/scontrol/info_job.c from 25.05), so these keys repeat. A group key is only read as one in that place,
# and kept as ``Nodes#0``, ``CPU_IDs#0``, ... in the order printed. None of them is in _KNOWN_KEYS: inside a
# free-text value (a job name or comment) they stay part of the text.
_GROUP_KEYS = ("Nodes", "CPU_IDs", "Mem", "GRES")

_KEY_START = re.compile(r" (?=[A-Za-z][A-Za-z0-9_:/]*=)")
_KEY_VALUE = re.compile(r"([A-Za-z][A-Za-z0-9_:/]*)=(.*)", re.DOTALL)
_EMPTY_MESSAGES = ("No jobs in the system", "No nodes in the system")


def parse_scontrol_jobs_text(
    text: str, source: str = "scontrol -o show jobs", tz: tzinfo | None = None
) -> list[SlurmJob]:
    """Parse ``scontrol [-d] -o show jobs`` (one ``Key=Value ...`` line per job) into jobs.

    Lines indented with white space continue the record above, so plain
    ``scontrol show jobs`` output is read too. With ``-d``, the ``Nodes=
    CPU_IDs= Mem=`` groups of a job that holds nodes become its ``allocation``.
    Strict: the first bad record raises; the daemon reads through
    :func:`decode_scontrol_jobs_text`, which skips it instead.

    Parameters
    ----------
    text : str
        The command's standard output.
    source : str
        How to name the output in error messages.
    tz : tzinfo, optional
        Time zone of the ``SubmitTime=``-style wall-clock times; scontrol prints
        the controller host's local time, so the default is this host's zone.

    Raises
    ------
    SlurmOutputError
        For a line that is not ``Key=Value``, a bad number, memory size, time
        or CPU id list, a node twice in one job's groups, a key read twice (a
        free-text field holding ``Key=`` text that cannot be told apart), or a
        job without ``JobId`` or ``JobState``; the message names the line and key.
    """
    return decode_scontrol_jobs_text(text, source, tz, strict=True).records


def decode_scontrol_jobs_text(text: str, source: str = "scontrol -o show jobs", tz: tzinfo | None = None, *,
                              strict: bool = False) -> Decoded:
    """Decode ``scontrol [-d] -o show jobs`` (see :func:`parse_scontrol_jobs_text`).

    A job record that cannot be read is left out, counted in ``skipped`` (its
    job id in ``skipped_ids``) and logged once; ``strict=True`` raises instead.

    How free text is told from keys: scontrol prints values unquoted, so a job
    name, comment or working directory may hold ``Key=value`` text. scontrol
    prints a job's keys in one fixed order (``slurm_sprint_job_info()``), each
    once. A ``Key=`` inside a free-text value (:data:`_FREE_TEXT_KEYS`) starts
    a new field only if scontrol prints that key after the free-text key and it
    is the last ``Key=`` of that name on the line; so a comment's
    ``Partition=debug AdminComment=x NumNodes=zz`` (keys printed before
    ``Comment=``) and a job name's ``Partition=debug`` (the real one follows)
    stay text. Text that would still make a key appear twice makes the record
    unreadable (skipped), never read with a value taken from free text.
    """
    jobs: list[SlurmJob] = []
    skipped: list[str] = []
    ids: set[int] = set()
    for lineno, line in _records(text):
        try:
            jobs.append(_job_from_text(_TextRecord(_split_record(line, lineno, source, ordered=True), lineno,
                                                   source, tz)))
        except SlurmOutputError as exc:
            if strict:
                raise
            match = _TEXT_JOB_ID.match(line)
            ident = int(match.group(1)) if match else None
            skipped.append(_skip_line(exc, "job", ident))
            _add_id(ids, ident)
    _log_skipped(skipped, source, "job")
    return Decoded(jobs, skipped=tuple(skipped), skipped_ids=frozenset(ids))


def parse_scontrol_nodes_text(text: str, source: str = "scontrol -o show nodes") -> list[SlurmNode]:
    """Parse ``scontrol -o show nodes`` (one ``Key=Value ...`` line per node) into nodes.

    Raises
    ------
    SlurmOutputError
        As :func:`parse_scontrol_jobs_text`; a node needs ``NodeName`` and ``State``.
    """
    return decode_scontrol_nodes_text(text, source, strict=True).records


def decode_scontrol_nodes_text(text: str, source: str = "scontrol -o show nodes", *,
                               strict: bool = False) -> Decoded:
    """Decode ``scontrol -o show nodes``; a node record that cannot be read, or a name already seen, is
    skipped, counted and logged once (``strict=True`` raises instead)."""
    nodes: list[SlurmNode] = []
    skipped: list[str] = []
    seen: dict[str, int] = {}
    for lineno, line in _records(text):
        try:
            node = _node_from_text(_TextRecord(_split_record(line, lineno, source), lineno, source, None))
            if node.name in seen:
                raise SlurmOutputError(f"{source}:{lineno}", "NodeName",
                                       f"node {node.name!r} already on line {seen[node.name]}")
        except SlurmOutputError as exc:
            if strict:
                raise
            match = _TEXT_NODE_NAME.match(line)
            skipped.append(_skip_line(exc, "node", match.group(1) if match else None))
            continue
        seen[node.name] = lineno
        nodes.append(node)
    _log_skipped(skipped, source, "node")
    return Decoded(nodes, skipped=tuple(skipped))


_TEXT_JOB_ID = re.compile(r"JobId=(\d{1,20})(?= |$)")
_TEXT_NODE_NAME = re.compile(r"NodeName=(\S{1,200})")


def _records(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, record)`` for each record: a line, with the indented lines that continue it."""
    pending: tuple[int, str] | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.strip() in _EMPTY_MESSAGES:
            continue
        if line[0].isspace() and pending is not None:
            pending = (pending[0], pending[1] + " " + line.strip())
            continue
        if pending is not None:
            yield pending
        pending = (lineno, line.strip())
    if pending is not None:
        yield pending


def _split_record(line: str, lineno: int, source: str, ordered: bool = False) -> dict[str, str]:
    """The fields of one record.

    Each ``Key=`` met inside the value of a free-text key (:data:`_FREE_TEXT_KEYS`) either ends that value or
    is part of it. It can end it only if it is a key scontrol prints (:data:`_KNOWN_KEYS`), not read yet in
    this record and, when ``ordered`` (jobs: scontrol prints their keys in :data:`_KNOWN_KEY_NAMES` order),
    printed after the free-text key and before the key that follows it. A reading is possible if no key
    comes twice in it and it reads the keys that identify a job (:data:`_TELLING_KEYS`) wherever the line
    holds them. What scontrol printed is always a possible reading, and no other possible reading takes as
    keys all the ``Key=`` it takes and more: a reading that leaves a real key in a free-text value is one
    of its parts. So the record is read if one possible reading holds all others in that sense; if not,
    the readings that no other holds (a working directory ``/w Comment=x`` and an admin comment ``y``, or
    a comment ``x AdminComment=y``: the same line) must agree on every field wattsched reads, or the record
    cannot be read. Text that cannot pass for a key (out of scontrol's order) stays text at no cost.
    """
    parts: list[tuple[str, str, str]] = []
    ranks: list[int] = []  # each Key='s place in scontrol's order, -1 for a key it does not print
    last: dict[str, int] = {}  # where each key name comes last on the line
    unknown = len(_KEY_RANK)
    for part in _KEY_START.split(line):
        match = _KEY_VALUE.fullmatch(part)
        if match is None:
            raise SlurmOutputError(f"{source}:{lineno}", None, f"expected Key=Value, got {part[:60]!r}")
        key, value = match.groups()
        last[key] = len(parts)
        parts.append((key, value, part))
        ranks.append(_KEY_RANK.get(key, -1))
    telling = (_TELLING_KEYS if ordered else _TELLING_NODE_KEYS) & last.keys()
    later_min: list[int] = []  # the lowest rank of the known keys from each index on (made when first needed)

    def keyable(key: str, current: str, fields: dict[str, str]) -> bool:
        return key in _KNOWN_KEYS and key not in fields and (
            not ordered or _KEY_RANK.get(key, -1) > _KEY_RANK.get(current, unknown))

    def contested(i: int, key: str, current: str) -> bool:
        """Whether a later ``Key=`` could be a key only if this one is text (else text here loses a key)."""
        lo, hi = _KEY_RANK.get(current, -1), _KEY_RANK.get(key, unknown)
        if ordered and last[key] == i:
            if not later_min:
                later_min.extend([unknown] * (len(parts) + 1))
                for j in range(len(parts) - 1, -1, -1):
                    r = ranks[j]
                    later_min[j] = min(later_min[j + 1], r if r >= 0 else unknown)
            if later_min[i + 1] >= hi:
                return False  # nothing after it is printed before it (a record as scontrol printed it)
        if not ordered:
            return last[key] > i  # nodes: free text is their administrators'; only a repeated key is in doubt
        return any(parts[j][0] == key or lo < r < hi for j, r in enumerate(ranks[i + 1:], start=i + 1))

    budget = [_SPLIT_BUDGET]
    problems: list[tuple[str, str]] = []
    readings: list[tuple[frozenset[int], dict[str, str]]] = []

    def walk(i: int, fields: dict[str, str], previous: str | None, group: int, taken: list[int],
             chosen: int = -1) -> None:
        # chosen: the rank of the last key read since one (not free text) was taken out of free text: up to
        # the next free-text key, each key scontrol prints must come after the one before
        while i < len(parts):
            budget[0] -= 1
            if budget[0] < 0:
                return
            key, value, part = parts[i]
            if chosen >= 0 and key in _KEY_RANK:
                if _KEY_RANK[key] <= chosen:
                    return  # keys taken out of free text must come where scontrol prints them: before the next
                chosen = _KEY_RANK[key] if key not in _FREE_TEXT_KEYS else -1  # (up to the next free-text key)
            if _in_group(previous, key):
                if key == "Nodes":
                    group += 1
                fields[f"{key}#{group}"] = value
            elif previous in _FREE_TEXT_KEYS:
                if keyable(key, previous, fields):
                    if not contested(i, key, previous):  # as text, it would only make a part of this reading
                        fields[key] = value
                        taken.append(i)
                        previous = key
                        chosen = _KEY_RANK[key] if ordered and key not in _FREE_TEXT_KEYS else -1
                        i += 1
                        continue
                    walk(i + 1, {**fields, key: value}, key, group, [*taken, i],  # as a key
                         _KEY_RANK[key] if ordered and key not in _FREE_TEXT_KEYS else -1)
                    if key in telling and last[key] == i:
                        problems.append((key, "inside a free-text field in every reading of the record"))
                        return  # as text, it loses a key the reading needs
                fields[previous] += " " + part  # as text
                i += 1
                continue
            elif key in fields:
                problems.append((key, "printed twice in one record: a free-text field (job name, comment, working "
                                      f"directory...) holds {key + '='!r} text that cannot be told from the key"))
                return
            else:
                fields[key] = value
                taken.append(i)
            previous = key
            i += 1
        missing = telling - fields.keys()
        if missing:
            problems.append((min(missing, key=lambda k: _KEY_RANK.get(k, 0)),
                             "inside a free-text field in every reading of the record"))
            return
        readings.append((frozenset(taken), fields))

    walk(0, {}, None, -1, [])
    if budget[0] < 0:
        raise SlurmOutputError(f"{source}:{lineno}", None, "too many 'Key=' texts inside free-text fields to "
                                                           "tell them from the keys")
    if not readings:
        key, problem = problems[0] if problems else (None, "keys not in the order scontrol prints them")
        raise SlurmOutputError(f"{source}:{lineno}", key, problem)
    tops = [r for r in readings if not any(r[0] < other[0] for other in readings)]
    first = _read_part(tops[0][1])
    for _, fields in tops[1:]:
        other = _read_part(fields)
        if other != first:
            key = min((k for k in first.keys() | other.keys() if first.get(k) != other.get(k)),
                      key=lambda k: _KEY_RANK.get(k.split("#")[0], 0))
            raise SlurmOutputError(f"{source}:{lineno}", key.split("#")[0],
                                   "free text (a job name, comment or working directory holding 'Key=' text) lets "
                                   "the record be read in two ways that differ here")
    return max(tops, key=lambda r: len(r[0]))[1]


def _read_part(fields: dict[str, str]) -> dict[str, str]:
    """The fields wattsched reads, without the free text it does not (paths, command, dependency)."""
    return {k: v for k, v in fields.items() if k not in _UNREAD_TEXT_KEYS}


_UNREAD_TEXT_KEYS = frozenset({"Command", "WorkDir", "StdErr", "StdIn", "StdOut", "Dependency", "SystemComment",
                               "Extra", "OS"})


# Keys that identify a job (or a node) and the resources it asks for: a reading of a record that would take
# one of them (where the line holds it) into a free-text value is not the record scontrol printed.
_TELLING_KEYS = frozenset({"JobId", "UserId", "JobState", "Partition", "NumNodes", "NumCPUs", "NodeList",
                           "TimeLimit"})
_TELLING_NODE_KEYS = frozenset({"NodeName", "State"})
_SPLIT_BUDGET = 3_000  # steps of the search for one record: a plain record takes one per key


def _in_group(previous: str | None, key: str) -> bool:
    """Whether ``key`` continues the ``JOB_GRES= Nodes= CPU_IDs= Mem= GRES= Nodes= ...`` sequence."""
    if key == "Nodes":
        return previous in ("JOB_GRES", "GRES")
    if key in _GROUP_KEYS:
        return previous == _GROUP_KEYS[_GROUP_KEYS.index(key) - 1]
    return False


class _TextRecord:
    """Typed access to one ``Key=Value`` record, with line-numbered errors."""

    def __init__(self, fields: dict[str, str], lineno: int, source: str, tz: tzinfo | None):
        self.fields = fields
        self.lineno = lineno
        self.source = source
        self.tz = tz

    def error(self, key: str, message: str) -> SlurmOutputError:
        return SlurmOutputError(f"{self.source}:{self.lineno}", key, message)

    def required(self, key: str) -> str:
        value = self.fields.get(key)
        if value is None or not value.strip():
            raise self.error(key, "missing")
        return value.strip()

    def string(self, key: str, *fallbacks: str) -> str:
        for k in (key, *fallbacks):
            value = self.fields.get(k)
            if value is not None:
                value = value.strip()
                return "" if value in _NULL_STRINGS else value
        return ""

    def integer(self, key: str, default: int | None) -> int | None:
        value = self.string(key)
        if value in ("", "N/A", "n/a", "n/s", "*"):
            return default
        # NumNodes=2-2 / NumCPUs=4-8: Slurm prints min-max for pending jobs; the JSON has the minimum.
        head = value.split("-", 1)[0] if re.fullmatch(r"\d+-\d+", value) else value
        if not head.isdigit():
            raise self.error(key, f"expected a number >= 0, got {value[:40]!r}")
        if len(head) > MAX_DIGITS or int(head) > MAX_NUMBER:
            raise self.error(key, f"{value[:40]} is out of range")
        return int(head)

    def integer_top(self, key: str) -> int:
        """The top of a ``min-max`` value (``NumNodes=1-3``: 3), 0 for a single number or none."""
        value = self.string(key)
        if not re.fullmatch(r"\d+-\d+", value):
            return 0
        top = value.split("-", 1)[1]
        if len(top) > MAX_DIGITS or int(top) > MAX_NUMBER:
            raise self.error(key, f"{value[:40]} is out of range")
        return int(top)

    def flag(self, key: str, default: bool) -> bool:
        value = self.integer(key, None)
        return default if value is None else bool(value)

    def time(self, key: str) -> float | None:
        value = self.string(key)
        if value in ("", "Unknown", "None", "N/A", "0"):
            return None
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise self.error(key, f"expected a time like 2026-11-22T02:30:00, got {value!r}") from None
        if moment.tzinfo is None and self.tz is not None:
            moment = moment.replace(tzinfo=self.tz)
        return moment.timestamp()

    def converted(self, key: str, convert: Callable[[str], Any]) -> Any:
        value = self.string(key)
        try:
            return convert(value)
        except ValueError as exc:
            raise self.error(key, str(exc)) from None


def _job_from_text(r: _TextRecord) -> SlurmJob:
    r.required("JobId")
    job_id = r.integer("JobId", None)
    if not job_id:
        raise r.error("JobId", f"not a job id: {r.string('JobId')!r}")
    try:
        state, flags = _job_state_from_names(r.required("JobState").split("+"))
    except ValueError as exc:
        raise r.error("JobState", str(exc)) from None
    if state not in _JOB_STATES:
        raise r.error("JobState", f"unknown job state {state!r:.60}")
    user = r.string("UserId")
    user = re.sub(r"\(\d+\)$", "", user)  # "alice(1001)" -> "alice"
    node_count = r.integer("NumNodes", 1) or 0
    # NumNodes=1-3: a pending moldable job's range (sbatch --nodes=1-3); the JSON's node_count and max_nodes
    max_nodes = _max_nodes(r.integer_top("NumNodes"), node_count, state, r.error, "NumNodes")
    return SlurmJob(
        job_id=int(job_id or 0),  # required() above guarantees a value
        state=state,
        user=user,
        account=r.string("Account"),
        partition=r.string("Partition"),
        qos=r.string("QOS"),
        name=r.string("JobName"),
        # scontrol prints the state description instead of the reason code when there is one
        # ("ReqNodeNotAvail,_UnavailableNodes:n4", spaces made "_"); the code is the part before
        # the comma, which is what the JSON's state_reason holds.
        reason=_reason(r.string("Reason").split(",", 1)[0]),
        flags=flags,
        priority=r.integer("Priority", None),
        submit_time=r.time("SubmitTime"),
        start_time=r.time("StartTime"),
        end_time=r.time("EndTime"),
        eligible_time=r.time("EligibleTime"),
        time_limit_s=r.converted("TimeLimit", parse_time_limit),
        node_count=node_count,
        max_nodes=max_nodes,
        cpus=r.integer("NumCPUs", 0) or 0,
        nodes=r.converted("NodeList", hostlist.expand),
        required_nodes=r.converted("ReqNodeList", hostlist.expand),
        excluded_nodes=r.converted("ExcNodeList", hostlist.expand),
        comment=r.string("Comment"),
        admin_comment=r.string("AdminComment"),
        requeue=r.flag("Requeue", True),
        batch=r.flag("BatchFlag", True),
        restart_count=r.integer("Restarts", 0) or 0,
        gpus_per_node=_gpus_per_node(r.string("TresPerNode", "Gres")),
        features=r.string("Features"),
        shared=_shared_text(r.string("OverSubscribe")),
        tasks=r.integer("NumTasks", 0) or 0,
        tasks_per_node=r.converted("NtasksPerN:B:S:C", _first_count),
        cpus_per_task=max(1, r.integer("CPUs/Task", 1) or 1),
        mem_per_node_mb=r.converted("MinMemoryNode", _memory_mb),
        mem_per_cpu_mb=r.converted("MinMemoryCPU", _memory_mb),
        allocation=_allocation_text(r) if _holds_nodes(state, flags) else (),
    )


def _shared_text(value: str) -> bool:
    """``OverSubscribe=`` of a job (job_share_string(), src/common/slurm_protocol_defs.c): ``OK`` for the
    default and ``YES`` for ``--oversubscribe`` may share; ``NO``, ``USER``, ``MCS``, ``TOPO``, an empty or
    unknown value do not.

    >>> [_shared_text(v) for v in ("OK", "YES", "FORCE:4", "NO", "USER", "")]
    [True, True, True, False, False, False]
    """
    value = value.strip().upper()
    return value == "OK" or value.startswith(("YES", "FORCE"))


def _first_count(text: str) -> int:
    """The first field of ``NtasksPerN:B:S:C=2:0:*:*`` (0 when ``*`` or absent)."""
    head = text.split(":", 1)[0].strip()
    if head in ("", "*", "N/A"):
        return 0
    if not head.isdigit() or len(head) > MAX_DIGITS:
        raise ValueError(f"expected a count, got {text[:40]!r}")
    return int(head)


_MEMORY_UNITS = {"K": Fraction(1, 1024), "M": Fraction(1), "G": Fraction(1024), "T": Fraction(1024**2),
                 "P": Fraction(1024**3)}
_MEMORY = re.compile(r"(\d{1,15}(?:\.\d{1,6})?)([KMGTP]?)")


def _memory_mb(text: str) -> int:
    """A memory size of ``scontrol`` in MB (rounded up); 0 when absent.

    scontrol prints MB scaled by 1024 for as long as the value stays whole or half
    (``convert_num_unit()`` with ``CONVERT_NUM_UNIT_EXACT``, src/common/slurm_protocol_api.c):
    128000 MB is ``125G``, 64000 MB ``62.50G``, 32000 MB ``32000M``.

    >>> _memory_mb("125G"), _memory_mb("62.50G"), _memory_mb("100M"), _memory_mb("512K"), _memory_mb("")
    (128000, 64000, 100, 1, 0)
    """
    text = text.strip()
    if text in ("", "N/A", "0"):
        return 0
    m = _MEMORY.fullmatch(text)
    if m is None:
        raise ValueError(f"expected a memory size like 200M or 2G, got {text[:40]!r}")
    return math.ceil(Fraction(m.group(1)) * _MEMORY_UNITS[m.group(2) or "M"])


def _cpu_ids(text: str) -> int:
    """How many CPUs ``CPU_IDs=0-3,8,10-11`` lists.

    >>> _cpu_ids("0-3,8,10-11")
    7
    """
    count = 0
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()) or len(lo) > MAX_DIGITS or len(hi) > MAX_DIGITS:
            raise ValueError(f"expected CPU ids like 0-3,8, got {text[:40]!r}")
        if hi and int(hi) < int(lo):
            raise ValueError(f"range {part.strip()!r} runs backwards")
        count += int(hi or lo) - int(lo) + 1
    if count > MAX_NUMBER:
        raise ValueError(f"{text[:40]} is out of range")
    return count


def _group_value(r: _TextRecord, key: str, group: int, convert: Callable[[str], Any]) -> Any:
    try:
        return convert(r.string(f"{key}#{group}"))
    except ValueError as exc:
        raise r.error(key, f"{exc} (node group {group + 1})") from None


def _allocation_text(r: _TextRecord) -> tuple[NodeAllocation, ...]:
    """The ``Nodes=wsn[2-3] CPU_IDs=0-1 Mem=200 GRES=`` groups of ``scontrol -d show job``, one per layout."""
    out: list[NodeAllocation] = []
    seen: set[str] = set()
    k = 0
    while f"Nodes#{k}" in r.fields:
        names = _group_value(r, "Nodes", k, hostlist.expand)
        cpus = _group_value(r, "CPU_IDs", k, _cpu_ids) if r.string(f"CPU_IDs#{k}") else 0
        mem = _group_value(r, "Mem", k, _memory_mb)
        for name in names:
            if name in seen:
                raise r.error("Nodes", f"node {name!r:.60} twice in the job's allocation")
            seen.add(name)
            out.append(NodeAllocation(name, cpus=cpus, mem_mb=mem))
        k += 1
    return tuple(out)


def _node_from_text(r: _TextRecord) -> SlurmNode:
    name = r.required("NodeName")
    state, flags = _node_state_from_names(r.required("State").split("+"))
    return SlurmNode(
        name=name,
        state=state,
        flags=flags,
        cpus=r.integer("CPUTot", 0) or 0,
        sockets=r.integer("Sockets", 0) or 0,
        cores_per_socket=r.integer("CoresPerSocket", 0) or 0,
        threads_per_core=r.integer("ThreadsPerCore", 1) or 0,
        real_memory_mb=r.integer("RealMemory", 0) or 0,
        features=_csv(r.string("AvailableFeatures", "Features") or r.string("ActiveFeatures")),
        partitions=_csv(r.string("Partitions")),
        gres=r.string("Gres"),
        address=r.string("NodeAddr"),
        reason=_strip_reason_stamp(r.string("Reason")),
        current_watts=r.converted("CurrentWatts", _watts),
    )


def _watts(value: str) -> float | None:
    # 0 and the "not supported" markers (n/s in 22.05, n/a in 25.05) mean "no reading".
    if value in ("", "n/s", "n/a", "N/A"):
        return None
    try:
        watts = float(value)
    except ValueError:
        raise ValueError(f"expected watts, got {value[:40]!r}") from None
    if not 0 <= watts <= MAX_NODE_WATTS:  # also refuses nan
        raise ValueError(f"{value[:40]} W is not a node's power")
    return watts or None


# --------------------------------------------------------------------------- small values

_DURATION = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def parse_time_limit(value: str) -> float | None:
    """Seconds from a Slurm time limit; ``None`` when unlimited or unset.

    Slurm's forms (sbatch(1) ``--time``): ``minutes``, ``minutes:seconds``,
    ``hours:minutes:seconds``, ``days-hours``, ``days-hours:minutes`` and
    ``days-hours:minutes:seconds``. ``scontrol`` prints ``[days-]hh:mm:ss``.

    >>> parse_time_limit("1-02:03:04")
    93784.0
    >>> parse_time_limit("5:00"), parse_time_limit("00:05:00"), parse_time_limit("60")
    (300.0, 300.0, 3600.0)
    >>> parse_time_limit("UNLIMITED") is None
    True
    """
    text = value.strip()
    if text.upper() in ("", "UNLIMITED", "INFINITE", "NONE", "N/A", "PARTITION_LIMIT", "(NULL)"):
        return None
    match = _DURATION.fullmatch(text) if len(text) <= 32 else None
    if match is None:
        raise ValueError(f"expected a time limit like 1-02:03:04, 01:00:00 or UNLIMITED, got {value!r}")
    days, first, second, third = match.groups()
    d = int(days) if days else 0
    a = int(first)
    b = int(second) if second else 0
    c = int(third) if third else 0
    if days is not None:
        # days-hours[:minutes[:seconds]]
        seconds = ((d * 24 + a) * 60 + b) * 60 + c
    elif third is not None:
        seconds = (a * 60 + b) * 60 + c  # hours:minutes:seconds
    elif second is not None:
        seconds = a * 60 + b  # minutes:seconds
    else:
        seconds = a * 60  # minutes
    return float(seconds)


_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_slurm_version(text: str) -> tuple[int, int, int]:
    """``(major, minor, micro)`` from ``sinfo --version`` / ``scontrol --version``.

    >>> parse_slurm_version("slurm-wlm 22.05.8")
    (22, 5, 8)
    >>> parse_slurm_version("slurm 23.11.4")
    (23, 11, 4)

    Raises
    ------
    SlurmOutputError
        When the text holds no ``X.Y.Z`` version.
    """
    match = _VERSION.search(text or "")
    if match is None:
        raise SlurmOutputError("slurm --version", None, f"no version like 22.05.8 in {text.strip()[:80]!r}")
    major, minor, micro = (int(g) for g in match.groups())
    return major, minor, micro


def job_work_dir(text: str | bytes, job_id: int, source: str = "squeue --json --jobs") -> tuple[str, int, int]:
    """``(working directory, uid, gid)`` of job ``job_id`` in ``squeue --json --jobs=<id>`` output.

    Where the daemon puts the resize scripts of a job it shrank (:mod:`wattsched.daemon.slurm.resize`).

    >>> job_work_dir('{"jobs": [{"job_id": 7, "current_working_directory": "/home/a", "user_id": 1001, '
    ...              '"group_id": 100}]}', 7)
    ('/home/a', 1001, 100)
    """
    doc = _load_json(_text_of(text), source)
    for i, raw in enumerate(doc.get("jobs") or ()):
        if not isinstance(raw, dict):
            continue
        f = _Fields(raw, f"jobs[{i}]", source)
        if f.integer("job_id", 0) != job_id:
            continue
        work_dir = f.string("current_working_directory")
        if not work_dir.startswith("/"):
            raise f.error("current_working_directory", f"not an absolute path: {work_dir[:200]!r}")
        uid, gid = f.number("user_id"), f.number("group_id")
        if uid is None or gid is None:
            raise f.error("user_id" if uid is None else "group_id", "missing")
        return work_dir, int(uid), int(gid)
    raise SlurmOutputError(source, None, f"job {job_id} is not listed")
