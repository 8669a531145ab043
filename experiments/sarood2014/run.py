"""Reproduce Sarood et al. 2014 (PARM) in one command: `python experiments/sarood2014/run.py [--quick]`.

Writes the job tables (the testbed's SetL and SetH, three 1,000-job sets of a
real log scaled to Intrepid) and the platform variants of Fig. 7, runs every
`wattsched simulate` of the experiment, at most two at a time (resumable: a run
whose summary.json exists is not run again), collects one row per run in
`results/<tag>/rows.csv` and writes `results/COMPARISON<-tag>.md`, each claim of
the paper beside our number, computed from those rows, and a few figures.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACES = HERE.parents[2] / "shared" / "traces"      # ../shared/traces of the repository, never copied in
APPS = ("leanmd", "wave2d", "lulesh", "amr", "jacobi2d")
BETA = {"leanmd": 0.40, "wave2d": 0.16, "lulesh": 0.30, "amr": 0.33, "jacobi2d": 0.08}   # Table IV
# §VI-E: SetH is 3 LeanMD, 3 Wave2D, 2 Lulesh, 1 Jacobi, 1 AMR (mean β 0.27); SetL's mix is not given,
# only its mean β 0.1: 7 Jacobi2D and 3 Wave2D give 0.104.
SET_MIX = {"SetL": {"jacobi2d": 7, "wave2d": 3},
           "SetH": {"leanmd": 3, "wave2d": 3, "lulesh": 2, "jacobi2d": 1, "amr": 1}}
INTREPID_NODES = 40960
GAMMAS = [0.2, 0.4, 0.5, 0.6, 0.8]
NAIVE_W = [30, 40, 50, 60]
ALPHAS = [0.0, 0.5, 1.0, 2.0]
LEVELS = {2: [30, 60], 3: [30, 44, 60], 4: [30, 36, 50, 60], 6: [30, 33, 36, 44, 50, 60],
          8: [30, 33, 36, 40, 44, 50, 55, 60]}   # 6 is the paper's P_j; the others spread over 30..60 W
# Table V and the text of §VI-G, §VII-C/D (the paper's numbers; Figs. 4-7 are images our copy lacks).
PAPER_T5 = {(1, 0.5): (90, 3, 6, 80, 84, 95, 453, 610, 601, 1.91, 1.70),
            (2, 0.5): (500, 34, 57, 57, 69, 89, 632, 714, 721, 5.25, 4.66),
            (3, 0.5): (217, 99, 88, 60, 73, 90, 520, 662, 665, 1.65, 1.61),
            (2, 0.7): (142, 12, 20, 57, 66, 83, 596, 656, 660, 2.36, 1.96),
            (3, 0.7): (194, 95, 86, 60, 73, 90, 488, 596, 599, 1.54, 1.43)}
PAPER_T6 = {30: (4.32, 55248), 40: (1.86, 49493), 50: (2.33, 44824), 60: (5.25, 40960)}


# ----------------------------------------------------------------------------- workloads

def testbed_set(name: str, seed: int) -> list[dict]:
    """One of the testbed's datasets (§VI-E): 10 jobs of the mix of `name`, run times of mean 1 h.

    Run times are exponential of mean 1 h, clipped to 10 min..3 h; arrivals uniform over the first 2 h of
    the 5-h span (so that the 28-node conventional machine queues); the least node count (the job's
    memory needs) uniform in 4..12, the largest `ceil(min / θ)`, θ ~ U[0.3, 0.6], at most 38. `nodes` is
    the least count: SLURM and noMM run the job on it (§VI-F), and its run time there at full CPU power
    is the job's work.
    """
    rng = random.Random(f"{name}-{seed}")
    apps = [a for a, k in SET_MIX[name].items() for _ in range(k)]
    rng.shuffle(apps)
    rows = []
    for i, app in enumerate(apps):
        lo = rng.randint(4, 12)
        runtime = min(3 * 3600.0, max(600.0, rng.expovariate(1 / 3600)))
        rows.append({"id": i + 1, "submit_s": round(rng.uniform(0, 7200), 1), "runtime_s": round(runtime, 1),
                     "walltime_s": round(3 * runtime, 1), "nodes": lo, "min_nodes": lo,
                     "max_nodes": min(38, math.ceil(lo / rng.uniform(0.3, 0.6))), "malleable": "true", "app": app})
    rows.sort(key=lambda r: (r["submit_s"], r["id"]))
    return rows


def read_log(workload: str, intrepid_file: Path | None) -> list[dict]:
    """The jobs of the log, oldest first: id, submit_s, runtime_s, walltime_s and nodes on Intrepid's 40,960.

    `atlas`: LLNL-Atlas (1,152 nodes of 8 cores) through wattsched's SWF reader, jobs of positive run
    time, node counts scaled by 40,960 / 1,152 (rounded up, at most 40,960), requested times as logged.
    `intrepid`: the 3,000-job Intrepid excerpt of github.com/gaganmangat/MTech-Thesis (JobLogs/anl.swf,
    commit 4f56a88), columns `Job_name Submit Runtime Nodes Comment Perc`: node counts are Intrepid's
    own; it has no requested time, so the run time is taken (exact estimates).
    """
    if workload == "atlas":
        from wattsched.workload.swf import read_swf

        wl = read_swf(TRACES / "LLNL-Atlas-2006-2.1-cln.swf.gz", cores_per_node=8)
        return [{"id": j.id, "submit_s": j.submit_s, "runtime_s": j.runtime_s,
                 "walltime_s": max(j.walltime_s, j.runtime_s),
                 "nodes": min(INTREPID_NODES, math.ceil(j.nodes * INTREPID_NODES / 1152))}
                for j in wl.jobs if j.runtime_s > 0]
    if intrepid_file is None or not intrepid_file.exists():
        raise SystemExit(f"run.py: --workload intrepid needs --intrepid-file (the excerpt's anl.swf, see README.md); "
                         f"got {intrepid_file}")
    jobs = []
    with open(intrepid_file) as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts or parts[0] == "Job_name" or line.startswith(";"):
                continue
            try:
                jid, submit, runtime, nodes = int(parts[0]), float(parts[1]), float(parts[2]), int(parts[3])
            except (ValueError, IndexError):
                raise SystemExit(f"{intrepid_file}:{lineno}: expected 'Job_name Submit Runtime Nodes ...', "
                                 f"got {line.strip()[:60]!r}") from None
            if runtime > 0 and 0 < nodes <= INTREPID_NODES:
                jobs.append({"id": jid, "submit_s": submit, "runtime_s": runtime, "walltime_s": runtime,
                             "nodes": nodes})
    return jobs


def log_set(log: list[dict], start: int, count: int, gamma: float, seed: int) -> list[dict]:
    """`count` successive jobs from index `start`, arrivals from 0 multiplied by γ, moldable by §VII-B-2/3.

    Every job gets a PASS application drawn uniformly from Table IV's five, a range
    `ceil(θ·n)..n` with θ ~ U[0.2, 0.6], and is malleable; the draws depend on the set, not on γ.
    The time limit is three times the requested time (runs also pass --no-kill-at-walltime).
    """
    rng = random.Random(f"log-{start}-{seed}")
    sel = log[start:start + count]
    t0 = sel[0]["submit_s"]
    rows = []
    for j in sel:
        theta, app = rng.uniform(0.2, 0.6), rng.choice(APPS)
        rows.append({"id": j["id"], "submit_s": round((j["submit_s"] - t0) * gamma, 1), "runtime_s": j["runtime_s"],
                     "walltime_s": 3 * j["walltime_s"], "nodes": j["nodes"],
                     "min_nodes": max(1, math.ceil(theta * j["nodes"])), "max_nodes": j["nodes"],
                     "malleable": "true", "app": app})
    return rows


def write_table(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text_rows = [",".join(str(r[k]) for k in rows[0]) for r in rows]
    text = ",".join(rows[0]) + "\n" + "\n".join(text_rows) + "\n"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def platform_variant(levels: list[int], dest: Path) -> Path:
    """A copy of the packaged intrepid-overprovisioned platform with CPU levels `levels` (Fig. 7)."""
    from importlib.resources import files

    text = (files("wattsched") / "data" / "platforms" / "intrepid-overprovisioned.yaml").read_text()
    line = next(x for x in text.splitlines() if x.startswith("cpu_power_levels_w:"))
    text = text.replace(line, f"cpu_power_levels_w: {levels}").replace(
        "name: intrepid-overprovisioned", f"name: intrepid-{len(levels)}-levels")
    if not dest.exists() or dest.read_text() != text:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
    return dest


# ----------------------------------------------------------------------------- runs

def plan(args, out: Path) -> list[dict]:
    """Every run of the experiment: key, trace, platform, policy arguments and the labels of its row."""
    runs: list[dict] = []
    inputs = out / "inputs"

    def add(key, trace, platform, policy_args, **labels):
        runs.append({"key": key, "trace": str(trace), "platform": str(platform), "args": policy_args, **labels})

    parm = ["--policy", "parm", "--param", "count_idle=false"]   # Eq. 5 as printed: only the nodes given to jobs
    policies4 = {"slurm": ["--policy", "easy", "--naive-cpu-w", "60"],
                 "noMM": [*parm, "--param", "version=noMM"],
                 "noSE": [*parm, "--param", "version=noSE"],
                 "wSE": [*parm, "--param", "version=wSE"]}
    for name in SET_MIX:
        for seed in range(args.testbed_seeds):
            trace = write_table(inputs / f"testbed-{name}-{seed}.csv", testbed_set(name, seed))
            for label, pa in policies4.items():
                add(f"fig4-{name}-{seed}-{label}", trace, "sarood-testbed", pa, exp="fig4", set=name, seed=seed,
                    scheme=label)
    log = read_log(args.workload, args.intrepid_file)
    starts = {1: 0, 2: len(log) // 3, 3: 2 * len(log) // 3} if args.workload == "atlas" else {1: 0, 2: 1000, 3: 2000}
    for s in {*args.sets, args.table6[0], *(c[0] for c in args.fig67)}:
        if s not in starts:
            raise SystemExit(f"run.py: sets are 1, 2 and 3, got {s}")
        if starts[s] + args.jobs > len(log):
            raise SystemExit(f"run.py: set {s} needs {args.jobs} jobs from {starts[s]}, the log has {len(log)}")
    big = {"baseline": ["--policy", "easy", "--naive-cpu-w", "60"],
           "noSE": [*parm, "--param", "version=noSE"],
           "wSE": [*parm, "--param", "version=wSE"]}

    def trace_of(s, g):
        return write_table(inputs / f"{args.workload}-set{s}-g{g}-{args.jobs}.csv",
                           log_set(log, starts[s], args.jobs, g, s))

    plat = "intrepid-overprovisioned"
    for s in args.sets:
        for g in args.gammas:
            for label, pa in big.items():
                add(f"t5-set{s}-g{g}-{label}", trace_of(s, g), plat, pa, exp="table5", set=s, gamma=g, scheme=label)
    s6, g6 = args.table6
    for w in args.naive:
        add(f"t5-set{s6}-g{g6}-baseline" if w == 60 else f"t6-set{s6}-g{g6}-naive{w}", trace_of(s6, g6), plat,
            ["--policy", "easy", "--naive-cpu-w", str(w)], exp="table6", set=s6, gamma=g6, scheme=f"naive{w}")
    if args.naive:
        add(f"t5-set{s6}-g{g6}-wSE", trace_of(s6, g6), plat, big["wSE"], exp="table5", set=s6, gamma=g6,
            scheme="wSE")
    for s1, g1 in args.fig67:
        fig67(add, trace_of, s1, g1, args, inputs, plat, big["wSE"])
    return runs   # a run shared by experiments (the same key) appears once for each, and is run once


def fig67(add, trace_of, s1, g1, args, inputs, plat, wse):
    """The runs of Figs. 6 and 7 on set `s1` at γ `g1`."""
    for a in args.alphas:
        key = f"t5-set{s1}-g{g1}-wSE" if a == 0 else f"fig6-set{s1}-g{g1}-a{a}"
        add(key, trace_of(s1, g1), plat, [*wse, "--param", f"alpha={a}"], exp="fig6", set=s1, gamma=g1,
            scheme="wSE", alpha=a)
    for k in args.levels:
        key = f"t5-set{s1}-g{g1}-wSE" if k == 6 else f"fig7-set{s1}-g{g1}-L{k}"
        platform = plat if k == 6 else platform_variant(LEVELS[k], inputs / f"intrepid-{k}-levels.yaml")
        add(key, trace_of(s1, g1), platform, wse, exp="fig7", set=s1, gamma=g1, scheme="wSE", levels=k)


HEAVY = ["node_caps.csv", "timeline.csv", "*.parquet", "workload.csv.gz", "*.png", "report.html"]


def run_one(run: dict, out: Path) -> dict:
    """Run one `wattsched simulate` unless its summary exists; return its row."""
    d = out / "runs" / run["key"]
    summary = d / "summary.json"
    wall, ran = None, False
    if not summary.exists():
        wattsched = Path(sys.executable).with_name("wattsched")
        cmd = [str(wattsched), "simulate", "--trace", run["trace"], "--platform", run["platform"], *run["args"],
               "--no-kill-at-walltime", "--out", str(d), "-q", "--no-report"]
        t = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - t
        if p.returncode != 0 or not summary.exists():
            print(f"run.py: {run['key']} failed (exit {p.returncode}): {p.stderr.strip()[-400:]}", file=sys.stderr)
            return {"key": run["key"], "status": "failed"}
        (d / "wall_s.txt").write_text(f"{wall:.1f}\n")
        ran = True
        for heavy in HEAVY:   # keep summary.json and jobs.csv: a 40,960-node run's node_caps.csv is ~100 MB
            for path in d.glob(heavy):
                path.unlink()
    elif (d / "wall_s.txt").exists():
        wall = float((d / "wall_s.txt").read_text())
    s = json.loads(summary.read_text())["summary"]
    with open(d / "jobs.csv", newline="") as f:
        jobs = list(csv.DictReader(f))
    done = [j for j in jobs if j["end_s"] not in ("", "nan")]
    return {"key": run["key"], "status": "ok", "n_jobs": s["n_jobs"], "completed": s["jobs_completed"],
            "mean_completion_s": s["mean_turnaround_s"], "max_completion_s": s["max_turnaround_s"],
            "mean_response_s": s["mean_wait_s"], "max_response_s": s["max_wait_s"],
            "mean_exec_s": statistics.fmean(float(j["end_s"]) - float(j["start_s"]) for j in done) if done else "",
            "mean_nodes": statistics.fmean(int(j["nodes"]) for j in done) if done else "",
            "busy_nodes": s["utilization"] * s["nodes"], "makespan_s": s["makespan_s"],
            "max_power_w": s["max_power_w"], "wall_s": wall or "", "ran": ran}


FIELDS = ["key", "exp", "set", "seed", "gamma", "scheme", "alpha", "levels", "status", "n_jobs", "completed",
          "mean_completion_s", "max_completion_s", "mean_response_s", "max_response_s", "mean_exec_s", "mean_nodes",
          "busy_nodes",
          "makespan_s", "max_power_w", "wall_s"]


def run_all(runs: list[dict], out: Path, workers: int) -> list[dict]:
    """One row per entry of `runs`; each distinct key is simulated once."""
    unique = list({r["key"]: r for r in runs}.values())
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = dict(zip((r["key"] for r in unique), pool.map(lambda r: run_one(r, out), unique)))
    return [{k: v for k, v in run.items() if k in FIELDS} | results[run["key"]]
            for run in runs]


# ----------------------------------------------------------------------------- comparison

def _f(v) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def md(head: list[str], rows: list[list]) -> str:
    """A Markdown table."""
    fmt = lambda v: "" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)  # noqa: E731
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                     + ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows])


def _runs(rows: list[dict]) -> dict[str, dict]:
    """The rows that ran, by key (a key shared by experiments: its Table V row when it has one)."""
    out: dict[str, dict] = {}
    for r in rows:
        if r.get("status") == "ok" and (r["key"] not in out or r.get("exp") == "table5"):
            out[r["key"]] = r
    return out


def _mean(vals) -> float | None:
    vals = [v for v in vals if v is not None]
    return statistics.fmean(vals) if vals else None


def fig4(rows: list[dict]) -> tuple[str, dict]:
    """Fig. 4: mean completion and response times (min) per set and scheme, means over the seeds."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get("exp") == "fig4"]
    schemes = ["slurm", "noMM", "noSE", "wSE"]
    out, got = [], {}
    for name in ("SetL", "SetH"):
        mine = [r for r in ok if r["set"] == name]
        if not mine:
            continue
        comp = {s: _mean(_f(r["mean_completion_s"]) for r in mine if r["scheme"] == s) for s in schemes}
        resp = {s: _mean(_f(r["mean_response_s"]) for r in mine if r["scheme"] == s) for s in schemes}
        nodes = {s: _mean(_f(r["mean_nodes"]) for r in mine if r["scheme"] == s) for s in schemes}
        busy = {s: _mean(_f(r.get("busy_nodes")) for r in mine if r["scheme"] == s) for s in schemes}
        got[name] = comp
        seeds = len({r["seed"] for r in mine})
        out.append(md([f"{name} ({seeds} datasets)", *schemes],
                      [["mean completion (min)", *[None if comp[s] is None else comp[s] / 60 for s in schemes]],
                       ["mean response (min)", *[None if resp[s] is None else resp[s] / 60 for s in schemes]],
                       ["mean nodes of a job", *[nodes[s] for s in schemes]],
                       ["mean busy nodes (Fig. 4c)", *[busy[s] for s in schemes]]]))
    return "\n\n".join(out), got


