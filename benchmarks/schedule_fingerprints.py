"""Fingerprints of schedules: a hash of every job's (id, start, end) and of the power timeline, per policy setup.

Usage: python benchmarks/schedule_fingerprints.py [--ricc FILE] [--ricc-jobs 40000] [--out FILE] [--compare FILE]

Replays the bundled KTH excerpt and a prefix of RICC-2010-2 (power-augmented
with seed 0, on the machine of the trace header) through fcfs, easy, easy-pc
(checks mean/max/gaussian_99 x predictors none/naive/oracle/history), easy-saf
and knapsack, each power-aware policy under three caps: 50 % and 70 % of the
dynamic range for the whole trace, and a schedule of 12 windows at 50 %
spread over the trace (``--caps`` adds ``1step``: one step to 50 % from the
middle of the trace on). Prints one line per run; ``--out`` saves them as JSON,
``--compare`` reads such a file (made, say, on another branch) and lists the
runs whose fingerprints differ. Only public APIs that have long been stable
are used, so the script runs against older trees too (``PYTHONPATH=.../src``).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from importlib.resources import as_file, files
from pathlib import Path

import numpy as np

from wattsched.config.platform import platform_from_procs
from wattsched.model.constraints import CapSchedule, CapStep
from wattsched.model.snapshot import fraction_cap
from wattsched.policies import make_policy
from wattsched.predictors import make_predictor
from wattsched.sim.engine import Engine
from wattsched.workload.augment import AugmentParams, augment
from wattsched.workload.swf import read_swf


def load(path: str, limit: int | None):
    w = read_swf(path)
    platform = platform_from_procs(w.max_procs)
    jobs = list(augment(itertools.islice(w.jobs, limit), platform.nodes[0].power, AugmentParams(), 0))
    return platform, jobs


def caps(platform, jobs) -> dict[str, CapSchedule]:
    low = fraction_cap(platform, 0.5)
    span = jobs[-1].submit_s - jobs[0].submit_s
    steps = []
    for k in range(12):
        start = jobs[0].submit_s + span * k / 12
        steps += [CapStep(start, low, "window"), CapStep(start + span / 24, float("inf"), "")]
    return {"50%": CapSchedule.constant(low), "70%": CapSchedule.constant(fraction_cap(platform, 0.7)),
            "12win": CapSchedule(steps),
            # one step, 50 % from the middle of the trace on: the schedule the one-step lookahead fix is about
            "1step": CapSchedule([CapStep(jobs[0].submit_s + span / 2, low, "step")])}


def setups(predictors, cap_names):
    yield "fcfs", {}, None, None
    yield "easy", {}, None, None
    for cap in cap_names:
        for check in ("mean", "max", "gaussian_99"):
            for pred in predictors:
                yield "easy-pc", {"check": check}, pred, cap
        yield "easy-saf", {"check": "gaussian_99"}, "history", cap
        yield "knapsack", {}, "history", cap


def fingerprint(result) -> tuple[str, str]:
    j = result.jobs
    order = np.argsort(j["id"], kind="stable")
    rows = np.stack([j["id"][order].astype(np.float64), j["start_s"][order], j["end_s"][order]])
    tl = result.timeline
    return (hashlib.sha256(rows.tobytes()).hexdigest()[:16],
            hashlib.sha256(np.stack([tl["t_s"], tl["power_w"]]).tobytes()).hexdigest()[:16])


def main() -> int:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ricc", default=str(here.parent.parent / "shared" / "traces" / "RICC-2010-2.swf.gz"))
    ap.add_argument("--ricc-jobs", type=int, default=40_000)
    ap.add_argument("--ricc-predictors", default="none,naive,oracle,history",
                    help="predictors of the easy-pc runs on RICC (without one, easy-pc takes minutes a run there)")
    ap.add_argument("--caps", default="50%,70%,12win",
                    help="caps of the power-aware runs, among 50%%, 70%%, 12win (12 windows at 50%%) and 1step "
                         "(50%% from the middle of the trace on)")
    ap.add_argument("--out", help="save the fingerprints as JSON")
    ap.add_argument("--compare", help="a JSON file from --out to compare with")
    args = ap.parse_args()
    traces = {}
    ref = files("wattsched") / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"
    with as_file(ref) as path:
        traces["kth5000"] = load(str(path), None)
    if Path(args.ricc).exists():
        traces[f"ricc{args.ricc_jobs // 1000}k"] = load(args.ricc, args.ricc_jobs)
    else:
        print(f"no RICC trace at {args.ricc}: KTH only", file=sys.stderr)
    out: dict[str, list[str]] = {}
    for name, (platform, jobs) in traces.items():
        schedules = caps(platform, jobs)
        predictors = ("none", "naive", "oracle", "history") if name == "kth5000" else args.ricc_predictors.split(",")
        for policy, params, pred, cap in setups(predictors, args.caps.split(",")):
            key = f"{name} {policy} {json.dumps(params, sort_keys=True)} {pred or '-'} {cap or '-'}"
            t0 = time.perf_counter()
            result = Engine(platform, jobs, make_policy(policy, params),
                            cap=schedules[cap] if cap else None,
                            predictor=make_predictor(pred) if pred not in (None, "none") else None).run()
            jobs_fp, power_fp = fingerprint(result)
            out[key] = [jobs_fp, power_fp]
            print(f"{key:70s} jobs {jobs_fp} power {power_fp} {time.perf_counter() - t0:6.1f} s", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    if args.compare:
        other = json.loads(Path(args.compare).read_text())
        differ = [k for k in out if k in other and other[k] != out[k]]
        print(f"\n{len(differ)} of {len(out)} runs differ from {args.compare}"
              + "".join(f"\n  {k}: jobs {'same' if other[k][0] == out[k][0] else 'DIFFER'}, "
                        f"power {'same' if other[k][1] == out[k][1] else 'DIFFER'}" for k in differ))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
