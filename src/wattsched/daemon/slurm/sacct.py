"""Pure parsers for Slurm accounting: ``sacct --json`` (and slurmrestd ``/slurmdb/vX/jobs``) and ``sacct -P`` text.

Both give :class:`AcctJob` records, one per job (steps are folded into their job).
No function here runs a command or opens a connection.

JSON layouts (``sacct --json`` prints what slurmrestd's ``/slurmdb`` answers):

- Slurm 22.05, ``openapi/dbv0.0.38`` (``src/plugins/openapi/dbv0.0.38/jobs.c``): the envelope
  is ``meta.plugin.type`` = ``openapi/dbv0.0.38`` and ``meta.Slurm.version`` with int parts;
  ``state.current`` is a string; ``time.{submission,start,end}`` are ints (0 = unset) and
  ``time.limit`` is minutes as an int (``null`` or 0xFFFFFFFE/0xFFFFFFFF = unlimited/unset).
- data_parser v0.0.39 (23.02): the envelope names ``meta.plugins.data_parser``; numbers
  that may be NO_VAL, ``time.limit`` among them, become ``{"set", "infinite", "number"}``.
- data_parser v0.0.40 to v0.0.44 (23.11 to 25.11): ``meta.plugin.data_parser`` and lower-case
  ``meta.slurm``; ``state.current`` is a list of the base state and its flags; timestamps may
  be plain ints or ``{"set", "infinite", "number"}`` objects (both are read).

Every version gives ``nodes`` as a hostlist string (``"c[1-2]"``, ``"None assigned"`` before
a start), ``allocation_nodes`` as the node count, and energy as TRES of type ``energy``
(``tres.allocated`` of the job, ``tres.requested.total`` of its steps), in joules. A step's
``requested`` block holds its TRESUsageIn figures, ``consumed`` its TRESUsageOut: ``sacct``'s
``ConsumedEnergyRaw`` of a step is ``requested.total``'s energy (``consumed.total``'s is another
figure; seen on 22.05 with acct_gather_energy/ibmaem: 2344 J against 33). The job's own energy,
there when Slurm ran an extern step (``PrologFlags=Contain``), is that step's: the energy of all
the job's nodes over its allocation.

``sacct -P`` text: a header line naming the columns (run it *without* ``-n``), then one
``|``-separated line per job or step. :data:`SACCT_REQUIRED` are needed;
:data:`SACCT_OPTIONAL` are read when present; other columns are ignored. Times are
the wall clock of the host that ran ``sacct`` (``tz`` says which zone, the local one
by default).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from wattsched.daemon.slurm import hostlist
from wattsched.errors import TraceError

__all__ = [
    "SACCT_FORMAT",
    "SACCT_OPTIONAL",
    "SACCT_REQUIRED",
    "SUPPORTED_DATA_PARSERS",
    "AcctJob",
    "data_parser_of",
    "parse_sacct_json",
    "parse_sacct_text",
]

SACCT_REQUIRED: tuple[str, ...] = (
    "JobIDRaw", "Submit", "Start", "End", "TimelimitRaw", "NNodes", "NodeList", "Partition", "User", "State",
)
"""Columns ``sacct -P`` must print for :func:`parse_sacct_text` (any order, header line included)."""

SACCT_OPTIONAL: tuple[str, ...] = ("ConsumedEnergyRaw", "AllocCPUS", "Group", "JobName")
"""Columns read when present: the job's energy in joules, its CPUs, its group and name."""

SACCT_FORMAT = ",".join(SACCT_REQUIRED + SACCT_OPTIONAL)
"""The ``--format`` to give ``sacct -P`` (documented in docs/simulator.md)."""

SUPPORTED_DATA_PARSERS: tuple[str, ...] = (
    "v0.0.36", "v0.0.37", "v0.0.38", "v0.0.39", "v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44",
)
"""Schema versions :func:`parse_sacct_json` reads: 22.05's openapi/dbv0.0.36-38 and data_parser v0.0.39-44."""

# Slurm's NO_VAL/INFINITE sentinels as 22.05 prints them in plain ints (slurm.h).
_SENTINELS = frozenset({0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF})
_NO_TIME = frozenset({"", "Unknown", "None", "N/A"})
_NO_LIMIT = frozenset({"", "UNLIMITED", "Partition_Limit", "INVALID", "NONE", "INFINITE"})
_VERSION_RE = re.compile(r"(?:data_parser/|openapi/(?:db)?)?(v0\.0\.\d+)$")


