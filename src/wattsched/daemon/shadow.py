"""Shadow mode's record: what a dry-running daemon observed, cycle by cycle, for counterfactual replays.

``wattsched daemon --shadow`` decides as in dry-run and, each cycle, appends to
the state store (in one transaction with the cycle's job events, so a daemon
killed mid-cycle loses that cycle and nothing before it):

``shadow_cycles``
    One row a cycle: its time, the managed nodes (a hostlist and
    each node's CPUs, through ``shadow_nodesets``), the node states that changed since the previous row
    (every node's on the first row after a start and on the oldest row kept),
    the measured power of each node (a list in the nodes' order, ``null``
    where none was fresh), the platform power the daemon decided at (measured
    where fresh, estimated elsewhere), the cap in force and the demand-response
    events in force.
``shadow_jobs``
    Job events as the daemon first saw them: ``submit`` (submit time,
    requested nodes, time limit, CPUs, user, partition), ``start`` (Slurm's
    start time, node count and node list), ``end`` (Slurm's end time, or the
    cycle a job vanished in, and its state).

Cycles older than ``shadow_retention_s`` are deleted as new ones come, with
the events of jobs that ended before the oldest cycle kept. :func:`read_record` reads it back,
checking every row (an error names the file, the table and the row);
:func:`replay_inputs` turns a window of it into accounting records for
:func:`~wattsched.daemon.traceimport.import_accounting` and the live schedule
for the side-by-side of ``wattsched shadow replay``; :func:`record_accounting`
gives every recorded job as Slurm ran it, the accounting ``traces import
--shadow-record`` reads on a cluster without slurmdbd.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wattsched.daemon.slurm import hostlist
from wattsched.daemon.slurm.sacct import AcctJob
from wattsched.daemon.store import StoreError

__all__ = [
    "SHADOW_SCHEMA",
    "CycleObservation",
    "JobEvent",
    "RecordedCycle",
    "ShadowRecord",
    "ShadowRecorder",
    "job_events",
    "read_record",
    "record_accounting",
    "record_summary",
    "replay_inputs",
]

SHADOW_SCHEMA = """
CREATE TABLE IF NOT EXISTS shadow_nodesets (
    id INTEGER PRIMARY KEY AUTOINCREMENT, names TEXT NOT NULL, cpus TEXT NOT NULL, UNIQUE (names, cpus));
CREATE TABLE IF NOT EXISTS shadow_cycles (
    id INTEGER PRIMARY KEY AUTOINCREMENT, cycle INTEGER NOT NULL, time REAL NOT NULL, nodeset INTEGER NOT NULL,
    states TEXT NOT NULL, power TEXT, power_w REAL, cap_w REAL, dr TEXT);
CREATE INDEX IF NOT EXISTS shadow_cycles_time ON shadow_cycles(time);
CREATE TABLE IF NOT EXISTS shadow_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, cycle_id INTEGER NOT NULL, job_id INTEGER NOT NULL, event TEXT NOT NULL,
    time REAL NOT NULL, nodes INTEGER, node_list TEXT, limit_s REAL, cpus INTEGER, user TEXT, partition TEXT,
    state TEXT);
CREATE INDEX IF NOT EXISTS shadow_jobs_job ON shadow_jobs(job_id);
"""

EVENTS = ("submit", "start", "end")
_RUNNING = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED"})
_PENDING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "CONFIGURING"})


@dataclass(frozen=True)
class JobEvent:
    """One event of a job: ``submit``, ``start`` or ``end`` at ``time`` (epoch s)."""

    job_id: int
    event: str
    time: float
    nodes: int | None = None
    node_list: str = ""
    limit_s: float | None = None
    cpus: int | None = None
    user: str = ""
    partition: str = ""
    state: str = ""


@dataclass(frozen=True)
class CycleObservation:
    """What one cycle saw: node states and measured watts by node, the power decided at, cap and events in force.

    ``dr`` holds ``(label, start_s, end_s, cap_w)`` of each demand-response event in force.
    """

    time: float
    states: Mapping[str, str]
    power: Mapping[str, float] = field(default_factory=dict)
    cpus: Mapping[str, int] = field(default_factory=dict)
    power_w: float | None = None
    cap_w: float | None = None
    dr: tuple[tuple[str, float, float, float], ...] = ()


@dataclass(frozen=True)
class RecordedCycle:
    """A cycle read back: ``states`` are every node's (the changes folded in), ``power`` the measured ones."""

    row: int
    cycle: int
    time: float
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    states: dict[str, str]
    power: dict[str, float]
    power_w: float | None
    cap_w: float | None
    dr: tuple[tuple[str, float, float, float], ...]