def _trend(before: float, after: float, *, down: bool) -> str:
    """'yes' when `after` moved the claimed way by more than 0.1 %, 'unchanged' within it, else 'no'."""
    if abs(after - before) <= 1e-3 * abs(before):
        return "unchanged"
    return "yes" if (after < before) == down else "no"


def _ratio(a, b):
    return a / b if a is not None and b else None


def comparison(rows: list[dict], title: str = "") -> str:
    """COMPARISON.md: every claim of the paper beside our number, from the rows."""
    runs = _runs(rows)
    lines = [f"# Sarood et al. 2014 (PARM): the paper's claims beside ours{title}", "",
             f"{len(runs)} runs ok, {len({r['key'] for r in rows if r.get('status') == 'failed'})} failed. "
             "Completion = submit to end (summary's mean_turnaround_s), response = submit to start. "
             "Speedup = baseline's mean completion / the scheme's.", ""]
    # Fig. 4
    text, got = fig4(rows)
    lines += ["## Fig. 4: the testbed (38 nodes, 3,300 W)", ""]
    if got:
        lines += [text, ""]
        claims = []
        L = got.get("SetL", {})
        H = got.get("SetH", {})
        for nm, paper, ours in (
                ("wSE over SLURM, completion, SetL", "1.7×", _ratio(L.get("slurm"), L.get("wSE"))),
                ("noSE better than noMM, SetL", "7.5 %", None if not L.get("noMM") or L.get("noSE") is None
                 else 100 * (1 - L["noSE"] / L["noMM"])),
                ("wSE better than noMM, SetL", "13.9 %", None if not L.get("noMM") or L.get("wSE") is None
                 else 100 * (1 - L["wSE"] / L["noMM"])),
                ("wSE over SLURM, completion, SetH", "smaller than SetL's", _ratio(H.get("slurm"), H.get("wSE")))):
            unit = "×" if "over" in nm else " %"
            claims.append([nm, paper, None if ours is None else f"{ours:.2f}{unit}"])
        lines += [md(["claim", "paper", "ours"], claims), ""]
    else:
        lines += ["not run", ""]
    # Table V / Fig. 5
    t5 = [r for r in runs.values() if r.get("exp") == "table5"]
    lines += ["## Fig. 5 and Table V: three 1,000-job sets on 40,960 nodes, arrivals × γ", ""]
    cells = sorted({(int(r["set"]), float(r["gamma"])) for r in t5})
    table = []
    for s, g in cells:
        def get(scheme, col, s=s, g=g):
            r = runs.get(f"t5-set{s}-g{g}-{scheme}")
            return _f(r[col]) if r else None
        base, w, n = (get(x, "mean_completion_s") for x in ("baseline", "wSE", "noSE"))
        p = PAPER_T5.get((s, g))
        m = lambda v: None if v is None else v / 60  # noqa: E731
        table.append([s, g,
                      *(m(get(x, "mean_response_s")) for x in ("baseline", "wSE", "noSE")),
                      *(m(get(x, "mean_exec_s")) for x in ("baseline", "wSE", "noSE")),
                      *(get(x, "mean_nodes") for x in ("baseline", "wSE", "noSE")),
                      _ratio(base, w), _ratio(base, n),
                      f"{p[9]:.2f} / {p[10]:.2f}" if p else ""])
    if table:
        lines += ["Ours (minutes; nodes = mean node count a job ran on; speedups wSE / noSE), with the paper's "
                  "speedups where Table V gives them:", "",
                  md(["set", "γ", "resp base", "resp wSE", "resp noSE", "exe base", "exe wSE", "exe noSE",
                      "nodes base", "nodes wSE", "nodes noSE", "speedup wSE", "speedup noSE", "paper wSE / noSE"],
                     table), "",
                  "The paper's Table V (minutes):", "",
                  md(["set", "γ", "resp base", "resp wSE", "resp noSE", "exe base", "exe wSE", "exe noSE",
                      "nodes base", "nodes wSE", "nodes noSE", "speedup wSE", "speedup noSE"],
                     [[s, g, *v] for (s, g), v in PAPER_T5.items()]), ""]
        claims = []
        sp = {(s, g): (row[11], row[12]) for (s, g), row in zip(cells, table)}
        wins = [v for v in sp.values() if v[0] is not None and v[1] is not None]
        claims.append(["noSE and wSE beat the baseline in every set and γ", "yes",
                       f"{sum(1 for a, b in wins if a > 1 and b > 1)} of {len(wins)}"])
        ties = sum(1 for a, b in wins if abs(a - b) <= 0.005 * b)
        claims.append(["wSE faster than noSE", "yes, in all sets",
                       f"faster in {sum(1 for a, b in wins if a > b and abs(a - b) > 0.005 * b)}, within 0.5 % in "
                       f"{ties}, slower in {sum(1 for a, b in wins if a < b and abs(a - b) > 0.005 * b)} "
                       f"of {len(wins)}"])
        for s in sorted({c[0] for c in cells}):
            gs = sorted(g for c, g in cells if c == s and sp[(c, g)][0] is not None)
            if len(gs) > 1:
                lo, hi = sp[(s, gs[0])][0], sp[(s, gs[-1])][0]
                claims.append([f"set {s}: higher speedup at smaller γ (wSE, γ {gs[0]} vs {gs[-1]})", "yes",
                               f"{lo:.2f} vs {hi:.2f}: {'yes' if lo > hi else 'no'}"])
        lines += [md(["claim", "paper", "ours"], claims), ""]
    else:
        lines += ["not run", ""]
    # Table VI
    t6 = [r for r in rows if r.get("exp") == "table6" and r.get("status") == "ok"]
    lines += ["## Table VI: wSE over the naive strategy (every node at one CPU cap, easy)", ""]
    if t6:
        s6, g6 = t6[0]["set"], t6[0]["gamma"]
        w = runs.get(f"t5-set{s6}-g{g6}-wSE")
        wc = _f(w["mean_completion_s"]) if w else None
        tab = []
        for r in sorted(t6, key=lambda r: int(r["scheme"][5:])):
            watts = int(r["scheme"][5:])
            p = PAPER_T6.get(watts, (None, None))
            nodes = math.floor(4751360 / (38 + 18 + watts))
            tab.append([watts, nodes, p[1], _f(r["mean_completion_s"]) / 60, _ratio(_f(r["mean_completion_s"]), wc),
                        p[0]])
        lines += [f"Set {s6}, γ = {g6} (the paper: Set 2, γ = 0.5); wSE's mean completion "
                  f"{'' if wc is None else f'{wc / 60:.1f}'} min.", "",
                  md(["CPU cap (W)", "nodes (ours)", "nodes (paper)", "naive mean completion (min)",
                      "speedup of wSE (ours)", "speedup of wSE (paper)"], tab), ""]
    else:
        lines += ["not run", ""]
    # Fig. 6 and Fig. 7, one table for each (set, γ) run
    lines += ["## Fig. 6: α trades mean against maximum completion time (wSE)", ""]
    f6 = [r for r in rows if r.get("exp") == "fig6" and r.get("status") == "ok"]
    for cell in sorted({(r["set"], r["gamma"]) for r in f6}):
        mine = sorted((r for r in f6 if (r["set"], r["gamma"]) == cell), key=lambda r: float(r["alpha"]))
        tab = [[float(r["alpha"]), _f(r["mean_completion_s"]) / 60, _f(r["max_completion_s"]) / 3600,
                None if _f(r.get("max_response_s")) is None else _f(r["max_response_s"]) / 3600] for r in mine]
        lines += [f"Set {cell[0]}, γ = {cell[1]}.", "",
                  md(["α", "mean completion (min)", "max completion (h)", "max response (h)"], tab), ""]
        if len(tab) > 1:
            lines += [md(["claim", "paper", "ours"],
                         [[f"α {tab[0][0]:g} → {tab[-1][0]:g}: max completion falls", "yes",
                           _trend(tab[0][2], tab[-1][2], down=True)],
                          [f"α {tab[0][0]:g} → {tab[-1][0]:g}: mean completion rises", "yes",
                           _trend(tab[0][1], tab[-1][1], down=False)]]), ""]
    if not f6:
        lines += ["not run", ""]
    lines += ["## Fig. 7: number of CPU power levels |P_j| (wSE)", ""]
    f7 = [r for r in rows if r.get("exp") == "fig7" and r.get("status") == "ok"]
    for cell in sorted({(r["set"], r["gamma"]) for r in f7}):
        mine = sorted((r for r in f7 if (r["set"], r["gamma"]) == cell), key=lambda r: int(r["levels"]))
        tab = [[int(r["levels"]), ", ".join(map(str, LEVELS[int(r["levels"])])), _f(r["mean_completion_s"]) / 60,
                _f(r["max_completion_s"]) / 3600] for r in mine]
        lines += [f"Set {cell[0]}, γ = {cell[1]}.", "",
                  md(["|P_j|", "levels (W)", "mean completion (min)", "max completion (h)"], tab), ""]
        by = {t[0]: t[2] for t in tab}
        claims = []
        if 6 in by and any(k > 6 for k in by):
            k8 = max(by)
            claims.append([f"gain of {k8} levels over 6 (mean completion)", "negligible",
                           f"{100 * (1 - by[k8] / by[6]):.1f} %"])
        if 6 in by and min(by) < 6:
            k0 = min(by)
            claims.append([f"{k0} → 6 levels: mean completion falls", "yes",
                           f"{_trend(by[k0], by[6], down=True)} ({100 * (1 - by[6] / by[k0]):.1f} %)"])
        if claims:
            lines += [md(["claim", "paper", "ours"], claims), ""]
    if not f7:
        lines += ["not run", ""]
    walls = [_f(r.get("wall_s")) for r in runs.values()]
    walls = [w for w in walls if w is not None]
    if walls:
        lines += [f"Sum of the simulations' wall times, each measured when it ran (two at a time by default): "
                  f"{sum(walls):.0f} s over {len(walls)} runs.", ""]
    return "\n".join(lines)


