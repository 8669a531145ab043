"""The predictor contract.

A predictor estimates the per-node power of jobs before they run: mean,
maximum and standard deviation (a :class:`~wattsched.model.job.PowerEstimate`).
It learns from *history*: completed jobs with their measured power.

* ``fit(history) -> self`` learns from a batch of completed jobs;
* ``update(completed)`` adds one completed job as it finishes (online);
* ``predict(jobs)`` estimates jobs, each as of its submission time: only jobs
  completed by then may inform its estimate (the simulator calls ``predict``
  when jobs are submitted and ``update`` when they end, in time order, so
  nothing leaks from the future).

Constructors only store parameters; learned state lives in attributes ending
in ``_``. ``setup(platform)`` gives a predictor the machine (for node power
bounds) before use.

What else a predictor takes or gives it declares in its tags
(:class:`PredictorTags`, from :meth:`BasePredictor.tags`, read through
:func:`predictor_tags`):

* ``needs_truth``: it is an oracle; the simulator (or an evaluation) hands it
  the real power through ``observe_truth(truth)`` after ``setup``, and only
  then; a live daemon refuses it;
* ``takes_clock``: ``set_clock(clock)`` gives it a wall clock to time its
  work (retrainings); this package reads no clock itself;
* ``retrain_log``: it keeps ``retrain_log_``, one dict per retraining.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

from wattsched.errors import PredictorError
from wattsched.model.job import Job, PowerEstimate, slot_layout
from wattsched.model.platform import Platform
from wattsched.plugins import NoParams, Parametrized, declared_tags

__all__ = ["BasePredictor", "CompletedJob", "NoParams", "Predictor", "PredictorTags", "node_max_w",
           "predictor_tags"]


@dataclass(frozen=True, slots=True)
class PredictorTags:
    """What a predictor declares it takes or keeps beyond the protocol; every field defaults to "nothing".

    Parameters
    ----------
    needs_truth
        An oracle: it predicts from the jobs' real power, which the
        simulator (or an evaluation) hands it through
        ``observe_truth(truth)``, a function from a job id to its real
        :class:`~wattsched.model.job.PowerEstimate`. Outputs of runs with it
        say so; a live daemon has no truth to give.
    takes_clock
        ``set_clock(clock)`` gives it a wall clock (``time.perf_counter``) to
        time its work with; without one it times nothing.
    retrain_log
        It keeps ``retrain_log_``: a list of dicts, one per retraining (when,
        on how many jobs, how long), which runs and evaluations report.

    >>> PredictorTags().needs_truth
    False
    """

    needs_truth: bool = False
    takes_clock: bool = False
    retrain_log: bool = False


@dataclass(frozen=True, slots=True)
class CompletedJob:
    """A finished job and its measured per-node power over its run."""

    job: Job
    start_s: float
    end_s: float
    mean_w: float
    max_w: float
    std_w: float


def completed_job_builder() -> Callable[..., Any]:
    """A ``CompletedJob(job, start_s, end_s, mean_w, max_w, std_w)`` constructor for the engine's completed jobs.

    It builds as :func:`~wattsched.model.job.job_from_fields` builds a Job (the frozen dataclass's
    ``__init__`` costs about three times more).
    """
    layout = slot_layout(CompletedJob)
    new = object.__new__

    def completed_job(job: Job, start_s: float, end_s: float, mean_w: float, max_w: float, std_w: float):
        obj = new(layout)
        obj.job = job
        obj.start_s = start_s
        obj.end_s = end_s
        obj.mean_w = mean_w
        obj.max_w = max_w
        obj.std_w = std_w
        obj.__class__ = CompletedJob
        return obj

    return completed_job


@runtime_checkable
class Predictor(Protocol):
    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def tags(self) -> PredictorTags: ...

    def setup(self, platform: Platform) -> Predictor: ...

    def fit(self, history: Iterable[CompletedJob]) -> Predictor: ...

    def update(self, completed: CompletedJob) -> None: ...

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]: ...


def predictor_tags(predictor: Any) -> PredictorTags:
    """The tags ``predictor`` declares through its ``tags()``; a predictor without that method has the defaults.

    >>> predictor_tags(object())
    PredictorTags(needs_truth=False, takes_clock=False, retrain_log=False)
    """
    return declared_tags(predictor, PredictorTags, PredictorError, "predictor")


class BasePredictor(Parametrized):
    """Optional base: typed parameters, ``get_params``, ``repr``, ``fit`` as a loop of ``update``, :meth:`tags`."""

    def tags(self) -> PredictorTags:
        """What this predictor takes or keeps (:class:`PredictorTags`); subclasses change what differs.

        As scikit-learn's ``__sklearn_tags__``::

            def tags(self):
                return dataclasses.replace(super().tags(), takes_clock=True)
        """
        return PredictorTags()

    def observe_truth(self, truth: Callable[[int], PowerEstimate]) -> None:
        """Take the real power of the jobs (``truth(job_id)``); only predictors tagged ``needs_truth`` do."""
        raise PredictorError(f"predictor {self.name or type(self).__qualname__!r} does not take the real power "
                             "(its tags say needs_truth=False)")

    def set_clock(self, clock: Callable[[], float] | None) -> None:
        """Take a wall clock to time work with; only predictors tagged ``takes_clock`` use it."""

    def setup(self, platform: Platform) -> BasePredictor:
        self.platform_ = platform
        return self

    def fit(self, history: Iterable[CompletedJob]) -> BasePredictor:
        for completed in sorted(history, key=lambda c: c.end_s):
            self.update(completed)
        return self

    def update(self, completed: CompletedJob) -> None:
        """Most predictors learn online; those that do not ignore completions."""

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]:  # pragma: no cover
        raise NotImplementedError


def node_max_w(platform: Platform, job: Job) -> float:
    """The most one node of ``job`` can draw: the highest ``busy_w`` plus the job's GPUs at TDP."""
    return platform.max_busy_w(job.gpus_per_node)
