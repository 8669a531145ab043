"""Reader for the Standard Workload Format (SWF) of the Parallel Workloads Archive.

Format: https://www.cs.huji.ac.il/labs/parallel/workload/swf.html -- one job per
line, 18 whitespace-separated fields, ``-1`` where a value is missing, header
lines starting with ``;`` (``; MaxProcs: 8192``). ``.gz`` files are read
transparently. A well-formed file is parsed whole into arrays when its first
job is asked for (a few passes over the text instead of one Python step per
line; about 150 bytes a job) and its jobs are made a block at a time. A file
with anything irregular is read line by line instead, streamed (only the job
being parsed is in memory), and that path reports the file, line and field of
each error; both paths give the same jobs.

Conventions (also in ``docs/simulator.md``):

* Times are rebased so that the first kept job is submitted at ``t = 0``;
  :attr:`Workload.origin_unix_s` gives the epoch time of ``t = 0`` when the
  header has ``UnixStartTime``.
* Processors: field 8 (requested) if present, else field 5 (allocated).
  Nodes = ``ceil(procs / cores_per_node)``.
* Requested time: field 9; when missing (``-1`` or ``0``) the fallback is the
  job's real runtime (``default_walltime="runtime"``, an exact estimate) or a
  fixed number of seconds.
* Cleaning rules drop a job and count it: ``runtime_missing`` (runtime < 0),
  ``procs_missing`` (fields 5 and 8 both missing), ``procs_nonpositive``,
  ``larger_than_machine`` (more processors than the machine has).
* A job whose runtime exceeds its requested time is kept with its real
  runtime; the engine kills it at its requested time (Slurm's behaviour) or
  lets it finish, by option. The reader counts such jobs.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import math
import os
import re
import zlib
from collections.abc import Iterator

from wattsched.errors import TraceError
from wattsched.workload.records import CleaningReport, TraceJob, Workload

FIELDS = (
    "job_number", "submit_time", "wait_time", "run_time", "allocated_procs", "avg_cpu_time",
    "used_memory", "requested_procs", "requested_time", "requested_memory", "status", "user_id",
    "group_id", "executable", "queue", "partition", "preceding_job", "think_time",
)

_INT_HEADER_KEYS = ("MaxJobs", "MaxRecords", "MaxProcs", "MaxNodes", "UnixStartTime", "MaxQueues", "MaxPartitions")


def _open_text(path: str | os.PathLike) -> io.TextIOBase:
    path = os.fspath(path)
    try:
        with open(path, "rb") as probe:
            magic = probe.read(2)
    except FileNotFoundError:
        raise TraceError(path, None, "no such file") from None
    except OSError as exc:
        raise TraceError(path, None, f"cannot read: {exc.strerror}") from None
    # utf-8-sig: a byte-order mark some editors write is not part of the first line
    if magic == b"\x1f\x8b":
        raw = gzip.open(path, "rb")  # noqa: SIM115 - the wrapper returned owns it, the caller closes that
        try:
            _refuse_wide_text(path, raw.peek(64)[:64])
        except BaseException:
            raw.close()
            raise
        return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace")
    with open(path, "rb") as probe:
        _refuse_wide_text(path, probe.read(64))
    return open(path, encoding="utf-8-sig", errors="replace")


_WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
              (b"\xfe\xff", "UTF-16"))


def _refuse_wide_text(path: str, head: bytes) -> None:
    """A file in UTF-16 or UTF-32 (a byte-order mark, or NUL bytes between characters) is refused, named as such.

    >>> _refuse_wide_text("u.swf", "; MaxProcs: 4".encode("utf-16"))
    Traceback (most recent call last):
    ...
    wattsched.errors.TraceError: u.swf: the file is UTF-16 text (byte-order mark ff fe); wattsched reads SWF as UTF-8 \
