"""Reproduce Carastan-Santos et al. 2024 (lightweight power predictions under a power cap) on RICC-2010-2.

Usage (`make reproduce-lwp ARGS="..."` runs the same):
    python experiments/lightweight-predictions/run.py [--out DIR] [--workers N] [--scheduler ADDRESS]
    python experiments/lightweight-predictions/run.py --quick          # 3 slices, caps 40 and 50 %
    python experiments/lightweight-predictions/run.py --power-model profile   # fluctuating real power
    python experiments/lightweight-predictions/run.py --part algorithms       # the knapsack question only
    python experiments/lightweight-predictions/run.py --lookahead always      # jobs held from the warm-up on
    python experiments/lightweight-predictions/run.py --report-only --out DIR # tables, figures, COMPARISON.md

The runs are the wattsched sweep lightweight-predictions.sweep.yaml (run on Dask, resumable: runs already
in DIR/sweep/results.sqlite are skipped); the accuracy comparison of Fig. 3 replays the trace through the
history and the four regression predictors (lwp_accuracy.py). This script then writes the paper's tables
and figures, rows.csv and COMPARISON.md (each claim of the paper beside ours, lwp_compare.py).
It writes only in DIR: by default a directory under the system's temporary directory, never the checkout
(`--out experiments/lightweight-predictions/results` updates the committed results). See README.md.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lwp_experiment import PROFILE, QUICK, SWEEP, export  # noqa: E402
from lwp_report import write_report  # noqa: E402

QUICK_ACCURACY_JOBS = 3000
"""Jobs of the accuracy replay with --quick (no weekly retraining happens that early: ML = history)."""


def variant_sweep(sweep: Path, dest: Path, *, lookahead: str | None, part: str | None) -> Path:
    """A copy of ``sweep`` in ``dest``: the capped policies' ``lookahead`` set, or only the algorithms' runs.

    Paths are made absolute (the trace and the metrics module are relative to the sweep file).
    """
    text = sweep.read_text()
    text = re.sub(r"trace: (\S+)", lambda m: f"trace: {(sweep.parent / m.group(1)).resolve()}", text)
    text = text.replace("metrics: [lwp_experiment.py:run_metrics]",
                        f"metrics: [{HERE / 'lwp_experiment.py'}:run_metrics]")
    if lookahead is not None:
        text = text.replace("lookahead: window,", f"lookahead: {lookahead},")
    look = f"lookahead: {lookahead or 'window'}, "
    if part == "algorithms":
        # keep the uncapped reference and the four algorithms at 50 % (EASY FCFS is the easy-pc gaussian_99 run)
        grid = text.index("grid:")
        tail = text.index("cap_window:")
        block = ("grid:\n  - policies: [easy]\n    caps: [null]\n"
                 "  - policies:\n"
                 f"      - {{name: easy-pc, params: {{{look}"
                 "check: gaussian_99}}\n"
                 f"      - {{name: easy-saf, params: {{{look}"
                 "check: gaussian_99}}\n"
                 f"      - {{name: knapsack, params: {{{look}"
                 "check: gaussian_99, profit: [wait, stretch]}}\n"
                 "    predictors: [history, oracle]\n    caps: [\"50%\"]\n")
        text = text[:grid] + block + text[tail:]
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / sweep.name
    path.write_text(text)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None,
                    help="results directory (default: wattsched-lwp[-quick|-profile|...] in the temporary directory)")
    ap.add_argument("--sweep", default=None, help="sweep file (default lightweight-predictions.sweep.yaml)")
    ap.add_argument("--workers", type=int, default=None, help="local Dask workers (default: one per core)")
    ap.add_argument("--scheduler", default=None, help="a running Dask scheduler to use instead of a local cluster")
    ap.add_argument("--power-model", choices=("constant", "profile"), default="constant",
                    help="constant: a job draws its augmented mean power throughout (default); profile: the "
                         "augmentation's fluctuating series in 1-hour steps "
                         "(lightweight-predictions-profile.sweep.yaml)")
    ap.add_argument("--lookahead", choices=("window", "always"), default=None,
                    help="window: jobs held to the cap only from the window's start, as the paper (the sweep files' "
                         "setting); always: from the start of the warm-up (the former behaviour)")
    ap.add_argument("--part", choices=("all", "algorithms"), default="all",
                    help="algorithms: only the uncapped reference and the four algorithms at 50 %% (§6.6)")
    ap.add_argument("--accuracy-jobs", type=int, default=None,
                    help=f"jobs of the Fig. 3 accuracy replay (default: the whole trace; {QUICK_ACCURACY_JOBS} "
                         "with --quick); 0: skip it")
    ap.add_argument("--quick", action="store_true", help="smoke test: 3 slices, caps 40 and 50 %%")
    ap.add_argument("--report-only", action="store_true",
                    help="only rewrite summary.md, the figures, rows.csv and COMPARISON.md from DIR")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        ap.error(f"--workers: expected a positive integer, got {args.workers}")
    if args.accuracy_jobs is not None and args.accuracy_jobs < 0:
        ap.error(f"--accuracy-jobs: expected 0 or a positive integer, got {args.accuracy_jobs}")

    profile = args.power_model == "profile"
    tag = "-".join(["wattsched-lwp", *(["quick"] if args.quick else []), *(["profile"] if profile else []),
                    *([args.lookahead] if args.lookahead else []),
                    *(["algorithms"] if args.part == "algorithms" else [])])
    out = Path(args.out) if args.out else Path(tempfile.gettempdir()) / tag
    sweep = Path(args.sweep) if args.sweep else (QUICK if args.quick else (PROFILE if profile else SWEEP))
    used = out / "sweep-file" / sweep.name
    if args.report_only and used.exists():
        sweep = used  # the variant the runs were made with
    elif args.lookahead or args.part == "algorithms":
        sweep = variant_sweep(sweep, out / "sweep-file", lookahead=args.lookahead,
                              part=None if args.part == "all" else args.part)
    accuracy_jobs = args.accuracy_jobs if args.accuracy_jobs is not None else (
        QUICK_ACCURACY_JOBS if args.quick else None)
    t_all = time.perf_counter()
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
        if accuracy_jobs != 0 and args.part == "all":
            from lwp_accuracy import run_accuracy

            t = time.perf_counter()
            facts = run_accuracy(out, max_jobs=accuracy_jobs, progress=not args.no_progress)
            print(f"accuracy comparison (Fig. 3): {facts['jobs']:,} jobs of {facts['users']} users, "
                  f"{time.perf_counter() - t:.0f} s")
    facts = export(sweep, out / "sweep", out,
                   check_reference=not args.quick and args.sweep is None and args.part == "all")
    write_report(out)
    from lwp_compare import write_comparison, write_rows

    write_rows(out / "runs.csv", out / "rows.csv")
    title = (f" ({'quick, ' if args.quick else ''}power {args.power_model}, lookahead {args.lookahead or 'window'}"
             f"{', algorithms only' if args.part == 'algorithms' else ''})")
    dest = write_comparison(out, title)
    print(dest.read_text())
    ref = facts["ref_dyn_w"]
    print(f"{facts['runs']} runs in {out}/runs.csv; reference dynamic power "
          f"{ref:,.0f} W; wrote {out / 'summary.md'}, figures and {dest} "
          f"({time.perf_counter() - t_all:.0f} s in all)" if math.isfinite(ref) else "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
