"""Reproduction of Borghesi et al. 2018, §5 (Figs. 2-7) on wattsched's simulator and the ``eurora`` platform.

The campaign is one wattsched sweep. This module holds what is specific to
the paper:

* the figures (:data:`FIGURES`): instance family, methods, budgets;
* :func:`make_instance`, the one place that turns a figure's instance
  description and a seed into a job table (synthetic §5 instances, or
  consecutive jobs of a real trace for the Fig. 5 analogue);
* :func:`reference_peak_dyn_w`, the uncapped peak a budget is a fraction of
  (§5.2: "we run each dispatcher without power cap, to establish the uncapped
  maximal power consumption"; here the uncapped EASY run of the instance);
* :func:`sweep_file`, the sweep (one grid block per instance and method
  group, caps in watts: idle power + budget × the instance's uncapped peak of
  dynamic power, as the paper counts only dynamic power);
* :func:`run_metrics`, the sweep's extra per-run metrics: the paper's BSLD
  (Eq. 3, θ = 300 s, over the instance's own jobs, not the hot-start ones) and
  whether the run kept to the budget;
* :func:`collate`, the rows of ``runs.csv`` per figure, method and budget.
"""

from __future__ import annotations

import csv
import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TRACES = REPO.parent / "shared" / "traces"

THETA_S = 300.0
"""θ of Eq. 3: five minutes."""

PRESET = "borghesi2018"
"""The synthetic instances are the library's §5 preset (``wattsched.workload.synthetic``): Eurora's 64
nodes, its queues with expected waiting times, application classes, arrivals, hot start."""


def _preset() -> dict:
    from wattsched.workload.synthetic import preset

    return preset(PRESET)


QUEUE_EWT_S = _preset()["queues"].ewt_param()
"""Expected waiting time per queue, the ``queue_ewt_s`` of ``ls``/``dec`` (the preset's queues)."""

TRACE_QUEUE_LIMITS_S = (("debug", 1800.0), ("parallel", 6 * 3600.0), ("longpar", math.inf))
"""Fig. 5 analogue only: a real trace's job goes to the first of the preset's queues whose limit its
requested time does not exceed (ASSUMPTION: the traces have no such queues)."""

VIOLATION_TOL = 0.01
"""A run breaks its budget when the platform power is above cap × (1 + this) for any time."""

# --- response models (§5.1.1) ---------------------------------------------------------------------------------
# The library's scenarios (``wattsched.model.response.ResponseScenario``), named by the policies'
# ``response`` parameter: a factor F for every job (DynShare_F), ``mixed`` (F drawn per job within its
# application class's interval), ``cpi`` (Eq. 4); taken on the dynamic power, with the paper's 1 W floor.

# --- methods ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Method:
    """One bar of the paper's figures: a policy with its parameters, predictor and response model."""

    label: str
    policy: str
    params: dict = field(default_factory=dict)
    predictor: dict = field(default_factory=lambda: {"name": "oracle"})
    proactive: bool = False


MIXED = {"response": "mixed"}
"""The response of the methods that slow jobs down, unless a figure names another (the paper's default)."""

UNDER = {"name": "oracle", "params": {"under_share": 0.1, "under_by": 0.4, "seed": 7}}
"""§5.2.4: 10 % of the jobs predicted 40 % below their real power."""


PAPER_DEC = {"time_limit_s": 1.0, "max_time_limit_s": 10.0}
"""§4.3/§5.1: dec's first solver limit 1 s, doubled up to 10 s (CP-SAT deterministic time here)."""

PAPER_FLOOR_W = 1.0
"""§5.2: "we cannot arbitrarily decrease the job power below a certain threshold (1 Watt in our experiments)"."""


