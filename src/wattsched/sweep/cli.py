"""Subcommands ``wattsched sweep`` and ``wattsched traces slice`` (registered from :mod:`wattsched.cli`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from wattsched.errors import ConfigError


def register(sub, traces_sub=None) -> None:
    """Add ``sweep`` to the top-level subparsers and ``slice`` to those of ``traces``."""
    p = sub.add_parser(
        "sweep",
        help="run a campaign of simulations (a sweep file) on Dask; `sweep report DIR` rewrites its report",
        description=(
            "Run every simulation of SWEEP.yaml (the product of its axes) as independent Dask tasks, on a local "
            "cluster (default), an existing scheduler (--scheduler) or Slurm (cluster: {kind: slurm} in the "
            "file). Results go to OUT/results.sqlite as runs finish; a rerun does only the missing runs. "
            "`wattsched sweep report DIR` writes DIR/report.html and the aggregated tables. "
            "See docs/sweeps.md."
        ),
    )
    p.add_argument("sweep", metavar="SWEEP.yaml|report", help="sweep file, or `report` followed by a results DIR")
    p.add_argument("dir", nargs="?", metavar="DIR", help="with `report`: the sweep's results directory")
    p.add_argument("--dry-run", action="store_true", help="validate, print the number of runs and a sample, stop")
    p.add_argument("--out", metavar="DIR", help="results directory (default: the file's `out`, else sweeps/NAME)")
    p.add_argument("--workers", type=int, metavar="N", help="local workers (default: cores) or Slurm worker jobs")
    p.add_argument("--scheduler", metavar="ADDRESS", help="use a running Dask scheduler (tcp://host:port)")
    p.add_argument("--max-runs", type=int, metavar="N", help="execute at most N of the missing runs")
    p.add_argument("--no-report", action="store_true", help="do not write the report at the end")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_sweep)
    if traces_sub is not None:
        t = traces_sub.add_parser(
            "slice", help="show the workload slices of a sweep file with their offered load",
            description="Print the slices (t0, jobs, warm-up jobs, offered load) the sweep's `slices` axis gives.")
        t.add_argument("sweep", metavar="SWEEP.yaml")
        t.add_argument("--json", action="store_true", help="print JSON instead of a table")
        t.set_defaults(func=cmd_traces_slice)


def _out_dir(cfg, args) -> Path:
    if args.out:
        return Path(args.out)
    if cfg.out is not None:
        return Path(cfg.out)
    return Path("sweeps") / cfg.name


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.sweep == "report":
        if not args.dir:
            raise ConfigError("sweep report: give the results directory: wattsched sweep report DIR")
        from wattsched.sweep.report import write_report

        path = write_report(Path(args.dir))
        print(f"wrote {path}")
        return 0
    if args.dir:
        raise ConfigError(f"sweep: unexpected argument {args.dir!r} (did you mean `wattsched sweep report DIR`?)")
    if args.workers is not None and args.workers < 1:
        raise ConfigError("--workers: expected a positive integer")
    from wattsched.sweep.expand import axis_columns, expand
    from wattsched.sweep.spec import load_sweep

    cfg = load_sweep(args.sweep)
    runs = expand(cfg)
    out = _out_dir(cfg, args)
    if args.dry_run:
        print(f"{cfg.source}: {len(runs)} runs; axes: {', '.join(axis_columns(runs))}")
        for r in runs[:5]:
            print(f"  {r.key}  " + "  ".join(f"{k}={v}" for k, v in r.axes.items()))
        if len(runs) > 5:
            print(f"  ... {len(runs) - 5} more")
            r = runs[-1]
            print(f"  {r.key}  " + "  ".join(f"{k}={v}" for k, v in r.axes.items()))
        from wattsched.sweep.store import Store

        if (out / "results.sqlite").exists():
            done = Store(out).finished_keys()
            print(f"already in {out}: {sum(r.key in done for r in runs)} of them")
        return 0
    from wattsched.sweep import require_dask
    from wattsched.sweep.execute import run_sweep
    from wattsched.sweep.interrupt import quiet_interrupt
    from wattsched.sweep.store import Store

    require_dask()
    store = Store(out)
    store.set_meta("sweep", {"name": cfg.name, "file": str(Path(args.sweep).resolve()),
                             "keys": [r.key for r in runs], "axes": axis_columns(runs)})
    t = time.perf_counter()
    try:
        with quiet_interrupt():
            counts = run_sweep(cfg, runs, store, workers=args.workers, scheduler=args.scheduler,
                               progress=not args.quiet, max_runs=args.max_runs)
    except KeyboardInterrupt:
        saved = len(store.finished_keys() & {r.key for r in runs})
        print(f"interrupted: {saved} of {len(runs)} runs saved in {out}; rerun the same command to resume",
              file=sys.stderr)
        return 130
    elapsed = time.perf_counter() - t
    rows = store.rows({r.key for r in runs})
    ok = sum(r["status"] == "ok" for r in rows)
    print(f"{counts['runs']} runs: {counts['skipped']} already done, {counts['executed']} executed "
          f"({counts['failed']} failed) in {elapsed:.1f} s; {ok}/{len(runs)} finished in {out / 'results.sqlite'}")
    if not args.no_report and rows:
        from wattsched.sweep.report import write_report

        print(f"report: {write_report(out)}")
    failed = len(runs) - ok
    return 1 if failed else 0


def cmd_traces_slice(args: argparse.Namespace) -> int:
    from wattsched.sweep.slicing import DAY, load_trace, offered_load, slice_specs
    from wattsched.sweep.spec import base_platform, check_files, load_sweep

    cfg = load_sweep(args.sweep)
    check_files(cfg)
    blocks = [b for b in cfg.blocks() if b.slices is not None]
    if not blocks:
        raise ConfigError(f"{cfg.source}: axes: no `slices` axis")
    sl = blocks[0].slices
    platform = base_platform(cfg, sl.trace)
    specs = slice_specs(sl, len(platform))
    tr = load_trace(str(sl.trace), sl.cores_per_node, len(platform))
    rows = []
    for s in specs:
        lo, mid, hi = tr.submit.searchsorted([s.origin_s, s.t0_s, s.t0_s + s.length_s])
        rows.append({"slice": s.index, "t0_s": s.t0_s, "t0_day": round(s.t0_s / DAY, 3),
                     "warmup_jobs": int(mid - lo), "jobs": int(hi - mid),
                     "offered_load": round(offered_load(tr, len(platform), s.t0_s, s.t0_s + s.length_s), 4),
                     "offered_load_with_warmup": round(offered_load(tr, len(platform), s.origin_s,
                                                                    s.t0_s + s.length_s), 4)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{os.path.normpath(sl.trace)}: {len(specs)} slices of {sl.length_h:g} h after {sl.warmup_h:g} h of warm-up "
          f"({sl.t0}{', seed ' + str(sl.seed) if sl.t0 == 'strata' else ''}); machine {len(platform)} nodes; "
          f"trace span {tr.span_s / DAY:.1f} d, {len(tr.jobs)} jobs")
    print(f"{'slice':>5} {'t0 (day)':>9} {'warm-up jobs':>12} {'jobs':>6} {'load':>6} {'load incl. warm-up':>18}")
    for r in rows:
        print(f"{r['slice']:>5} {r['t0_day']:>9.2f} {r['warmup_jobs']:>12} {r['jobs']:>6} "
              f"{r['offered_load']:>6.2f} {r['offered_load_with_warmup']:>18.2f}")
    return 0
