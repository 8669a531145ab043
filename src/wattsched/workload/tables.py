"""Job tables: one row per job, CSV (plain or gzipped) or Parquet, power columns included.

A job table is the simplest way to hand the simulator a workload that has per-job
power (Marconi100/PM100, site exports, synthetic workloads after augmentation).
:func:`read_job_table` turns one into a :class:`~wattsched.workload.records.Workload`
and :func:`write_job_table` writes jobs back; the two round-trip exactly.

Formats
-------
The format is chosen from the file name: ``.csv`` and ``.csv.gz`` are read
with the standard :mod:`csv` module (UTF-8, a leading BOM tolerated, one header
line, comma separated) and written through pyarrow's CSV writer (strings
quoted, floats in their shortest exact form, gzip level 1); ``.parquet`` and
``.pq`` are read and written with pyarrow.

Columns
-------
Column names are matched case-insensitively, surrounding spaces ignored. Columns
not listed here are ignored (named in :attr:`Workload.notes`).

========================  ========  ===================================================
column                    required  meaning
========================  ========  ===================================================
``id``                    yes       integer job id, unique in the table
``submit_s``              yes       submission time, seconds from the trace origin
``runtime_s``             yes       real run time in seconds (``>= 0``)
``procs`` or ``nodes``    one       processors, whole nodes (``>= 1``); with only
                                    ``procs``, ``nodes = ceil(procs / cores_per_node)``;
                                    with only ``nodes``, ``procs = nodes * cores_per_node``;
                                    a job of ``units`` needs neither
``walltime_s``            no        requested time in seconds; when the column or a
                                    cell is missing: ``default_walltime_s``, else the
                                    run time
``user``, ``group``,      no        strings (numbers are read as their text)
``partition``,
``app_class``
``status``                no        integer (SWF codes: 1 completed, 0 failed,
                                    5 cancelled) or a Slurm state name
                                    (``COMPLETED`` → 1; ``FAILED``, ``TIMEOUT``,
                                    ``NODE_FAIL``, ``OUT_OF_MEMORY``, ``BOOT_FAIL``,
                                    ``DEADLINE``, ``PREEMPTED`` → 0;
                                    ``CANCELLED`` → 5); default 1
``gpus_per_node``         no        integer ``>= 0``, default 0
``min_nodes``,            no        node range of a moldable or malleable job:
``max_nodes``                       integers with ``min_nodes <= nodes <= max_nodes``;
                                    empty or 0: the requested ``nodes``
``malleable``             no        ``true``/``false`` (also ``1``/``0``, ``yes``/``no``):
                                    the job may be reshaped within its range while it
                                    runs; default ``false``
``mean_w``, ``max_w``,    no        per-node power of the job in watts (``>= 0``);
``std_w``                           an empty cell means "no power for this job"
``power_series``          no        measured per-node power profile, see below
``running_at_start``      no        ``true``: the job was already running when the
                                    replay begins (a *hot start*): the engine starts
                                    it at its submission time on free nodes without
                                    asking the policy; default ``false``. Written only
                                    when some job has it
``units``                 no        job units (Borghesi et al. 2018, §3) in the text
                                    form of :mod:`wattsched.model.units`, e.g.
                                    ``"2*8c1g4G;4c"``: a non-empty cell makes the job a
                                    job of units (:attr:`TraceJob.units`); ``nodes``
                                    is then the number of units (a ``nodes`` cell must
                                    equal it), ``procs`` defaults to the units' total
                                    cores and the power columns are per unit. Empty:
                                    whole nodes. Written only when some job has units
``app``                   no        application of the job, e.g. one of the packaged
                                    PASS models (``leanmd``, ``wave2d``, ``lulesh``,
                                    ``amr``, ``jacobi2d``, :mod:`wattsched.scalingmodels`)
                                    by which its run time on a node count and CPU power
                                    is modelled; read into ``TraceJob.extra["app"]``
                                    (:func:`wattsched.workload.moldable.app_of`).
                                    Written only when some job has one
========================  ========  ===================================================

An empty cell (or a Parquet null) in an optional column takes the default.
Numbers must be finite; integers may be written ``4`` or ``4.0``.

``power_series`` is a string of ``offset_s:watts`` steps separated by ``;``,
for example ``"0:350;600:420;1200:380"``: from the job's start the node draws
350 W, from 600 s on 420 W, from 1200 s on 380 W, until the job ends. Offsets
are seconds of work from the job's start: the first is 0, the others strictly
increasing; watts are ``>= 0``; spaces are allowed around the separators. It becomes the ``(offset_s, watts)`` tuples of
:attr:`TraceJob.power_series`.

Marconi100 / PM100 names
------------------------
When a canonical column is absent, these names (those of the PM100 job table,
Antici et al. 2023, and of Slurm's job records) are read in its place; the
first present one wins and the mapping is noted in :attr:`Workload.notes`.

===========================================================  ===============  ===================================
alias                                                        read as          conversion
===========================================================  ===============  ===================================
``job_id``, ``jobid``                                        ``id``
``submit_time``                                              ``submit_s``     numbers are seconds; timestamps
                                                                              (Parquet timestamps, ISO-8601
                                                                              text) become seconds after the
                                                                              earliest submission, whose epoch
                                                                              time goes to ``origin_unix_s``
``run_time``                                                 ``runtime_s``    seconds
``time_limit``                                               ``walltime_s``   Slurm minutes × 60; ``INFINITE``
                                                                              or ``UNLIMITED`` count as missing
``num_nodes_alloc``, ``num_nodes``, ``num_nodes_req``        ``nodes``
``num_cores_alloc``, ``num_cpus_alloc``, ``num_cores``,      ``procs``
``num_cpus``, ``num_cores_req``, ``num_cpus_req``
``num_gpus_alloc``, ``num_gpus``                             ``gpus_per_node``  job total, divided by ``nodes``
                                                                              (rounded up)
``user_id``, ``group_id``                                    ``user``,
                                                             ``group``
``job_state``                                                ``status``       Slurm state name, as above
===========================================================  ===============  ===================================

PM100's ``power_consumption`` array is not read: it is a whole-job series at
the sampling period of the source, and converting it to per-node ``mean_w``,
``max_w``, ``std_w`` and ``power_series`` is left to the user.

Rows and errors
---------------
The table is read whole when :func:`read_job_table` is called, so every error is
raised there: a :class:`~wattsched.errors.TraceError` naming the file, the line
(CSV: the physical line of the file, the header being line 1; Parquet: the
1-based row number) and the column. Rows not sorted by submission time are
sorted (stably) and a note says so; duplicate ids are an error.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import math
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from wattsched.errors import MissingDependencyError, OutputError, TraceError
from wattsched.model.job import Unit
from wattsched.model.units import format_units, parse_units
from wattsched.workload.records import TraceJob, Workload, app_of

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

__all__ = [
    "COLUMNS",
    "MissingDependencyError",
    "format_power_series",
    "parse_power_series",
    "read_job_table",
    "write_job_table",
]

COLUMNS: tuple[str, ...] = (
    "id", "submit_s", "runtime_s", "walltime_s", "procs", "nodes", "user", "group", "partition",
    "status", "app_class", "gpus_per_node", "min_nodes", "max_nodes", "malleable",
    "mean_w", "max_w", "std_w", "power_series",
)
"""Columns :func:`write_job_table` writes, in this order; also every column :func:`read_job_table` reads."""

OPTIONAL_COLUMNS: tuple[str, ...] = ("running_at_start", "units", "app")
"""Columns written after :data:`COLUMNS` only when some job has them, in this order.