def methods(dec_params: dict) -> dict[str, Method]:
    """Every method of the figures by label; ``dec_params`` are dec's solver limits for this campaign."""
    ls = {"queue_ewt_s": QUEUE_EWT_S}
    dec = {**ls, **dec_params}
    out = [
        Method("LS", "ls", ls, proactive=True),
        Method("DEC", "dec", dec, proactive=True),
        Method("DEC_1s", "dec", {**ls, **PAPER_DEC}, proactive=True),
        Method("BF", "bf"),
        Method("DVFS", "dvfs", MIXED),
        Method("Simple", "simple", MIXED),
        *(Method(f"DynShare_{f:g}", "dynshare", {"response": f"{f:g}"}) for f in (0, 0.25, 0.5, 0.75, 1)),
        Method("DynShare_mixed", "dynshare", MIXED),
        Method("DynShare_CPI", "dynshare", {"response": "cpi"}),
        *(Method(f"DynShare_{f:g}+AC", "dynshare", {"admission": True, "response": f"{f:g}"})
          for f in (0, 0.25, 0.5, 0.75, 1)),
        Method("DynShare_mixed+AC", "dynshare", {"admission": True, **MIXED}),
        Method("DEC+RAPL", "dec+rapl", {**dec, **MIXED}, proactive=True),
        Method("LS_U", "ls", ls, UNDER, proactive=True),
        Method("DEC_U", "dec", dec, UNDER, proactive=True),
        Method("LS_vU99", "ls", {**ls, "cap_margin": 0.01}, UNDER, proactive=True),
        Method("DEC_vU99", "dec", {**dec, "cap_margin": 0.01}, UNDER, proactive=True),
    ]
    return {m.label: m for m in out}


# --- figures ---------------------------------------------------------------------------------------------------

SYNTH_METHODS = ("LS", "DEC", "BF", "DVFS", "Simple", "DynShare_0", "DynShare_0.25", "DynShare_0.5",
                 "DynShare_0.75", "DynShare_1", "DynShare_mixed")
ALL_BUDGETS = (100, 90, 80, 70, 60, 50, 40, 30, 20, 10)


@dataclass(frozen=True)
class Family:
    """An instance family: synthetic (n jobs in a window) or consecutive jobs of a real trace."""

    key: str
    n_jobs: int
    window_s: float = 300.0
    arrival: str = "uniform"
    hot_start: float = 0.0
    trace: str | None = None

    def describe(self) -> str:
        if self.trace:
            return f"{self.n_jobs} consecutive jobs of {self.trace}"
        hs = f", HS {self.hot_start:.0%}" if self.hot_start else ""
        return f"{self.n_jobs} jobs in {self.window_s:g} s, {self.arrival}{hs}"


@dataclass(frozen=True)
class Figure:
    key: str
    title: str
    families: tuple[Family, ...]
    methods: tuple[str, ...]
    budgets: tuple[int, ...] = ALL_BUDGETS


F50 = Family("n50-w300-uniform", 50)
F50HS = Family("n50-w300-uniform-hs70", 50, hot_start=0.7)
F200 = Family("n200-w300-burst", 200, arrival="burst")
F400 = Family("n400-w300-burst", 400, arrival="burst")
F100U = Family("n100-w900-uniform", 100, 900.0)
WINDOWS_S = (300.0, 1800.0, 7200.0, 21600.0)
"""Fig. 6's arrival windows: 5 min (the synthetic figures) to 6 h (the paper's historical traces' average)."""
FIG6 = tuple(Family(f"n100-w{w:g}-uniform", 100, w) for w in WINDOWS_S)
KTH = "KTH-SP2-1996-2.1-cln.swf"

PAPER_DEC_LABEL = "DEC_1s"
"""``dec`` at the paper's solver limits (:data:`PAPER_DEC`), run on the 50- and 200-job instances (Figs. 2a, 3)
beside ``DEC`` at the campaign's limits; ``--dec-paper-instances``/``--dec-paper-budgets`` bound its runs."""

