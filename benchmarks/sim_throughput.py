"""Simulation throughput: jobs/s and peak memory of `fcfs`/`easy` on every trace in ../shared/traces.

Usage: python benchmarks/sim_throughput.py [--traces DIR] [--policies easy,fcfs] [--only NAME]

Each (trace, policy) runs in a fresh subprocess so that peak memory (ru_maxrss)
is that run's own. Reading and cleaning the trace is timed apart from the
simulation; "total" is what `wattsched simulate` would spend on both.
Targets (2-core machine): easy on KTH-SP2 >= 60,000 jobs/s (the engine's
margin over the 50,000 first asked for); easy on RICC-2010-2 in <= 20 s total
with <= 2 GiB peak memory. Each target is printed met or MISSED, with the load
average measured alongside (the figures of a loaded machine are not the
machine's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from wattsched.model.platform import Platform
from wattsched.policies import make_policy
from wattsched.sim.collector import read_whole
from wattsched.sim.engine import Engine
from wattsched.workload.swf import read_swf

path, policy = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
w = read_swf(path)
jobs = read_whole(w.jobs)  # as `wattsched simulate` reads a whole trace: without the collector, then frozen
t1 = time.perf_counter()
platform = Platform.homogeneous_cluster(w.max_procs)
result = Engine(platform, jobs, make_policy(policy)).run()
t2 = time.perf_counter()
print(json.dumps({
    "jobs": len(jobs), "read_s": t1 - t0, "sim_s": t2 - t1,
    "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "events": result.info["events"], "policy_calls": result.info["policy_calls"],
}))
"""

TARGETS = {
    ("KTH-SP2-1996-2.1-cln", "easy"): ("jobs_per_s", ">=", 60_000),
    ("RICC-2010-2", "easy"): ("total_s", "<=", 20.0),
}


def main() -> int:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=str(here.parent.parent / "shared" / "traces"))
    ap.add_argument("--policies", default="fcfs,easy")
    ap.add_argument("--only", help="run traces whose name contains this")
    ap.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    args = ap.parse_args()
    traces = sorted(p for p in Path(args.traces).glob("*.swf*"))
    if args.only:
        traces = [p for p in traces if args.only in p.name]
    if not traces:
        print(f"no traces in {args.traces}", file=sys.stderr)
        return 2
    failed = []
    print(f"{'trace':28s} {'policy':6s} {'jobs':>8s} {'read s':>7s} {'sim s':>7s} {'total s':>8s} "
          f"{'jobs/s':>9s} {'peak MiB':>9s}  target")
    for path in traces:
        name = path.name.split(".swf")[0]
        for policy in args.policies.split(","):
            out = subprocess.run([sys.executable, "-c", CHILD, str(path), policy], capture_output=True, text=True)
            if out.returncode:
                print(f"{name}: {policy} failed:\n{out.stderr}", file=sys.stderr)
                failed.append((name, policy))
                continue
            r = json.loads(out.stdout)
            r["total_s"] = r["read_s"] + r["sim_s"]
            r["jobs_per_s"] = r["jobs"] / r["sim_s"]
            target = TARGETS.get((name, policy))
            verdict = ""
            if target:
                key, op, bound = target
                ok = r[key] >= bound if op == ">=" else r[key] <= bound
                ok = ok and r["peak_mib"] <= 2048
                verdict = f"{key} {op} {bound:,}: {'met' if ok else 'MISSED'}"
                if not ok:
                    failed.append((name, policy))
            if args.json:
                print(json.dumps({"trace": name, "policy": policy, **r}))
            else:
                print(f"{name:28s} {policy:6s} {r['jobs']:8d} {r['read_s']:7.2f} {r['sim_s']:7.2f} "
                      f"{r['total_s']:8.2f} {r['jobs_per_s']:9,.0f} {r['peak_mib']:9.0f}  {verdict}")
    if not args.json:
        print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores while measuring)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
