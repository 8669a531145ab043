"""Job power history as the predictors want it, from the state store's rows."""

from __future__ import annotations

from collections import Counter as Tally

from wattsched.model.job import Job
from wattsched.predictors.base import CompletedJob


def completed_jobs(rows) -> list[CompletedJob]:
    """Store rows ``(job_id, start_s, user, partition, nodes, walltime_s, submit_s, end_s, mean, max, std, source)``."""
    out = []
    for jid, start, user, partition, nodes, walltime, submit, end, mean, mx, std, _src in rows:
        job = Job(id=jid, submit_s=submit, walltime_s=walltime, nodes=nodes, user=user, partition=partition)
        out.append(CompletedJob(job, start, end, mean, mx, std))
    return out


SACCT_FIELDS = "JobIDRaw,User,Partition,NNodes,NodeList,Submit,Start,End,TimelimitRaw,State"
"""What ``wattsched history import`` asks sacct for (``-P``: pipe-separated, one line per job with ``-X``)."""


def sacct_args(since: str, until: str = "now") -> list[str]:
    return ["sacct", "-a", "-X", "-P", "-n", "-S", since, "-E", until, "-o", SACCT_FIELDS,
            "--state=CD,TO,F,CA,NF,OOM"]


def parse_sacct(text: str, source: str = "sacct") -> list[dict]:
    """Finished jobs from ``sacct -P -n -o SACCT_FIELDS`` output; a malformed line names its number."""
    import datetime as dt

    from wattsched.daemon.slurm.hostlist import expand
    from wattsched.errors import TraceError

    def when(value: str, line: int, key: str) -> float:
        try:
            return dt.datetime.fromisoformat(value).astimezone().timestamp()
        except ValueError:
            raise TraceError(source, line, f"not a time: {value!r}", key) from None

    names = SACCT_FIELDS.split(",")
    jobs = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != len(names):
            raise TraceError(source, no, f"expected {len(names)} fields ({SACCT_FIELDS}), got {len(parts)}")
        rec = dict(zip(names, parts, strict=True))
        if rec["Start"] in ("Unknown", "None", "") or rec["End"] in ("Unknown", "None", ""):
            continue  # never ran
        try:
            job_id = int(rec["JobIDRaw"].split("_")[0].split("+")[0])
            nnodes = int(rec["NNodes"])
        except ValueError as exc:
            raise TraceError(source, no, str(exc)) from None
        if nnodes < 1:
            raise TraceError(source, no, f"a finished job ran on at least 1 node, got {rec['NNodes']}", "NNodes")
        limit_min = rec["TimelimitRaw"].strip()
        if limit_min.isdigit():
            walltime = float(limit_min) * 60
        elif limit_min in _NO_TIME_LIMIT:
            walltime = 0.0  # unknown: predictors do without
        else:
            raise TraceError(source, no, f"expected minutes >= 0 (or {', '.join(sorted(_NO_TIME_LIMIT - {''}))}), "
                             f"got {limit_min!r}", "TimelimitRaw")
        submit_s, start_s = when(rec["Submit"], no, "Submit"), when(rec["Start"], no, "Start")
        end_s = when(rec["End"], no, "End")
        if submit_s > start_s:
            raise TraceError(source, no, f"{rec['Submit']} is after Start {rec['Start']}", "Submit")
        if end_s < start_s:
            raise TraceError(source, no, f"{rec['End']} is before Start {rec['Start']}", "End")
        try:
            node_names = list(expand(rec["NodeList"]))
        except ValueError as exc:  # malformed, or more names than any cluster has
            raise TraceError(source, no, str(exc), "NodeList") from None
        jobs.append({
            "job_id": job_id, "user": rec["User"], "partition": rec["Partition"], "nodes": nnodes,
            "node_names": node_names, "submit_s": submit_s, "start_s": start_s, "end_s": end_s,
            "walltime_s": walltime,
        })
    return jobs


_NO_TIME_LIMIT = frozenset({"", "UNLIMITED", "Partition_Limit", "INVALID", "NONE"})
"""TimelimitRaw values of a job without a time limit of its own (its walltime is then unknown)."""


def import_history(jobs: list[dict], telemetry, store, progress=None) -> tuple[int, int]:
    """Measure each finished job's power over its run from telemetry and store it. Returns (new, without data)."""
    rows, missing = [], 0
    for job in (progress(jobs) if progress else jobs):
        measured = telemetry.job_power(job["node_names"], job["start_s"], job["end_s"])
        if measured is None:
            missing += 1
            continue
        mean, mx, std = measured
        rows.append((job["job_id"], job["start_s"], job["user"], job["partition"], job["nodes"], job["walltime_s"],
                     job["submit_s"], job["end_s"], mean, mx, std, "prometheus"))
    return store.add_history(rows), missing


class PowerHistory:
    """Job power history as the daemon learns it: Slurm's per-node readings of running jobs sampled each cycle,
    or telemetry over a finished job's whole run, written to the store when the job finishes."""

    def __init__(self, store, telemetry):
        self.store = store
        self.telemetry = telemetry
        self.samples: dict[int, list[float]] = {}
        """Per running job, its per-node watts, one reading per cycle."""
        self.running: dict[int, object] = {}

    def learn(self, state, view) -> list[tuple]:
        """Sample the per-node power Slurm reports for running jobs; record the jobs that finished since (returned)."""
        watts = {n.name: n.current_watts for n in state.nodes}
        running = {j.job_id: j for j in view.classified.running}
        jobs_on = Tally(n for j in state.jobs if j.state in ("RUNNING", "SUSPENDED", "COMPLETING") for n in j.nodes)
        for jid, job in running.items():
            if job.shared and any(jobs_on[n] > 1 for n in job.nodes):
                continue  # a node's power is a job's own (a unit's, alone on its node) only while nothing shares it
            readings = [watts.get(n) for n in job.nodes]
            if readings and all(w is not None for w in readings):
                self.samples.setdefault(jid, []).append(sum(readings) / len(readings))
        rows = []
        finished = {j.job_id: j for j in state.jobs}
        for jid, job in self.running.items():
            if jid in running:
                continue
            samples = self.samples.pop(jid, None)
            start = job.start_time or state.read_at
            end = (finished[jid].end_time if jid in finished and finished[jid].end_time else None) or state.read_at
            # a job that may have shared its nodes learns only from the cycles it ran alone on them
            measured = self.telemetry.job_power(job.nodes, start, end) if job.nodes and not job.shared else None
            if measured is not None:  # telemetry over the job's whole run
                mean, mx, std = measured
                source = "prometheus"
            elif samples:  # Slurm's own node power readings, one per cycle
                mean = sum(samples) / len(samples)
                mx = max(samples)
                std = (sum((x - mean) ** 2 for x in samples) / len(samples)) ** 0.5
                source = "slurm"
            else:
                continue
            rows.append((jid, start, job.user, job.partition, max(job.node_count, 1), job.time_limit_s or 0.0,
                         job.submit_time or start, end, mean, mx, std, source))
        if rows:
            self.store.add_history(rows)
        for jid in list(self.samples):
            if jid not in running:
                del self.samples[jid]
        self.running = running
        return rows