FIGURES: tuple[Figure, ...] = (
    Figure("fig2a", "Fig. 2a: 50 jobs in 300 s, uniform, HS 0 %", (F50,), (*SYNTH_METHODS, PAPER_DEC_LABEL)),
    Figure("fig2b", "Fig. 2b: 50 jobs in 300 s, uniform, HS 70 %", (F50HS,), SYNTH_METHODS),
    Figure("fig3", "Fig. 3: 200 jobs in 300 s, burst", (F200,), (*SYNTH_METHODS, PAPER_DEC_LABEL),
           ALL_BUDGETS[:-1]),
    Figure("fig4a", "Fig. 4a: 400 jobs in 300 s, burst, no admission control", (F400,), SYNTH_METHODS),
    Figure("fig4b", "Fig. 4b: 400 jobs in 300 s, burst, DynShare with admission control", (F400,),
           ("LS", "DEC", "BF", "DVFS", "DynShare_0+AC", "DynShare_0.25+AC", "DynShare_0.5+AC",
            "DynShare_0.75+AC", "DynShare_1+AC", "DynShare_mixed+AC")),
    Figure("fig5a", "Fig. 5a analogue: 100-job slices of KTH-SP2", (Family("kth-100", 100, trace=KTH),),
           ("LS", "DEC", "BF", "DVFS", "DynShare_mixed", "DynShare_CPI", "DEC+RAPL")),
    Figure("fig5b", "Fig. 5b analogue: 400-job slices of KTH-SP2", (Family("kth-400", 400, trace=KTH),),
           ("LS", "DEC", "BF", "DVFS", "DynShare_mixed", "DynShare_CPI", "DEC+RAPL")),
    Figure("fig6", "Fig. 6: DEC against DynShare_mixed as the arrival window widens (100 jobs, uniform)", FIG6,
           ("DEC", "DynShare_mixed", "DEC+RAPL")),
    Figure("fig7", "Fig. 7: 100 jobs in 900 s, 10 % of jobs under-predicted by 40 %", (F100U,),
           ("LS", "DEC", "LS_U", "DEC_U", "LS_vU99", "DEC_vU99", "BF", "DVFS", "DynShare_mixed")),
)
FIGURE_BY_KEY = {f.key: f for f in FIGURES}


# --- instances -------------------------------------------------------------------------------------------------

def queue_of(walltime_s: float) -> str:
    return next(name for name, limit in TRACE_QUEUE_LIMITS_S if walltime_s <= limit)


def make_instance(family: Family, index: int, platform, units: bool = False) -> list:
    """The jobs of instance ``index`` of ``family`` on ``platform`` (seeded by family and index).

    Synthetic families are the library's §5 instances (:func:`wattsched.workload.synthetic.generate`
    with the ``borghesi2018`` preset): ``n_jobs`` arrivals in ``window_s`` (uniform, left-skewed or
    burst), queues with expected waiting times, application classes, and with ``hot_start`` that share
    of the nodes busy with jobs already running at t = 0 (``running_at_start``: the engine starts them
    before the replay, they are not decisions of the policy). Per-job power by
    :func:`wattsched.workload.augment.augment` (it keeps the generator's classes). Trace families take
    ``n_jobs`` consecutive jobs of the trace from a seeded start (at most 64 nodes each), shifted to
    start at 0, queues by requested time. With ``units``, synthetic jobs are jobs of units (the
    paper's job units, sharing nodes; ``generate(units=True)``), the same arrivals, queues, classes
    and run times as without; trace slices keep whole nodes.
    """
    from wattsched.workload.augment import AugmentParams, augment
    from wattsched.workload.synthetic import generate

    seed = 1000 * (abs(hash_key(family.key)) % 100000) + index
    node_power = platform.nodes[-1].power
    if family.trace is not None:
        jobs = [_job(j, partition=queue_of(j.walltime_s)) for j in _trace_jobs(family, seed, len(platform.nodes))]
    else:
        kw = _preset()
        kw["max_nodes"] = len(platform.nodes)
        wl = generate(family.n_jobs, window_s=family.window_s, arrival=family.arrival, seed=seed,
                      hot_start=family.hot_start, units=units, **kw)
        jobs = list(wl.jobs)
    # constant job power, as the paper models it (a job draws its average power throughout; docs/simulator.md 2.4)
    return list(augment(jobs, node_power, AugmentParams(profile="constant"), seed=seed,
                        cores_per_node=platform.nodes[-1].cores))


