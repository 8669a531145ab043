"""Twin fidelity: how well wattsched's replay predicts what the live Slurm cluster did.

Usage: python benchmarks/twin_fidelity.py [--figures DIR] [--keep-cluster]

Runs tests/integration/test_twin_fidelity.py (as root: it brings up the
namespace Slurm cluster of deploy/testcluster, submits one seeded 60-job
workload twice and replays each run, see that module) and prints, for each
scenario, the figures it measured:

- wattsched-easy-pc: the daemon acting with ``easy-pc`` under a cap window,
  recording (``shadow_record``), against ``shadow replay`` with the same policy
  and the recorded cap;
- slurm-backfill: Slurm's own backfill (the daemon in ``--shadow``) against the
  simulator's ``easy``.

Each as ``shadow replay`` does by default, with one constant start latency and
the job power modelled (and, for Slurm alone, ``fcfs``), and as the latter with
Slurm's scheduling passes (``--sched-passes``) in place of the constant latency,
one column each.

Targets (issue 31): >= 90 % of jobs started in the same order, median
|live start - replay start| <= 2 poll intervals, energy of the window within 5 %.
Each figure is printed with whether its target is met; the exit status is 1 when
the test failed (the run, or one of the bounds it asserts, which are looser than
the targets where a target is not met reliably), not when a target is missed
(docs/trust-the-replay.md explains the misses). Takes about 9 minutes, plus the
cluster's start.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = (("wattsched-easy-pc", "wattsched easy-pc live vs replay"),
             ("slurm-backfill", "Slurm backfill vs simulator easy"))
TARGETS = (("same_order_share", "same start order", ">=", 0.90, "{:.0%}"),
           ("start_error_median_polls", "median |start error| (polls)", "<=", 2.0, "{:.2f}"),
           ("start_error_p95_polls", "p95 |start error| (polls)", None, None, "{:.2f}"),
           ("energy_error", "energy replay/live - 1", "abs<=", 0.05, "{:+.1%}"))


def met(value: float, op: str | None, target: float | None) -> str:
    if op is None:
        return ""
    ok = value >= target if op == ">=" else value <= target if op == "<=" else abs(value) <= target
    return "met" if ok else "MISSED"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--figures", metavar="DIR", help="keep the figures (JSON) and side-by-sides (shadow.md) here")
    ap.add_argument("--keep-cluster", action="store_true", help="leave the test cluster running afterwards")
    args = ap.parse_args(argv)
    figures = Path(args.figures) if args.figures else Path(tempfile.mkdtemp(prefix="twin-fidelity-"))
    figures.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "WATTSCHED_TWIN_FIGURES": str(figures),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    if args.keep_cluster:
        env["WATTSCHED_TESTCLUSTER_KEEP"] = "1"
    # its own base directory, which other pytest runs on the machine do not rotate away; it keeps the state
    # stores and replays for a look afterwards
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                          str(figures / "runs"), str(ROOT / "tests" / "integration" / "test_twin_fidelity.py")],
                         cwd=ROOT, env=env)
    found = {name: json.loads((figures / f"{name}.json").read_text()) for name, _ in SCENARIOS
             if (figures / f"{name}.json").exists()}
    if not found:
        print("no figures: the live run failed or was skipped (it needs root and deploy/testcluster)")
        return 1
    columns = [(f"{name} / {label}", r) for name, _ in SCENARIOS if name in found
               for label, r in found[name]["replays"].items()]
    print(f"\n{'':<30}" + "".join(f"{title:>34}" for title, _ in columns))
    for key, label, op, target, fmt in TARGETS:
        print(f"{label:<30}" + "".join(f"{(fmt.format(r[key]) + ' ' + met(r[key], op, target)).strip():>34}"
                                       for _, r in columns))
    for key, label in (("policy", "replay policy"), ("start_latency_s", "start latency modelled (s)"),
                       ("job_power", "job power"), ("sched_passes_s", "Slurm passes every (s)"),
                       ("poll_interval_s", "poll interval (s)"),
                       ("start_error_max_s", "max |start error| (s)"), ("energy_live_j", "energy live (kJ)"),
                       ("energy_replay_j", "energy replay (kJ)"), ("mean_wait_live_s", "mean wait live (s)"),
                       ("mean_wait_replay_s", "mean wait replay (s)")):
        cells = []
        for _, r in columns:
            v = r[key]
            cells.append(v if isinstance(v, str) else "-" if v is None else
                         f"{v * (1e-3 if key.startswith('energy') else 1.0):.1f}")
        print(f"{label:<30}" + "".join(f"{c:>34}" for c in cells))
    print(f"\nfigures and side-by-sides in {figures}")
    return 0 if run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
