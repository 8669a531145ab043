"""The workload entering a run: trace records made into jobs, their ground truth kept apart, predictions.

:class:`Intake` streams the workload (a 450,000-job trace is never all in memory): at each instant the
engine hands it, it submits to the ledger the jobs submitted by then, as the :class:`~wattsched.model.job.Job`
a policy sees, and keeps each trace record (real runtime and power) apart until the job leaves. A predictor,
if the run has one, predicts the new jobs at once and learns each job's real power when it completes; an
oracle reads that truth here. Jobs of units are checked to fit some node. Compiled with the core
(``intake.pxd``): it runs once per job.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

from wattsched.errors import TraceError
from wattsched.model.job import Job, PowerEstimate, job_from_fields
from wattsched.model.ledger import Ledger, Run
from wattsched.model.platform import Platform
from wattsched.model.snapshot import Snapshot
from wattsched.predictors.base import completed_job_builder, predictor_tags
from wattsched.sim.options import EngineOptions
from wattsched.workload.records import TraceJob, Workload, app_of, true_power


def make_job(tj: TraceJob) -> Job:
    """The job a policy sees of trace record ``tj``."""
    # Positional, in Job's field order: this runs once per job.
    return job_from_fields(
        tj.id, tj.submit_s, tj.walltime_s, tj.nodes, tj.user, tj.group, "", tj.partition, "", tj.procs,
        1, tj.gpus_per_node, 0, tj.min_nodes, tj.max_nodes, tj.malleable, True, 0.0, tj.app_class, (),
        tj.units, False, app_of(tj),
    )


def _progress_bar(options: EngineOptions, workload: Workload | None):
    """A bar counting submitted jobs (against the trace's ``MaxJobs`` if it states one), or None."""
    if not options.progress:
        return None
    from tqdm import tqdm

    total = None
    if workload is not None:
        raw = workload.header.get("MaxJobs")
        if raw and raw.strip().isdigit():
            total = int(raw.strip())
    return tqdm(total=total, unit=" jobs", delay=2.0, mininterval=0.5, leave=False, desc="simulating")


class Intake:
    """Submits ``workload``'s jobs to ``ledger`` as the clock reaches them.

    Parameters
    ----------
    snapshot
        The policy's snapshot of the ledger: its estimate (nominal busy power) narrows the queue index's
        searches when no predictor runs and ``index_estimates`` is set (a policy that plans against power).
    maps_units
        The policy maps jobs of units itself; otherwise :attr:`pack` is set once such a job is seen (its starts
        are then packed onto units).
    """

    def __init__(self, workload: Workload | Iterable[TraceJob], ledger: Ledger, snapshot: Snapshot, *,
                 predictor=None, maps_units: bool = False, index_estimates: bool = True,
                 options: EngineOptions | None = None):
        self.workload = workload if isinstance(workload, Workload) else None
        self.name = self.workload.name if self.workload is not None else "workload"
        self._jobs: Iterator[TraceJob] = iter(workload.jobs if isinstance(workload, Workload) else workload)
        self.ledger = ledger
        self.platform: Platform = ledger.platform
        self._snapshot = snapshot
        self.truth: dict[int, TraceJob] = {}  # ground truth of the jobs in the system, by id
        self.submitted = 0
        self.pack = False
        self._maps_units = maps_units
        self._index_estimates = index_estimates
        self.next_job: TraceJob | None = None
        self._options = options or EngineOptions()
        self._bar = None
        self.predictor = predictor
        self.predictor_tags = None if predictor is None else predictor_tags(predictor)
        if predictor is not None:
            self._completed = completed_job_builder()
            predictor.setup(self.platform)
            if self.predictor_tags.needs_truth:
                predictor.observe_truth(self.true_estimate)  # an oracle: the replay knows the real power

    def first(self) -> TraceJob | None:
        """The run starts: the workload's first job is read (:attr:`next_job`), the progress bar set up."""
        self.next_job = next(self._jobs, None)
        self._bar = _progress_bar(self._options, self.workload)
        return self.next_job

    def submit_until(self, t: float) -> list[int]:
        """Submit the jobs submitted up to ``t`` (predicted, if a predictor runs); returns the ids of those that
        were running when the trace began (a hot start), in order."""
        nxt = self.next_job
        truth = self.truth
        ledger = self.ledger
        jobs = self._jobs
        bar = self._bar
        first_new = submitted = self.submitted
        hot: list[int] = []
        while nxt is not None and nxt.submit_s <= t:
            job = make_job(nxt)
            if job.id in truth:
                raise TraceError(self.name, None, f"job id {job.id} appears twice in the workload")
            truth[job.id] = nxt
            if job.units:
                self._check_units(job)
            elif job.app:
                self._check_app(job)
            ledger.submit(job)
            if nxt.extra and nxt.extra.get("running_at_start"):
                hot.append(job.id)
            submitted += 1
            nxt = next(jobs, None)
            if bar is not None and not submitted & 1023:
                bar.update(1024)
        self.next_job = nxt
        self.submitted = submitted
        if submitted > first_new and (self.predictor is not None or self._index_estimates):
            self._estimate(submitted - first_new)
        return hot

    def _estimate(self, count: int) -> None:
        """The estimates of the ``count`` jobs just submitted (predicted, or nominal for the queue index)."""
        ledger = self.ledger
        if self.predictor is not None:
            new = list(islice(reversed(ledger.pending.values()), count))
            new.reverse()
            for job, est in zip(new, self.predictor.predict(new)):
                ledger.set_estimate(job.id, est)
        elif self._index_estimates:
            # No prediction: the estimate the policy gets (nominal busy power) narrows the index's searches too
            # (for a policy that plans against power: a power-unaware one never searches the index by power).
            snap, qindex = self._snapshot, ledger.qindex
            for job in islice(reversed(ledger.pending.values()), count):
                est = snap.estimate(job)
                qindex.set_estimate(job.id, est.mean_w, est.max_w, est.std_w)

    def _check_units(self, job: Job) -> None:
        """A submitted job of units: packed for a whole-node policy; refused if some unit fits no node at all."""
        if not self._maps_units:
            self.pack = True
        problem = self.ledger.unhosted(job)
        if problem is not None:
            raise TraceError(self.name, None, problem, field="units")

    def _check_app(self, job: Job) -> None:
        """A job of an application on a platform that times jobs by PASS: refused if the application has no model."""
        models = self.ledger.pass_models
        if models and job.app not in models:
            raise TraceError(self.name, None, f"job {job.id}: application {job.app!r} has no PASS model on platform "
                             f"{self.platform.name!r} (known: {', '.join(sorted(models))})", field="app")

    def true_estimate(self, job_id: int) -> PowerEstimate:
        """Real per-node power of a job: what the oracle sees and what the predictor learns."""
        return true_power(self.truth[job_id], self.platform)

    def learn(self, run: Run, end_s: float) -> None:
        """The predictor learns the real power of ``run``'s job, which completed at ``end_s``."""
        true = true_power(self.truth[run.job.id], self.platform)
        self.predictor.update(self._completed(run.job, run.start_s, end_s, true.mean_w, true.max_w, true.std_w))

    def close(self) -> int:
        """The run ends: the progress bar closes; returns how many jobs of the workload were never submitted."""
        bar = self._bar
        if bar is not None:
            bar.update(self.submitted & 1023)
            bar.close()
        if self.next_job is None:
            return 0
        return 1 + sum(1 for _ in self._jobs)
