"""Job power history as the predictors want it, from the state store's rows."""

from __future__ import annotations

from wattsched.model.job import Job
from wattsched.predictors.base import CompletedJob


def completed_jobs(rows) -> list[CompletedJob]:
    """Store rows ``(job_id, start_s, user, partition, nodes, walltime_s, submit_s, end_s, mean, max, std, source)``."""
    out = []
    for jid, start, user, partition, nodes, walltime, submit, end, mean, mx, std, _src in rows:
        job = Job(id=jid, submit_s=submit, walltime_s=walltime, nodes=nodes, user=user, partition=partition)
        out.append(CompletedJob(job, start, end, mean, mx, std))
    return out
