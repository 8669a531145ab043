"""Cost of power-aware scheduling: easy-pc (gaussian_99, history predictor) against plain easy, same run.

Usage: python benchmarks/easy_pc_overhead.py [--trace FILE] [--cap 70%] [--check gaussian_99]

Both policies replay the same power-augmented jobs (seed 0) on the machine of
the trace header. easy-pc runs under a constant cap for the whole trace (the
worst case: every decision is power-aware) with the history predictor
learning online. Target (issue #3): easy-pc at most twice the time of easy on
RICC-2010-2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from wattsched.config.platform import platform_from_procs
from wattsched.model.constraints import CapSchedule
from wattsched.model.snapshot import fraction_cap
from wattsched.policies import make_policy
from wattsched.predictors import make_predictor
from wattsched.sim.collector import read_whole
from wattsched.sim.engine import Engine
from wattsched.workload.augment import AugmentParams, augment
from wattsched.workload.swf import read_swf


def main() -> int:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default=str(here.parent.parent / "shared" / "traces" / "RICC-2010-2.swf.gz"))
    ap.add_argument("--cap", default="70%", help="cap as a percentage of the dynamic range (default 70%%)")
    ap.add_argument("--check", default="gaussian_99")
    ap.add_argument("--predictor", default="history")
    args = ap.parse_args()
    if not Path(args.trace).exists():
        print(f"no trace at {args.trace}", file=sys.stderr)
        return 2
    w = read_swf(args.trace)
    platform = platform_from_procs(w.max_procs)
    # read as `wattsched simulate` reads a whole trace: without the collector's passes, then frozen
    jobs = read_whole(augment(w.jobs, platform.nodes[0].power, AugmentParams(), 0))
    cap = CapSchedule.constant(fraction_cap(platform, float(args.cap.rstrip("%")) / 100))
    t0 = time.perf_counter()
    easy = Engine(platform, jobs, make_policy("easy")).run()
    t1 = time.perf_counter()
    pc = Engine(platform, jobs, make_policy("easy-pc", {"check": args.check}), cap=cap,
                predictor=make_predictor(args.predictor)).run()
    t2 = time.perf_counter()
    ratio = (t2 - t1) / (t1 - t0)
    above = (pc.timeline["power_w"] > cap.cap_at(0)).mean()
    print(f"trace {w.name}: {len(jobs):,} jobs, {len(platform):,} nodes, cap {args.cap} = {cap.cap_at(0):,.0f} W")
    print(f"easy                         {t1 - t0:8.2f} s  ({easy.info['policy_calls']:,} policy calls)")
    print(f"easy-pc {args.check} + {args.predictor:8s} {t2 - t1:8.2f} s  ({pc.info['policy_calls']:,} policy calls)")
    print(f"ratio {ratio:.2f} (target <= 2.00: {'met' if ratio <= 2 else 'MISSED'}); "
          f"easy-pc timeline rows above the cap: {above:.2%}")
    return 0 if ratio <= 2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
