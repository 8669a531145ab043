"""A site's own workload as a job table: Slurm accounting plus the power its nodes drew.

:func:`import_accounting` turns :class:`~wattsched.daemon.slurm.sacct.AcctJob` records
(``sacct --json``, ``sacct -P`` or slurmrestd's ``/slurmdb/vX/jobs``) into
:class:`~wattsched.workload.records.TraceJob` rows that ``simulate --trace`` reads,
and the columns of what Slurm recorded (:data:`RECORD_COLUMNS`), which the
simulator ignores and ``platform fit`` and replays with the recorded start
times read. :func:`fetch_slurmdb_jobs` asks slurmrestd for the jobs.

Per-job power, per node (``mean_w``, ``max_w``, ``std_w``), comes from

- ``prometheus``: a node power series (any PromQL giving one series per node in
  watts) over the job's nodes and run, :meth:`PrometheusSource.job_power`;
- ``slurm-energy``: Slurm's ``ConsumedEnergyRaw`` (TRES ``energy``) divided by
  nodes and run time, where the site has energy accounting;
- ``none``: neither; the power cells stay empty (``simulate`` then treats the job as any job without power).

``power_source`` names which one each job got.
"""

from __future__ import annotations

import hashlib
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wattsched.daemon.slurm.sacct import AcctJob, parse_sacct_json
from wattsched.errors import OptionError, TelemetryError, TraceError
from wattsched.workload.records import TraceJob

__all__ = [
    "POWER_SOURCES",
    "RECORD_COLUMNS",
    "ImportedTrace",
    "fetch_slurmdb_jobs",
    "hash_user",
    "import_accounting",
]

POWER_SOURCES = ("auto", "prometheus", "slurm-energy", "none")
"""``--power`` choices: ``auto`` takes Prometheus where it has the job's data, else Slurm's energy, else none."""

RECORD_COLUMNS: dict[str, str] = {
    "start_s": "float64",
    "end_s": "float64",
    "submit_unix_s": "float64",
    "node_list": "string",
    "state": "string",
    "energy_j": "float64",
    "power_source": "string",
}
"""Columns written after the job-table columns, with their types: the recorded start and end (seconds from the
same origin as ``submit_s``), the epoch time of the submission, Slurm's node list and state, the job's energy over
all its nodes (J) and where its power came from (``prometheus``, ``slurm-energy`` or ``none``)."""

_STATUS = {"COMPLETED": 1, "CANCELLED": 5}


def hash_user(user: str, salt: str) -> str:
    """A user name as a salted hash, the same for the same name and salt (for sharing a trace).

    >>> hash_user("alice", "s3cret")
    'u-41bd54578941'
    >>> hash_user("alice", "s3cret") == hash_user("alice", "other")
    False
    """
    return "u-" + hashlib.sha256(f"{salt}\0{user}".encode()).hexdigest()[:12]


