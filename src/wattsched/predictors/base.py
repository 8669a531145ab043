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
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from wattsched.model.job import Job, PowerEstimate
from wattsched.model.platform import Platform


@dataclass(frozen=True, slots=True)
class CompletedJob:
    """A finished job and its measured per-node power over its run."""

    job: Job
    start_s: float
    end_s: float
    mean_w: float
    max_w: float
    std_w: float


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@runtime_checkable
class Predictor(Protocol):
    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def setup(self, platform: Platform) -> Predictor: ...

    def fit(self, history: Iterable[CompletedJob]) -> Predictor: ...

    def update(self, completed: CompletedJob) -> None: ...

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]: ...


class BasePredictor:
    """Optional base: typed parameters, ``get_params``, ``repr``, ``fit`` as a loop of ``update``."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams
    is_oracle: ClassVar[bool] = False

    def __init__(self, params: BaseModel | dict | None = None, **kwargs: Any):
        if params is None or isinstance(params, dict):
            params = self.Params(**{**(params or {}), **kwargs})
        elif kwargs:
            params = params.model_copy(update=kwargs)
        self.params = params

    def get_params(self) -> dict[str, Any]:
        return self.params.model_dump()

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

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
    """The most one node of ``job`` can draw: the first node's ``busy_w`` plus the job's GPUs at TDP."""
    pm = platform.nodes[0].power
    return pm.busy_w + job.gpus_per_node * pm.gpu_tdp_w