@dataclass
class ShadowRecord:
    """The record read back: cycles in order, and each job's events in order."""

    path: Path
    cycles: list[RecordedCycle]
    jobs: dict[int, list[JobEvent]]

    @property
    def window(self) -> tuple[float, float] | None:
        return (self.cycles[0].time, self.cycles[-1].time) if self.cycles else None


# --------------------------------------------------------------------------- observing


def job_events(last: dict[int, str], jobs: Iterable, now: float, skipped: Iterable[int] = (),
               since: float | None = None) -> list[JobEvent]:
    """The events of this cycle's Slurm jobs against ``last`` (job id to its last recorded event), which is updated.

    A job seen for the first time is submitted, unless it ended before
    ``since`` (when the record began: Slurm lists finished jobs for
    ``MinJobAge``, and what ran before the record is not part of it); a running job whose last event
    is not ``start`` started (again, after a requeue); a job that finished, was
    requeued, or is no longer listed (but for ``skipped``, records Slurm sent
    that could not be read) ended. Jobs whose end is recorded and that Slurm no
    longer lists are forgotten.

    >>> from wattsched.daemon.slurm.records import SlurmJob
    >>> last = {}
    >>> [e.event for e in job_events(last, [SlurmJob(7, "RUNNING", submit_time=1.0, start_time=2.0,
    ...                                               nodes=("n1",))], 3.0)]
    ['submit', 'start']
    >>> [(e.event, e.time, e.state) for e in job_events(last, [], 9.0)]
    [('end', 9.0, 'GONE')]
    >>> last  # ended and no longer listed: forgotten
    {}
    """
    out: list[JobEvent] = []
    seen = set()
    for job in jobs:
        jid = job.job_id
        seen.add(jid)
        prev = last.get(jid)
        state = job.state
        if prev is None:
            if state not in _RUNNING and state not in _PENDING:
                if not job.nodes:
                    continue  # ended without running before it was ever seen: nothing to replay
                if since is not None and job.end_time is not None and job.end_time < since:
                    continue  # ended before the record began
            out.append(JobEvent(jid, "submit", _finite(job.submit_time, now), job.node_count, "",
                                job.time_limit_s, job.cpus or None, job.user, job.partition, state))
            prev = "submit"
        if state in _RUNNING:
            if prev != "start":
                out.append(JobEvent(jid, "start", _finite(job.start_time, now), len(job.nodes) or job.node_count,
                                    hostlist.compress(job.nodes), state=state))
                prev = "start"
        elif state not in _PENDING:
            if prev == "start" or prev == "submit":
                started = prev == "start" or bool(job.nodes)
                if prev == "submit" and job.start_time is not None and job.nodes:  # ran between two cycles
                    out.append(JobEvent(jid, "start", job.start_time, len(job.nodes) or job.node_count,
                                        hostlist.compress(job.nodes), state=state))
                out.append(JobEvent(jid, "end", _finite(job.end_time, now) if started else now, state=state))
                prev = "end"
        elif prev == "start":  # requeued: the run ended, the job queues again
            out.append(JobEvent(jid, "end", _finite(job.end_time, now), state=state))
            prev = "submit"
        last[jid] = prev
    skip = set(skipped)
    for jid in [j for j in last if j not in seen]:
        if last[jid] != "end" and jid not in skip:
            out.append(JobEvent(jid, "end", now, state="GONE"))
            last[jid] = "end"
        if last[jid] == "end":
            del last[jid]
    return out


