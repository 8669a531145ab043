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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

from wattsched.model.job import Job, PowerEstimate
from wattsched.model.platform import Platform
from wattsched.plugins import NoParams, Parametrized

__all__ = ["BasePredictor", "CompletedJob", "NoParams", "Predictor", "node_max_w"]


@dataclass(frozen=True, slots=True)
class CompletedJob:
    """A finished job and its measured per-node power over its run."""

    job: Job
    start_s: float
    end_s: float
    mean_w: float
    max_w: float
    std_w: float


@runtime_checkable
class Predictor(Protocol):
    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def setup(self, platform: Platform) -> Predictor: ...

    def fit(self, history: Iterable[CompletedJob]) -> Predictor: ...

    def update(self, completed: CompletedJob) -> None: ...

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]: ...


class BasePredictor(Parametrized):
    """Optional base: typed parameters, ``get_params``, ``repr``, ``fit`` as a loop of ``update``."""

    is_oracle: ClassVar[bool] = False

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
