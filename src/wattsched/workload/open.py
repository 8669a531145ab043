"""Every input format of a workload behind one registry: a trace is opened by the format that claims it.

A format claims a file by its name (``.swf``, ``.swf.gz``, ``.csv``, ``.csv.gz``,
``.parquet``, ``.pq``) or, when the name says nothing, by its first bytes (an SWF
file starts with ``;`` header lines or a row of 18 numbers; a CSV table with a
header row naming ``submit``; Parquet with ``PAR1``). A file no format claims is
refused with one error that names it and lists the formats. Every command that
reads a trace (``simulate``, ``sweep``, ``predict evaluate``, ``traces info``,
``dr-events generate``, the daemon's simulated cluster) opens it here, so the
same file is the same workload wherever it is named.

>>> format_of("KTH.swf.gz").name, format_of("jobs.CSV").name, format_of("m100.pq").name
('swf', 'table', 'table')
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wattsched.errors import TraceError
from wattsched.workload.records import Workload

__all__ = ["FORMATS", "InputFormat", "format_of", "is_swf", "machine_procs", "open_trace", "trace_stem"]

_SNIFF_BYTES = 4096


@dataclass(frozen=True)
class InputFormat:
    """One input format: how it is recognised and how it is read."""

    name: str
    description: str
    suffixes: tuple[str, ...]
    sniff: Callable[[bytes], bool]
    """True when a file's first (decompressed) bytes are of this format."""
    gives_machine: bool
    """The file states the machine's size (the SWF header's ``MaxProcs``)."""


def _sniff_swf(head: bytes) -> bool:
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith(";"):
            return True
        return len(line.split()) == 18 and all(re.fullmatch(r"-?\d+(\.\d+)?", f) for f in line.split())
    return False


def _sniff_table(head: bytes) -> bool:
    if head.startswith(b"PAR1"):
        return True
    first = head.decode("utf-8", "replace").lstrip("\ufeff").split("\n", 1)[0].lower()
    return "," in first and "submit" in first


FORMATS: tuple[InputFormat, ...] = (
    InputFormat("swf", "Standard Workload Format (*.swf, *.swf.gz)", (".swf", ".swf.gz"), _sniff_swf, True),
    InputFormat("table", "job table (*.csv, *.csv.gz, *.parquet, *.pq)", (".csv", ".csv.gz", ".parquet", ".pq"),
                _sniff_table, False),
)


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except FileNotFoundError:
        raise TraceError(path, None, "no such file") from None
    except OSError as exc:
        raise TraceError(path, None, f"cannot read: {exc.strerror}") from None
    if head.startswith(b"\x1f\x8b"):
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(_SNIFF_BYTES)
        except (OSError, EOFError) as exc:
            raise TraceError(path, None, f"corrupt gzip data ({exc}); the file is damaged") from None
    return head


def format_of(path: str | os.PathLike) -> InputFormat:
    """The format of ``path``: by its name, else by its first bytes; a :class:`TraceError` when none claims it."""
    spath = os.fspath(path)
    name = spath.lower()
    for fmt in FORMATS:
        if name.endswith(fmt.suffixes):
            return fmt
    head = _head(spath)
    for fmt in FORMATS:
        if fmt.sniff(head):
            return fmt
    kinds = "; ".join(f.description for f in FORMATS)
    raise TraceError(spath, None, f"not a workload format wattsched reads (by its name or its first lines): {kinds}")


def is_swf(path: str | os.PathLike) -> bool:
    """True when ``path`` is named as an SWF trace (the name alone: no file is read)."""
    return os.fspath(path).lower().endswith(FORMATS[0].suffixes)


def trace_stem(path: str | os.PathLike) -> str:
    """The file name without the suffix of its format: ``KTH-SP2.swf.gz`` -> ``KTH-SP2``."""
    name = Path(path).name
    for fmt in FORMATS:
        for suffix in sorted(fmt.suffixes, key=len, reverse=True):
            if name.lower().endswith(suffix):
                return name[: -len(suffix)]
    return name


def machine_procs(path: str | os.PathLike) -> int | None:
    """The machine's processors as the file states them (the SWF header's ``MaxProcs``), or None.

    Raises :class:`TraceError` when the header states a size that is not a positive number.
    """
    if format_of(path).name != "swf":
        return None
    from wattsched.workload.swf import read_header

    raw = read_header(path).get("MaxProcs", "").split()
    if not raw:
        return None
    try:
        procs = int(raw[0])
    except ValueError:
        procs = 0
    if procs <= 0:
        raise TraceError(os.fspath(path), None, f"MaxProcs: {raw[0]!r} is not a positive number of processors; "
                                                "give the machine with --procs N or --platform FILE|NAME")
    return procs


def open_trace(path: str | os.PathLike, *, cores_per_node: int = 1, machine_nodes: int | None = None,
               machine_procs: int | None = None, default_walltime: str | float = "runtime",
               skip_bad_lines: bool = False) -> Workload:
    """Open ``path`` in its format as a streamed :class:`Workload`.

    Jobs larger than the machine are dropped: ``machine_procs`` processors for an SWF trace
    (``machine_nodes`` nodes of ``cores_per_node`` cores when not given), ``machine_nodes``
    nodes for a job table. ``default_walltime`` (``"runtime"`` or seconds) is the requested
    time of jobs without one; ``skip_bad_lines`` skips malformed SWF lines instead of failing.
    """
    fmt = format_of(path)
    if fmt.name == "swf":
        from wattsched.workload.swf import read_swf

        if machine_procs is None and machine_nodes is not None:
            machine_procs = machine_nodes * cores_per_node
        return read_swf(path, cores_per_node=cores_per_node, machine_procs=machine_procs,
                        default_walltime=default_walltime, skip_bad_lines=skip_bad_lines)
    from wattsched.workload.tables import read_job_table

    default = None if default_walltime == "runtime" else float(default_walltime)
    return read_job_table(path, cores_per_node=cores_per_node, default_walltime_s=default,
                          machine_nodes=machine_nodes)