@dataclass(frozen=True, slots=True)
class AcctJob:
    """One job of Slurm's accounting.

    Times are epoch seconds (``None``: unset, e.g. a job cancelled before it started);
    ``time_limit_s`` is ``None`` when unlimited; ``energy_j`` is Slurm's energy of
    the job (``ConsumedEnergyRaw``), ``None`` without energy accounting (Slurm
    reports 0 then). ``where`` names the record in its source (a JSON path or a line).
    """

    job_id: int
    submit: float | None
    start: float | None
    end: float | None
    time_limit_s: float | None
    nodes: int
    node_list: str
    node_names: tuple[str, ...]
    partition: str
    user: str
    state: str
    energy_j: float | None = None
    cpus: int | None = None
    group: str = ""
    name: str = ""
    where: str = field(default="", compare=False)

    @property
    def ran(self) -> bool:
        """The job started and ended (only such jobs become rows of a job table)."""
        return self.start is not None and self.end is not None and self.nodes > 0


# --------------------------------------------------------------------------- JSON


def data_parser_of(doc: Mapping[str, Any]) -> str | None:
    """The schema version of a ``sacct --json`` document (``"v0.0.42"``), ``None`` if it names none.

    >>> data_parser_of({"meta": {"plugin": {"type": "openapi/dbv0.0.38"}}})
    'v0.0.38'
    >>> data_parser_of({"meta": {"plugins": {"data_parser": "data_parser/v0.0.39"}}})
    'v0.0.39'
    >>> data_parser_of({"meta": {"plugin": {"type": "", "data_parser": "v0.0.42"}}})
    'v0.0.42'
    """
    meta = doc.get("meta")
    if not isinstance(meta, Mapping):
        return None
    plugin = meta.get("plugin") if isinstance(meta.get("plugin"), Mapping) else {}
    plugins = meta.get("plugins") if isinstance(meta.get("plugins"), Mapping) else {}
    for raw in (plugin.get("data_parser"), plugins.get("data_parser"), plugin.get("type")):
        if isinstance(raw, str) and raw:
            m = _VERSION_RE.search(raw.strip())
            return m.group(1) if m else raw.strip()
    return None