def _finite(value: float | None, default: float) -> float:
    return value if value is not None and math.isfinite(value) and value > 0 else default


class ShadowRecorder:
    """Appends cycles to the record in ``db`` (a connection to the state store, autocommit mode).

    ``path`` names the file in errors. The jobs' last events are read back at
    start, so a restarted daemon goes on where the record ends.
    """

    def __init__(self, db: sqlite3.Connection, path: str | Path):
        self.db = db
        self.path = Path(path)
        self.db.executescript(SHADOW_SCHEMA)
        self.last: dict[int, str] = {
            r[0]: ("submit" if r[1] == "end" and r[2] in _PENDING else r[1])
            for r in db.execute("SELECT job_id, event, state FROM shadow_jobs WHERE id IN "
                                "(SELECT MAX(id) FROM shadow_jobs GROUP BY job_id)")
        }
        last_cycle = db.execute("SELECT MAX(time) FROM shadow_cycles").fetchone()[0]
        self.began_s: float | None = last_cycle  # jobs that ended before this are not recorded (see job_events)
        self._states: dict[str, str] | None = None  # the states as last written (None: write them all)
        self._nodesets: dict[tuple[str, str], int] = {}

    def since(self, now: float) -> float:
        """When the record began: the last recorded cycle of an earlier run of the daemon, else this first cycle."""
        if self.began_s is None:
            self.began_s = now
        return self.began_s

    def record(self, cycle: int, obs: CycleObservation, events: Sequence[JobEvent], retention_s: float) -> None:
        """Write one cycle and its job events in one transaction, then delete what is older than ``retention_s``."""
        nodes = tuple(sorted(obs.states, key=_node_key))
        names = hostlist.compress(nodes) if nodes else ""
        cpus = _dumps([int(obs.cpus.get(n, 0)) for n in nodes])
        if self._states is None:
            changed = dict(obs.states)
        else:
            changed = {n: s for n, s in obs.states.items() if self._states.get(n) != s}
        power = [None if obs.power.get(n) is None else round(float(obs.power[n]), 1) for n in nodes]
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            nodeset = self._nodesets.get((names, cpus))
            if nodeset is None:
                self.db.execute("INSERT OR IGNORE INTO shadow_nodesets (names, cpus) VALUES (?, ?)", (names, cpus))
                nodeset = self.db.execute("SELECT id FROM shadow_nodesets WHERE names=? AND cpus=?",
                                          (names, cpus)).fetchone()[0]
                self._nodesets[(names, cpus)] = nodeset
            cur = self.db.execute(
                "INSERT INTO shadow_cycles (cycle, time, nodeset, states, power, power_w, cap_w, dr) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (cycle, obs.time, nodeset, _dumps(changed),
                 _dumps(power) if any(p is not None for p in power) else None,
                 _num(obs.power_w), _num(obs.cap_w), _dumps([list(d) for d in obs.dr]) if obs.dr else None))
            row = cur.lastrowid
            self.db.executemany(
                "INSERT INTO shadow_jobs (cycle_id, job_id, event, time, nodes, node_list, limit_s, cpus, user, "
                "partition, state) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [(row, e.job_id, e.event, e.time, e.nodes, e.node_list or None, _num(e.limit_s), e.cpus,
                  e.user or None, e.partition or None, e.state or None) for e in events])
            if prune(self.db, obs.time - retention_s, self.path):
                self._nodesets.clear()
        self._states = dict(obs.states)