``running_at_start`` and ``app`` are read into ``TraceJob.extra``, ``units`` into ``TraceJob.units``.
"""

_OPTIONAL_TYPES: dict[str, str] = {"running_at_start": "bool_", "units": "string", "app": "string"}

_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("job_id", "jobid"),
    "submit_s": ("submit_time",),
    "runtime_s": ("run_time",),
    "walltime_s": ("time_limit",),
    "nodes": ("num_nodes_alloc", "num_nodes", "num_nodes_req"),
    "procs": ("num_cores_alloc", "num_cpus_alloc", "num_cores", "num_cpus", "num_cores_req", "num_cpus_req"),
    "gpus_per_node": ("num_gpus_alloc", "num_gpus"),
    "user": ("user_id",),
    "group": ("group_id",),
    "status": ("job_state",),
}

# Slurm job states (``man sacct``, JOB STATE CODES) mapped to SWF status codes
# (1 completed, 0 failed, 5 cancelled; https://www.cs.huji.ac.il/labs/parallel/workload/swf.html).
_SLURM_STATES: dict[str, int] = {
    "COMPLETED": 1, "CD": 1,
    "FAILED": 0, "F": 0, "TIMEOUT": 0, "TO": 0, "NODE_FAIL": 0, "NF": 0, "OUT_OF_MEMORY": 0,
    "OOM": 0, "BOOT_FAIL": 0, "BF": 0, "DEADLINE": 0, "DL": 0, "PREEMPTED": 0, "PR": 0,
    "CANCELLED": 5, "CA": 5,
}

_INFINITE = frozenset({"INFINITE", "UNLIMITED"})
_TRUE = frozenset({"true", "t", "yes", "y", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "0"})
_PARQUET_BATCH = 65536


class _Invalid(Exception):
    """A cell could not be converted; the caller adds file, line and column."""


def _require_pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError(
            "Parquet job tables need pyarrow: pip install 'wattsched[parquet]' (or use a .csv/.csv.gz table)"
        ) from exc
    return pa, pq


def _format_of(path: str) -> str:
    name = path.lower()
    if name.endswith((".csv", ".csv.gz")):
        return "csv"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    raise TraceError(path, None, "unknown job-table format; name the file *.csv, *.csv.gz or *.parquet")


def _read_format_of(path: str) -> str:
    """The format of a table to read: by its name, else Parquet by its magic bytes, else CSV."""
    name = path.lower()
    if name.endswith((".csv", ".csv.gz", ".parquet", ".pq")):
        return _format_of(path)
    try:
        with open(path, "rb") as fh:
            return "parquet" if fh.read(4) == b"PAR1" else "csv"
    except OSError:
        return "csv"  # the reader says what is wrong with the file


def _stem(path: str) -> str:
    name = os.path.basename(path)
    for suffix in (".csv.gz", ".csv", ".parquet", ".pq"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


# --------------------------------------------------------------------------- power series


def parse_power_series(text: str) -> tuple[tuple[float, float], ...] | None:
    """Parse a ``power_series`` cell: ``offset_s:watts`` steps separated by ``;``.

    Returns ``None`` for an empty string. Raises :class:`ValueError` with the
    reason if the text is malformed, the first offset is not 0, offsets do not
    increase, or a value is negative or not finite.

    >>> parse_power_series("0:350; 600:420.5")
    ((0.0, 350.0), (600.0, 420.5))
    >>> parse_power_series("") is None
    True
    >>> parse_power_series("0:350;0:400")
    Traceback (most recent call last):
    ...
    ValueError: offsets must increase: step 2 has offset 0.0 after 0.0
    """
    text = text.strip()
    if not text:
        return None
    steps = []
    last = -math.inf
    for k, part in enumerate(text.split(";"), start=1):
        offset_txt, sep, watts_txt = part.partition(":")
        if not sep:
            raise ValueError(f"step {k} {part.strip()!r} is not offset_s:watts")
        try:
            offset, watts = float(offset_txt), float(watts_txt)
        except ValueError:
            raise ValueError(f"step {k} {part.strip()!r} is not offset_s:watts with numbers") from None
        if not (math.isfinite(offset) and math.isfinite(watts)):
            raise ValueError(f"step {k} {part.strip()!r} is not finite")
        if offset < 0 or watts < 0:
            raise ValueError(f"step {k} {part.strip()!r} is negative")
        if k == 1 and offset != 0:
            # the engine applies the first step from the job's start
            raise ValueError(f"the first step must be at offset 0 (the job's start), got {offset!r}")
        if offset <= last:
            raise ValueError(f"offsets must increase: step {k} has offset {offset!r} after {last!r}")
        last = offset
        steps.append((offset, watts))
    return tuple(steps)


def format_power_series(series: Sequence[tuple[float, float]] | None) -> str:
    """Write a power profile as :func:`parse_power_series` reads it, floats as ``repr``.

    >>> format_power_series(((0, 350.0), (600.0, 420.5)))
    '0.0:350.0;600.0:420.5'
    >>> format_power_series(None)
    ''
    """
    if not series:
        return ""
    return ";".join(f"{float(t)!r}:{float(w)!r}" for t, w in series)


# --------------------------------------------------------------------------- cell converters
# Each takes a raw cell (a string from CSV; a Python value from Parquet) and returns the
# value, or None when the cell is empty; it raises _Invalid with what is wrong.


def _is_empty(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip()) or (isinstance(v, float) and v != v)


def _float(v: Any) -> float | None:
    if _is_empty(v):
        return None
    if isinstance(v, bool):
        raise _Invalid(f"{v!r} is not a number")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise _Invalid(f"{v!r} is not a number") from None
    if not math.isfinite(x):
        raise _Invalid(f"{v!r} is not a finite number")
    return x


def _int(v: Any) -> int | None:
    if _is_empty(v):
        return None
    if isinstance(v, bool):
        raise _Invalid(f"{v!r} is not an integer")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            pass
    try:
        x = _float(v)
    except _Invalid:
        x = None
    if x is None or not x.is_integer():
        raise _Invalid(f"{v!r} is not an integer")
    return int(x)


def _str(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():  # a Parquet float column of ids
        return str(int(v))
    return v if isinstance(v, str) else str(v)  # not stripped: strings round-trip exactly


def _bool(v: Any) -> bool | None:
    if _is_empty(v):
        return None
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise _Invalid(f"{v!r} is not a boolean (use true or false)")


def _status(v: Any) -> int | None:
    if _is_empty(v):
        return None
    if isinstance(v, str):
        s = v.strip()
        try:
            return int(s)
        except ValueError:
            pass
        # sacct prints "CANCELLED by 1234"
        state = s.split()[0].upper()
        if state in _SLURM_STATES:
            return _SLURM_STATES[state]
        raise _Invalid(
            f"{v!r} is neither an integer status nor a known Slurm state "
            "(COMPLETED, FAILED, TIMEOUT, CANCELLED, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE, PREEMPTED)"
        )
    return _int(v)


def _series(v: Any) -> tuple[tuple[float, float], ...] | None:
    if _is_empty(v):
        return None
    if not isinstance(v, str):
        raise _Invalid(f"{v!r} is not an 'offset_s:watts;...' string")
    try:
        return parse_power_series(v)
    except ValueError as exc:
        raise _Invalid(f"{v!r}: {exc}") from None


def _units(v: Any) -> tuple[Unit, ...]:
    if _is_empty(v):
        return ()
    if not isinstance(v, str):
        raise _Invalid(f"{v!r} is not a units string such as '2*8c1g4G;4c'")
    try:
        return parse_units(v)
    except ValueError as exc:
        raise _Invalid(f"{v!r}: {exc}") from None


def _time_limit_min(v: Any) -> float | None:
    if isinstance(v, str) and v.strip().upper() in _INFINITE:
        return None
    x = _float(v)
    return None if x is None else x * 60.0


def _submit_time(v: Any) -> float | tuple[str, float] | None:
    """Seconds as given, or ``("epoch", seconds)`` for a timestamp."""
    if _is_empty(v):
        return None
    if isinstance(v, datetime):
        dt = v
    elif isinstance(v, str):
        try:
            return _float(v)
        except _Invalid:
            pass
        try:
            dt = datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
        except ValueError:
            raise _Invalid(f"{v!r} is neither seconds nor an ISO-8601 timestamp") from None
    else:
        return _float(v)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return ("epoch", dt.timestamp())


# --------------------------------------------------------------------------- reading


def _resolve_columns(path: str, names: Sequence[str], header_line: int | None):
    """Map canonical fields to positions in ``names``. Returns (positions, sources, notes)."""
    normalized = [str(n).strip().lower() for n in names]
    where: dict[str, int] = {}
    for i, n in enumerate(normalized):
        if n in where:
            raise TraceError(path, header_line, f"column {names[i]!r} appears twice", field=str(names[i]))
        where[n] = i
    positions: dict[str, int] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []
    for col in COLUMNS + OPTIONAL_COLUMNS:
        if col in where:
            positions[col], sources[col] = where[col], col
            continue
        for alias in _ALIASES.get(col, ()):
            if alias in where:
                positions[col], sources[col] = where[alias], alias
                notes.append(f"column {alias!r} read as {col!r}")
                break
    for col in ("id", "submit_s", "runtime_s"):
        if col not in positions:
            aliases = _ALIASES.get(col, ())
            hint = f" (or {', '.join(repr(a) for a in aliases)})" if aliases else ""
            raise TraceError(path, header_line, f"missing required column {col!r}{hint}", field=col)
    if "procs" not in positions and "nodes" not in positions and "units" not in positions:
        raise TraceError(path, header_line, "missing required column: give 'procs' or 'nodes'", field="nodes")
    used = set(positions.values())
    ignored = [names[i] for i in range(len(names)) if i not in used]
    if ignored:
        notes.append("ignored columns: " + ", ".join(map(str, ignored)))
    return positions, sources, notes


def _csv_rows(path: str, fh: io.TextIOBase):
    reader = csv.reader(fh)
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError(path, None, "empty file; a job table needs a header line naming its columns") from None
    except csv.Error as exc:
        raise TraceError(path, reader.line_num, f"malformed CSV: {exc}") from None

    def rows() -> Iterator[tuple[int, Sequence[Any]]]:
        width = len(header)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise TraceError(path, reader.line_num, f"malformed CSV: {exc}") from None
            if not row:
                continue
            if len(row) != width:
                raise TraceError(
                    path, reader.line_num, f"expected {width} fields as in the header, found {len(row)}"
                )
            yield reader.line_num, row

    return header, rows()


def _parquet_rows(path: str):
    _, pq = _require_pyarrow()
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid, OSError, ...
        raise TraceError(path, None, f"cannot read Parquet file: {exc}") from exc
    names = list(pf.schema_arrow.names)

    def rows(selected: Sequence[int]) -> Iterator[tuple[int, Sequence[Any]]]:
        # Read only the columns we use: PM100's power arrays are most of the file.
        select = [names[i] for i in selected]
        pos = {i: k for k, i in enumerate(selected)}
        row_no = 0
        for batch in pf.iter_batches(batch_size=_PARQUET_BATCH, columns=select):
            cols = [batch.column(k).to_pylist() for k in range(len(select))]
            for values in zip(*cols):
                row_no += 1
                yield row_no, _Remap(values, pos)

    return names, rows


class _Remap:
    """A Parquet row read with only some columns, indexed by the file's column positions."""

    __slots__ = ("pos", "values")

    def __init__(self, values: tuple, pos: dict[int, int]):
        self.values = values
        self.pos = pos

    def __getitem__(self, i: int) -> Any:
        return self.values[self.pos[i]]


