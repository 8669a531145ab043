"""``learned``: online regression retrained periodically (Carastan-Santos et al. 2024, §4.2 and §6.2).

At each period boundary ``t(w)`` (by default the end of every week) the models
are retrained on every job completed before it (Eq. 4, ``C_j < t(w)``) and then
predict the jobs submitted until the next boundary (Eq. 6). Before the first
retraining, or while fewer than ``min_train_jobs`` jobs have completed, the
prediction is the ``history`` predictor's (Eq. 1), as in the paper's week 0.

Features
--------
Table 2 of the paper, computed when the job is predicted (its submission):

1. ``hour_of_day``: hour of the submission, ``((time_origin_s + submit_s) mod 86400) / 3600``
   (UTC when ``time_origin_s`` is the epoch time of ``t = 0``; the simulator's
   times are relative to the trace's start, so it defaults to 0);
2. ``procs``: ``job.procs``, or ``nodes * cores_per_node`` when the record has none;
3. ``nodes``;
4. ``walltime_s``: the requested time;
5. ``history_w``: the ``history`` prediction (Eq. 1) *of the metric being predicted*
   (mean, max or std);
6. ``history_spread_w``: the standard deviation of the user's past mean powers;
7. ``last_job_w``: the mean power of the user's last completed job.

Features 5-7 come from an internal :class:`~wattsched.predictors.history.HistoryPredictor`
(same ``alpha`` and ``window_s``; users without history get the all-users values).
A job's feature row is stored when it is predicted and used for training when
it completes, so training rows describe jobs as they were known at submission.
A completed job that was never predicted (``fit`` on a batch history) gets its
row computed when it is learned.

Targets and models
------------------
One regressor per metric (mean, max and std node power), each with its own
feature subset and hyperparameters: the paper trains a predictor per metric,
and feature 5 differs per metric. ``model`` chooses the regression method of
the paper (all from scikit-learn): ``linear`` (``LinearRegression``),
``random_forest`` (``RandomForestRegressor``), ``linear_svr`` (``LinearSVR``) or
``sgd`` (``SGDRegressor``). Linear methods see standardized features
(``StandardScaler``); targets are standardized for every method (no effect on
trees, it keeps the linear SVR's epsilon and SGD's step sizes meaningful).

Model selection at each retraining, as in §6.2: with ``rfe`` and ``cv_folds >= 2``,
recursive feature elimination with cross-validation (``RFECV``) picks the
feature subset, then a ``cv_folds``-fold grid search sets the hyperparameters
from a small grid (see :data:`GRIDS`). Folds are contiguous blocks of the
time-ordered jobs (``KFold`` without shuffling). To keep the cost bounded, the
search runs on the ``search_max_jobs`` most recent training jobs and the final
fit on the ``max_train_jobs`` most recent ones; everything runs on one thread.

Predictions are clipped: mean and max to ``[0, node maximum]`` with
``max >= mean``, std to ``[0, node maximum]``.

Cost
----
:attr:`LearnedPredictor.retrain_log_` records each retraining: its boundary
``at_s``, the number of training jobs, the wall time (when a clock is given:
this package is pure and reads no clock itself, see STYLE.md §2) and the chosen
features and hyperparameters per metric.

Determinism: the search folds are fixed, and every random estimator gets
``random_state``; time comes only from jobs' submission and completion times.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from sklearn.ensemble import RandomForestRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import RFECV
from sklearn.linear_model import LinearRegression, SGDRegressor
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVR

from wattsched.model.job import Job, PowerEstimate
from wattsched.predictors.base import BasePredictor, CompletedJob, PredictorTags, node_max_w
from wattsched.predictors.history import HistoryPredictor

WEEK_S = 7 * 86400.0

METRICS = ("mean", "max", "std")
FEATURES = ("hour_of_day", "procs", "nodes", "walltime_s", "history_w", "history_spread_w", "last_job_w")
"""Table 2 of Carastan-Santos et al. 2024, in order."""

# A stored row holds the history predictions of all three metrics:
# hour, procs, nodes, walltime, history mean, history max, history std, spread, last job.
_ROW_LEN = 9
_COLUMNS = {m: (0, 1, 2, 3, 4 + i, 7, 8) for i, m in enumerate(METRICS)}
"""Columns of a stored row that make the 7 features of each metric's model."""