(or ASCII): convert it, e.g. iconv -f UTF-16 u.swf -t UTF-8 > u.utf8.swf
    """
    encoding = next((name for bom, name in _WIDE_BOMS if head.startswith(bom)), None)
    if encoding is None and b"\x00" not in head:
        return
    if encoding is not None:
        bom = head[:4 if encoding == "UTF-32" else 2].hex(" ")
        what = f"{encoding} text (byte-order mark {bom})"
    else:
        encoding = "UTF-16"
        what = "UTF-16 or UTF-32 text, or not text at all (it has NUL bytes)"
    name = os.path.basename(path)
    stem = name.removesuffix(".gz").removesuffix(".swf")
    source = f"zcat {name} | iconv -f {encoding}" if name.endswith(".gz") else f"iconv -f {encoding} {name}"
    raise TraceError(path, None, f"the file is {what}; wattsched reads SWF as UTF-8 (or ASCII): convert it, e.g. "
                                 f"{source} -t UTF-8 > {stem}.utf8.swf")


GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)
"""What reading a truncated or corrupt ``.gz`` file raises."""


@contextlib.contextmanager
def gzip_errors(path: str, where: list[int] | None = None):
    """Turn a truncated or corrupt gzip stream into a :class:`TraceError` naming the file (and line).

    ``where`` holds the number of the last line read, if the caller keeps one.
    """
    try:
        yield
    except GZIP_ERRORS as exc:
        line = where[0] + 1 if where else None
        what = "truncated" if isinstance(exc, EOFError) else "corrupt"
        raise TraceError(path, line, f"{what} gzip data ({exc}); the file is damaged, download or "
                                     "compress it again") from None
    except OSError as exc:
        raise TraceError(path, None, f"cannot read: {exc.strerror or exc}") from None


_HEADER_KEY = re.compile(r"([A-Za-z][A-Za-z0-9_]*)\s*:(?!//)\s*(.*)")
"""``Key: value``; a URL (``http://...``) is not a key."""


def read_header(path: str | os.PathLike) -> dict[str, str]:
    """The ``; Key: value`` header of an SWF file (repeated keys are joined with newlines).

    A line that is not ``Key: value`` (an indented ``;       times are actually
    start times``, a second URL, a cleaning filter) continues the value of the
    key above it and is joined to it with a space; an empty ``;`` line ends
    the continuation. Reading stops at the first job line, so this is cheap on
    any trace.
    """
    header: dict[str, str] = {}
    last: str | None = None
    with gzip_errors(os.fspath(path)), _open_text(path) as fh:
        for line in fh:
            s = line.strip()
            if not s:
                continue
            if not s.startswith(";"):
                break
            body = s.lstrip(";").strip()
            if not body:
                last = None
                continue
            m = _HEADER_KEY.fullmatch(body)
            if m is None:
                if last is not None:
                    header[last] = f"{header[last]} {body}"
                continue
            key, value = m.group(1), m.group(2).strip()
            header[key] = f"{header[key]}\n{value}" if key in header else value
            last = key
    return header


def _header_int(header: dict[str, str], key: str) -> int | None:
    raw = header.get(key)
    if raw is None:
        return None
    try:
        return int(float(raw.split()[0]))
    except (ValueError, IndexError, OverflowError):  # not a number, empty, inf
        return None


def read_swf(
    path: str | os.PathLike,
    *,
    cores_per_node: int = 1,
    machine_procs: int | None = None,
    default_walltime: str | float = "runtime",
    skip_bad_lines: bool = False,
) -> Workload:
    """Open an SWF trace as a streamed :class:`~wattsched.workload.records.Workload`.

    Parameters
    ----------
    path
        ``.swf`` or ``.swf.gz`` file.
    cores_per_node
        Processors per node; a job's node count is ``ceil(procs / cores_per_node)``.
    machine_procs
        Size of the machine for the ``larger_than_machine`` rule; default the
        header's ``MaxProcs``.
    default_walltime
        ``"runtime"`` or seconds: the requested time of jobs that have none.
    skip_bad_lines
        Skip (and count) malformed lines instead of raising :class:`TraceError`.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise TraceError(path, None, "no such file")
    if cores_per_node < 1:
        raise ValueError("cores_per_node must be at least 1")
    fallback_walltime: float | None = None
    if default_walltime != "runtime":
        fallback_walltime = float(default_walltime)
        if not fallback_walltime > 0:
            raise ValueError(f"default_walltime must be 'runtime' or positive seconds, got {default_walltime!r}")
    header = read_header(path)
    max_procs = _header_int(header, "MaxProcs")
    max_nodes = _header_int(header, "MaxNodes")
    unix_start = _header_int(header, "UnixStartTime")
    limit = machine_procs or (max_procs if max_procs is not None and max_procs > 0 else None)
    report = CleaningReport()
    notes: list[str] = []
    note = header.get("Note", "") + header.get("Information", "")
    if "actually start times" in note or "submit times are actually" in note:
        notes.append(
            "the header says submit times are start times: this trace has no real waits, "
            "so simulated waits measure the policy against a zero-wait baseline"
        )
    if "MaxProcs" in header and not (max_procs is not None and max_procs > 0):
        notes.append(f"the header's MaxProcs ({header['MaxProcs'][:40]!r}) is not a positive number of "
                     "processors: no job is checked against the machine size")
    name = os.path.basename(path)
    for suffix in (".gz", ".swf"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    workload = Workload(
        name=name,
        jobs=iter(()),
        max_procs=max_procs,
        max_nodes=max_nodes,
        header=header,
        report=report,
        notes=notes,
    )
    workload.jobs = _stream(path, workload, cores_per_node, limit, fallback_walltime, skip_bad_lines, unix_start)
    return workload


def _bad(path: str, lineno: int, field_index: int | None, message: str) -> TraceError:
    if field_index is None:
        return TraceError(path, lineno, message)
    return TraceError(path, lineno, f"{message} (field {field_index + 1})", FIELDS[field_index])


# fields read as numbers, and which of them must be whole numbers (-1 where missing)
_NUMERIC = (0, 1, 3, 4, 7, 8, 10, 11, 12, 14, 15)
_INTEGRAL = frozenset({0, 4, 7, 10, 11, 12, 14, 15})
_CODES = frozenset({10, 11, 12, 14, 15})  # ids and codes: -1 (missing) or >= 0


def _stream(
    path: str,
    workload: Workload,
    cores_per_node: int,
    limit: int | None,
    fallback_walltime: float | None,
    skip_bad_lines: bool,
    unix_start: int | None,
) -> Iterator[TraceJob]:
    report = workload.report
    table = _fast_table(path)
    if table is not None:
        yield from _table_jobs(table, workload, cores_per_node, limit, fallback_walltime, unix_start)
        return
    drop = report.drop
    adjust = report.adjust
    origin: float | None = None
    last_submit = -math.inf
    ceil = math.ceil
    isfinite = math.isfinite
    seen = _SeenIds()
    where = [0]
    with gzip_errors(path, where), _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            where[0] = lineno
            if not line or line[0] == ";" or line.isspace():
                continue
            parts = line.split()
            if parts[0].startswith(";"):
                continue
            report.read += 1
            try:
                if len(parts) != 18:
                    raise _bad(path, lineno, None, f"expected 18 fields, found {len(parts)}")
                values = []
                for i in _NUMERIC:
                    try:
                        values.append(float(parts[i]))
                    except ValueError:
                        raise _bad(path, lineno, i, f"not a number: {parts[i][:40]!r}") from None
                if not isfinite(sum(values)) or max(values) > 1e15:  # nan, inf or absurd values somewhere
                    for i, v in zip(_NUMERIC, values):
                        if not isfinite(v):
                            raise _bad(path, lineno, i, f"not a finite number: {parts[i][:40]!r}")
                        if v > 1e15:
                            raise _bad(path, lineno, i, f"{parts[i][:40]} is out of range (at most 1e15)")
                for i, v in zip(_NUMERIC, values):
                    if i in _INTEGRAL and v != int(v):
                        raise _bad(path, lineno, i, f"expected a whole number, got {parts[i]}")
                    if i in _CODES and v < -1:
                        raise _bad(path, lineno, i, f"expected -1 (missing) or a number >= 0, got {parts[i]}")
                job_id, submit, runtime, alloc, req_procs, req_time, status, user, group, queue, part = values
                if job_id < 0:
                    raise _bad(path, lineno, 0, f"a job number must be >= 0, got {parts[0]}")
                first = seen.add(int(job_id), lineno)
                if first is not None:
                    raise _bad(path, lineno, 0, f"job number {int(job_id)} already appears on line {first}")
                if submit < 0:
                    raise _bad(path, lineno, 1, f"negative submit time {parts[1]}")
                if submit < last_submit:
                    raise _bad(path, lineno, 1, f"submit time {parts[1]} goes back in time (SWF is sorted)")
            except TraceError:
                if not skip_bad_lines:
                    raise
                report.skipped_lines += 1
                continue
            last_submit = submit
            if runtime < 0:
                drop("runtime_missing")
                continue
            procs = int(req_procs) if req_procs != -1 else int(alloc)
            if procs == -1 and alloc == -1:
                drop("procs_missing")
                continue
            if procs <= 0:
                drop("procs_nonpositive")
                continue
            if limit is not None and procs > limit:
                drop("larger_than_machine")
                continue
            if req_time <= 0:
                if fallback_walltime is None:
                    req_time = runtime if runtime > 0 else 1.0
                    adjust("walltime_from_runtime")
                else:
                    req_time = fallback_walltime
                    adjust("walltime_default")
            if runtime > req_time:
                adjust("runtime_exceeds_walltime")
            if origin is None:
                origin = submit
                if unix_start is not None:
                    workload.origin_unix_s = unix_start + submit
            report.kept += 1
            yield TraceJob(
                int(job_id),
                submit - origin,
                runtime,
                req_time,
                procs,
                ceil(procs / cores_per_node),
                str(int(user)),
                str(int(group)),
                str(int(part)) if part != -1 else (str(int(queue)) if queue != -1 else ""),
                int(status),
            )


class _SeenIds:
    """Job numbers read so far with their lines, in 16 bytes a job when they rise (as in every archive trace).

    >>> seen = _SeenIds()
    >>> [seen.add(i, line) for line, i in enumerate([3, 5, 4, 9, 5, 4], 1)]
    [None, None, None, None, 2, 3]
    """

    def __init__(self) -> None:
        from array import array

        self.rising = array("q")  # ids above every earlier one, and their lines
        self.lines = array("q")
        self.other: dict[int, int] = {}  # the rest

    def add(self, job_id: int, lineno: int) -> int | None:
        """Record ``job_id`` read on ``lineno``; the line it was first read on if it was already."""
        rising = self.rising
        if not rising or job_id > rising[-1]:
            rising.append(job_id)
            self.lines.append(lineno)
            return None
        import bisect

        k = bisect.bisect_left(rising, job_id)
        if rising[k] == job_id:
            return self.lines[k]
        first = self.other.get(job_id)
        if first is None:
            self.other[job_id] = lineno
        return first


_ODD_WHITESPACE = (b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f")
"""Whitespace that ``str.split`` splits at but the fast path does not expect: such files go line by line."""
_COMMENT_LINE = re.compile(rb"^[ \t]*;[^\n]*\n?", re.MULTILINE)
_UTF8_BOM = b"\xef\xbb\xbf"


FAST_MAX_BYTES = 64 * 2**20
"""Largest text (after decompression) parsed at once by :func:`_fast_table`; a larger file is read line by line,
so that its memory stays bounded whatever its size (the table at once takes some 500 bytes a job)."""


def _fast_table(path: str):
    """All job lines of a well-formed SWF file of at most :data:`FAST_MAX_BYTES` as an ``(n, 18)`` array, or ``None``.

    The whole text is parsed at once by numpy's C parser (``loadtxt``). Anything
    irregular (a line without 18 fields, a value that is not a number, a rule of
    :func:`_stream` broken, non-ASCII text, a damaged ``.gz``) gives ``None``,
    and the caller reads the file line by line instead: that path names the file,
    line and field of what is wrong, or skips bad lines. On a file this accepts,
    both paths give the same jobs and the same cleaning report.
    """
    import numpy as np

    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
        with (gzip.open if gz else open)(path, "rb") as fh:
            text = fh.read(FAST_MAX_BYTES + 1)
    except (OSError, ValueError, EOFError, zlib.error):
        return None
    if len(text) > FAST_MAX_BYTES:  # a large trace is streamed line by line, in bounded memory
        return None
    # The bytes as read, never decoded: ASCII text is its own UTF-8 (a BOM aside), and numpy parses the bytes
    # in chunks where a decoded text would be copied whole, four bytes a character, into the parser's buffer.
    if text.startswith(_UTF8_BOM):
        text = text[len(_UTF8_BOM):]
    if not text.isascii() or any(c in text for c in _ODD_WHITESPACE):
        return None
    if b"\r" in text:  # universal newlines, as the line reader sees the file
        text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    pos = 0
    while text.startswith((b";", b"\n"), pos):  # the header
        pos = text.find(b"\n", pos) + 1 or len(text)
    text = text[pos:]
    if b";" in text:
        text = _COMMENT_LINE.sub(b"", text)
        if b";" in text:
            return None
    if b"\n\n" in text:  # empty lines between jobs
        text = re.sub(b"\n\n+", b"\n", text)
    text = text.rstrip(b"\n")
    if not text:
        table = np.empty((0, 18))
    else:
        import io
        import warnings

        table = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # numpy's "empty input" and the like: not a table
                if b"-0" not in text:  # "-0" would read as 0, where float() reads -0.0
                    # most traces hold integers only, which numpy reads four times as fast as doubles;
                    # a fraction, an exponent or a value beyond 64 bits sends the file to the float parser
                    with contextlib.suppress(ValueError):
                        table = np.loadtxt(io.BytesIO(text), dtype=np.int64, comments=None, ndmin=2,
                                           encoding="ascii")
                if table is None:
                    # numpy's C parser: the same doubles as float() on every field it accepts (others: None below)
                    table = np.loadtxt(io.BytesIO(text), dtype=np.float64, comments=None, ndmin=2,
                                       encoding="ascii")
        except (ValueError, Warning):  # a line with a different number of fields, a field not a number
            return None
        if table.shape[1] != 18:
            return None
    if table.dtype.kind == "i":  # finite and integral: only the bounds to check
        if (table.max(axis=0)[list(_NUMERIC)] > 10**15).any() or (table.min(axis=0)[sorted(_CODES)] < -1).any():
            return None
        table = table.astype(np.float64)  # exact below 2**53
    else:
        numeric = table[:, _NUMERIC]
        if not np.isfinite(numeric).all() or (numeric > 1e15).any():
            return None
        integral = table[:, sorted(_INTEGRAL)]
        if (integral != np.trunc(integral)).any() or (table[:, sorted(_CODES)] < -1).any():
            return None
    ids, submit = table[:, 0], table[:, 1]
    if (ids < 0).any() or (submit < 0).any() or (np.diff(submit) < 0).any():
        return None
    ordered = np.sort(ids)  # duplicates side by side (np.unique would import numpy.ma, 30 ms, for this)
    if (ordered[1:] == ordered[:-1]).any():
        return None
    return table


def _table_jobs(table, workload: Workload, cores_per_node: int, limit: int | None,
                fallback_walltime: float | None, unix_start: int | None) -> Iterator[TraceJob]:
    """The jobs of a table from :func:`_fast_table`, cleaned and counted as :func:`_stream` does line by line."""
    import numpy as np

    report = workload.report
    n = table.shape[0]
    report.read += n
    runtime, alloc, req_procs, req_time = table[:, 3], table[:, 4], table[:, 7], table[:, 8]
    procs = np.where(req_procs != -1, req_procs, alloc)
    # the rule each line breaks first, in _stream's order (-1: kept)
    rules = ("runtime_missing", "procs_missing", "procs_nonpositive", "larger_than_machine")
    rule = np.full(n, -1, dtype=np.int8)
    broken = [runtime < 0, (req_procs == -1) & (alloc == -1), procs <= 0,
              procs > limit if limit is not None else np.zeros(n, dtype=bool)]
    for k in range(len(rules) - 1, -1, -1):
        rule[broken[k]] = k
    _count_in_order(report.dropped, rules, rule)
    kept = rule == -1
    table = table[kept]
    runtime, procs, req_time = table[:, 3], procs[kept], table[:, 8]
    no_walltime = req_time <= 0
    if fallback_walltime is None:
        walltime = np.where(no_walltime, np.where(runtime > 0, runtime, 1.0), req_time)
        fill_rule = "walltime_from_runtime"
    else:
        walltime = np.where(no_walltime, fallback_walltime, req_time)
        fill_rule = "walltime_default"
    over = runtime > walltime
    # adjustments in the order _stream makes them: line by line, the walltime fill before the overrun
    m = runtime.size
    first = {}
    if no_walltime.any():
        first[fill_rule] = 2 * int(np.argmax(no_walltime))
    if over.any():
        first["runtime_exceeds_walltime"] = 2 * int(np.argmax(over)) + 1
    counts = {fill_rule: int(no_walltime.sum()), "runtime_exceeds_walltime": int(over.sum())}
    for name in sorted(first, key=first.__getitem__):
        report.adjusted[name] = report.adjusted.get(name, 0) + counts[name]
    if m == 0:
        return
    origin = float(table[0, 1])
    if unix_start is not None:
        workload.origin_unix_s = unix_start + origin
    report.kept += m
    ids = table[:, 0].astype(np.int64)
    submit = table[:, 1] - origin
    nodes = np.ceil(procs / cores_per_node).astype(np.int64)
    procs_int = procs.astype(np.int64)
    status = table[:, 10].astype(np.int64)
    users = _labels(table[:, 11])
    groups = _labels(table[:, 12])
    queue, part = table[:, 14], table[:, 15]
    partition_code = np.where(part != -1, part, queue)
    partitions = _labels(partition_code, missing=(part == -1) & (queue == -1))
    block = 65536
    for lo in range(0, m, block):
        hi = min(lo + block, m)
        yield from map(TraceJob, ids[lo:hi].tolist(), submit[lo:hi].tolist(), runtime[lo:hi].tolist(),
                       walltime[lo:hi].tolist(), procs_int[lo:hi].tolist(), nodes[lo:hi].tolist(),
                       users[lo:hi], groups[lo:hi], partitions[lo:hi], status[lo:hi].tolist())


def _count_in_order(counts: dict[str, int], names: tuple[str, ...], which) -> None:
    """Add to ``counts`` how often each ``names[k]`` appears in ``which``, new keys in order of first appearance."""
    import numpy as np

    seen = []
    for k, name in enumerate(names):
        hits = np.flatnonzero(which == k)
        if hits.size:
            seen.append((int(hits[0]), name, int(hits.size)))
    for _, name, count in sorted(seen):
        counts[name] = counts.get(name, 0) + count


def _labels(codes, missing=None) -> list[str]:
    """``str(int(code))`` of each code (``""`` where ``missing``), one string object per distinct code."""
    import numpy as np

    values, inverse = np.unique(codes, return_inverse=True)
    names = [str(int(v)) for v in values.tolist()]
    out = [names[i] for i in inverse.ravel().tolist()]
    if missing is not None and missing.any():
        for i in np.flatnonzero(missing).tolist():
            out[i] = ""
    return out


def submit_span_s(path: str | os.PathLike) -> float:
    """Seconds between the first and the last submission of an SWF file, read cheaply (no parsing of jobs).

    A plain file is read from both ends; a ``.gz`` file is decompressed once. Lines that are
    not jobs are ignored, so the span may be a little off on a malformed file (the reader
    reports those).
    """
    path = os.fspath(path)

    def submit(line: str) -> float | None:
        parts = line.split()
        if len(parts) < 2 or parts[0].startswith(";"):
            return None
        try:
            value = float(parts[1])
        except ValueError:
            return None
        return value if math.isfinite(value) else None

    first = last = None
    with gzip_errors(path), _open_text(path) as fh:
        for line in fh:
            first = submit(line)
            if first is not None:
                break
        if first is None:
            return 0.0
        if isinstance(fh, io.TextIOWrapper) and isinstance(fh.buffer, gzip.GzipFile):
            for line in fh:
                value = submit(line)
                last = value if value is not None else last
        else:
            with open(path, "rb") as raw:
                raw.seek(max(0, os.path.getsize(path) - 65536))
                for line in raw.read().decode("utf-8", "replace").splitlines()[1:]:
                    value = submit(line)
                    last = value if value is not None else last
    return max(0.0, (last if last is not None else first) - first)


def trace_info(workload: Workload) -> dict:
    """Consume a workload and describe it: jobs, span, machine, missing fields, offered load."""
    n = 0
    first = last = None
    node_seconds = 0.0
    proc_seconds = 0.0
    users: set[str] = set()
    over = 0
    zero = 0
    for job in workload.jobs:
        n += 1
        if first is None:
            first = job.submit_s
        last = job.submit_s
        proc_seconds += job.runtime_s * job.procs
        node_seconds += job.runtime_s * job.nodes
        users.add(job.user)
        over += job.runtime_s > job.walltime_s
        zero += job.runtime_s == 0
    span = (last - first) if n else 0.0
    procs = workload.max_procs
    return {
        "name": workload.name,
        "jobs": n,
        "users": len(users),
        "span_s": span,
        "span_days": span / 86400.0,
        "max_procs": procs,
        "max_nodes": workload.max_nodes,
        "origin_unix_s": workload.origin_unix_s,
        "offered_load": (proc_seconds / (procs * span)) if procs and span > 0 else None,
        "zero_runtime_jobs": zero,
        "runtime_exceeds_walltime": over,
        "cleaning": workload.report.as_dict(),
        "notes": list(workload.notes),
        "has_power": workload.has_power,
    }