def _node_key(name: str):
    """Natural order of node names (``n2`` before ``n10``)."""
    import re

    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _num(value) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def prune(db: sqlite3.Connection, cutoff: float, path: str | Path = "state.db") -> int:
    """Delete cycles before ``cutoff`` (epoch s) and the events of jobs that ended before; returns cycles deleted.

    The oldest cycle kept gets every node's state, so that the record still
    reads from its first row. Runs inside the caller's transaction.
    """
    first = db.execute("SELECT MIN(id) FROM shadow_cycles WHERE time >= ?", (cutoff,)).fetchone()[0]
    if first is None:
        first = db.execute("SELECT MAX(id) FROM shadow_cycles").fetchone()[0]
        if first is None:
            return 0
    old = db.execute("SELECT COUNT(*) FROM shadow_cycles WHERE id < ?", (first,)).fetchone()[0]
    if not old:
        return 0
    states: dict[str, str] = {}
    nodes: tuple[str, ...] = ()
    for row, nodeset, text in db.execute("SELECT c.id, n.names, c.states FROM shadow_cycles c LEFT JOIN "
                                         "shadow_nodesets n ON n.id = c.nodeset WHERE c.id <= ? ORDER BY c.id",
                                         (first,)):
        states.update(_states_of(text, path, row))
        nodes = _nodes_of(nodeset, path, row)
    db.execute("UPDATE shadow_cycles SET states=? WHERE id=?",
               (_dumps({n: states[n] for n in nodes if n in states}), first))
    db.execute("DELETE FROM shadow_cycles WHERE id < ?", (first,))
    # jobs whose last event is an end before the kept cycles (not a requeue: that job waits again); a job
    # still waiting keeps its submission however old, and one that vanished while the daemon was down gets
    # its end at the next start (the recorder reads the jobs' last events back)
    pending = ",".join(f"'{s}'" for s in sorted(_PENDING))
    db.execute("DELETE FROM shadow_jobs WHERE job_id IN (SELECT job_id FROM shadow_jobs WHERE id IN (SELECT MAX(id) "
               f"FROM shadow_jobs GROUP BY job_id) AND event = 'end' AND COALESCE(state, '') NOT IN ({pending}) "
               "AND cycle_id < ?)", (first,))
    db.execute("DELETE FROM shadow_nodesets WHERE id NOT IN (SELECT DISTINCT nodeset FROM shadow_cycles)")
    return old


# --------------------------------------------------------------------------- reading back


def _bad(path, table: str, row, what: str) -> StoreError:
    return StoreError(f"{path}: {table} row {row}: {what}; the shadow record is damaged (delete its rows, or the "
                      "state store, to start a new record)")


def _json(text, path, table, row, column):
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise _bad(path, table, row, f"{column}: not JSON ({exc})") from None


def _states_of(text, path, row) -> dict[str, str]:
    value = _json(text, path, "shadow_cycles", row, "states")
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _bad(path, "shadow_cycles", row, "states: not an object of node names to states")
    return value


def _nodes_of(names, path, row) -> tuple[str, ...]:
    if names is None:
        raise _bad(path, "shadow_cycles", row, "nodeset: no such node set")
    try:
        return hostlist.expand(names)
    except ValueError as exc:
        raise _bad(path, "shadow_nodesets", row, f"names: {exc}") from None


def _real(value, path, table, row, column, *, optional: bool = True) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(path, table, row, f"{column}: {value!r} is not a finite number")
    return float(value)


