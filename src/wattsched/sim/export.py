"""Export a run's simulated schedule for other tools: SWF (Parallel Workloads Archive) and Batsim/evalys jobs.

Both take a run as :func:`~wattsched.sim.report.load_run` returns it (or a
:class:`~wattsched.sim.result.SimResult`) and write one file.

SWF
---
:func:`write_swf` writes the 18 fields of the Standard Workload Format
(https://www.cs.huji.ac.il/labs/parallel/workload/swf.html) with the simulated
wait time (field 3) and run time (field 4) filled in, sorted by submit time:

* processors (fields 5 and 8) are ``nodes × cores_per_node`` of the run;
* requested time (field 9) is the job's requested walltime;
* status (field 11): 1 completed, 0 killed at its requested time (``TIMEOUT``),
  5 cancelled; a job that never started or never ended (a time limit) has
  wait and run time ``-1`` and status ``-1``;
* user (field 12): the user as given when it is an integer (as in SWF
  traces), otherwise users are numbered 1, 2, ... in order of first
  submission and the header says so;
* times are seconds from the run's ``t = 0`` (integers when they are whole);
  ``UnixStartTime`` gives its epoch time when the trace gave one.

Header comments give the version, the computer (trace, policy), ``MaxJobs``,
``MaxRecords``, ``MaxNodes``, ``MaxProcs`` and notes. The project's own reader
(:func:`~wattsched.workload.swf.read_swf`) reads the file back.

Batsim / evalys jobs
--------------------
:func:`write_batsim_jobs` writes the columns of Batsim's ``_jobs.csv`` that
evalys' ``JobSet.from_csv`` reads (``job_id``, ``workload_name``,
``submission_time``, ``requested_number_of_resources``, ``requested_time``,
``success``, ``final_state``, ``starting_time``, ``execution_time``,
``finish_time``, ``waiting_time``, ``turnaround_time``, ``stretch``,
``allocated_resources``, ``consumed_energy``, ``metadata``), one row per job
that ran. Resources are nodes. The engine does not keep which nodes each job
used, so ``allocated_resources`` is a placement rebuilt from the schedule:
jobs are taken in start order (ends first at equal times) and each gets the
lowest-numbered nodes free at its start, written as an interval set
(``0-3 8``). It respects every job's node count and times and never
double-books a node; it is not necessarily the engine's own node choice.
Jobs that did not run to their end (never started, or still running when a
time limit stopped the run) have no row: a warning says how many were left
out, and SWF keeps them with wait and run time ``-1``.

Jobs for spreadsheets
---------------------
:func:`write_jobs_csv_safe` writes the run's job table (the columns and rows of
``jobs.csv``) with every text cell that a spreadsheet would read as a formula
(one starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return, as in
OWASP's CSV injection guidance) prefixed with a single quote. Numbers are
written as in ``jobs.csv``; ``jobs.csv`` itself keeps the exact text of the
trace.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FORMULA_STARTS", "rebuild_placement", "spreadsheet_text", "write_batsim_jobs", "write_jobs_csv_safe",
           "write_swf"]

_SWF_STATUS = {"COMPLETED": 1, "TIMEOUT": 0, "CANCELLED": 5}

log = logging.getLogger(__name__)


def _num(x: float) -> str:
    """An SWF number: an integer when whole, else the shortest exact decimal.

    >>> _num(60.0), _num(0.5), _num(float("nan"))
    ('60', '0.5', '-1')
    """
    if not math.isfinite(x):
        return "-1"
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _col(jobs: dict[str, np.ndarray], name: str) -> np.ndarray:
    return np.asarray(jobs[name])


def write_swf(run: Any, path: str | os.PathLike[str]) -> int:
    """Write the simulated schedule of ``run`` as an SWF file; returns the number of jobs written.

    See the module documentation for the fields.
    """
    jobs, info = run.jobs, getattr(run, "info", {}) or {}
    n = len(jobs["id"])
    cores = int(info.get("cores_per_node") or 1)
    nodes_total = int(info.get("nodes") or 0)
    order = np.lexsort((_col(jobs, "id"), _col(jobs, "submit_s")))
    users = [str(u) for u in _col(jobs, "user")]
    numeric = all(u.lstrip("-").isdigit() for u in users)
    if numeric:
        user_ids = [int(u) for u in users]
    else:
        first: dict[str, int] = {}
        for i in order.tolist():
            first.setdefault(users[i], len(first) + 1)
        user_ids = [first[u] for u in users]
    submit, wait, runtime = _col(jobs, "submit_s"), _col(jobs, "wait_s"), _col(jobs, "runtime_s")
    walltime, nodes, states = _col(jobs, "walltime_s"), _col(jobs, "nodes"), _col(jobs, "state")
    header = [
        "; Version: 2.2",
        f"; Computer: wattsched simulation of {info.get('trace', '?')} with policy {info.get('policy', '?')}",
        "; Installation: wattsched trace-replay simulator (simulated schedule)",
        f"; MaxJobs: {n}",
        f"; MaxRecords: {n}",
    ]
    if nodes_total:
        header += [f"; MaxNodes: {nodes_total}", f"; MaxProcs: {nodes_total * cores}"]
    origin = info.get("origin_unix_s")
    if origin is not None and math.isfinite(float(origin)):
        header.append(f"; UnixStartTime: {int(float(origin))}")
    header += [
        "; Note: fields 3 (wait) and 4 (run time) are the simulated schedule; -1 where a job did not run to its end",
        f"; Note: processors = nodes x {cores} cores per node; status 1 completed, 0 killed at its requested time, "
        "5 cancelled",
    ]
    if not numeric:
        header.append("; Note: users are numbered 1, 2, ... in order of first submission (the run named them)")
    lines = header
    for i in order.tolist():
        state = str(states[i])
        finished = state in _SWF_STATUS and math.isfinite(runtime[i]) and math.isfinite(wait[i])
        procs = int(nodes[i]) * cores
        lines.append(" ".join((
            str(int(jobs["id"][i])), _num(submit[i]), _num(wait[i]) if finished else "-1",
            _num(runtime[i]) if finished else "-1", str(procs), "-1", "-1", str(procs), _num(walltime[i]), "-1",
            str(_SWF_STATUS[state]) if finished else "-1", str(user_ids[i]), "-1", "-1", "-1", "-1", "-1", "-1",
        )))
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return n


def rebuild_placement(start_s: np.ndarray, end_s: np.ndarray, nodes: np.ndarray) -> list[list[int] | None]:
    """A node placement for a schedule: each job gets the lowest-numbered nodes free at its start.

    Jobs with no finite start and end get ``None``. Ends are processed before
    starts at equal times. The schedule must never use more nodes at once than
    it has (every simulated schedule satisfies this).

    >>> rebuild_placement(np.array([0.0, 0.0, 5.0]), np.array([10.0, 5.0, 9.0]), np.array([2, 1, 1]))
    [[0, 1], [2], [2]]
    >>> rebuild_placement(np.array([0.0, 3.0, 3.0]), np.array([3.0, 3.0, 4.0]), np.array([1, 1, 1]))
    [[0], [0], [0]]
    """
    n = len(start_s)
    placed: list[list[int] | None] = [None] * n
    ran = [i for i in range(n) if math.isfinite(start_s[i]) and math.isfinite(end_s[i])]
    # a job that ends when it starts gets its nodes and gives them back at its start event
    events = sorted([(float(end_s[i]), 0, i) for i in ran if end_s[i] > start_s[i]]
                    + [(float(start_s[i]), 1, i) for i in ran])
    free: list[int] = []  # released node ids; new ids are handed out above the highest used so far
    next_id = 0
    for _, kind, i in events:
        if kind == 0:
            for node in placed[i] or ():
                heapq.heappush(free, node)
            continue
        k = int(nodes[i])
        got = [heapq.heappop(free) for _ in range(min(k, len(free)))]
        while len(got) < k:
            got.append(next_id)
            next_id += 1
        got.sort()
        placed[i] = got
        if not end_s[i] > start_s[i]:
            for node in got:
                heapq.heappush(free, node)
    return placed


def _interval_set(ids: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2 5"`` (Batsim's interval-set text).

    >>> _interval_set([0, 1, 2, 5, 7, 8])
    '0-2 5 7-8'
    """
    parts = []
    lo = prev = ids[0]
    for x in ids[1:]:
        if x != prev + 1:
            parts.append(f"{lo}-{prev}" if prev > lo else str(lo))
            lo = x
        prev = x
    parts.append(f"{lo}-{prev}" if prev > lo else str(lo))
    return " ".join(parts)