MAX_NODE_W = 1e6
"""Largest per-node power a table may give (watts): a megawatt node is a unit mistake."""
MAX_SECONDS = 1e15
"""Largest time a table may give (seconds, about 30 million years): more is a unit mistake or damage."""


def read_job_table(
    path: str | os.PathLike[str], *, cores_per_node: int = 1, default_walltime_s: float | None = None,
    machine_nodes: int | None = None,
) -> Workload:
    """Read a CSV or Parquet job table (see the module documentation for the columns).

    Parameters
    ----------
    path
        ``*.csv``, ``*.csv.gz``, ``*.parquet`` or ``*.pq``.
    cores_per_node
        Cores of one node, to derive ``nodes`` from ``procs`` (rounded up) or
        ``procs`` from ``nodes`` when the table gives only one of them.
    default_walltime_s
        Requested time of jobs without one (or with 0); ``None`` uses the job's run time.
    machine_nodes
        Size of the machine: larger jobs are dropped and counted as ``larger_than_machine``
        (the SWF reader's rule); ``None`` keeps every job. Jobs of units are kept
        whatever their number of units (units may share nodes).

    Returns
    -------
    Workload
        Jobs sorted by submission time. ``has_power`` is true when every job
        has ``mean_w``. ``notes`` says which aliases were used, which columns
        were ignored, what was defaulted and whether rows were re-sorted.

    Raises
    ------
    TraceError
        A required column is missing, or a cell is missing or invalid; the
        message names the file, the line (Parquet: the row) and the column.
    MissingDependencyError
        A Parquet file was given and pyarrow is not installed.
    """
    spath = os.fspath(path)
    if cores_per_node < 1:
        raise TraceError(spath, None, f"cores_per_node must be >= 1, got {cores_per_node!r}")
    if default_walltime_s is not None and not (math.isfinite(default_walltime_s) and default_walltime_s >= 0):
        raise TraceError(spath, None, f"default_walltime_s must be a finite number >= 0, got {default_walltime_s!r}")
    fmt = _read_format_of(spath)
    if not os.path.exists(spath):
        raise TraceError(spath, None, "no such file")
    if fmt == "csv":
        try:
            with open(spath, "rb") as probe:
                opener = gzip.open if probe.read(2) == b"\x1f\x8b" else open
            with opener(spath, "rt", newline="", encoding="utf-8-sig") as fh:
                header, rows = _csv_rows(spath, fh)
                positions, sources, notes = _resolve_columns(spath, header, 1)
                jobs, origin, more = _parse_rows(spath, rows, positions, sources, cores_per_node,
                                                 default_walltime_s)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            what = "truncated" if isinstance(exc, EOFError) else "corrupt"
            raise TraceError(spath, None, f"{what} gzip data ({exc}); the file is damaged, write or download it "
                                          "again") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise TraceError(spath, None, f"cannot read CSV: {exc}") from None
    else:
        names, make_rows = _parquet_rows(spath)
        positions, sources, notes = _resolve_columns(spath, names, None)
        rows = make_rows(sorted(set(positions.values())))
        jobs, origin, more = _parse_rows(spath, rows, positions, sources, cores_per_node, default_walltime_s)
    notes.extend(more)
    dropped = 0
    if machine_nodes is not None:
        # a job of units may have more units than the machine has nodes: its units can share them
        kept = [j for j in jobs if j.nodes <= machine_nodes or j.units]
        dropped, jobs = len(jobs) - len(kept), kept

    unsorted = sum(1 for a, b in pairwise(jobs) if b.submit_s < a.submit_s)
    if unsorted:
        jobs.sort(key=lambda j: j.submit_s)
        notes.append(
            f"rows were not sorted by submit time ({unsorted} out of order); sorted them, ties keep file order"
        )
    with_power = sum(1 for j in jobs if j.mean_w is not None)
    if 0 < with_power < len(jobs):
        notes.append(f"{len(jobs) - with_power} of {len(jobs)} jobs have no mean_w")
    workload = Workload(
        name=_stem(spath),
        jobs=iter(jobs),
        origin_unix_s=origin,
        notes=notes,
        has_power=bool(jobs) and with_power == len(jobs),
        header={"format": fmt},
    )
    workload.report.read = len(jobs) + dropped
    workload.report.kept = len(jobs)
    if dropped:
        workload.report.dropped["larger_than_machine"] = dropped
    return workload