@dataclass
class ImportedTrace:
    """What :func:`import_accounting` made: the jobs, the recorded columns, counts and notes."""

    jobs: list[TraceJob]
    record: dict[str, tuple[str, list]]
    origin_unix_s: float | None
    sources: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def import_accounting(
    acct: Iterable[AcctJob],
    *,
    power: str = "auto",
    prometheus=None,
    step_s: float = 15.0,
    hash_salt: str | None = None,
    as_run: bool = False,
    progress: Callable[[Sequence[AcctJob]], Iterable[AcctJob]] | None = None,
    measured_name: str = "prometheus",
) -> ImportedTrace:
    """Jobs that ran, as job-table rows with their power; the others are counted in ``skipped``.

    Parameters
    ----------
    acct
        Accounting records; a job id seen twice (``sacct -D``, a requeue) keeps its last run.
    power
        One of :data:`POWER_SOURCES`.
    prometheus
        A :class:`~wattsched.telemetry.prometheus.PrometheusSource` (``None``: no Prometheus).
    step_s
        Resolution of the power series read over each job's run.
    hash_salt
        When given, user names are replaced by :func:`hash_user` of them.
    as_run
        Submit each job at its recorded start: a replay then starts every job when Slurm did (on a machine
        with room for the recorded schedule), which checks the power data and the platform against the
        recorded energy rather than a policy.
    measured_name
        The ``power_source`` of jobs whose power ``prometheus`` gave: any object with its ``job_power`` will do
        (shadow mode passes its record's measured node power, named ``shadow``).

    Raises
    ------
    TelemetryError
        Prometheus is unreachable or rejects the query (the message names the URL and query).
    """
    if power not in POWER_SOURCES:
        raise OptionError("--power", f"one of {', '.join(POWER_SOURCES)}, got {power!r}")
    if power == "prometheus" and prometheus is None:
        raise OptionError("--power", "prometheus needs --prometheus URL")
    use_prom = prometheus is not None and power in ("auto", "prometheus")
    use_slurm = power in ("auto", "slurm-energy")
    skipped: dict[str, int] = {}
    latest: dict[int, AcctJob] = {}
    for job in acct:
        if job.start is None:
            skipped["never started"] = skipped.get("never started", 0) + 1
            continue
        if job.end is None:
            skipped["still running"] = skipped.get("still running", 0) + 1
            continue
        if job.nodes < 1:
            skipped["no nodes"] = skipped.get("no nodes", 0) + 1
            continue
        if job.job_id in latest:
            skipped["earlier runs of a requeued job"] = skipped.get("earlier runs of a requeued job", 0) + 1
            if latest[job.job_id].start > job.start:
                continue
        latest[job.job_id] = job
    def submitted(j: AcctJob) -> float:
        return j.start if as_run or j.submit is None or j.submit > j.start else j.submit

    ran = sorted(latest.values(), key=lambda j: (submitted(j), j.job_id))
    origin = min(map(submitted, ran)) if ran else None
    jobs: list[TraceJob] = []
    cols: dict[str, list] = {name: [] for name in RECORD_COLUMNS}
    sources: dict[str, int] = {}
    no_limit = past_limit = 0
    for job in (progress(ran) if progress else ran):
        submit = submitted(job)
        runtime = max(job.end - job.start, 0.0)
        mean = mx = std = None
        source = "none"
        energy = None
        if use_prom and job.node_names and runtime > 0:
            # samples at the steps from the start up to, not including, the end: the sample at the end is the
            # node after the job
            last = job.end - min(step_s, runtime) / 2
            measured = prometheus.job_power(job.node_names, job.start, last, step_s=step_s)
            if measured is not None:
                mean, mx, std = measured
                source = measured_name
                energy = mean * job.nodes * runtime
        if source == "none" and use_slurm and job.energy_j is not None and runtime > 0:
            mean = job.energy_j / (job.nodes * runtime)
            mx, std = mean, 0.0
            source = "slurm-energy"
            energy = job.energy_j
        sources[source] = sources.get(source, 0) + 1
        if job.time_limit_s is None:
            no_limit += 1
        elif runtime > job.time_limit_s:
            past_limit += 1
        user = hash_user(job.user, hash_salt) if hash_salt is not None else job.user
        group = hash_user(job.group, hash_salt) if hash_salt is not None and job.group else job.group
        jobs.append(TraceJob(
            job.job_id, submit - origin, runtime,
            max(job.time_limit_s, runtime) if job.time_limit_s is not None else runtime,
            job.cpus or job.nodes, job.nodes, user=user, group=group, partition=job.partition,
            status=_STATUS.get(job.state.upper(), 0), mean_w=mean, max_w=mx, std_w=std,
        ))
        for name, value in (("start_s", job.start - origin), ("end_s", job.end - origin), ("submit_unix_s", submit),
                            ("node_list", job.node_list), ("state", job.state), ("energy_j", energy),
                            ("power_source", source)):
            cols[name].append(value)
    notes = []
    no_user = sum(1 for j in ran if not j.user)
    if no_user:
        # sacct --json and slurmrestd (22.05 at least) give a job's user through its association only: null for a
        # user without one on a cluster that does not enforce associations; sacct -P prints the name either way
        notes.append(f"{no_user} jobs have no user (Slurm's JSON names the user of jobs with an association only; "
                     "sacct -P text names every user)")
    if no_limit:
        notes.append(f"{no_limit} jobs have no time limit of their own; their requested time is their run time")
    if past_limit:
        # Slurm checks limits every 30 s and adds OverTimeLimit: a TIMEOUT job runs past its limit
        notes.append(f"{past_limit} jobs ran past their time limit (Slurm kills late); their requested time is "
                     "their run time, so that a replay does not cut them short")
    return ImportedTrace(jobs, {name: (kind, cols[name]) for name, kind in RECORD_COLUMNS.items()}, origin,
                         sources, skipped, notes)


# --------------------------------------------------------------------------- slurmrestd


REST_VERSIONS = ("v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40", "v0.0.39", "v0.0.38")
"""``/slurmdb/vX`` versions tried, newest first, when none is given."""