def _job(j, **kw):
    import dataclasses

    return dataclasses.replace(j, **kw)


def hash_key(text: str) -> int:
    from wattsched.workload.augment import stable_hash

    return stable_hash(text)


@functools.lru_cache(maxsize=4)
def _trace(path: str):
    from wattsched.workload.swf import read_swf

    return list(read_swf(path).jobs)


def _trace_jobs(family: Family, seed: int, max_nodes: int) -> list:
    path = TRACES / family.trace
    if not path.exists():
        raise FileNotFoundError(f"{path}: trace not found (the Fig. 5 analogue reads the real traces from there)")
    jobs = [j for j in _trace(str(path)) if j.runtime_s > 0]
    rng = np.random.default_rng(seed)
    start = int(rng.integers(0, len(jobs) - family.n_jobs))
    part = jobs[start:start + family.n_jobs]
    t0 = part[0].submit_s
    return [_job(j, id=i + 1, submit_s=j.submit_s - t0, nodes=min(j.nodes, max_nodes),
                 procs=min(j.nodes, max_nodes) * 16, walltime_s=max(j.walltime_s, j.runtime_s))
            for i, j in enumerate(part)]


def reference_peak_dyn_w(table: Path, platform) -> float:
    """Peak dynamic power (W) of the uncapped EASY run of a job table."""
    from wattsched.policies import make_policy
    from wattsched.sim.engine import Engine
    from wattsched.workload.tables import read_job_table

    jobs = list(read_job_table(str(table)).jobs)
    result = Engine(platform, jobs, make_policy("easy")).run()
    return float(result.timeline["power_w"].max() - platform.idle_power_w)


DEC_POLICIES = ("dec", "dec+rapl")

# --- sweep file ------------------------------------------------------------------------------------------------

def campaign_platform(dest: Path) -> Path:
    """The ``eurora`` platform with node caps down to idle + the paper's 1 W floor (written to ``dest``).

    The packaged file's node caps start at 150 W, 30 W above idle (an ASSUMPTION of that file): under it every
    capped job keeps 30 W a node, a floor the paper does not have (§5.2: its only floor is 1 W of a job's
    power). The campaign lowers ``cap_min_w`` to ``idle_w + 1``.
    """
    from importlib import resources

    text = resources.files("wattsched").joinpath("data", "platforms", "eurora.yaml").read_text()
    if text.count("cap_min_w: 150.0") != 2 or text.count("idle_w: 120.0") != 2:
        raise ValueError("the packaged eurora platform changed: update b18.campaign_platform")
    text = text.replace("cap_min_w: 150.0", f"cap_min_w: {120.0 + PAPER_FLOOR_W}")
    text = ("# Written by experiments/borghesi2018 (b18.campaign_platform): the packaged eurora platform with\n"
            "# node caps down to idle + the paper's 1 W floor.\n" + text)
    if not dest.exists() or dest.read_text() != text:
        dest.write_text(text)
    return dest