def write_batsim_jobs(run: Any, path: str | os.PathLike[str]) -> int:
    """Write the jobs of ``run`` that ran as a Batsim ``_jobs.csv`` that evalys reads; returns the row count.

    Jobs that did not run to their end are left out, with a warning that says how many.
    """
    import pyarrow as pa

    from wattsched.workload.tables import write_csv_table

    jobs, info = run.jobs, getattr(run, "info", {}) or {}
    start, end = _col(jobs, "start_s").astype(float), _col(jobs, "end_s").astype(float)
    placement = rebuild_placement(start, end, _col(jobs, "nodes"))
    keep = np.array([p is not None for p in placement], dtype=bool)
    idx = np.flatnonzero(keep)
    if idx.size < keep.size:
        never = int(np.sum(~np.isfinite(start)))
        log.warning("left out %d of %d jobs that did not run to their end (%d never started, %d still running "
                    "when the run stopped): Batsim's jobs table holds finished jobs only; "
                    "`--format swf` keeps them with wait and run time -1",
                    keep.size - idx.size, keep.size, never, keep.size - idx.size - never)
    submit = _col(jobs, "submit_s").astype(float)[idx]
    s, e = start[idx], end[idx]
    execution = e - s
    turnaround = e - submit
    with np.errstate(divide="ignore", invalid="ignore"):
        stretch = np.where(execution > 0, turnaround / execution, np.nan)
    states = _col(jobs, "state")[idx].astype(str)
    table = pa.table({
        "job_id": pa.array(_col(jobs, "id")[idx].astype(np.int64)),
        "workload_name": pa.array([str(info.get("trace", "w"))] * idx.size, type=pa.string()),
        "submission_time": submit,
        "requested_number_of_resources": _col(jobs, "nodes")[idx].astype(np.int64),
        "requested_time": _col(jobs, "walltime_s").astype(float)[idx],
        "success": (states == "COMPLETED").astype(np.int64),
        "final_state": pa.array(np.where(states == "COMPLETED", "COMPLETED_SUCCESSFULLY",
                                         np.where(states == "TIMEOUT", "COMPLETED_WALLTIME_REACHED",
                                                  "COMPLETED_KILLED")).tolist(), type=pa.string()),
        "starting_time": s,
        "execution_time": execution,
        "finish_time": e,
        "waiting_time": s - submit,
        "turnaround_time": turnaround,
        "stretch": stretch,
        "allocated_resources": pa.array([_interval_set(placement[i]) for i in idx.tolist()], type=pa.string()),
        "consumed_energy": _col(jobs, "energy_j").astype(float)[idx],
        "metadata": pa.array([""] * idx.size, type=pa.string()),
    })
    write_csv_table(table, path)
    return table.num_rows


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (OWASP, *CSV Injection*)."""


def spreadsheet_text(text: str) -> str:
    r"""``text`` as a spreadsheet shows it as text: a single quote before a leading formula character.

    >>> spreadsheet_text('=HYPERLINK("http://x","y")'), spreadsheet_text("alice"), spreadsheet_text("-2+3")
    ('\'=HYPERLINK("http://x","y")', 'alice', "'-2+3")
    """
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def write_jobs_csv_safe(run: Any, path: str | os.PathLike[str]) -> tuple[int, int]:
    """Write the job table of ``run`` as ``jobs.csv`` has it, text cells made safe for spreadsheets.

    Returns ``(rows, cells)``: the rows written and the text cells that were prefixed
    (:func:`spreadsheet_text`). Numeric columns are written by the same writer as
    ``jobs.csv``, so their text is the same.
    """
    import pyarrow as pa

    from wattsched.sim.report import jobs_arrow_table
    from wattsched.workload.tables import write_csv_table

    table = jobs_arrow_table(run.jobs)
    changed = 0
    for i, f in enumerate(table.schema):
        if not pa.types.is_string(f.type):
            continue
        values = table.column(i).to_pylist()
        safe = [v if v is None else spreadsheet_text(v) for v in values]
        changed += sum(a != b for a, b in zip(values, safe))
        table = table.set_column(i, f.name, pa.array(safe, type=pa.string()))
    write_csv_table(table, path)
    return table.num_rows, changed
