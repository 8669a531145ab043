"""What a simulation run produces: a per-job table, a power timeline and run information."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from wattsched.model.platform import Platform

JOB_COLUMNS = (
    "id", "user", "submit_s", "start_s", "end_s", "wait_s", "runtime_s", "walltime_s",
    "nodes", "energy_j", "wasted_j", "wasted_node_s", "evictions", "state", "work_s",
)
"""Columns of :attr:`SimResult.jobs`.

``start_s`` and ``end_s`` are those of the last attempt (a requeued job runs
again); ``wait_s = start_s - submit_s``; ``runtime_s = end_s - start_s``;
``energy_j`` counts every attempt; ``wasted_j`` and ``wasted_node_s`` count
the energy and node-seconds of evicted attempts; ``state`` is the final
:class:`~wattsched.model.job.JobState` value (``COMPLETED``, ``TIMEOUT``,
``CANCELLED``). Jobs still pending or running when the run stops (a time
limit) have ``NaN`` start or end and state ``PENDING`` or ``RUNNING``.
``nodes`` is the number of nodes the last attempt ran on at its end: the
request, or the count a scheduler chose in a moldable job's range (the last,
after a reshape); for a job that never started, its request. ``work_s`` is
the work the last attempt did, in seconds at nominal speed: the
job's run time had no cap or lower frequency slowed it (for a completed job,
its real run time); ``runtime_s / work_s`` is its slowdown by power reduction.
It is ``NaN`` for jobs that never started.
"""

LEGACY_JOB_COLUMNS = JOB_COLUMNS[:-1]
"""Columns of run directories written before ``work_s`` existed; read with ``work_s`` as ``NaN``."""

TIMELINE_COLUMNS = ("t_s", "power_w", "cap_w", "busy_nodes", "off_nodes", "pending_jobs")
"""Columns of :attr:`SimResult.timeline`.

Row ``i`` holds from ``t_s[i]`` until ``t_s[i+1]`` (piecewise constant); the last
row marks the end of the run. ``cap_w`` is ``inf`` where no cap applies.
"""

JOB_NUMBERS = {col: np.int64 if col in ("nodes", "evictions") else np.float64
               for col in JOB_COLUMNS if col not in ("id", "user", "state")}
"""The numbers of a job's row as the engine records them, in order, and their types in :attr:`SimResult.jobs`
(recorded as doubles: node and eviction counts are exact there; job ids, which may not be, are kept apart)."""


def job_table(ids: list[int], users: list[str], states: list[str], numbers: np.ndarray) -> dict[str, np.ndarray]:
    """:attr:`SimResult.jobs` from the jobs recorded in the order they left: ids, users, states, and a row of
    :data:`JOB_NUMBERS` each; sorted by id.

    >>> t = job_table([2, 1], ["b", "a"], ["COMPLETED", "TIMEOUT"], np.zeros((2, len(JOB_NUMBERS))))
    >>> t["id"].tolist(), t["user"].tolist(), list(t) == list(JOB_COLUMNS)
    ([1, 2], ['a', 'b'], True)
    """
    id_array = np.fromiter(ids, dtype=np.int64, count=len(ids))
    order = np.argsort(id_array, kind="stable")
    jobs = {"id": id_array[order], "user": np.array(users, dtype=object)[order],
            "state": np.array(states, dtype=object)[order]}
    for k, (col, dtype) in enumerate(JOB_NUMBERS.items()):
        jobs[col] = numbers[:, k][order].astype(dtype, copy=False)
    return {col: jobs[col] for col in JOB_COLUMNS}


@dataclass
class SimResult:
    jobs: dict[str, np.ndarray]
    timeline: dict[str, np.ndarray]
    platform: Platform
    info: dict = field(default_factory=dict)

    @property
    def n_jobs(self) -> int:
        return len(self.jobs["id"])
