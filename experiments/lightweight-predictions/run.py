"""Reproduce Carastan-Santos et al. 2024 (lightweight power predictions under a power cap) on RICC-2010-2.

Usage:
    python experiments/lightweight-predictions/run.py [--out DIR] [--workers N] [--scheduler ADDRESS]
    python experiments/lightweight-predictions/run.py --quick          # 3 slices, caps 40 and 50 %
    python experiments/lightweight-predictions/run.py --power-model profile   # fluctuating real power
    python experiments/lightweight-predictions/run.py --report-only    # summary and figures from DIR

The runs are the wattsched sweep lightweight-predictions.sweep.yaml (run on Dask, resumable: runs already
in DIR/sweep/results.sqlite are skipped); this script then writes the paper's tables and figures.
See README.md for the design.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lwp_experiment import PROFILE, QUICK, SWEEP, export  # noqa: E402
from lwp_report import write_report  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="results directory (default results/, results-quick/ with --quick)")
    ap.add_argument("--sweep", default=None, help="sweep file (default lightweight-predictions.sweep.yaml)")
    ap.add_argument("--workers", type=int, default=None, help="local Dask workers (default: one per core)")
    ap.add_argument("--scheduler", default=None, help="a running Dask scheduler to use instead of a local cluster")
    ap.add_argument("--power-model", choices=("constant", "profile"), default="constant",
                    help="constant: a job draws its augmented mean power throughout (default); profile: seeded "
                         "1-hour steps around it (lightweight-predictions-profile.sweep.yaml, results-profile/)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 3 slices, caps 40 and 50 %%")
    ap.add_argument("--report-only", action="store_true", help="only rewrite summary.md and the figures")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    profile = args.power_model == "profile"
    default_out = "results-quick" if args.quick else ("results-profile" if profile else "results")
    out = Path(args.out) if args.out else HERE / default_out
    sweep = Path(args.sweep) if args.sweep else (QUICK if args.quick else (PROFILE if profile else SWEEP))
    if not args.report_only:
        from wattsched.cli import main as wattsched

        t = time.perf_counter()
        cmd = ["sweep", str(sweep), "--out", str(out / "sweep"), "--no-report"]
        cmd += ["--workers", str(args.workers)] if args.workers else []
        cmd += ["--scheduler", args.scheduler] if args.scheduler else []
        cmd += ["-q"] if args.no_progress else []
        rc = wattsched(cmd)
        if rc:
            return rc
        print(f"sweep took {time.perf_counter() - t:.0f} s")
    facts = export(sweep, out / "sweep", out, check_reference=not args.quick and args.sweep is None)
    write_report(out)
    print(f"{facts['runs']} runs in {out}/runs.csv; reference dynamic power {facts['ref_dyn_w']:,.0f} W; "
          f"wrote {out / 'summary.md'} and figures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