def _parse_rows(
    path: str,
    rows: Iterable[tuple[int, Sequence[Any]]],
    positions: dict[str, int],
    sources: dict[str, str],
    cores_per_node: int,
    default_walltime_s: float | None,
) -> tuple[list[TraceJob], float | None, list[str]]:
    def conv(field: str, fn: Callable[[Any], Any]):
        i = positions.get(field)
        return None if i is None else (i, fn, sources[field])

    submit_fn = _submit_time if sources["submit_s"] == "submit_time" else _float
    wall_fn = _time_limit_min if sources.get("walltime_s") == "time_limit" else _float
    optional = [
        c for c in (
            conv("user", _str), conv("group", _str), conv("partition", _str), conv("status", _status),
            conv("app_class", _str), conv("min_nodes", _int), conv("max_nodes", _int),
            conv("malleable", _bool), conv("mean_w", _float), conv("max_w", _float), conv("std_w", _float),
            conv("power_series", _series), conv("running_at_start", _bool), conv("app", _str),
        ) if c is not None
    ]
    field_of = {sources[f]: f for f in sources}
    i_id, i_submit, i_run = positions["id"], positions["submit_s"], positions["runtime_s"]
    i_wall, i_procs, i_nodes = positions.get("walltime_s"), positions.get("procs"), positions.get("nodes")
    i_gpus, i_units = positions.get("gpus_per_node"), positions.get("units")
    gpus_total = sources.get("gpus_per_node") in _ALIASES["gpus_per_node"]
    non_negative = {"min_nodes", "max_nodes", "mean_w", "max_w", "std_w"}

    jobs: list[TraceJob] = []
    seen: dict[int, int] = {}
    epoch_kind: bool | None = None
    defaulted_wall = 0
    line = 0
    col = ""
    try:
        for line, row in rows:
            col = sources["id"]
            job_id = _int(row[i_id])
            if job_id is None:
                raise _Invalid("missing job id")
            if job_id < 0:
                raise _Invalid(f"job id {job_id} is negative")
            if job_id in seen:
                raise _Invalid(f"duplicate job id {job_id} (first on line {seen[job_id]})")
            seen[job_id] = line

            col = sources["submit_s"]
            submit = submit_fn(row[i_submit])
            if submit is None:
                raise _Invalid("missing submit time")
            is_epoch = isinstance(submit, tuple)
            if epoch_kind is None:
                epoch_kind = is_epoch
            elif is_epoch != epoch_kind:
                raise _Invalid("mixes timestamps and plain seconds; use one kind for the whole column")
            if is_epoch:
                submit = submit[1]
            elif submit < 0:
                raise _Invalid(f"submit time {submit!r} is negative (seconds from the trace's origin)")
            elif submit > MAX_SECONDS:
                raise _Invalid(f"submit time {submit!r} is out of range (at most {MAX_SECONDS:g} s)")

            col = sources["runtime_s"]
            runtime = _float(row[i_run])
            if runtime is None:
                raise _Invalid("missing run time")
            if runtime < 0:
                raise _Invalid(f"run time {runtime!r} is negative")
            if runtime > MAX_SECONDS:
                raise _Invalid(f"run time {runtime!r} is out of range (at most {MAX_SECONDS:g} s)")

            walltime = None
            if i_wall is not None:
                col = sources["walltime_s"]
                walltime = wall_fn(row[i_wall])
                if walltime is not None and walltime < 0:
                    raise _Invalid(f"requested time {walltime!r} is negative")
                if walltime is not None and walltime > MAX_SECONDS:
                    raise _Invalid(f"requested time {walltime!r} is out of range (at most {MAX_SECONDS:g} s)")
                if walltime == 0:  # as in SWF, 0 means "not given"
                    walltime = None
            if walltime is None:
                defaulted_wall += 1
                walltime = runtime if default_walltime_s is None else float(default_walltime_s)

            units: tuple[Unit, ...] = ()
            if i_units is not None:
                col = sources["units"]
                units = _units(row[i_units])
            procs = nodes = None
            if i_procs is not None:
                col = sources["procs"]
                procs = _int(row[i_procs])
                # a job of units may ask no cores (GPUs or MICs only), hence 0 procs
                if procs is not None and procs < (0 if units else 1):
                    raise _Invalid(f"procs must be >= {0 if units else 1}, got {procs}")
            if i_nodes is not None:
                col = sources["nodes"]
                nodes = _int(row[i_nodes])
                if nodes is not None and nodes < 1:
                    raise _Invalid(f"nodes must be >= 1, got {nodes}")
            if units:
                if nodes is not None and nodes != len(units):
                    col = sources["units"]
                    raise _Invalid(f"{len(units)} units but nodes is {nodes}; a job of units has one node "
                                   "per unit (leave nodes empty or give the number of units)")
                nodes = len(units)
                if procs is None:
                    procs = sum(u.cores for u in units)
            if nodes is None and procs is None:
                col = sources.get("nodes") or sources.get("procs") or sources["units"]
                raise _Invalid("missing size: give procs or nodes" + (" or units" if i_units is not None else ""))
            if nodes is None:
                nodes = -(-procs // cores_per_node)
            elif procs is None:
                procs = nodes * cores_per_node

            gpus = 0
            if i_gpus is not None:
                col = sources["gpus_per_node"]
                g = _int(row[i_gpus])
                if g is not None:
                    if g < 0:
                        raise _Invalid(f"GPU count must be >= 0, got {g}")
                    gpus = -(-g // nodes) if gpus_total else g

            values: dict[str, Any] = {}
            for (i, fn, name) in optional:
                col = name
                v = fn(row[i])
                if v is not None:
                    field = field_of[name]
                    if field in non_negative and v < 0:
                        raise _Invalid(f"{v!r} is negative")
                    if field in ("mean_w", "max_w", "std_w") and v > MAX_NODE_W:
                        raise _Invalid(f"{v!r} W per node is out of range (at most {MAX_NODE_W:g} W)")
                    values[field] = v
            mean_w, max_w = values.get("mean_w"), values.get("max_w")
            if mean_w is not None and max_w is not None and mean_w > max_w:
                col = sources.get("mean_w", "mean_w")
                raise _Invalid(f"mean power {mean_w!r} W is above max_w {max_w!r} W")
            lo, hi = values.get("min_nodes", 0), values.get("max_nodes", 0)
            if lo and hi and lo > hi:
                col = sources.get("min_nodes", "min_nodes")
                raise _Invalid(f"min_nodes {lo} is above max_nodes {hi}")
            if lo > nodes:
                col = sources.get("min_nodes", "min_nodes")
                raise _Invalid(f"min_nodes {lo} is above the requested nodes {nodes}; a job's range must hold the "
                               "nodes it asks (min_nodes <= nodes <= max_nodes)")
            if hi and hi < nodes:
                col = sources.get("max_nodes", "max_nodes")
                raise _Invalid(f"max_nodes {hi} is below the requested nodes {nodes}; a job's range must hold the "
                               "nodes it asks (min_nodes <= nodes <= max_nodes)")
            extra = {"running_at_start": True} if values.pop("running_at_start", False) else {}
            app = values.pop("app", None)
            if app:
                extra["app"] = app
            jobs.append(TraceJob(job_id, submit, runtime, walltime, procs, nodes, gpus_per_node=gpus, extra=extra,
                                 units=units, **values))
    except _Invalid as exc:
        raise TraceError(path, line, str(exc), field=col) from None

    notes = []
    origin = None
    if epoch_kind and jobs:
        origin = min(j.submit_s for j in jobs)
        for j in jobs:
            j.submit_s -= origin
        notes.append(f"submit timestamps rebased to the earliest one (origin_unix_s={origin!r})")
    if defaulted_wall:
        using = "the run time" if default_walltime_s is None else f"default_walltime_s={default_walltime_s!r}"
        notes.append(f"{defaulted_wall} jobs have no requested time; using {using}")
    return jobs, origin, notes


# --------------------------------------------------------------------------- writing

_WRITE_TYPES = (
    "int64", "float64", "float64", "float64", "int64", "int64", "string", "string", "string", "int64", "string",
    "int64", "int64", "int64", "bool_", "float64", "float64", "float64", "string",
)
_GZIP_LEVEL = 1
"""gzip level of ``.csv.gz`` tables: 1 writes several times faster than 9 for a file about 25 % larger."""


class PackedSeries:
    """The ``power_series`` column of a job table as three arrays: each job's step count, then every step's
    offset and watts, one job after another. Another process gets it as plain memory copies, and it
    formats the cells (:meth:`cells`, what :func:`format_power_series` writes) itself.

    >>> p = PackedSeries.of([((0.0, 350.0), (600.0, 420.5)), None])
    >>> p.cells()
    ['0.0:350.0;600.0:420.5', None]
    """

    __slots__ = ("counts", "steps")

    def __init__(self, counts, steps):
        self.counts = counts
        self.steps = steps

    @classmethod
    def of(cls, series: Sequence[Sequence[tuple[float, float]] | None]) -> PackedSeries:
        import numpy as np

        counts = np.fromiter((len(s) if s else 0 for s in series), dtype=np.int64, count=len(series))
        flat = [x for s in series if s for step in s for x in step]
        return cls(counts, np.array(flat, dtype=np.float64).reshape(-1, 2))

    def cells(self) -> list[str | None]:
        # every number formatted in one pass, then joined per job: the text of format_power_series, in 3/5 the time
        numbers = list(map(repr, self.steps.ravel().tolist()))
        steps = list(map(":".join, zip(numbers[0::2], numbers[1::2], strict=True)))
        cells: list[str | None] = []
        i = 0
        for n in self.counts.tolist():
            if n:
                cells.append(";".join(steps[i:i + n]))
                i += n
            else:
                cells.append(None)
        return cells


def job_columns(jobs: Iterable[TraceJob], *, pack_series: bool = False) -> dict[str, Any]:
    """The :data:`COLUMNS` of ``jobs``, in order: lists (``None`` where a job has no power), numbers as NumPy arrays.

    A number column is an array when every value converts to its type (no
    ``None``, no ``NaN``), a list otherwise; :func:`arrow_column` reads either
    to the same values. Arrays cost no more to make than lists, and they reach
    another process, and become Arrow columns there, as plain memory copies.
    With ``pack_series``, ``power_series`` is a :class:`PackedSeries`, formatted
    where the table is written.
    """
    from operator import attrgetter

    import numpy as np

    jobs = jobs if isinstance(jobs, list) else list(jobs)
    n = len(jobs)
    cols: dict[str, Any] = {}
    for name, kind in zip(COLUMNS, _WRITE_TYPES):
        values = None
        if name == "malleable":
            values = [bool(j.malleable) for j in jobs]
        elif name == "power_series":
            if pack_series:
                values = PackedSeries.of(list(map(attrgetter(name), jobs)))
            else:
                values = [format_power_series(j.power_series) or None if j.power_series else None for j in jobs]
        elif kind in ("int64", "float64"):
            # map(attrgetter) runs in C: about twice as fast as a comprehension per column
            with contextlib.suppress(TypeError, ValueError, OverflowError):  # a None, a value out of range
                values = np.fromiter(map(attrgetter(name), jobs), dtype=np.dtype(kind), count=n)
            if values is not None and kind == "float64" and np.isnan(values).any():
                values = None  # fromiter reads None as NaN: the list tells a missing value from a NaN
        cols[name] = list(map(attrgetter(name), jobs)) if values is None else values
    return cols


def arrow_column(values, kind: str, *, nulls: bool = True):
    """An Arrow array of ``kind`` (``int64``, ``float64``, ``bool_``, ``string``) from a list or NumPy array.

    ``None`` becomes a null when ``nulls`` (a float ``NaN`` stays a value). The
    array is built from its buffers: ``pyarrow.array`` would import pandas when
    it is installed, a fifth of a second that a simulation run does not need.
    """
    import numpy as np
    import pyarrow as pa

    n = len(values)
    validity = None
    if nulls and n and kind != "bool_" and not (isinstance(values, np.ndarray) and values.dtype != object):
        if any(v is None for v in values) if isinstance(values, np.ndarray) else None in values:
            missing = np.fromiter((v is None for v in values), dtype=bool, count=n)
            validity = pa.py_buffer(np.packbits(~missing, bitorder="little"))
    if kind == "string":
        items = values.tolist() if isinstance(values, np.ndarray) else values
        offsets = np.zeros(n + 1, dtype=np.int64)
        joined = None
        if validity is None and all(type(v) is str for v in items[:1]):
            with contextlib.suppress(TypeError):  # not all strings: encoded one by one below
                joined = "".join(items)
        if joined is not None and joined.isascii():
            # ASCII: a string's length is its length in bytes, so no per-string encoding is needed
            data = joined.encode("ascii")
            np.cumsum(np.fromiter(map(len, items), dtype=np.int64, count=n), out=offsets[1:])
            typ, width = (pa.string(), np.int32) if offsets[-1] < 2**31 - 1 else (pa.large_string(), np.int64)
            return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets.astype(width)), pa.py_buffer(data)])
        encoded = [b"" if v is None else (v if isinstance(v, str) else str(v)).encode("utf-8") for v in items]
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=n), out=offsets[1:])
        typ, width = (pa.string(), np.int32) if offsets[-1] < 2**31 - 1 else (pa.large_string(), np.int64)
        buffers = [validity, pa.py_buffer(offsets.astype(width)), pa.py_buffer(b"".join(encoded))]
        return pa.Array.from_buffers(typ, n, buffers)
    if kind == "bool_":
        bits = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])
    dtype = np.float64 if kind == "float64" else np.int64
    if validity is not None:
        values = [0 if v is None else v for v in values]
    try:
        data = np.ascontiguousarray(np.asarray(values, dtype=dtype))
    except (TypeError, ValueError, OverflowError) as exc:
        raise OutputError(f"cannot write a {kind} column: {exc}") from None
    return pa.Array.from_buffers(getattr(pa, kind)(), n, [validity, pa.py_buffer(data)])