def sweep_file(instances: list[dict], figures: list[Figure], budgets: tuple[int, ...] | None, dec_params: dict,
               name: str, dec_max_jobs: int | None = None, platform: str = "eurora",
               paper_dec_instances: int | None = None, paper_dec_budgets: tuple[int, ...] | None = None,
               dec_instances: int | None = None) -> dict:
    """The sweep as a dict (written as YAML): one grid block per instance and method.

    ``instances`` are ``{"family", "index", "path", "peak_dyn_w", "idle_w"}`` records; with
    ``dec_max_jobs``, the dec-based methods are left out of instances with more jobs; ``DEC_1s`` (dec at
    the paper's limits) runs on the first ``paper_dec_instances`` instances only, at ``paper_dec_budgets``;
    the other dec-based methods on the first ``dec_instances`` only.
    """
    by_method = methods(dec_params)
    grid = []
    for inst in instances:
        wanted: dict[str, set[int]] = {}
        for fig in figures:
            if inst["family"] not in {f.key for f in fig.families}:
                continue
            for m in fig.methods:
                if dec_max_jobs is not None and inst["n_jobs"] > dec_max_jobs and by_method[m].policy in DEC_POLICIES:
                    continue
                bs = {b for b in fig.budgets if budgets is None or b in budgets}
                if (m != PAPER_DEC_LABEL and dec_instances is not None and by_method[m].policy in DEC_POLICIES
                        and inst["index"] >= dec_instances):
                    continue
                if m == PAPER_DEC_LABEL:
                    if paper_dec_instances is not None and inst["index"] >= paper_dec_instances:
                        continue
                    bs = {b for b in bs if paper_dec_budgets is None or b in paper_dec_budgets}
                if bs:
                    wanted.setdefault(m, set()).update(bs)
        for label, bs in sorted(wanted.items(), key=lambda kv: (by_method[kv[0]].policy in DEC_POLICIES, kv[0])):
            m = by_method[label]
            caps = [round(inst["idle_w"] + b / 100 * inst["peak_dyn_w"], 3) for b in sorted(bs, reverse=True)]
            grid.append({
                "traces": [inst["path"]],
                "policies": [{"name": m.policy, "params": m.params} if m.params else m.policy],
                "predictors": [m.predictor if m.predictor.get("params") else m.predictor["name"]],
                "caps": caps,
            })
    # kill_at_walltime off: a job slowed by a cap runs its D' out (Eq. 3 counts D'; the paper kills no job)
    return {"kind": "sweep", "name": name,
            "base": {"platform": platform, "bsld_threshold_s": THETA_S, "kill_at_walltime": False},
            "grid": grid, "metrics": [f"{HERE / 'b18.py'}:run_metrics"]}


# --- metrics ---------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def _instance_facts(path: str) -> tuple[dict[int, float], frozenset[int]]:
    """Original run time per job id and the ids of hot-start jobs, from the job table."""
    runtime, hot = {}, set()
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            i = int(row["id"])
            runtime[i] = float(row["runtime_s"])
            if row.get("running_at_start", "").lower() == "true":
                hot.add(i)
    return runtime, frozenset(hot)


def bsld_eq3(wait_s: np.ndarray, run_new_s: np.ndarray, run_orig_s: np.ndarray, theta_s: float = THETA_S):
    """Eq. 3: ``max((wait + run') / max(θ, run), 1)``, ``run`` the original duration, ``run'`` the final one.

    >>> float(bsld_eq3(np.array([0.0]), np.array([1200.0]), np.array([600.0]))[0])
    2.0
    >>> float(bsld_eq3(np.array([60.0]), np.array([60.0]), np.array([60.0]))[0])
    1.0
    """
    return np.maximum((wait_s + run_new_s) / np.maximum(theta_s, run_orig_s), 1.0)


