"""COMPARISON.md: each claim of Carastan-Santos et al. 2024 beside our number, computed from the result rows.

The rows are ``rows.csv`` (one per simulation run: the columns of ``runs.csv``
the claims need, :data:`ROW_COLUMNS`, written by :func:`write_rows`) and
``accuracy/summary.csv`` (one per prediction method, :mod:`lwp_accuracy`).
Both are kept in git with the results, so that ``COMPARISON.md`` is
regenerated from them byte for byte (``tests/sim/test_experiment_lightweight.py``).

Aggregation as in the paper's §6.5: a value per (workload, cap) instance,
averaged over the instances. A run *violates* the cap when some of the window
is above it. The verdict rules are stated in each row's ``rule`` and in
README.md; a claim whose runs are missing says ``not run``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

ROW_COLUMNS = ("workload", "run_id", "algorithm", "check", "values", "cap_frac", "cap_w", "idle_w",
               "window_mean_power_w", "dyn_power_util", "frac_above_cap", "max_overshoot_pct", "tat_change_pct",
               "max_tat_change_pct", "frac_jobs_in_window", "mean_tat_change_pct_>240nh",
               "mean_tat_change_pct_<=24nh")
"""The columns of ``runs.csv`` kept in ``rows.csv``."""

_TEXT = {"run_id", "algorithm", "check", "values"}
CHECK_SHORT = {"max": "max", "mean": "mean", "gaussian_68": "g68", "gaussian_95": "g95", "gaussian_99": "g99"}
ALGOS = (("easy-pc", "EASY FCFS"), ("easy-saf", "EASY SAF"), ("knapsack-wait", "Knapsack Wait."),
         ("knapsack-stretch", "Knapsack Stretch"))
ML = ("linear regression", "random forest", "linear SVR", "SGD regression")
PAPER_MAE = {"mean": (67.0, 76.2), "max": (149.3, 170.1), "std": (32.7, 40.2)}
"""§6.3: median per-user MAE, history's and the worst (linear regression) method's, W."""


# --------------------------------------------------------------------------- rows


def write_rows(runs_csv: Path, dest: Path) -> int:
    """Write ``dest`` (rows.csv) with :data:`ROW_COLUMNS` of ``runs_csv``, in its order; return the row count."""
    with open(runs_csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    with open(dest, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=ROW_COLUMNS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return len(rows)


def read_rows(path: Path) -> list[dict]:
    """``rows.csv`` with numbers as floats (``None`` where empty)."""
    out = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            out.append({k: (v if k in _TEXT else (None if v in ("", None) else float(v))) for k, v in r.items()})
    return out


def read_accuracy(path: Path) -> dict[str, dict[str, float]]:
    """``accuracy/summary.csv``: per method, its median per-user MAE of each metric and its counts."""
    if not path.exists():
        return {}
    with open(path, newline="") as fh:
        return {r["predictor"]: {k: float(v) for k, v in r.items() if k != "predictor" and v != ""}
                for r in csv.DictReader(fh)}


# --------------------------------------------------------------------------- helpers


def _mean(values) -> float | None:
    v = [x for x in values if x is not None and not math.isnan(x)]
    return sum(v) / len(v) if v else None


def _f(x: float | None, digits: int = 1, unit: str = "") -> str:
    return "—" if x is None else f"{x:.{digits}f}{unit}"


class _Runs:
    def __init__(self, rows: list[dict]):
        self.rows = rows
        self.base = {r["workload"]: r for r in rows if r["algorithm"] == "easy"}

    def select(self, algorithm: str, check: str, values: str, cap: float | None = None) -> list[dict]:
        return [r for r in self.rows if r["algorithm"] == algorithm and r["check"] == check
                and r["values"] == values and (cap is None or r["cap_frac"] == cap)]

    def check(self, check: str, values: str) -> list[dict]:
        return self.select("easy-pc", check, values)

    def mean(self, rows: list[dict], key: str, scale: float = 1.0) -> float | None:
        m = _mean([r[key] for r in rows])
        return None if m is None else m * scale

    def violating(self, rows: list[dict]) -> float | None:
        v = [r["frac_above_cap"] for r in rows if r["frac_above_cap"] is not None]
        return 100.0 * sum(x > 0 for x in v) / len(v) if v else None


def _verdict(ok: bool | None, partly: bool = False) -> str:
    if ok is None:
        return "not run"
    return "holds" if ok else ("partly" if partly else "does not")


# --------------------------------------------------------------------------- the table


def claims(rows: list[dict], accuracy: dict[str, dict[str, float]]) -> list[tuple[str, str, str, str, str]]:
    """(section, claim, paper, ours, verdict) for every claim of the paper."""
    out: list[tuple[str, str, str, str, str]] = []
    add = out.append

    # §6.3, Fig. 3: history against the regression methods
    for metric in ("mean", "max", "std"):
        key = f"median_user_mae_{metric}_w"
        hist = accuracy.get("history", {}).get(key)
        ml = [accuracy[m][key] for m in ML if m in accuracy and key in accuracy[m]]
        lo, hi = PAPER_MAE[metric]
        if hist is None or not ml:
            add(("Fig. 3", f"history predicts the {metric} power as well as the ML methods (median per-user MAE)",
                 f"{lo:g} W vs up to {hi:g} W", "—", "not run"))
            continue
        best = min(ml)
        ours = f"history {hist:.1f} W; ML {best:.1f}-{max(ml):.1f} W"
        add(("Fig. 3", f"history predicts the {metric} power as well as the ML methods (median per-user MAE)",
             f"history {lo:g} W; ML up to {hi:g} W", ours, _verdict(hist <= 1.05 * best, hist <= 1.15 * best)))

    runs = _Runs(rows)
    methods = [("naive", "naive")] + [(c, v) for c in CHECK_SHORT for v in ("predicted", "real")]
    by = {(c, v): runs.check(c, v) for c, v in methods}
    have = {k: bool(v) for k, v in by.items()}
    util = {k: runs.mean(v, "dyn_power_util", 100.0) for k, v in by.items() if v}
    tat = {k: runs.mean(v, "tat_change_pct") for k, v in by.items() if v}
    above = {k: runs.mean(v, "frac_above_cap", 100.0) for k, v in by.items() if v}
    viol = {k: runs.violating(v) for k, v in by.items() if v}
    over = {k: runs.mean(v, "max_overshoot_pct") for k, v in by.items() if v}

    def under(k):
        return None if util.get(k) is None else 100.0 - util[k]

    n = ("naive", "naive")
    checks = [k for k in methods if k != n and have[k]]
    if have[n] and checks:
        most_waste = all(under(n) > under(k) for k in checks)
        add(("§6.5", "naive wastes the most power (under-utilisation of the allowed dynamic power)", "74 %",
             f"{_f(under(n))} % (next: {_f(max(under(k) for k in checks))} %)", _verdict(most_waste)))
        add(("§6.5", "naive increases the mean turnaround the most", "+14 %",
             f"{_f(tat[n], unit=' %', digits=1)} (next: {_f(max(tat[k] for k in checks), unit=' %')})",
             _verdict(all(tat[n] > tat[k] for k in checks))))
    else:
        add(("§6.5", "naive wastes the most power (under-utilisation of the allowed dynamic power)", "74 %", "—",
             "not run"))

    def pr(d, c, digits=1, unit=""):
        p, r = d.get((c, "predicted")), d.get((c, "real"))
        return f"{_f(p, digits)} / {_f(r, digits)}{unit}"

    def both(c):
        return have[(c, "predicted")] and have[(c, "real")]

    if both("max"):
        p, r = viol[("max", "predicted")], viol[("max", "real")]
        add(("§6.5", "max never goes above the cap (predicted / real values)", "never (0 %)",
             f"violating instances {pr(viol, 'max', unit=' %')}", _verdict(p == 0 and r == 0, p == 0 or r == 0)))
        add(("§6.5", "max is conservative: under-utilisation and turnaround increase between mean's and naive's",
             "≈ 44 % and ≈ +8 %", f"{_f(100 - util[('max', 'predicted')])} / {_f(100 - util[('max', 'real')])} % "
             f"and {pr(tat, 'max', unit=' %')}",
             _verdict(all(under(("mean", v)) < under(("max", v)) < under(n) for v in ("predicted", "real"))
                      if both("mean") and have[n] else None)))
    else:
        add(("§6.5", "max never goes above the cap (predicted / real values)", "never (0 %)", "—", "not run"))
    if both("mean"):
        ms = [k for k in checks if k[0] != "mean"]
        best_use = [all(util[("mean", v)] > util[k] for k in ms) for v in ("predicted", "real")]
        add(("§6.5", "mean makes the best use of the power (under-utilisation, predicted / real)", "0.96 %",
             f"{_f(under(('mean', 'predicted')), 2)} / {_f(under(('mean', 'real')), 2)} %",
             _verdict(all(best_use), any(best_use))))
        least = [all(tat[("mean", v)] < tat[k] for k in ms) for v in ("predicted", "real")]
        add(("§6.5", "mean increases the turnaround the least (predicted / real)", "+1.65 %",
             pr(tat, "mean", 2, " %"), _verdict(all(least), any(least))))
        p, r = viol[("mean", "predicted")], viol[("mean", "real")]
        most = [all(viol[("mean", v)] > viol[k] for k in checks if k[0] != "mean") for v in ("predicted", "real")]
        add(("§6.5", "mean goes above the cap in most instances (predicted / real)", "88 %",
             f"{pr(viol, 'mean', unit=' %')}", _verdict(all(most) and min(p, r) >= 50, any(most) and max(p, r) > 0)))
        ov = [over[("mean", v)] for v in ("predicted", "real")]
        add(("§6.5", "mean's largest break above the cap (mean over instances, % of the cap, predicted / real)",
             "11 %", pr(over, "mean", 2, " %"),
             _verdict(all(5.5 <= x <= 22 for x in ov), any(x > 0 for x in ov))))
    else:
        add(("§6.5", "mean goes above the cap in most instances (predicted / real)", "88 %", "—", "not run"))
    gs = ("gaussian_68", "gaussian_95", "gaussian_99")
    if both("mean") and all(both(g) for g in gs):
        ok, part = [], []
        for v in ("predicted", "real"):
            a = [above[("mean", v)], *(above[(g, v)] for g in gs)]
            ok.append(all(a[i] >= a[i + 1] for i in range(3)) and a[3] < a[0])
            part.append(all(x <= a[0] for x in a[1:]) and min(a[1:]) < a[0])  # nothing to cut: does not
        add(("§6.5", "Gaussian checks cut the time above the cap against mean, gaussian_99 the most "
                     "(mean / g68 / g95 / g99, predicted; real)", "Fig. 6: mean > g68 > g95 > g99",
             " / ".join(_f(above[(c, 'predicted')]) for c in ("mean", *gs)) + " %; "
             + " / ".join(_f(above[(c, 'real')]) for c in ("mean", *gs)) + " %",
             _verdict(all(ok), any(ok) or all(part))))
        brk = [[over[(g, v)] for g in gs] for v in ("predicted", "real")]
        add(("§6.5", "the largest break falls from g68 to g99 (g68 / g95 / g99, predicted; real, % of the cap)",
             "8 / 5 / 3 %", "; ".join(" / ".join(_f(x, 2) for x in b) for b in brk) + " %",
             _verdict(all(b[0] >= b[1] >= b[2] and b[0] > b[2] for b in brk),
                      any(b[0] >= b[1] >= b[2] and b[0] > b[2] for b in brk))))
        und = [[under((g, v)) for g in gs] for v in ("predicted", "real")]
        dt = [max(abs(tat[(g, v)] - tat[("mean", v)]) for g in gs) for v in ("predicted", "real")]
        add(("§6.5", "Gaussian checks cost little: under-utilisation g68 < g95 < g99, turnaround close to mean's "
                     "(predicted; real)", "0.7 / 4 / 8 %; ≈ +2 %",
             "; ".join(" / ".join(_f(x) for x in u) for u in und) + f" %; within {_f(max(dt))} points of mean",
             _verdict(all(u[0] <= u[1] <= u[2] for u in und) and max(dt) <= 2.0,
                      all(u[0] <= u[1] <= u[2] for u in und) or max(dt) <= 2.0)))
    else:
        add(("§6.5", "Gaussian checks cut the time above the cap against mean", "Fig. 6", "—", "not run"))
    pairs = [c for c in CHECK_SHORT if both(c)]
    if len(pairs) == len(CHECK_SHORT):
        du = max(abs(util[(c, "predicted")] - util[(c, "real")]) for c in pairs)
        dt = max(abs(tat[(c, "predicted")] - tat[(c, "real")]) for c in pairs)
        add(("§6.5", "predicted values perform close to real ones (largest gap over the checks)", "\"satisfactory\"",
             f"utilisation {_f(du)} points, turnaround {_f(dt)} points", _verdict(du <= 3 and dt <= 3,
                                                                                   du <= 5 and dt <= 5)))
    else:
        add(("§6.5", "predicted values perform close to real ones", "\"satisfactory\"", "—", "not run"))

    # §6.6, Fig. 7: four algorithms at 50 %, gaussian_99
    alg = {(a, v): runs.select(a, "gaussian_99", v, 0.5) for a, _ in ALGOS for v in ("predicted", "real")}
    if all(alg.values()):
        def am(a, key, scale=1.0):
            return [runs.mean(alg[(a, v)], key, scale) for v in ("predicted", "real")]

        def cell(a, key, scale=1.0, digits=1):
            p, r = am(a, key, scale)
            return f"{_f(p, digits)} / {_f(r, digits)}"

        win = {a: am(a, "frac_jobs_in_window", 100.0) for a, _ in ALGOS}
        fc = win["easy-pc"]
        easy = runs.mean(list(runs.base.values()), "frac_jobs_in_window", 100.0)
        add(("§6.6", "EASY FCFS starts this share of the jobs inside the window (predicted / real)", "18 %",
             cell("easy-pc", "frac_jobs_in_window", 100.0) + f" % (uncapped EASY: {_f(easy)} %)",
             _verdict(all(abs(x - 18) <= 6 for x in fc), any(x >= 9 for x in fc))))
        others = [a for a, _ in ALGOS if a != "easy-pc"]
        add(("§6.6", "EASY SAF and the knapsacks start more jobs inside the window (SAF; Wait.; Stretch)",
             "> 30 %", "; ".join(cell(a, "frac_jobs_in_window", 100.0) for a in others) + " %",
             _verdict(all(x > 30 for a in others for x in win[a]),
                      all(win[a][i] > fc[i] for a in others for i in (0, 1)))))
        ut = {a: am(a, "dyn_power_util", 100.0) for a, _ in ALGOS}
        more = [ut[a][i] > ut["easy-pc"][i] for a in others for i in (0, 1)]
        add(("§6.6", "EASY SAF and the knapsacks are more aggressive with the cap than FCFS (dynamic utilisation; "
                     "FCFS; SAF; Wait.; Stretch)", "Fig. 7a: closer to the cap",
             "; ".join(cell(a, "dyn_power_util", 100.0) for a, _ in ALGOS) + " %", _verdict(all(more), any(more))))
        tc = {a: am(a, "tat_change_pct") for a, _ in ALGOS}
        worst = [all(tc["easy-pc"][i] > tc[a][i] for a in others) for i in (0, 1)]
        best = [all(tc["easy-saf"][i] < tc[a][i] for a in ("easy-pc", *others[1:])) for i in (0, 1)]
        add(("§6.6", "EASY FCFS has the worst mean turnaround increase, EASY SAF the best (FCFS; SAF; Wait.; Stretch)",
             "Fig. 7b", "; ".join(cell(a, "tat_change_pct") for a, _ in ALGOS) + " %",
             _verdict(all(worst) and all(best), any(worst) or any(best))))
        mx = {a: am(a, "max_tat_change_pct") for a, _ in ALGOS}
        starve = [mx["easy-saf"][i] > mx[a][i] for a in ("easy-pc", "knapsack-wait", "knapsack-stretch")
                  for i in (0, 1)]
        add(("§6.6", "EASY SAF starves large jobs: the largest max-turnaround increase (FCFS; SAF; Wait.; Stretch)",
             "Fig. 7c", "; ".join(cell(a, "max_tat_change_pct") for a, _ in ALGOS) + " %",
             _verdict(all(starve), any(starve))))
        ks = ("knapsack-wait", "knapsack-stretch")
        better = [tc[k][i] < tc["easy-pc"][i] for k in ks for i in (0, 1)]
        add(("§6.6", "the knapsacks improve the mean turnaround against EASY FCFS (FCFS; Wait.; Stretch)", "Fig. 7b",
             "; ".join(cell(a, "tat_change_pct") for a in ("easy-pc", *ks)) + " %",
             _verdict(all(better), any(better))))
        fair = [mx[k][i] <= mx["easy-pc"][i] and mx[k][i] < mx["easy-saf"][i] for k in ks for i in (0, 1)]
        add(("§6.6", "... without starving large jobs (max-turnaround increase at most FCFS's, below SAF's)", "Fig. 7c",
             "; ".join(cell(a, "max_tat_change_pct") for a in ("easy-pc", *ks)) + " %",
             _verdict(all(fair), any(fair))))
        st = [tc["knapsack-stretch"][i] < tc["knapsack-wait"][i] for i in (0, 1)]
        add(("§6.6", "Knapsack Stretch is slightly better than Knapsack Wait. (mean turnaround increase)",
             "\"slightly better\"", f"{cell('knapsack-stretch', 'tat_change_pct')} vs "
             f"{cell('knapsack-wait', 'tat_change_pct')} %", _verdict(all(st), any(st))))
    else:
        add(("§6.6", "the four algorithms at a 50 % cap", "Fig. 7", "—", "not run"))
    return out


def comparison(rows: list[dict], accuracy: dict[str, dict[str, float]], title: str = "") -> str:
    """The text of COMPARISON.md."""
    rs = claims(rows, accuracy)
    workloads = len({r["workload"] for r in rows})
    caps = sorted({r["cap_frac"] for r in rows if r["cap_frac"] is not None and not math.isnan(r["cap_frac"])})
    acc = accuracy.get("history", {})
    counts = {v: sum(1 for r in rs if r[4] == v) for v in ("holds", "partly", "does not", "not run")}
    lines = [f"# Carastan-Santos et al. 2024: the paper's claims beside ours{title}", "",
             f"{len(rows)} runs on {workloads} workloads, caps {', '.join(f'{c * 100:g} %' for c in caps)} "
             "(means over the (workload, cap) instances, as the paper's §6.5); "
             + (f"prediction accuracy over {acc['jobs']:,.0f} jobs of {acc['users']:.0f} users."
                if acc else "prediction accuracy not run."),
             "Computed by `lwp_compare.py` from `rows.csv` and `accuracy/summary.csv`; do not edit by hand. "
             "Verdict rules: README.md, *Comparison with the paper*.", "",
             f"**{counts['holds']} hold, {counts['partly']} partly, {counts['does not']} do not"
             + (f", {counts['not run']} not run" if counts["not run"] else "") + ".**", "",
             "| | claim | paper | ours | verdict |", "|---|---|---|---|---|"]
    for section, claim, paper, ours, verdict in rs:
        lines.append(f"| {section} | {claim} | {paper} | {ours} | {verdict} |")
    return "\n".join(lines) + "\n"


def write_comparison(out: Path, title: str = "") -> Path:
    """Write ``out/COMPARISON.md`` from ``out/rows.csv`` and ``out/accuracy/summary.csv``."""
    text = comparison(read_rows(out / "rows.csv"), read_accuracy(out / "accuracy" / "summary.csv"), title)
    dest = out / "COMPARISON.md"
    dest.write_text(text)
    return dest