def job_table_columns(jobs: Iterable[TraceJob], *, pack_series: bool = False) -> dict[str, Any]:
    """What :func:`write_job_table` writes of ``jobs``: :func:`job_columns`, and the optional columns jobs have.

    ``running_at_start`` when a job has it in its ``extra``; ``units`` (text
    form, ``None`` for a whole-node job) when a job has units; ``app`` (``None``
    for a job without) when a job has one in its ``extra``.

    Lists and NumPy arrays, so that another process can write the table
    (:func:`write_job_columns`): the simulator hands its workload to its
    output worker that way.
    """
    from operator import attrgetter

    jobs = jobs if isinstance(jobs, list) else list(jobs)
    cols = job_columns(jobs, pack_series=pack_series)
    if any(map(attrgetter("extra"), jobs)):  # most traces give every job an empty one: no lookup per job then
        hot = [bool(j.extra.get("running_at_start")) for j in jobs]
        if any(hot):
            cols["running_at_start"] = hot
        apps = [app_of(j) or None for j in jobs]
        if any(apps):
            cols["app"] = apps
    units = list(map(attrgetter("units"), jobs))
    if any(units):
        cols["units"] = [format_units(u) if u else None for u in units]
    return cols


def _job_arrow_table(jobs: Iterable[TraceJob]):
    return _arrow_job_table(job_table_columns(jobs))