GRIDS: dict[str, dict[str, list]] = {
    "linear": {},
    "random_forest": {"max_depth": [8, None], "min_samples_leaf": [1, 10]},
    "linear_svr": {"C": [0.01, 0.1, 1.0]},
    "sgd": {"alpha": [1e-5, 1e-4, 1e-3]},
}
"""Hyperparameter grids searched by cross-validation (kept small: 2-4 candidates)."""

SEARCH_TREES = 10
"""Trees of the forests fitted during the search (the final forest has ``n_estimators``)."""


class LearnedParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: Literal["linear", "random_forest", "linear_svr", "sgd"] = Field(
        "linear", description="Regression method (scikit-learn): LinearRegression, RandomForestRegressor, "
        "LinearSVR or SGDRegressor."
    )
    retrain_period_s: float = Field(WEEK_S, gt=0, description="Retrain at every multiple of this period (s).")
    min_train_jobs: int = Field(
        50, ge=2, description="Fewer completed jobs than this at a boundary: keep the previous models "
        "(the history prediction before the first retraining)."
    )
    max_train_jobs: int | None = Field(
        20_000, ge=2, description="Train on at most this many most recent completed jobs (None: all)."
    )
    search_max_jobs: int = Field(
        5_000, ge=2, description="Feature elimination and the grid search use this many most recent jobs."
    )
    rfe: bool = Field(True, description="Recursive feature elimination with cross-validation (RFECV).")
    cv_folds: int = Field(5, ge=0, description="Folds of the cross-validation; below 2: no search, defaults.")
    n_estimators: int = Field(30, ge=1, description="Trees of the random forest.")
    alpha: float = Field(2.0, ge=0, description="Aging exponent of the internal history predictor (Eq. 3).")
    window_s: float | None = Field(None, gt=0, description="Window of the internal history predictor (Eq. 2).")
    time_origin_s: float = Field(
        0.0, description="Epoch time of t = 0, for the hour-of-day feature (UTC); 0: hours of trace time."
    )
    random_state: int = Field(0, description="Seed of the random forest, the linear SVR and SGD.")


class _Fitted:
    """Fitted models of the three metrics, reduced to what a fast prediction needs.

    Linear methods fold the scaler and the target standardization into one
    ``rows @ W + b`` over the stored row layout; forests keep their trees and
    call ``tree_.predict`` directly (scikit-learn's ``predict`` validates its
    input and dispatches through joblib: ~1 ms a call, for one job).
    """

    def __init__(self):
        self.W: np.ndarray | None = None
        self.b: np.ndarray | None = None
        self.forests: list[tuple[list, np.ndarray, float, float]] = []

    def predict(self, rows: np.ndarray) -> np.ndarray:
        if self.W is not None:
            return rows @ self.W + self.b
        out = np.empty((len(rows), len(METRICS)))
        for i, (trees, cols, mu, sd) in enumerate(self.forests):
            x = np.ascontiguousarray(rows[:, cols], dtype=np.float32)
            total = np.zeros(len(rows))
            for tree in trees:
                total += tree.predict(x).reshape(len(rows), -1)[:, 0]
            out[:, i] = total / len(trees) * sd + mu
        return out