def fetch_slurmdb_jobs(
    url: str, token: str, *, since: float, until: float, user: str = "root", version: str | None = None,
    timeout_s: float = 60.0,
) -> tuple[list[AcctJob], str]:
    """Jobs slurmdbd recorded between ``since`` and ``until`` (epoch s), through slurmrestd.

    GET ``{url}/slurmdb/{version}/jobs?start_time=&end_time=`` with the
    ``X-SLURM-USER-NAME``/``X-SLURM-USER-TOKEN`` headers (a JWT from
    ``scontrol token``). Without ``version`` the newest that slurmrestd serves
    is used (it answers 404 for a version whose plugin is not loaded).

    Raises
    ------
    TelemetryError
        slurmrestd unreachable, refusing the token, or serving none of :data:`REST_VERSIONS`.
    TraceError
        The reply is not a job list (see :func:`~wattsched.daemon.slurm.sacct.parse_sacct_json`).
    """
    import time

    base = url.rstrip("/")
    # Relative times, the form every version parses (Slurm's parse_time: "now-3600seconds"); 22.05 refuses epoch
    # numbers ("Unable to parse time format") and ISO dates here.
    now = time.time()
    query = urllib.parse.urlencode({"start_time": f"now-{max(int(now - since), 0)}seconds",
                                    "end_time": f"now-{max(int(now - until), 0)}seconds"})
    tried = []
    for v in ((version,) if version else REST_VERSIONS):
        address = f"{base}/slurmdb/{v}/jobs?{query}"
        request = urllib.request.Request(address, headers={
            "X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as reply:
                body = reply.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and version is None:
                tried.append(v)
                continue
            detail = _rest_error(exc)
            hint = "; check the token (scontrol token) and --rest-user" if exc.code in (401, 403) else ""
            raise TelemetryError(f"slurmrestd at {address} answered HTTP {exc.code}: {detail}{hint}") from exc
        except (OSError, ValueError) as exc:
            raise TelemetryError(f"cannot reach slurmrestd at {base}: {getattr(exc, 'reason', exc)}; check the URL "
                                 "(e.g. http://head:6820) and that slurmrestd runs with the slurmdb plugin") from exc
        jobs, _ = parse_sacct_json(body, source=address)
        return jobs, v
    raise TelemetryError(f"slurmrestd at {base} serves none of /slurmdb/{{{','.join(tried)}}}/jobs; start it with "
                         "the slurmdb plugins (22.05: -s openapi/dbv0.0.38) or give --rest-version")


def _rest_error(exc: urllib.error.HTTPError) -> str:
    try:
        reply = json.loads(exc.read(65536))
        errors = reply.get("errors") or []
        return "; ".join(str(e.get("error") or e.get("description") or e) for e in errors) or str(exc.reason)
    except (ValueError, AttributeError, OSError):
        return str(exc.reason)


# --------------------------------------------------------------------------- reading an imported table


@dataclass(frozen=True)
class RecordedJob:
    """A row of an imported table as Slurm recorded it (epoch times)."""

    job_id: int
    start: float
    end: float
    nodes: tuple[str, ...]


def read_recorded(path: str) -> list[RecordedJob]:
    """The recorded runs of an imported job table (``traces import`` output: ``submit_unix_s``, ``start_s``, ...).

    Raises
    ------
    TraceError
        A column of :data:`RECORD_COLUMNS` is missing (not a ``traces import`` table) or a cell is malformed,
        naming the file, the row and the column.
    """
    from wattsched.daemon.slurm import hostlist

    rows = _table_rows(path)
    recorded = []
    for no, row in rows:
        try:
            origin = float(row["submit_unix_s"]) - float(row["submit_s"])
            start, end = origin + float(row["start_s"]), origin + float(row["end_s"])
            job_id = int(float(row["id"]))
        except (TypeError, ValueError) as exc:
            raise TraceError(path, no, f"not a number: {exc}") from None
        try:
            names = hostlist.expand(row.get("node_list") or "")
        except ValueError as exc:
            raise TraceError(path, no, str(exc), "node_list") from None
        if not (math.isfinite(start) and math.isfinite(end)):
            raise TraceError(path, no, "start_s and end_s must be finite", "start_s")
        recorded.append(RecordedJob(job_id, start, end, names))
    return recorded


def _table_rows(path: str) -> list[tuple[int, dict[str, Any]]]:
    """Rows of a CSV (plain or gzipped) or Parquet table as dicts, with their line (CSV) or row (Parquet) number."""
    import csv
    import gzip

    need = ("id", "submit_s", "submit_unix_s", "start_s", "end_s", "node_list")
    lower = path.lower()
    if lower.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        missing = [c for c in need if c not in table.column_names]
        if missing:
            raise TraceError(path, None, f"missing column {missing[0]!r}; is this `wattsched traces import` output?",
                             missing[0])
        return list(enumerate(table.to_pylist(), 1))
    opener = gzip.open if lower.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            header = [h.strip().lower() for h in reader.fieldnames or ()]
            missing = [c for c in need if c not in header]
            if missing:
                raise TraceError(path, 1, f"missing column {missing[0]!r}; is this `wattsched traces import` "
                                 "output?", missing[0])
            return [(reader.line_num, {k.strip().lower(): v for k, v in row.items() if k}) for row in reader]
    except OSError as exc:
        raise TraceError(path, None, f"cannot read: {exc.strerror or exc}") from None