def read_record(db: sqlite3.Connection, path: str | Path, since: float | None = None,
                until: float | None = None) -> ShadowRecord:
    """The record between ``since`` and ``until`` (epoch s; ``None``: its start or end), every row checked.

    The cycles before ``since`` are read too (for the node states in force at
    ``since``) but not returned; job events are returned whole (the replay
    needs a job's submission from before the window).

    Raises
    ------
    StoreError
        A row is malformed (a value of the wrong type, JSON that does not parse, a cut-short list), naming the
        file, the table and the row; or the store has no shadow record.
    """
    path = Path(path)
    try:
        rows = list(db.execute(
            "SELECT c.id, c.cycle, c.time, n.names, n.cpus, c.states, c.power, c.power_w, c.cap_w, c.dr "
            "FROM shadow_cycles c "
            "LEFT JOIN shadow_nodesets n ON n.id = c.nodeset ORDER BY c.id"))
        job_rows = list(db.execute("SELECT id, job_id, event, time, nodes, node_list, limit_s, cpus, user, partition, "
                                   "state FROM shadow_jobs ORDER BY id"))
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            raise StoreError(f"{path}: no shadow record; run the daemon with --shadow (config key shadow: true) "
                             "to record one") from None
        raise
    cycles: list[RecordedCycle] = []
    states: dict[str, str] = {}
    previous = -math.inf
    for row, cycle, time, names, cpus_text, text, power, power_w, cap_w, dr in rows:
        t = _real(time, path, "shadow_cycles", row, "time", optional=False)
        if t < previous:
            raise _bad(path, "shadow_cycles", row, f"time: {t} is before the previous row's {previous}")
        previous = t
        nodes = _nodes_of(names, path, row)
        cpus = _json(cpus_text, path, "shadow_cycles", row, "nodeset cpus")
        if not isinstance(cpus, list) or len(cpus) != len(nodes) or not all(
                isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
            raise _bad(path, "shadow_cycles", row, f"nodeset cpus: not a list of {len(nodes)} CPU counts")
        states.update(_states_of(text, path, row))
        missing = [n for n in nodes if n not in states]
        if missing:
            raise _bad(path, "shadow_cycles", row, f"states: no state recorded for node {missing[0]}")
        watts: dict[str, float] = {}
        if power is not None:
            values = _json(power, path, "shadow_cycles", row, "power")
            if not isinstance(values, list) or len(values) != len(nodes):
                raise _bad(path, "shadow_cycles", row, f"power: not a list of {len(nodes)} values (one a node)")
            for n, w in zip(nodes, values, strict=True):
                w = _real(w, path, "shadow_cycles", row, "power")
                if w is not None:
                    watts[n] = w
        events: list[tuple[str, float, float, float]] = []
        if dr is not None:
            value = _json(dr, path, "shadow_cycles", row, "dr")
            if not isinstance(value, list):
                raise _bad(path, "shadow_cycles", row, "dr: not a list of events")
            for e in value:
                if not (isinstance(e, list) and len(e) == 4 and isinstance(e[0], str)):
                    raise _bad(path, "shadow_cycles", row, "dr: an event is not [label, start_s, end_s, cap_w]")
                events.append((e[0], *(_real(x, path, "shadow_cycles", row, "dr", optional=False) for x in e[1:])))
        if (since is None or t >= since) and (until is None or t <= until):
            cycles.append(RecordedCycle(row, int(cycle), t, nodes, tuple(cpus), {n: states[n] for n in nodes},
                                        watts,
                                        _real(power_w, path, "shadow_cycles", row, "power_w"),
                                        _real(cap_w, path, "shadow_cycles", row, "cap_w"), tuple(events)))
    jobs: dict[int, list[JobEvent]] = {}
    for row, job_id, event, time, nodes, node_list, limit_s, cpus, user, partition, state in job_rows:
        if event not in EVENTS:
            raise _bad(path, "shadow_jobs", row, f"event: {event!r} is not one of {', '.join(EVENTS)}")
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            raise _bad(path, "shadow_jobs", row, f"job_id: {job_id!r} is not a job id")
        for column, value in (("nodes", nodes), ("cpus", cpus)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise _bad(path, "shadow_jobs", row, f"{column}: {value!r} is not a count")
        if node_list is not None:
            try:
                expanded = hostlist.expand(node_list)
            except (ValueError, TypeError) as exc:
                raise _bad(path, "shadow_jobs", row, f"node_list: {exc}") from None
            if nodes is not None and len(expanded) != nodes:
                raise _bad(path, "shadow_jobs", row, f"node_list: {len(expanded)} nodes, nodes says {nodes}")
        jobs.setdefault(job_id, []).append(JobEvent(
            job_id, event, _real(time, path, "shadow_jobs", row, "time", optional=False), nodes, node_list or "",
            _real(limit_s, path, "shadow_jobs", row, "limit_s"), cpus, user or "", partition or "", state or ""))
    return ShadowRecord(path, cycles, jobs)


def record_summary(db: sqlite3.Connection) -> dict | None:
    """Cycles, window, jobs and bytes of the record (``None``: no record)."""
    try:
        n, first, last, size = db.execute(
            "SELECT COUNT(*), MIN(time), MAX(time), COALESCE(SUM(LENGTH(states) + COALESCE(LENGTH(power), 0) + "
            "COALESCE(LENGTH(dr), 0) + 40), 0) FROM shadow_cycles").fetchone()
        jobs, job_size = db.execute(
            "SELECT COUNT(DISTINCT job_id), COALESCE(SUM(COALESCE(LENGTH(node_list), 0) + COALESCE(LENGTH(user), 0) "
            "+ COALESCE(LENGTH(partition), 0) + 60), 0) FROM shadow_jobs").fetchone()
    except sqlite3.OperationalError:
        return None
    if not n:
        return None
    return {"cycles": n, "start": first, "end": last, "jobs": jobs, "bytes": int(size + job_size)}


# --------------------------------------------------------------------------- replay inputs


@dataclass
class LiveJob:
    """A job of the replay window as it really ran (epoch s); ``hot``: running when the window began."""

    job_id: int
    submit: float
    start: float
    end: float
    nodes: int
    node_list: str
    hot: bool


@dataclass
class ReplayInputs:
    acct: list[AcctJob]
    live: list[LiveJob]
    window: tuple[float, float]
    notes: list[str]


def replay_inputs(record: ShadowRecord, cores_per_node: int = 1) -> ReplayInputs:
    """Accounting records of the jobs the window of ``record`` replays, and how they really ran.

    Jobs running when the window begins are submitted and started at its
    start, with the rest of their run (the replay's hot start); jobs waiting
    then are submitted at its start, in their order; jobs still running at its
    end end there; jobs that never started in the window are left out (their
    run time is unknown), and counted in ``notes``.
    """
    if not record.cycles:
        raise StoreError(f"{record.path}: the shadow record has no cycles in the window asked for")
    w0, w1 = record.window
    acct: list[AcctJob] = []
    live: list[LiveJob] = []
    never = cut = 0
    for job_id, events in sorted(record.jobs.items()):
        submit = next((e for e in events if e.event == "submit"), None)
        last_start = max((i for i, e in enumerate(events) if e.event == "start"), default=None)
        start = None if last_start is None else events[last_start]
        end = None if last_start is None else next((e for e in events[last_start + 1:] if e.event == "end"), None)
        t_submit = submit.time if submit is not None else (start.time if start is not None else events[0].time)
        if t_submit > w1:
            continue
        if start is None or start.time > w1:
            if end is None:  # (with an end and no start: cancelled while waiting)
                never += 1
            continue
        t_end = end.time if end is not None else w1
        if t_end <= w0:
            continue
        if end is None or t_end > w1:
            cut += 1
            t_end = min(t_end, w1)
        hot = start.time < w0
        t_start = max(start.time, w0)
        s = max(min(t_submit, t_start), w0)
        nodes = start.nodes or (submit.nodes if submit is not None else None) or 1
        cpus = submit.cpus if submit is not None and submit.cpus else nodes * cores_per_node
        limit = submit.limit_s if submit is not None else None
        acct.append(AcctJob(job_id, s, t_start, t_end, limit, nodes, start.node_list,
                            hostlist.expand(start.node_list), submit.partition if submit else "",
                            submit.user if submit else "", (end.state if end is not None else "RUNNING") or "COMPLETED",
                            cpus=cpus, where=f"{record.path}: shadow_jobs job {job_id}"))
        live.append(LiveJob(job_id, s, t_start, t_end, nodes, start.node_list, hot))
    notes = []
    if never:
        notes.append(f"{never} jobs waited through the window without starting; they are left out (their run time "
                     "is unknown)")
    if cut:
        notes.append(f"{cut} jobs ran on past the end of the record; their run ends there")
    return ReplayInputs(acct, live, (w0, w1), notes)


def record_accounting(record: ShadowRecord, since: float | None = None,
                      until: float | None = None) -> list[AcctJob]:
    """Every recorded job as Slurm ran it (its last run), as accounting records; unclipped, unlike the replay's.

    A job is kept when it was submitted by ``until`` and did not end before
    ``since`` (epoch s; ``None``: no bound). Times are Slurm's own, as the
    daemon read them (``squeue --json``): the submission, the last start and
    the end after it. A job that never started has ``start`` ``None``; one
    still running has ``end`` ``None``
    (:func:`~wattsched.daemon.traceimport.import_accounting` counts both as
    skipped); a job the daemon saw vanish without its end has the cycle it
    vanished in as its end, and the state ``GONE``.

    >>> from pathlib import Path
    >>> events = [JobEvent(7, "submit", 10.0, 2, limit_s=120.0, cpus=4, user="alice", partition="batch"),
    ...           JobEvent(7, "start", 12.0, 2, "n[1-2]"), JobEvent(7, "end", 19.0, state="COMPLETED")]
    >>> [job] = record_accounting(ShadowRecord(Path("state.db"), [], {7: events}))
    >>> job.submit, job.start, job.end, job.node_names, job.cpus, job.state
    (10.0, 12.0, 19.0, ('n1', 'n2'), 4, 'COMPLETED')
    >>> record_accounting(ShadowRecord(Path("state.db"), [], {7: events}), since=20.0)
    []
    """
    out: list[AcctJob] = []
    for job_id, events in sorted(record.jobs.items()):
        submit = next((e for e in events if e.event == "submit"), None)
        last_start = max((i for i, e in enumerate(events) if e.event == "start"), default=None)
        start = None if last_start is None else events[last_start]
        end = None if last_start is None else next((e for e in events[last_start + 1:] if e.event == "end"), None)
        if end is None and last_start is None:  # cancelled while waiting: its end is the job's
            end = next((e for e in events if e.event == "end"), None)
        t_submit = submit.time if submit is not None else (start.time if start is not None else events[0].time)
        if until is not None and t_submit > until:
            continue
        if since is not None and end is not None and end.time < since:
            continue
        nodes = (start.nodes if start is not None else None) or (submit.nodes if submit is not None else None) or 0
        node_list = start.node_list if start is not None else ""
        state = (end.state if end is not None else start.state if start is not None else
                 submit.state if submit is not None else "") or "COMPLETED"
        out.append(AcctJob(job_id, t_submit, start.time if start is not None else None,
                           end.time if end is not None and start is not None else None,
                           submit.limit_s if submit is not None else None, nodes, node_list,
                           hostlist.expand(node_list), submit.partition if submit is not None else "",
                           submit.user if submit is not None else "", state,
                           cpus=submit.cpus if submit is not None else None,
                           where=f"{record.path}: shadow_jobs job {job_id}"))
    return out


class RecordedPower:
    """Per-node power of a job from the record's measured node power (the ``job_power`` of a Prometheus source)."""

    def __init__(self, record: ShadowRecord):
        self.times = [c.time for c in record.cycles]
        self.power = [c.power for c in record.cycles]

    def job_power(self, nodes: Sequence[str], start: float, end: float, step_s: float = 0.0):
        """Mean, max and std over the cycles in ``[start, end]`` of the per-node mean of ``nodes``' power.

        >>> from types import SimpleNamespace as C
        >>> cycles = [C(time=float(t), power={"n1": 217.8}) for t in range(3)]
        >>> mean, mx, _ = RecordedPower(C(cycles=cycles)).job_power(["n1"], 0.0, 2.0)
        >>> mean <= mx == 217.8
        True
        """
        import bisect

        lo, hi = bisect.bisect_left(self.times, start), bisect.bisect_right(self.times, end)
        samples = []
        for p in self.power[lo:hi]:
            have = [p[n] for n in nodes if n in p]
            if len(have) == len(nodes) and have:
                samples.append(sum(have) / len(have))
        if not samples:
            return None
        mx = max(samples)
        mean = min(sum(samples) / len(samples), mx)  # equal samples can sum to a mean a rounding above them
        std = math.sqrt(sum((x - mean) ** 2 for x in samples) / len(samples))
        return mean, mx, std