def run_metrics(result, run: dict) -> dict:
    """The paper's BSLD over the instance's jobs and whether the run kept to its budget."""
    spec = run["spec"]
    runtime, hot = _instance_facts(spec["trace"])
    jobs = result.jobs
    ids = jobs["id"].astype(int)
    keep = np.array([i not in hot for i in ids], dtype=bool)
    start, end, submit = jobs["start_s"], jobs["end_s"], jobs["submit_s"]
    done = keep & np.isfinite(end)
    orig = np.array([runtime[i] for i in ids[done]])
    b = bsld_eq3(start[done] - submit[done], end[done] - start[done], orig)
    tl = result.timeline
    t, p, cap = tl["t_s"], tl["power_w"], tl["cap_w"]
    dt = np.diff(t, append=t[-1]) if len(t) else np.array([])
    capped = np.isfinite(cap)
    over = capped & (p > cap * (1 + VIOLATION_TOL))
    total = float(dt[capped].sum()) if capped.any() else 0.0
    sim = spec["sim"]
    return {
        "method_key": method_key(sim.get("policy", "easy"), sim.get("params"), sim.get("predictor_params"),
                                 spec.get("response")),
        "bsld_eq3": float(b.mean()) if b.size else None,
        "jobs_measured": int(keep.sum()),
        "jobs_unended": int((keep & ~np.isfinite(end)).sum()),
        "slowdown_factor": float(np.mean((end[done] - start[done]) / np.maximum(orig, 1e-9))) if b.size else None,
        "peak_over_cap_pct": float(np.max((p[capped] - cap[capped]) / cap[capped]) * 100) if capped.any() else None,
        "time_over_cap_frac": float(dt[over].sum() / total) if total > 0 else 0.0,
        "budget_kept": bool(not over.any()),
    }


# --- collation -------------------------------------------------------------------------------------------------

def method_key(policy: str, params: dict | None, predictor: dict | None, response: dict | None) -> str:
    """A run's method identity: policy, its parameters, the predictor's parameters, the response models."""
    return json.dumps([policy, _norm(params or {}), _norm(predictor or {}), _norm(response or {})], sort_keys=True)


def _norm(v):
    if isinstance(v, dict):
        return {str(k): _norm(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_norm(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    return float(v)


def collate(runs: list[dict], instances: list[dict], dec_params: dict, figures=FIGURES,
            budgets: tuple[int, ...] | None = None) -> list[dict]:
    """One row per (figure, family, method, budget, instance) from the sweep's ``runs.csv`` rows.

    A run belongs to every figure whose family and method it matches (Figs. 4a and 4b share LS, DEC,
    BF and DVFS runs). With ``budgets``, only those budgets are kept.
    """
    by_path = {Path(i["path"]).name: i for i in instances}
    index: dict[tuple, dict] = {}
    for r in runs:
        if r.get("status") != "ok":
            continue
        inst = by_path.get(r["trace"])
        if inst is None:
            continue
        budget = round((float(r["cap"]) - inst["idle_w"]) / inst["peak_dyn_w"] * 100)
        index[(r["trace"], _row_method(r), budget)] = r
    out = []
    all_methods = methods(dec_params)
    for fig in figures:
        for fam in fig.families:
            for inst in (i for i in instances if i["family"] == fam.key):
                name = Path(inst["path"]).name
                for label in fig.methods:
                    m = all_methods[label]
                    key = _spec_method(m)
                    for b in fig.budgets:
                        if budgets is not None and b not in budgets:
                            continue
                        r = index.get((name, key, b))
                        if r is None:
                            continue
                        out.append({"figure": fig.key, "family": fam.key, "window_s": fam.window_s,
                                    "method": label, "budget_pct": b, "instance": inst["index"],
                                    "bsld": _num(r.get("bsld_eq3")),
                                    "budget_kept": r.get("budget_kept") in (True, "True", "true", 1, "1"),
                                    "peak_over_cap_pct": _num(r.get("peak_over_cap_pct")),
                                    "time_over_cap_frac": _num(r.get("time_over_cap_frac")),
                                    "jobs_unended": _num(r.get("jobs_unended")),
                                    "sim_wall_s": _num(r.get("sim_wall_s"))})
    return out


def _num(v) -> float | None:
    if v is None or v == "":
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _spec_method(m: Method) -> str:
    return method_key(m.policy, m.params, m.predictor.get("params"), None)


def _row_method(r: dict) -> str:
    return r["method_key"]