class LearnedPredictor(BasePredictor):
    """Online regression on Table 2's features, retrained every period (Carastan-Santos et al. 2024, §4.2).

    Parameters
    ----------
    params
        :class:`LearnedParams` or a dict of them (keywords work too).
    clock
        A wall clock (``time.perf_counter``) to time retrainings for
        :attr:`retrain_log_`; without one the times are ``None``.

    Attributes
    ----------
    retrain_log_ : list of dict
        One entry per retraining: ``at_s`` (the boundary), ``n_train``,
        ``seconds`` (wall time, or ``None``), ``model`` and ``chosen``
        (per metric: the selected ``features``, the ``params`` and the
        cross-validated ``cv_mse`` when a search ran).
    models_ : object or None
        The current models; ``None`` until the first retraining.
    """

    name = "learned"
    Params = LearnedParams

    def __init__(self, params=None, *, clock: Callable[[], float] | None = None, **kwargs: Any):
        super().__init__(params, **kwargs)
        self.clock = clock
        p = self.params
        self.history_ = HistoryPredictor(alpha=p.alpha, window_s=p.window_s, fallback="global")
        self.models_: _Fitted | None = None
        self.retrain_log_: list[dict] = []
        self.next_retrain_s_ = p.retrain_period_s
        self._rows: dict[int, np.ndarray] = {}
        maxlen = p.max_train_jobs
        self._train_end: deque[float] = deque(maxlen=maxlen)
        self._train_x: deque[np.ndarray] = deque(maxlen=maxlen)
        self._train_y: deque[tuple[float, float, float]] = deque(maxlen=maxlen)

    def tags(self) -> PredictorTags:
        return dataclasses.replace(super().tags(), takes_clock=True, retrain_log=True)

    def set_clock(self, clock: Callable[[], float] | None) -> None:
        """Time the retrainings with ``clock`` (``time.perf_counter``) from now on; ``None``: untimed."""
        self.clock = clock

    def setup(self, platform) -> LearnedPredictor:
        super().setup(platform)
        self.history_.setup(platform)
        return self

    # ------------------------------------------------------------ features
    def _features(self, job: Job) -> np.ndarray:
        """The stored row of ``job`` as of now (see the module docstring for the layout)."""
        hist = self.history_.predict([job])[0]
        _, spread, last = self.history_.user_features(job)
        hour = math.fmod(self.params.time_origin_s + job.submit_s, 86400.0) / 3600.0
        if hour < 0:
            hour += 24.0
        procs = job.procs or job.nodes * max(job.cores_per_node, 1)
        return np.array(
            [hour, procs, job.nodes, job.walltime_s, hist.mean_w, hist.max_w, hist.std_w, spread, last],
            dtype=np.float64,
        )

    def feature_row(self, job: Job) -> dict[str, float]:
        """The features of ``job`` by name, for the mean power (as stored if it was predicted)."""
        row = self._rows.get(job.id)
        if row is None:
            row = self._features(job)
        return {name: float(row[c]) for name, c in zip(FEATURES, _COLUMNS["mean"])}

    # ------------------------------------------------------------ online
    def update(self, completed: CompletedJob) -> None:
        row = self._rows.pop(completed.job.id, None)
        if row is None:
            row = self._features(completed.job)  # before the history learns the job itself
        self._train_end.append(completed.end_s)
        self._train_x.append(row)
        self._train_y.append((completed.mean_w, completed.max_w, completed.std_w))
        self.history_.update(completed)

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]:
        out: list[PowerEstimate | None] = [None] * len(jobs)
        segment: list[int] = []
        rows: list[np.ndarray] = []
        for k, job in enumerate(jobs):
            if job.submit_s >= self.next_retrain_s_:
                self._flush(jobs, segment, rows, out)
                segment, rows = [], []
                self._retrain_at(job.submit_s)
            row = self._rows.get(job.id)
            if row is None:
                row = self._rows[job.id] = self._features(job)
            if self.models_ is None:
                out[k] = PowerEstimate(float(row[4]), float(row[5]), float(row[6]))
            else:
                segment.append(k)
                rows.append(row)
        self._flush(jobs, segment, rows, out)
        return out  # type: ignore[return-value]

    def _flush(self, jobs, segment: list[int], rows: list[np.ndarray], out: list) -> None:
        if not segment:
            return
        x = np.vstack(rows)
        pred = self.models_.predict(x)
        bad = ~np.isfinite(pred)
        if bad.any():  # a diverged linear model: use the history value of that metric
            pred[bad] = x[:, 4:7][bad]
        for k, (mean, mx, std) in zip(segment, pred.tolist()):
            cap = node_max_w(self.platform_, jobs[k])
            mean = min(max(mean, 0.0), cap)
            mx = min(max(mx, mean), cap)
            std = min(max(std, 0.0), cap)
            out[k] = PowerEstimate(mean, mx, std)

    # ------------------------------------------------------------ retraining
    def training_data(self, before_s: float = math.inf) -> tuple[np.ndarray, np.ndarray]:
        """Rows and targets of the kept completed jobs that ended before ``before_s``, oldest first.

        Rows are in the stored layout: hour of day, procs, nodes, requested
        time, the history's mean, max and std predictions, spread, last job's
        power; targets are the measured mean, max and std.
        """
        ends = np.fromiter(self._train_end, dtype=np.float64, count=len(self._train_end))
        keep = ends < before_s
        if not keep.any():
            return np.empty((0, _ROW_LEN)), np.empty((0, len(METRICS)))
        return np.vstack(self._train_x)[keep], np.asarray(self._train_y, dtype=np.float64)[keep]

    def _retrain_at(self, t: float) -> None:
        period = self.params.retrain_period_s
        at = math.floor(t / period) * period
        self.next_retrain_s_ = at + period
        x, y = self.training_data(before_s=at)  # Eq. 4: jobs completed before the boundary
        n = len(x)
        if n < self.params.min_train_jobs:
            return
        t0 = self.clock() if self.clock is not None else None
        fitted, chosen = self._train(x, y)
        seconds = self.clock() - t0 if t0 is not None else None
        self.models_ = fitted
        self.retrain_log_.append(
            {"at_s": at, "n_train": n, "seconds": seconds, "model": self.params.model, "chosen": chosen}
        )

    def _estimator(self, hyper: dict[str, Any], *, search: bool = False) -> Pipeline:
        p = self.params
        kind = p.model
        if kind == "linear":
            model: Any = LinearRegression()
        elif kind == "random_forest":
            trees = min(p.n_estimators, SEARCH_TREES) if search else p.n_estimators
            model = RandomForestRegressor(n_estimators=trees, random_state=p.random_state, n_jobs=1)
        elif kind == "linear_svr":
            # The squared epsilon-insensitive loss is solved in the primal: fast, where the default
            # L1 loss's dual solver needs many iterations on thousands of jobs.
            model = LinearSVR(loss="squared_epsilon_insensitive", dual=False, random_state=p.random_state)
        else:
            model = SGDRegressor(random_state=p.random_state, max_iter=1000, tol=1e-4)
        model.set_params(**hyper)
        scale = "passthrough" if kind == "random_forest" else StandardScaler()
        return Pipeline([("scale", scale), ("model", model)])

    def _train(self, x: np.ndarray, y: np.ndarray) -> tuple[_Fitted, dict]:
        p = self.params
        fitted = _Fitted()
        chosen: dict[str, dict] = {}
        linear = p.model != "random_forest"
        if linear:
            fitted.W = np.zeros((_ROW_LEN, len(METRICS)))
            fitted.b = np.zeros(len(METRICS))
        getter = "named_steps.model.coef_" if linear else "named_steps.model.feature_importances_"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for i, metric in enumerate(METRICS):
                cols = np.array(_COLUMNS[metric])
                xm = x[:, cols]
                mu = float(y[:, i].mean())
                sd = float(y[:, i].std()) or 1.0
                ys = (y[:, i] - mu) / sd
                selected = np.ones(len(cols), dtype=bool)
                hyper: dict[str, Any] = {}
                info: dict[str, Any] = {}
                m = min(len(xm), p.search_max_jobs)
                folds = min(p.cv_folds, m)
                if folds >= 2:
                    xs, yss = xm[-m:], ys[-m:]
                    cv = KFold(folds)
                    if p.rfe:
                        rfe = RFECV(self._estimator({}, search=True), cv=cv, scoring="neg_mean_squared_error",
                                    importance_getter=getter, n_jobs=1)
                        rfe.fit(xs, yss)
                        selected = rfe.support_.copy()
                    grid = GRIDS[p.model]
                    if grid:
                        search = GridSearchCV(
                            self._estimator({}, search=True), {f"model__{k}": v for k, v in grid.items()},
                            cv=cv, scoring="neg_mean_squared_error", n_jobs=1, refit=False,
                        )
                        search.fit(xs[:, selected], yss)
                        hyper = {k.removeprefix("model__"): v for k, v in search.best_params_.items()}
                        info["cv_mse"] = float(-search.best_score_) * sd * sd
                est = self._estimator(hyper).fit(xm[:, selected], ys)
                info["features"] = [f for f, s in zip(FEATURES, selected) if s]
                info["params"] = hyper
                chosen[metric] = info
                used = cols[selected]
                model = est.named_steps["model"]
                if linear:
                    scaler = est.named_steps["scale"]
                    coef = np.ravel(model.coef_) / scaler.scale_
                    intercept = float(np.ravel(model.intercept_)[0]) - float(coef @ scaler.mean_)
                    fitted.W[used, i] = coef * sd
                    fitted.b[i] = intercept * sd + mu
                else:
                    trees = [t.tree_ for t in model.estimators_]
                    fitted.forests.append((trees, used, mu, sd))
        return fitted, chosen
