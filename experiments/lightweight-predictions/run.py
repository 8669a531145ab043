"""Reproduce Carastan-Santos et al. 2024 (lightweight power predictions under a power cap) on RICC-2010-2.

Usage:
    python experiments/lightweight-predictions/run.py [--workloads 30] [--out DIR] [--jobs-per-process 4]
    python experiments/lightweight-predictions/run.py --quick          # 3 workloads, caps 40 and 50 %
    python experiments/lightweight-predictions/run.py --report-only    # summary and figures from DIR/runs.csv

Runs already in DIR/runs.csv are skipped, so an interrupted run resumes. See README.md for the design.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lwp_experiment import Config, default_trace, run_experiment, verify_identical  # noqa: E402
from lwp_report import write_report  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=None, help="number of workloads (default 30; 3 with --quick)")
    ap.add_argument("--out", default=None, help="results directory (default results/, results-quick/ with --quick)")
    ap.add_argument("--trace", default=str(default_trace()), help="RICC-2010-2 SWF trace")
    ap.add_argument("--window-h", type=float, default=24.0, help="W: hours of submissions per workload (default 24)")
    ap.add_argument("--warmup-h", type=float, default=24.0,
                    help="hours of submissions replayed before the cap window (default 24; 0 = empty machine)")
    ap.add_argument("--cap-window-h", type=float, default=3.0, help="length of the cap window in hours (default 3)")
    ap.add_argument("--caps", default=None, help="cap fractions, comma-separated (default 0.4,0.5,0.6,0.7)")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--power-model", choices=("constant", "profile"), default="constant",
                    help="constant: a job draws its augmented mean power throughout (default); "
                         "profile: seeded step profile around it (see README)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--jobs-per-process", type=int, default=4,
                    help="simulation runs handed to a worker process per task (default 4)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 3 workloads, caps 0.4 and 0.5")
    ap.add_argument("--report-only", action="store_true", help="only rewrite summary.md and the figures")
    ap.add_argument("--keep-cache", action="store_true", help="keep the prepared workloads in OUT/.cache")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--check-policies", metavar="INDICES", default=None,
                    help="instead of the experiment: check on these workloads (e.g. 1,3,21) that the fast policy "
                         "stand-ins (lwp_policies.py) take the library policies' decisions; needs OUT/reference.json")
    args = ap.parse_args(argv)

    out = Path(args.out) if args.out else HERE / ("results-quick" if args.quick else "results")
    if args.report_only:
        write_report(out)
        print(f"wrote {out / 'summary.md'} and figures")
        return 0
    caps = tuple(float(x) for x in args.caps.split(",")) if args.caps else ((0.4, 0.5) if args.quick
                                                                             else (0.4, 0.5, 0.6, 0.7))
    cfg = Config(
        trace=args.trace,
        workloads=args.workloads or (3 if args.quick else 30),
        window_h=args.window_h,
        warmup_h=args.warmup_h,
        cap_window_h=args.cap_window_h,
        caps=caps,
        algo_cap=0.5,
        seed=args.seed,
        power_model=args.power_model,
    )
    if args.check_policies:
        ref = json.loads((out / "reference.json").read_text())["ref_dyn_w"]
        indices = [int(x) for x in args.check_policies.split(",")]
        bad = verify_identical(cfg, ref, indices=indices, progress=not args.no_progress)
        print("identical decisions" if not bad else "DIFFERENT:\n  " + "\n  ".join(bad))
        return 1 if bad else 0
    t = time.perf_counter()
    facts = run_experiment(cfg, out, workers=args.workers, jobs_per_process=args.jobs_per_process,
                           progress=not args.no_progress, keep_cache=args.keep_cache)
    print(f"{facts['runs']} runs in {out}/runs.csv; reference dynamic power {facts['ref_dyn_w']:,.0f} W; "
          f"dropped from the trace: {facts['dropped']}; took {time.perf_counter() - t:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