def figures(rows: list[dict], out: Path, tag: str = "") -> list[Path]:
    """Fig. 5 (mean completion against γ per set) and Fig. 4 (testbed bars) as PNGs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = _runs(rows)
    written = []
    t5 = [r for r in runs.values() if r.get("exp") == "table5"]
    sets = sorted({int(r["set"]) for r in t5})
    if t5:
        fig, axes = plt.subplots(1, len(sets), figsize=(4.2 * len(sets), 3.6), squeeze=False)
        for ax, s in zip(axes[0], sets):
            for scheme, style in (("baseline", "k-o"), ("noSE", "b--s"), ("wSE", "g-^")):
                pts = sorted((float(r["gamma"]), _f(r["mean_completion_s"]) / 60) for r in t5
                             if int(r["set"]) == s and r["scheme"] == scheme)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=scheme)
            ax.set_title(f"set {s}", fontsize=9)
            ax.set_xlabel("γ (arrival times ×)")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("mean completion time (min)")
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        path = out / f"fig5{tag}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    _, got = fig4(rows)
    if got:
        fig, ax = plt.subplots(figsize=(5.2, 3.4))
        schemes = ["slurm", "noMM", "noSE", "wSE"]
        for i, name in enumerate(got):
            ax.bar([x + 0.4 * i for x in range(4)], [(got[name].get(s) or 0) / 60 for s in schemes], 0.4, label=name)
        ax.set_xticks([x + 0.2 for x in range(4)], schemes)
        ax.set_ylabel("mean completion time (min)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        path = out / f"fig4{tag}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="2 testbed datasets per set, set 1 only at γ 0.5, 300 jobs, α {0, 1}, levels {2, 6}, "
                         "naive at 30 and 60 W")
    ap.add_argument("--workload", choices=["atlas", "intrepid"], default="atlas",
                    help="log of the 1,000-job sets: LLNL-Atlas scaled (default) or the Intrepid excerpt")
    ap.add_argument("--intrepid-file", type=Path, help="the Intrepid excerpt (anl.swf, see README.md)")
    ap.add_argument("--workers", type=int, default=2, help="simulations at a time (default 2)")
    ap.add_argument("--fig67", default="1:0.5", metavar="SET:GAMMA[,...]",
                    help="the set and γ of the Fig. 6 and Fig. 7 runs, one or more (default 1:0.5, the paper's)")
    ap.add_argument("--sets", dest="only_sets", default=None, metavar="N[,N...]",
                    help="only these 1,000-job sets (default 1,2,3); Table VI runs only with its set (2), Figs. 6-7 "
                         "only with theirs. The rows and the comparison get a suffix (rows-sets1.csv, "
                         "COMPARISON-sets1.md); runs already stored under the same log are reused")
    args = ap.parse_args(argv)
    try:
        args.fig67 = [(int(a), float(b)) for a, b in (c.split(":") for c in args.fig67.split(","))]
    except ValueError:
        ap.error(f"--fig67: give SET:GAMMA[,SET:GAMMA...] (e.g. 1:0.5,1:0.2), got {args.fig67!r}")
    if args.workers < 1:
        ap.error(f"--workers: expected a positive integer, got {args.workers}")
    if args.quick:
        args.testbed_seeds, args.sets, args.gammas, args.jobs = 2, [1], [0.5], 300
        args.table6, args.naive, args.alphas, args.levels = (1, 0.5), [30, 60], [0.0, 1.0], [2, 6]
    else:
        args.testbed_seeds, args.sets, args.gammas, args.jobs = 5, [1, 2, 3], GAMMAS, 1000
        args.table6, args.naive, args.alphas = (2, 0.5), NAIVE_W, ALPHAS
        args.levels = sorted(LEVELS)
    subset = ""
    if args.only_sets is not None:
        try:
            chosen = sorted({int(x) for x in args.only_sets.split(",")})
        except ValueError:
            ap.error(f"--sets: give N[,N...] from 1, 2, 3 (e.g. 1 or 1,3), got {args.only_sets!r}")
        if not chosen or not set(chosen) <= {1, 2, 3}:
            ap.error(f"--sets: sets are 1, 2 and 3, got {args.only_sets!r}")
        args.sets = [s for s in args.sets if s in chosen]
        if args.table6[0] not in chosen:
            args.naive = []
        args.fig67 = [c for c in args.fig67 if c[0] in chosen]
        subset = "-sets" + "".join(map(str, chosen))
    tag = ("quick" if args.quick else "full") + ("" if args.workload == "atlas" else f"-{args.workload}")
    out = HERE / "results" / tag
    runs = plan(args, out)
    t = time.monotonic()
    rows = run_all(runs, out, args.workers)
    elapsed = time.monotonic() - t
    with open(out / f"rows{subset}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    title = f" ({tag}: {args.workload}{', quick' if args.quick else ''}{f', sets {args.sets}' if subset else ''})"
    ran = len({r["key"] for r in rows if r.get("ran")})
    text = comparison(rows, title) + (f"\nThe last invocation of run.py ran {ran} simulations in {elapsed:.0f} s and "
                                      f"read {len({r['key'] for r in rows}) - ran} back from earlier ones (README.md "
                                      "gives the measured time of each whole campaign).\n")
    dest = HERE / "results" / ("COMPARISON" + ("" if tag == "full" else f"-{tag}") + f"{subset}.md")
    dest.write_text(text)
    print(text)
    print(f"written {dest}")
    for path in figures(rows, out, subset):
        print(f"written {path}")
    return 1 if any(r.get("status") == "failed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
