"""What a run leaves behind: a row per job that left, a timeline row per event, the control log.

The engine tells its :class:`Recorder` each job that leaves the system (completed, killed, cancelled, or
still pending or running when the run stops) and each instant it handled; the recorder reads the figures of
that instant from the ledger (power, busy and off nodes, queue length, the job's account across attempts)
and keeps them as :class:`~wattsched.sim.rows.Rows`, made into the tables of a
:class:`~wattsched.sim.result.SimResult` once, at the end. Compiled with the core (``recorder.pxd``): a
job's row and an event's row are on the per-job path.
"""

from __future__ import annotations

import math

from wattsched.model.job import Job, JobState
from wattsched.model.ledger import Ledger
from wattsched.model.platform import NodeState
from wattsched.sim.result import JOB_NUMBERS, TIMELINE_COLUMNS, job_table
from wattsched.sim.rows import Rows

CONTROL_LOG_MAX = 1_000_000
"""Most entries :attr:`Recorder.control_log` keeps."""
REJECTIONS_MAX = 100
"""Most rejected plans :attr:`Recorder.rejections` describes (all are counted)."""

_BUSY = int(NodeState.BUSY)
_OFF = int(NodeState.OFF)
_STATE_NAMES = ("idle", "busy", "off", "switching_on", "switching_off")


class Recorder:
    """The record of a run on ``ledger``: the jobs that left, in the order they left, and the timeline."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        # the jobs that left: ids, users and states apart; the numbers of JOB_NUMBERS a row each
        self.job_ids: list[int] = []
        self.job_users: list[str] = []
        self.job_states: list[str] = []
        self.job_rows = Rows(len(JOB_NUMBERS))
        self.timeline = Rows(len(TIMELINE_COLUMNS))  # a row per event
        self.rejections: list[str] = []
        self.control_log: list[tuple[float, str, int, float, int]] = []
        self.sizes: list[tuple[int, float, float, int, int, int, int]] = []
        """``(id, start_s, end_s, nodes used, min_nodes, max_nodes, nodes requested)`` of every moldable job that
        ran (its node range is not one count), in the order they left: what a scheduler chose in each range."""
        """Evictions and node frequency/cap changes applied: ``(t_s, kind, node, value, job_id)`` (-1: none).

        ``kind`` is ``evict``, ``cancel``, ``freq`` or ``cap``; ``value`` is the frequency (Hz) or cap (W) set,
        NaN for nominal; ``job_id`` is the job evicted or running on the node. At most
        :data:`CONTROL_LOG_MAX` entries.
        """

    def job(self, job: Job, state: JobState, start: float, end: float, energy_j: float, work_s: float,
            nodes: int = -1) -> None:
        """``job`` left in ``state`` (its last attempt from ``start`` to ``end``, on ``nodes`` nodes at its end:
        a moldable job's chosen count, a reshaped one's last; -1: its request); its account leaves the ledger."""
        if nodes < 0:
            nodes = job.nodes
        elif job.max_nodes != job.min_nodes and start == start:  # a moldable job that ran (start not NaN)
            self.sizes.append((job.id, start, end, nodes, job.min_nodes, job.max_nodes, job.nodes))
        acc = self.ledger.accounts.pop(job.id, None)
        self.job_ids.append(job.id)
        self.job_users.append(job.user)
        self.job_states.append(state._value_)
        submit = job.submit_s
        if acc is None:
            self.job_rows.add((submit, start, end, start - submit, end - start, job.walltime_s, nodes, energy_j,
                               0.0, 0.0, 0, work_s))
        else:
            self.job_rows.add((submit, start, end, start - submit, end - start, job.walltime_s, nodes,
                               energy_j + acc.energy_j, acc.wasted_j, acc.wasted_node_s, acc.evictions, work_s))

    def row(self, t: float, cap_w: float) -> None:
        """The timeline's row at ``t``: power, cap, busy and off nodes, queue length."""
        ledger = self.ledger
        self.timeline.add((t, ledger.power_w, cap_w, ledger.state_count[_BUSY], ledger.state_count[_OFF],
                           len(ledger.pending)))

    def jobs_left(self) -> int:
        """Jobs recorded so far."""
        return len(self.job_ids)

    def control(self, t: float, kind: str, node: int, value: float, job_id: int) -> None:
        """An eviction or a node setting applied at ``t`` (see :attr:`control_log`)."""
        if len(self.control_log) < CONTROL_LOG_MAX:
            self.control_log.append((t, kind, node, value, job_id))

    def rejected(self, t: float, problems: list[str]) -> None:
        """A plan the guard rejected at ``t``, described (the first :data:`REJECTIONS_MAX`)."""
        if len(self.rejections) < REJECTIONS_MAX:
            self.rejections.append(f"t={t:.0f}: " + "; ".join(problems))

    def unfinished(self) -> None:
        """The run stops: the jobs still running (their energy settled up to now) and pending are recorded so."""
        ledger = self.ledger
        runs = ledger.runs
        for jid in list(runs):
            run = runs[jid]
            ledger.settle(run)
            self.job(run.job, JobState.RUNNING, run.start_s, math.nan, run.energy_j, run.work_done_s, len(run.nodes))
        pending = ledger.pending
        for jid in list(pending):
            self.job(pending[jid], JobState.PENDING, math.nan, math.nan, 0.0, math.nan)

    def tables(self) -> tuple[dict, dict]:
        """The job table and the timeline of :class:`SimResult`; the ledger's books are closed."""
        jobs = job_table(self.job_ids, self.job_users, self.job_states, self.job_rows.table())
        table = self.timeline.table()
        timeline = {col: table[:, k].copy() for k, col in enumerate(TIMELINE_COLUMNS)}
        self.ledger.close()
        return jobs, timeline

    def figures(self) -> dict:
        """The run's energy, node-seconds and energy by node state, and the rejected plans (after :meth:`tables`)."""
        ledger = self.ledger
        return {
            "energy_j": ledger.energy_j,
            "node_seconds_by_state": dict(zip(_STATE_NAMES, ledger.state_node_s)),
            "energy_j_by_state": dict(zip(_STATE_NAMES, ledger.state_energy_j)),
            "rejected_plans": self.rejections,
        }
