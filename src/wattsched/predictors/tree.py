"""``per-user-tree``: one regression tree per user plus one for new users (Borghesi et al. 2018, §4.1).

Borghesi et al. predict a job's power from what the user asks for at
submission -- user, queue, requested duration, nodes, cores, GPUs, Xeon Phi,
memory -- with "several prediction models (one for each user plus one for
users who are submitting jobs for the first time)", decision trees or random
forests. Here:

* features: ``partition`` (queue; ordinal code), ``walltime_s``, ``nodes``,
  ``procs`` (cores), ``gpus_per_node``, ``mem_per_node_mb``; the model for new
  users (the *global* model, trained on every user's jobs) also gets the user as
  an ordinal code. Codes number names in the order they are first seen, so they
  are deterministic for a given stream of jobs. (Xeon Phi are not modelled.)
* accelerators: the model predicts the CPU part only; ``gpus_per_node ×
  gpu_tdp_w`` of the platform's node is added on top (the paper's TDP
  assumption). Training targets are the measured mean and max minus that GPU
  share (not clipped: when GPUs draw less than their TDP the residual is
  negative, and adding the share back still reproduces the measurement).
* targets: the paper predicts the mean power only; one multi-output tree
  predicts mean, max and std together (a tree splits on the sum of the three
  squared errors).
* training: a user's model is (re)trained lazily, when one of the user's jobs
  is predicted, once the user has ``min_user_jobs`` completed jobs and then
  whenever ``retrain_every`` more have completed; users with fewer completed
  jobs get the global model, retrained every ``global_retrain_every``
  completions (first trained once ``min_user_jobs`` jobs have completed).
  Before that, the prediction is the node maximum (as ``naive``). Each model
  trains on at most ``max_train_jobs`` most recent jobs.

Predictions are clipped: mean and max to ``[0, node maximum]`` with
``max >= mean``, std to ``[0, node maximum]``. Deterministic: trees get
``random_state``, and time comes only from the order of calls.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from sklearn.ensemble import RandomForestRegressor
from sklearn.tree import DecisionTreeRegressor

from wattsched.model.job import Job, PowerEstimate
from wattsched.predictors.base import BasePredictor, CompletedJob, node_max_w

FEATURES = ("user", "partition", "walltime_s", "nodes", "procs", "gpus_per_node", "mem_per_node_mb")
"""Features of the global model; per-user models use all but ``user``."""

_USER_COLS = np.arange(1, len(FEATURES))
_ALL_COLS = np.arange(len(FEATURES))


class TreeParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: Literal["tree", "forest"] = Field(
        "tree", description="DecisionTreeRegressor or RandomForestRegressor (Borghesi et al. use both)."
    )
    max_depth: int | None = Field(None, ge=1, description="Depth limit of the trees (None: unlimited).")
    min_samples_leaf: int = Field(
        5, ge=1, description="Fewest training jobs in a leaf (with 5, a user's first model is the user's mean)."
    )
    n_estimators: int = Field(30, ge=1, description="Trees of a forest.")
    min_user_jobs: int = Field(5, ge=1, description="Completed jobs a user needs for a model of their own.")
    retrain_every: int = Field(10, ge=1, description="Retrain a user's model after this many new completions.")
    global_retrain_every: int = Field(
        1000, ge=1, description="Retrain the model for new users after this many completions (all users)."
    )
    max_train_jobs: int | None = Field(
        20_000, ge=1, description="Train each model on at most this many most recent jobs (None: all)."
    )
    random_state: int = Field(0, description="Seed of the trees.")


class _Model:
    """A fitted tree or forest, with the job count it was trained at; predicts without scikit-learn's overhead."""

    __slots__ = ("cols", "n_at", "trees")

    def __init__(self, trees: list, cols: np.ndarray, n_at: int):
        self.trees = trees
        self.cols = cols
        self.n_at = n_at

    def predict(self, row: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(row[self.cols][None, :], dtype=np.float32)
        total = np.zeros(3)
        for tree in self.trees:
            total += tree.predict(x).reshape(3)
        return total / len(self.trees)


class PerUserTreePredictor(BasePredictor):
    """Per-user decision trees on the job request, plus a model for new users (Borghesi et al. 2018, §4.1).

    Attributes
    ----------
    user_models_ : dict
        User name to fitted model, for users with enough completed jobs.
    global_model_ : object or None
        The model for new users.
    fits_ : int
        Number of models trained so far (per-user and global).
    """

    name = "per-user-tree"
    Params = TreeParams

    def __init__(self, params=None, **kwargs: Any):
        super().__init__(params, **kwargs)
        maxlen = self.params.max_train_jobs
        self.user_models_: dict[str, _Model] = {}
        self.global_model_: _Model | None = None
        self.fits_ = 0
        self._codes: dict[str, dict[str, int]] = {"user": {}, "partition": {}}
        self._user_x: dict[str, deque] = {}
        self._user_y: dict[str, deque] = {}
        self._user_n: dict[str, int] = {}
        self._global_x: deque = deque(maxlen=maxlen)
        self._global_y: deque = deque(maxlen=maxlen)
        self._global_n = 0

    def _code(self, kind: str, value: str) -> int:
        table = self._codes[kind]
        code = table.get(value)
        if code is None:
            code = table[value] = len(table)
        return code

    def _row(self, job: Job) -> np.ndarray:
        procs = job.procs or job.nodes * max(job.cores_per_node, 1)
        return np.array(
            [self._code("user", job.user), self._code("partition", job.partition), job.walltime_s, job.nodes,
             procs, job.gpus_per_node, job.mem_per_node_mb],
            dtype=np.float64,
        )

    def _gpu_w(self, job: Job) -> float:
        return job.gpus_per_node * self.platform_.max_gpu_tdp_w

    def update(self, completed: CompletedJob) -> None:
        job = completed.job
        row = self._row(job)
        gpu = self._gpu_w(job)
        target = (completed.mean_w - gpu, completed.max_w - gpu, completed.std_w)
        user = job.user
        if user not in self._user_x:
            maxlen = self.params.max_train_jobs
            self._user_x[user] = deque(maxlen=maxlen)
            self._user_y[user] = deque(maxlen=maxlen)
            self._user_n[user] = 0
        self._user_x[user].append(row)
        self._user_y[user].append(target)
        self._user_n[user] += 1
        self._global_x.append(row)
        self._global_y.append(target)
        self._global_n += 1

    def _fit(self, xs: deque, ys: deque, cols: np.ndarray, n_at: int) -> _Model:
        p = self.params
        x = np.vstack(xs)[:, cols]
        y = np.asarray(ys, dtype=np.float64)
        if p.model == "tree":
            est = DecisionTreeRegressor(max_depth=p.max_depth, min_samples_leaf=p.min_samples_leaf,
                                        random_state=p.random_state).fit(x, y)
            trees = [est.tree_]
        else:
            est = RandomForestRegressor(n_estimators=p.n_estimators, max_depth=p.max_depth,
                                        min_samples_leaf=p.min_samples_leaf, random_state=p.random_state,
                                        n_jobs=1).fit(x, y)
            trees = [t.tree_ for t in est.estimators_]
        self.fits_ += 1
        return _Model(trees, cols, n_at)

    def model_for(self, job: Job) -> _Model | None:
        """The model that predicts ``job`` now, (re)training it if due; ``None`` before any model exists."""
        p = self.params
        user = job.user
        n = self._user_n.get(user, 0)
        if n >= p.min_user_jobs:
            model = self.user_models_.get(user)
            if model is None or n - model.n_at >= p.retrain_every:
                model = self.user_models_[user] = self._fit(self._user_x[user], self._user_y[user], _USER_COLS, n)
            return model
        g = self._global_n
        model = self.global_model_
        if (model is None and g >= p.min_user_jobs) or (model is not None and g - model.n_at >= p.global_retrain_every):
            model = self.global_model_ = self._fit(self._global_x, self._global_y, _ALL_COLS, g)
        return model

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]:
        out = []
        for job in jobs:
            cap = node_max_w(self.platform_, job)
            model = self.model_for(job)
            if model is None:
                out.append(PowerEstimate(cap, cap, 0.0))
                continue
            cpu_mean, cpu_max, std = model.predict(self._row(job)).tolist()
            gpu = self._gpu_w(job)
            mean = min(max(cpu_mean + gpu, 0.0), cap)
            mx = min(max(cpu_max + gpu, mean), cap)
            out.append(PowerEstimate(mean, mx, min(max(std, 0.0), cap)))
        return out