def _arrow_job_table(cols: dict[str, Any], record: dict[str, tuple[str, Any]] | None = None):
    pa, _ = _require_pyarrow()
    arrays = []
    record = record or {}
    clash = sorted(set(record) & {*COLUMNS, *OPTIONAL_COLUMNS})
    if clash:
        raise OutputError(f"record column {clash[0]!r} has the name of a job-table column")
    cols = {**cols, **{name: values for name, (_, values) in record.items()}}
    kinds = {name: kind for name, (kind, _) in record.items()}
    names = [*COLUMNS, *(name for name in OPTIONAL_COLUMNS if name in cols), *record]
    if isinstance(cols.get("power_series"), PackedSeries):
        cols["power_series"] = cols["power_series"].cells()
    for name in names:
        kind = (_WRITE_TYPES[COLUMNS.index(name)] if name in COLUMNS
                else _OPTIONAL_TYPES[name] if name in _OPTIONAL_TYPES else kinds[name])
        try:
            arrays.append(arrow_column(cols[name], kind))
        except OutputError as exc:
            raise OutputError(f"column {name!r}: {exc}") from None
    return pa.Table.from_arrays(arrays, names=names)


def write_job_columns(cols: dict[str, Any], path: str | os.PathLike[str],
                      record: dict[str, tuple[str, Any]] | None = None) -> int:
    """:func:`write_job_table` of the columns :func:`job_table_columns` gave; the same bytes. Returns the row count."""
    spath = os.fspath(path)
    table = _arrow_job_table(cols, record)
    if _format_of(spath) == "parquet":
        write_parquet_table(table, spath)
    else:
        write_csv_table(table, spath)
    return table.num_rows


