"""The accuracy comparison of the paper's Fig. 3 on RICC-2010-2: history against the four regression methods.

Carastan-Santos et al. 2024, §6.2-6.3: the mean absolute error (MAE) of the
predicted mean, maximum and standard deviation of each job's node power, one
box per method over the users (576 users of Marconi100 in the paper), for the
jobs-history method (Eq. 1, α = 2, the whole history) and online regressions
retrained every week on every job completed before (Eq. 4-6) with
scikit-learn's LinearRegression, RandomForestRegressor, LinearSVR and
SGDRegressor, recursive feature elimination and 5-fold cross-validation
(``learned``, docs/predictors.md §3.3).

The replay is ``wattsched predict evaluate``'s (:func:`wattsched.sim.evaluate.evaluate`):
jobs in submission order, each predicted at its submission and learned at
``submit + runtime`` (no queueing), on the same machine and trace reading as
the scheduling runs (Marconi100, RICC read with 8 cores per node, jobs wider
than 980 nodes dropped) and the same power augmentation (seed 2024, the whole
trace at once). ``predict evaluate`` takes each predictor once; the four
``learned`` models are four predictors here, labelled by their method.

Writes ``accuracy/per_user_mae.csv`` (one row per method and user, the
boxes of Fig. 3), ``accuracy/summary.csv`` (per method: jobs, users, median
per-user MAE of each metric, overall MAE, retrainings and their mean time) and
``fig3_accuracy.png``.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACE = HERE.parents[2] / "shared" / "traces" / "RICC-2010-2.swf.gz"

METHODS = (("history", "history", {"alpha": 2.0}),
           ("linear regression", "learned", {"model": "linear"}),
           ("random forest", "learned", {"model": "random_forest"}),
           ("linear SVR", "learned", {"model": "linear_svr"}),
           ("SGD regression", "learned", {"model": "sgd"}))
"""(label, predictor, params): the paper's five methods of Fig. 3."""

METRICS = ("mean", "max", "std")
SEED = 2024


def run_accuracy(out: Path, *, max_jobs: int | None = None, progress: bool = True) -> dict:
    """Replay RICC-2010-2 through the five methods and write the files of Fig. 3 in ``out``."""
    from wattsched.config.platform import load_platform
    from wattsched.predictors import make_predictor
    from wattsched.sim.evaluate import evaluate
    from wattsched.sweep.slicing import load_trace
    from wattsched.workload.augment import AugmentParams, augment_workload, reference_cores
    from wattsched.workload.records import Workload
    from wattsched.workload.swf import read_swf

    platform = load_platform("marconi100")
    trace = load_trace(str(TRACE), 8, len(platform))  # as the slices read it: 8 cores per node, <= 980 nodes
    jobs = trace.jobs[:max_jobs] if max_jobs else trace.jobs
    wl = Workload(name="RICC-2010-2", jobs=iter(jobs))
    aug = augment_workload(wl, platform.reference_power, AugmentParams(), SEED,
                           cores_per_node=reference_cores(platform))
    head = read_swf(str(TRACE), cores_per_node=8)
    next(iter(head.jobs), None)  # the reader learns the time origin from the first job
    origin = head.origin_unix_s
    predictors = []
    for label, name, params in METHODS:
        p = dict(params)
        if name == "learned" and origin is not None:
            p["time_origin_s"] = origin  # the hour-of-day feature in UTC
        predictors.append((label, make_predictor(name, p)))
    t = time.perf_counter()
    result = evaluate(aug.jobs, platform, predictors, progress=progress, total=len(jobs), clock=time.perf_counter)
    elapsed = time.perf_counter() - t
    summary = result.summary()
    rows = result.per_user()
    acc = out / "accuracy"
    acc.mkdir(parents=True, exist_ok=True)
    with open(acc / "per_user_mae.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, ["predictor", "user", "n_jobs", *(f"mae_{m}_w" for m in METRICS)])
        w.writeheader()
        for r in rows:
            w.writerow({**r, **{f"mae_{m}_w": f"{r[f'mae_{m}_w']:.4f}" for m in METRICS}})
    head = ["predictor", "jobs", "users", *(f"median_user_mae_{m}_w" for m in METRICS),
            *(f"mae_{m}_w" for m in METRICS), "retrainings", "retrain_seconds_mean"]
    with open(acc / "summary.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(head)
        for label, e in summary["predictors"].items():
            log = e.get("retrainings")
            w.writerow([label, summary["jobs"], summary["users"],
                        *(f"{e[f'median_user_mae_{m}_w']:.4f}" for m in METRICS),
                        *(f"{e[f'mae_{m}_w']:.4f}" for m in METRICS),
                        "" if log is None else len(log),
                        "" if e.get("retrain_seconds_mean") is None else f"{e['retrain_seconds_mean']:.2f}"])
    plot_accuracy(acc / "per_user_mae.csv", out / "fig3_accuracy.png")
    return {"jobs": summary["jobs"], "users": summary["users"], "seconds": elapsed}


def read_per_user(path: Path) -> dict[str, dict[str, list[float]]]:
    """Per method and metric, the users' MAE (W), from ``per_user_mae.csv``."""
    found: dict[str, dict[str, list[float]]] = {}
    if not path.exists():
        return found
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            d = found.setdefault(r["predictor"], {m: [] for m in METRICS})
            for m in METRICS:
                d[m].append(float(r[f"mae_{m}_w"]))
    return found


def plot_accuracy(per_user_csv: Path, path: Path) -> None:
    """Fig. 3: boxplots of the per-user MAE of the mean, max and std power, one box per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = read_per_user(per_user_csv)
    labels = [m[0] for m in METHODS if m[0] in data]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for ax, metric in zip(axes, METRICS):
        ax.boxplot([data[lab][metric] for lab in labels], showfliers=False)
        ax.set_xticks(range(1, len(labels) + 1), labels, rotation=25, ha="right")
        ax.set_title(f"{metric} power")
        ax.set_ylabel("MAE per user (W)")
        ax.grid(axis="y", alpha=0.3)
    n = len(next(iter(data.values()))["mean"]) if data else 0
    fig.suptitle(f"Fig. 3 analogue: per-user MAE of the node power predictions, RICC-2010-2 ({n} users)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
