"""``wattsched predict evaluate`` end to end, on small generated traces."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from wattsched.cli import main
from wattsched.config.platform import platform_from_procs
from wattsched.sim.evaluate import evaluate
from wattsched.workload.records import TraceJob

USER_POWER = {"alice": 120.0, "bob": 160.0, "carol": 180.0, "dave": 140.0}


@pytest.fixture
def table(tmp_path):
    """A job table where each user's jobs draw about the same power (mean, max, std per user)."""
    rng = np.random.default_rng(5)
    path = tmp_path / "jobs.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "submit_s", "runtime_s", "walltime_s", "nodes", "user", "mean_w", "max_w", "std_w"])
        t = 0.0
        for i in range(1, 241):
            t += float(rng.exponential(300.0))
            user = list(USER_POWER)[int(rng.integers(len(USER_POWER)))]
            mean = USER_POWER[user] + float(rng.normal(0, 2))
            runtime = float(rng.uniform(60, 3600))
            w.writerow([i, round(t, 1), round(runtime, 1), round(runtime * 1.5, 1), int(rng.integers(1, 5)), user,
                        mean, mean + 15.0, 4.0])
    return path


def read_summary(out):
    return json.loads((out / "summary.json").read_text())


def test_evaluate_writes_the_outputs_and_ranks_the_predictors(table, tmp_path, capsys):
    out = tmp_path / "eval"
    rc = main(["predict", "evaluate", "--trace", str(table), "--procs", "16", "--predictor", "naive",
               "--predictor", "history", "--predictor", "oracle", "--out", str(out), "-q"])
    assert rc == 0
    for name in ("summary.json", "per_user_mae.csv", "per_user_mae.png"):
        assert (out / name).stat().st_size > 0, name
    printed = capsys.readouterr().out
    assert "oracle (real values)" in printed and "MAE mean" in printed and "240 jobs, 4 users" in printed
    summary = read_summary(out)
    preds = summary["predictors"]
    assert list(preds) == ["naive", "history", "oracle (real values)"]
    assert summary["jobs"] == 240 and summary["users"] == 4 and summary["power_augmented"] is False
    assert "no queueing" in summary["convention"]
    oracle = preds["oracle (real values)"]
    assert oracle["oracle"] is True
    assert oracle["mae_mean_w"] == oracle["mae_max_w"] == oracle["mae_std_w"] == 0.0
    for m in ("mean", "max", "std"):
        assert preds["naive"][f"mae_{m}_w"] >= preds["history"][f"mae_{m}_w"]
    assert preds["history"]["mae_mean_w"] < 10.0  # per-user power: history learns it
    with open(out / "per_user_mae.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * 4
    assert {r["user"] for r in rows} == set(USER_POWER)
    naive_rows = [r for r in rows if r["predictor"] == "naive"]
    assert sum(int(r["n_jobs"]) for r in naive_rows) == 240
    # the overall MAE is the job-weighted mean of the per-user MAEs
    weighted = sum(int(r["n_jobs"]) * float(r["mae_mean_w"]) for r in naive_rows) / 240
    assert weighted == pytest.approx(preds["naive"]["mae_mean_w"])


def test_learned_and_tree_with_params_on_an_augmented_swf(tmp_path, capsys):
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(2)
    lines = ["; MaxProcs: 32", "; UnixStartTime: 1000000"]
    t = 0
    for i in range(1, 161):
        t += int(rng.integers(30, 400))
        procs = int(rng.integers(1, 9))
        run = int(rng.integers(10, 2000))
        lines.append(f"{i} {t} 0 {run} {procs} -1 -1 {procs} {run * 2} -1 1 {int(rng.integers(1, 6))} 1 -1 1 -1 -1 -1")
    swf = tmp_path / "tiny.swf"
    swf.write_text("\n".join(lines) + "\n")
    out = tmp_path / "eval"
    args = ["predict", "evaluate", "--trace", str(swf), "--predictor", "learned", "--predictor", "per-user-tree",
            "--predictor", "history", "--param", "retrain_period_s=5400", "--param", "learned.min_train_jobs=10",
            "--param", "learned.cv_folds=3",
            "--param", "min_user_jobs=3", "--seed", "3", "--out", str(out), "-q"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "power augmented (seed 3)" in printed and "retrainings" in printed
    summary = read_summary(out)
    learned = summary["predictors"]["learned"]
    assert learned["params"]["retrain_period_s"] == 5400 and learned["params"]["min_train_jobs"] == 10
    assert learned["params"]["time_origin_s"] == summary["origin_unix_s"] > 1000000  # hours of day in UTC
    assert summary["predictors"]["per-user-tree"]["params"]["min_user_jobs"] == 3
    log = learned["retrainings"]
    assert len(log) >= 4 and all(r["seconds"] >= 0 for r in log)
    assert [r["at_s"] for r in log] == sorted(r["at_s"] for r in log)
    assert all(r["at_s"] % 5400 == 0 for r in log)
    # the same seed gives the same numbers; another seed other augmented power
    again = tmp_path / "again"
    assert main([*args[:-3], "--out", str(again), "-q"]) == 0
    a, b = read_summary(out)["predictors"], read_summary(again)["predictors"]
    assert {k: v["mae_mean_w"] for k, v in a.items()} == {k: v["mae_mean_w"] for k, v in b.items()}
    other = tmp_path / "other"
    assert main([*args[:-5], "--seed", "4", "--out", str(other), "-q"]) == 0
    assert read_summary(other)["predictors"]["history"]["mae_mean_w"] != a["history"]["mae_mean_w"]


def test_a_param_no_predictor_has_is_an_error(table, tmp_path, capsys):
    rc = main(["predict", "evaluate", "--trace", str(table), "--procs", "16", "--predictor", "naive",
               "--param", "model=linear", "--out", str(tmp_path / "x"), "-q"])
    assert rc == 2
    assert "no predictor among naive has a parameter 'model'" in capsys.readouterr().err


def test_a_predictor_given_twice_is_an_error(table, tmp_path, capsys):
    rc = main(["predict", "evaluate", "--trace", str(table), "--procs", "16", "--predictor", "naive",
               "--predictor", "naive", "--out", str(tmp_path / "x"), "-q"])
    assert rc == 2 and "given twice" in capsys.readouterr().err


def test_completions_come_before_submissions_and_the_future_stays_hidden():
    """A job ending exactly when another is submitted informs it; one ending later does not."""
    from wattsched.predictors.history import HistoryPredictor

    plat = platform_from_procs(4, 1)
    busy = plat.nodes[0].power.busy_w

    def trace(second_power):
        return [
            TraceJob(1, 0.0, 100.0, 100.0, 1, 1, user="u", mean_w=150.0, max_w=150.0, std_w=0.0),
            TraceJob(2, 50.0, 500.0, 500.0, 1, 1, user="u", mean_w=second_power, max_w=second_power, std_w=0.0),
            TraceJob(3, 100.0, 10.0, 10.0, 1, 1, user="u", mean_w=150.0, max_w=150.0, std_w=0.0),
        ]

    results = [evaluate(trace(p), plat, [("history", HistoryPredictor())]) for p in (100.0, 190.0)]
    for result in results:
        errors = list(result.scores[0].errors[0])
        # job 1: nothing known yet, the node's busy power; job 3 (submitted at 100) is informed by job 1,
        # which ended at 100, and not by job 2, still running: whatever job 2 draws, the estimate is exact
        assert errors[0] == pytest.approx(busy - 150.0) and errors[2] == 0.0
        assert list(result.users) == ["u", "u", "u"]


@pytest.mark.slow
def test_kth_excerpt_learned_against_history(traces_dir, tmp_path):
    pytest.importorskip("sklearn")
    out = tmp_path / "kth"
    rc = main(["predict", "evaluate", "--trace", str(traces_dir / "KTH-SP2-1996-2.1-cln.swf"), "--predictor",
               "naive", "--predictor", "history", "--predictor", "learned", "--max-jobs", "6000", "--out", str(out),
               "-q"])
    assert rc == 0
    preds = read_summary(out)["predictors"]
    assert preds["naive"]["mae_mean_w"] > preds["history"]["mae_mean_w"]
    assert preds["learned"]["mae_mean_w"] < preds["naive"]["mae_mean_w"]
    assert len(preds["learned"]["retrainings"]) >= 5