def parse_sacct_json(text: str | bytes, source: str = "sacct --json") -> tuple[list[AcctJob], str]:
    """Jobs of a ``sacct --json`` document and its schema version.

    Raises
    ------
    TraceError
        Naming ``source``, and the line and column of malformed JSON, the key of
        an unknown or missing data_parser version, or the JSON path (``jobs[3].time.start``)
        of a missing or malformed field.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(source, exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno}); "
                         "give the output of `sacct --json` unchanged") from None
    except UnicodeDecodeError as exc:
        raise TraceError(source, None, f"not UTF-8 text: {exc}") from None
    if not isinstance(doc, Mapping):
        raise TraceError(source, None, f"expected a JSON object with 'meta' and 'jobs', got {type(doc).__name__}")
    version = data_parser_of(doc)
    if version is None:
        raise TraceError(source, None, "names no data_parser version; is this `sacct --json` output?",
                         "meta.plugin.data_parser")
    if version not in SUPPORTED_DATA_PARSERS:
        raise TraceError(source, None, f"unknown data_parser version {version!r}; supported: "
                         f"{', '.join(SUPPORTED_DATA_PARSERS)} (pin one with `sacct --json=v0.0.42`)",
                         "meta.plugin.data_parser")
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise TraceError(source, None, "missing or not a list", "jobs")
    return [_json_job(j, f"jobs[{i}]", source) for i, j in enumerate(jobs)], version


def _at(obj: Any, path: str, where: str, source: str, *, required: bool = True) -> Any:
    cur = obj
    for key in path.split("."):
        if not isinstance(cur, Mapping) or key not in cur:
            if required:
                raise TraceError(source, None, "missing", f"{where}.{path}")
            return None
        cur = cur[key]
    return cur


def _number(v: Any, key: str, source: str) -> tuple[float | None, bool]:
    """``(value, infinite)`` of a plain number or a ``{set, infinite, number}`` object; ``None`` when unset."""
    if v is None:
        return None, False
    if isinstance(v, Mapping):
        if v.get("infinite"):
            return None, True
        if not v.get("set", True):
            return None, False
        v = v.get("number")
        if v is None:
            return None, False
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise TraceError(source, None, f"expected a number or {{set, infinite, number}}, got {v!r}", key)
    if int(v) in _SENTINELS:
        return None, True
    return float(v), False


def _time(v: Any, key: str, source: str) -> float | None:
    value, _ = _number(v, key, source)
    return value if value else None  # 0: unset


def _energy_of(tres: Any) -> float | None:
    """Joules in a TRES list (entries ``{type, count}``); ``None`` without an ``energy`` entry above 0."""
    if not isinstance(tres, list):
        return None
    total = None
    for t in tres:
        if isinstance(t, Mapping) and t.get("type") == "energy":
            count, _ = _number(t.get("count"), "count", "")
            if count and count > 0:
                total = (total or 0.0) + count
    return total


def _json_job(job: Any, where: str, source: str) -> AcctJob:
    if not isinstance(job, Mapping):
        raise TraceError(source, None, f"expected a job object, got {type(job).__name__}", where)
    jid, _ = _number(_at(job, "job_id", where, source), f"{where}.job_id", source)
    if jid is None or not jid.is_integer():
        raise TraceError(source, None, f"expected an integer job id, got {job.get('job_id')!r}", f"{where}.job_id")
    state = _at(job, "state.current", where, source)
    if isinstance(state, list):  # v0.0.40+: base state first, then flags
        state = next((s for s in state if isinstance(s, str)), "")
    if not isinstance(state, str):
        raise TraceError(source, None, f"expected a state name or a list of them, got {state!r}",
                         f"{where}.state.current")
    limit, unlimited = _number(_at(job, "time.limit", where, source, required=False), f"{where}.time.limit", source)
    node_list = _at(job, "nodes", where, source, required=False) or ""
    if not isinstance(node_list, str):
        raise TraceError(source, None, f"expected a hostlist string, got {node_list!r}", f"{where}.nodes")
    try:
        names = hostlist.expand(node_list) if node_list != "None assigned" else ()
    except ValueError as exc:
        raise TraceError(source, None, str(exc), f"{where}.nodes") from None
    count, _ = _number(job.get("allocation_nodes"), f"{where}.allocation_nodes", source)
    nodes = int(count) if count else len(names)
    energy = _energy_of(_at(job, "tres.allocated", where, source, required=False))
    if energy is None:
        steps = job.get("steps") if isinstance(job.get("steps"), list) else []
        per_step = [_energy_of(_at(s, "tres.requested.total", where, source, required=False)) for s in steps]
        if any(e is not None for e in per_step):
            energy = sum(e for e in per_step if e is not None)
    cpus = None
    for t in _at(job, "tres.allocated", where, source, required=False) or ():
        if isinstance(t, Mapping) and t.get("type") == "cpu":
            c, _ = _number(t.get("count"), f"{where}.tres.allocated", source)
            cpus = int(c) if c else None
    return AcctJob(
        job_id=int(jid),
        submit=_time(_at(job, "time.submission", where, source), f"{where}.time.submission", source),
        start=_time(_at(job, "time.start", where, source), f"{where}.time.start", source),
        end=_time(_at(job, "time.end", where, source), f"{where}.time.end", source),
        time_limit_s=None if unlimited or limit is None else limit * 60.0,
        nodes=nodes,
        node_list="" if not names else node_list,
        node_names=names,
        partition=str(job.get("partition") or ""),
        user=str(job.get("user") or ""),
        state=state,
        energy_j=energy,
        cpus=cpus,
        group=str(job.get("group") or ""),
        name=str(job.get("name") or ""),
        where=where,
    )


# --------------------------------------------------------------------------- text


def parse_sacct_text(text: str, source: str = "sacct -P", *, tz: tzinfo | None = None) -> list[AcctJob]:
    """Jobs of ``sacct -P`` output with its header line (see :data:`SACCT_REQUIRED`).

    Step lines (``JobIDRaw`` such as ``12.batch``) add their ``ConsumedEnergyRaw`` to
    their job's when the job line has none. ``tz`` is the zone of the times
    (``None``: this host's).

    Raises
    ------
    TraceError
        Naming ``source``, the line (the header is line 1) and the column.
    """
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise TraceError(source, None, "empty; give `sacct -P` output with its header line")
    header = [h.strip() for h in lines[first].split("|")]
    missing = [c for c in SACCT_REQUIRED if c not in header]
    if missing:
        hint = "" if "|" in lines[first] else " (is this `sacct -P` output? its header line comes first; no -n)"
        raise TraceError(source, first + 1, f"missing column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)}{hint}; run sacct -a -X -P --format={SACCT_FORMAT}", missing[0])
    col = {name: i for i, name in enumerate(header)}
    jobs: dict[int, AcctJob] = {}
    step_energy: dict[int, float] = {}
    for no, line in enumerate(lines[first + 1:], first + 2):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != len(header):
            raise TraceError(source, no, f"expected {len(header)} fields as in the header, got {len(parts)}")

        def cell(name: str, parts=parts) -> str:
            return parts[col[name]].strip() if name in col else ""

        raw_id = cell("JobIDRaw")
        base, dot, _step = raw_id.partition(".")
        try:
            job_id = int(base.split("_")[0].split("+")[0])
        except ValueError:
            raise TraceError(source, no, f"not a job id: {raw_id!r}", "JobIDRaw") from None
        energy = _text_energy(cell("ConsumedEnergyRaw"), source, no)
        if dot:
            if energy is not None:
                step_energy[job_id] = step_energy.get(job_id, 0.0) + energy
            continue
        try:
            nnodes = int(cell("NNodes") or 0)
        except ValueError:
            raise TraceError(source, no, f"not a node count: {cell('NNodes')!r}", "NNodes") from None
        limit = cell("TimelimitRaw")
        if limit.isdigit():
            limit_s = float(limit) * 60.0
        elif limit in _NO_LIMIT:
            limit_s = None
        else:
            raise TraceError(source, no, f"expected minutes (or UNLIMITED, Partition_Limit), got {limit!r}",
                             "TimelimitRaw")
        node_list = cell("NodeList")
        try:
            names = hostlist.expand(node_list) if node_list != "None assigned" else ()
        except ValueError as exc:
            raise TraceError(source, no, str(exc), "NodeList") from None
        cpus = cell("AllocCPUS")
        jobs[job_id] = AcctJob(
            job_id=job_id,
            submit=_text_time(cell("Submit"), source, no, "Submit", tz),
            start=_text_time(cell("Start"), source, no, "Start", tz),
            end=_text_time(cell("End"), source, no, "End", tz),
            time_limit_s=limit_s,
            nodes=nnodes,
            node_list=node_list if names else "",
            node_names=names,
            partition=cell("Partition"),
            user=cell("User"),
            state=cell("State").split(" ")[0],  # "CANCELLED by 0"
            energy_j=energy,
            cpus=int(cpus) if cpus.isdigit() and int(cpus) > 0 else None,
            group=cell("Group"),
            name=cell("JobName"),
            where=f"line {no}",
        )
    for job_id, energy in step_energy.items():
        job = jobs.get(job_id)
        if job is not None and job.energy_j is None:
            jobs[job_id] = _replace_energy(job, energy)
    return list(jobs.values())


def _replace_energy(job: AcctJob, energy: float) -> AcctJob:
    from dataclasses import replace

    return replace(job, energy_j=energy)


def _text_time(value: str, source: str, line: int, key: str, tz: tzinfo | None) -> float | None:
    if value in _NO_TIME:
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        raise TraceError(source, line, f"not a time: {value!r} (expected YYYY-MM-DDTHH:MM:SS)", key) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=tz) if tz is not None else stamp.astimezone()
    return stamp.timestamp()


def _text_energy(value: str, source: str, line: int) -> float | None:
    if value in ("", "0"):
        return None  # Slurm prints 0 without energy accounting
    try:
        joules = float(value)
    except ValueError:
        raise TraceError(source, line, f"expected joules, got {value!r}", "ConsumedEnergyRaw") from None
    if not math.isfinite(joules) or joules < 0:
        raise TraceError(source, line, f"expected joules >= 0, got {value!r}", "ConsumedEnergyRaw")
    return joules or None


def only_ran(jobs: Iterable[AcctJob]) -> list[AcctJob]:
    """The jobs that started and ended, by start time (then id)."""
    return sorted((j for j in jobs if j.ran), key=lambda j: (j.start, j.job_id))
