"""Wall time of a sweep campaign as users run it: the whole ``wattsched sweep`` process, timed from outside.

Usage: python benchmarks/sweep_campaign.py [--sweep FILE] [--workers N] [--keep DIR]

Default sweep: the lightweight-predictions quick campaign (3 RICC slices, 87
runs). Prints the wall time of a fresh run, of an immediate rerun (every run
skipped: the cost of validating, expanding and reading the store) and the
throughput. The full campaign (1,530 runs) is
``--sweep experiments/lightweight-predictions/lightweight-predictions.sweep.yaml``;
its measured time against the earlier bespoke driver is in that directory's
README. Target (issue #10): no slower than the bespoke driver on the same machine.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return elapsed, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", default=str(ROOT / "experiments" / "lightweight-predictions" / "quick.sweep.yaml"))
    ap.add_argument("--workers", type=int, default=None, help="local Dask workers (default: one per core)")
    ap.add_argument("--keep", metavar="DIR", help="results directory to keep (default: a temporary one)")
    args = ap.parse_args()
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="wattsched-sweep-bench-"))
    cmd = [sys.executable, "-m", "wattsched", "sweep", args.sweep, "--out", str(out), "-q", "--no-report"]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    try:
        fresh, stdout = _run(cmd)
        m = re.search(r"(\d+) runs: \d+ already done, (\d+) executed \((\d+) failed\)", stdout)
        runs, executed, failed = (int(x) for x in m.groups())
        rerun, _ = _run(cmd)
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    print(f"sweep: {args.sweep}")
    print(f"fresh run: {runs} runs ({executed} executed, {failed} failed) in {fresh:.1f} s "
          f"= {executed / fresh:.2f} runs/s (whole process, Dask cluster start and stop included)")
    print(f"rerun, everything already done: {rerun:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