def write_parquet_table(table, path: str | os.PathLike[str]) -> None:
    """Write an Arrow ``table`` as Parquet, zstd-compressed, with dictionary encoding for its text columns only.

    A dictionary pays off for repeated names (users, states); for measured
    numbers, where nearly every value differs, Parquet would build one and
    then drop it (a third of the time of writing them, and larger files).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
            or pa.types.is_dictionary(f.type)]
    pq.write_table(table, path, compression="zstd", use_dictionary=text)


def write_csv_table(table, path: str | os.PathLike[str], *, compress: bool | None = None) -> None:
    """Write an Arrow ``table`` as CSV with a plain header line (gzip level 1 if the name ends in ``.gz``).

    Floats are written in their shortest form that reads back to the same double;
    strings are quoted, missing values are empty cells. A gzipped file has no
    name or time in its header, so the same table gives the same bytes.
    """
    spath = os.fspath(path)
    if spath.lower().endswith(".gz") if compress is None else compress:
        _store_csv(_csv_bytes(table), spath, True)
        return
    import pyarrow as pa

    with open(spath, "wb") as fh:  # straight to the file: no copy of the whole text in memory
        _write_csv(table, pa.PythonFile(fh, mode="w"))


_PLAIN_INTEGERS = 1e9
"""Below this magnitude Arrow writes an integral double as the integer's digits (from 1e10 on, some as "1e+10")."""


def _integral_columns_as_int(table):
    """``table`` with each float column whose values are all integers (below :data:`_PLAIN_INTEGERS`, no ``-0``)
    as int64: Arrow writes those digits three times as fast as it formats doubles, and the text is the same."""
    import numpy as np
    import pyarrow as pa

    for i, f in enumerate(table.schema):
        if not pa.types.is_float64(f.type) or table.column(i).null_count:
            continue
        # read from the buffers: Arrow's to_numpy and __array__ import pandas when it is installed
        chunks = [np.frombuffer(c.buffers()[1], dtype=np.float64, count=len(c), offset=c.offset * 8)
                  for c in table.column(i).chunks]
        x = np.concatenate(chunks) if chunks else np.empty(0)
        if (x.size and bool(np.all(np.abs(x) < _PLAIN_INTEGERS)) and bool(np.all(x == np.trunc(x)))
                and not bool(np.any(np.signbit(x)[x == 0]))):
            table = table.set_column(i, f.name, arrow_column(x.astype(np.int64), "int64", nulls=False))
    return table


def _csv_bytes(table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    _write_csv(table, sink)
    return sink.getvalue().to_pybytes()


def _write_csv(table, sink) -> None:
    """The CSV text of ``table`` into the Arrow output stream ``sink``: a plain header line, then the rows."""
    import pyarrow.csv as pacsv

    table = _integral_columns_as_int(table)
    sink.write((",".join(table.column_names) + "\n").encode("utf-8"))
    if table.num_rows:
        pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=False, batch_size=65536))


def _store_csv(data: bytes, path: str, compress: bool) -> None:
    if compress:
        data = gzip.compress(data, compresslevel=_GZIP_LEVEL, mtime=0)
    with open(path, "wb") as fh:
        fh.write(data)


def write_job_table(jobs: Iterable[TraceJob], path: str | os.PathLike[str],
                    record: dict[str, tuple[str, Any]] | None = None) -> int:
    """Write jobs as a job table that :func:`read_job_table` reads back identically.

    The columns are :data:`COLUMNS`, then those of :data:`OPTIONAL_COLUMNS`
    that some job has; the format follows the file name as for reading.
    Floats are written in their shortest exact form in CSV, as ``double`` in
    Parquet; ``.csv.gz`` is gzip level 1, reproducible byte for byte.
    ``TraceJob.extra`` is not written, but for ``running_at_start`` and ``app``; ``TraceJob.units`` is, as the
    ``units`` column, when some job has units. The jobs are gathered into columns
    and written in one pass, in the given order.

    Parameters
    ----------
    jobs
        The jobs; any iterable, consumed once.
    path
        Destination, ``*.csv``, ``*.csv.gz``, ``*.parquet`` or ``*.pq``; overwritten.
    record
        More columns written last, ``name -> (kind, values)`` with a kind of ``int64``,
        ``float64``, ``bool_`` or ``string`` and one value per job (``None``: empty);
        :func:`read_job_table` ignores them (``traces import`` writes what Slurm
        recorded of each job there: ``start_s``, ``end_s``, ``node_list``, ...).

    Returns
    -------
    int
        The number of jobs written.
    """
    spath = os.fspath(path)
    _format_of(spath)
    return write_job_columns(job_table_columns(jobs), spath, record)


def submit_job_table(jobs: Iterable[TraceJob], path: str | os.PathLike[str], executor: Executor) -> Future[int]:
    """:func:`write_job_table` of a CSV file whose compression and writing run on ``executor``.

    The jobs are gathered and encoded as CSV now (that work holds the GIL);
    gzip and the file write, which release it, run on ``executor`` alongside
    the caller's next work. The future gives the number of jobs written, or
    raises what the write raised. The file is the same, byte for byte.
    """
    spath = os.fspath(path)
    if _format_of(spath) == "parquet":
        raise ValueError(f"{spath}: submit_job_table writes CSV files only")
    table = _job_arrow_table(jobs)
    data = _csv_bytes(table)
    rows = table.num_rows
    del table

    def store() -> int:
        _store_csv(data, spath, spath.lower().endswith(".gz"))
        return rows

    return executor.submit(store)


def recording(jobs: Iterable[TraceJob], path: str | os.PathLike[str]) -> Iterator[TraceJob]:
    """Yield ``jobs`` unchanged and write them to the job table ``path`` once the stream is exhausted.

    This is how a caller saves the exact (e.g. power-augmented) workload it
    replays: the jobs are kept (not copied) as they pass and written in one
    columnar pass at the end. The file exists only once the generator is exhausted.
    """
    spath = os.fspath(path)
    _format_of(spath)
    kept: list[TraceJob] = []
    keep = kept.append
    for job in jobs:
        keep(job)
        yield job
    write_job_table(kept, spath)
