"""Run the Borghesi et al. 2018 reproduction (README.md): instances, the sweep, tables, figures, COMPARISON.md.

    nice -n 15 python experiments/borghesi2018/run.py --out DIR          # every figure, 20 instances
    nice -n 15 python experiments/borghesi2018/run.py --quick --out DIR  # 2 instances, budgets 100/50/20 %

Writes under OUT only (default: a directory in the system's temporary directory), the tables, figures
and COMPARISON.md in OUT/results unless --results names another directory (the committed ones:
--results experiments/borghesi2018/results). Resumable: instances and their uncapped references are kept
in OUT/instances.json, and the sweep's results store skips finished runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import b18  # noqa: E402
import b18_report  # noqa: E402

try:
    import yaml
except ImportError:  # pragma: no cover - wattsched depends on PyYAML
    raise SystemExit("PyYAML is needed (pip install -e .)") from None


def _ints(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or any(not 1 <= v <= 100 for v in vals):
        raise argparse.ArgumentTypeError(f"budgets are percentages in 1..100, got {text!r}")
    return vals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 instances per point, budgets 100,50,20, results-quick/")
    ap.add_argument("--instances", type=int, help="instances per point (default 20; --quick: 2)")
    ap.add_argument("--budgets", type=_ints, help="budgets in %% of the uncapped peak (default 100,90,...,10)")
    ap.add_argument("--figures", help=f"comma-separated subset of {','.join(f.key for f in b18.FIGURES)}")
    ap.add_argument("--methods", help="comma-separated subset of the methods (labels as in the tables)")
    ap.add_argument("--dec-time-limit", type=float, help="dec's first solver limit, s (default 1, the paper's)")
    ap.add_argument("--dec-max-time-limit", type=float, help="dec's largest solver limit, s (default 10)")
    ap.add_argument("--dec-horizon", type=int, help="dec's rolling horizon K, jobs in the CP model (default 200)")
    ap.add_argument("--dec-max-jobs", type=int, help="leave dec and dec+rapl out of instances with more jobs")
    ap.add_argument("--dec-paper-instances", type=int,
                    help="run DEC_1s (dec at the paper's 1 s -> 10 s) on the first N instances only (default all)")
    ap.add_argument("--dec-paper-budgets", type=_ints, help="DEC_1s at these budgets only (default all)")
    ap.add_argument("--dec-instances", type=int,
                    help="run the other dec-based methods on the first N instances only (default all)")
    ap.add_argument("--units", action="store_true",
                    help="synthetic jobs of units, sharing nodes (runs/borghesi2018-units, results-units/)")
    ap.add_argument("--workers", type=int, default=2, help="sweep workers (default 2)")
    ap.add_argument("--out", type=Path,
                    help="run directory (default wattsched-borghesi2018[-quick] in the temporary directory)")
    ap.add_argument("--results", type=Path, help="tables, figures and COMPARISON.md (default OUT/results)")
    ap.add_argument("--report-only", action="store_true", help="rewrite the tables and figures from OUT")
    args = ap.parse_args(argv)

    quick = args.quick
    n_inst = args.instances or (2 if quick else 20)
    if n_inst < 1:
        ap.error("--instances: must be at least 1")
    budgets = args.budgets or ((100, 50, 20) if quick else None)
    figures = list(b18.FIGURES)
    if args.figures:
        keys = args.figures.split(",")
        unknown = [k for k in keys if k not in b18.FIGURE_BY_KEY]
        if unknown:
            ap.error(f"--figures: unknown figure {unknown[0]!r}; use {', '.join(b18.FIGURE_BY_KEY)}")
        figures = [b18.FIGURE_BY_KEY[k] for k in keys]
    if args.methods:
        wanted = args.methods.split(",")
        known = {m for f in b18.FIGURES for m in f.methods}
        unknown = [m for m in wanted if m not in known]
        if unknown:
            ap.error(f"--methods: unknown method {unknown[0]!r}; use {', '.join(sorted(known))}")
        figures = [dataclasses.replace(f, methods=tuple(m for m in f.methods if m in wanted)) for f in figures]
    dec_params = {"time_limit_s": args.dec_time_limit if args.dec_time_limit is not None else (0.05 if quick else 1.0),
                  "max_time_limit_s": args.dec_max_time_limit if args.dec_max_time_limit is not None
                  else (0.2 if quick else 10.0)}
    if args.dec_horizon is not None:
        if args.dec_horizon < 1:
            ap.error("--dec-horizon: must be at least 1")
        dec_params["horizon_jobs"] = args.dec_horizon
    if dec_params["max_time_limit_s"] < dec_params["time_limit_s"]:
        ap.error("--dec-max-time-limit: must be at least --dec-time-limit")
    for opt in ("dec_paper_instances", "dec_instances"):
        if getattr(args, opt) is not None and getattr(args, opt) < 0:
            ap.error(f"--{opt.replace('_', '-')}: must be at least 0")
    suffix = ("-quick" if quick else "") + ("-units" if args.units else "")
    out = (args.out or Path(tempfile.gettempdir()) / f"wattsched-borghesi2018{suffix}").resolve()
    results = (args.results or out / "results").resolve()
    out.mkdir(parents=True, exist_ok=True)

    from wattsched.config.platform import load_platform

    platform = load_platform("eurora")
    instances = _instances(out, figures, n_inst, platform, args.units)
    sweep_path = out / "borghesi2018.sweep.yaml"
    sweep_dir = out / "sweep"
    if not args.report_only:
        spec = b18.sweep_file(instances, figures, budgets, dec_params, f"borghesi2018{suffix}",
                              args.dec_max_jobs, str(b18.campaign_platform(out / "eurora-1w.yaml")),
                              args.dec_paper_instances, args.dec_paper_budgets, args.dec_instances)
        sweep_path.write_text("# Written by experiments/borghesi2018/run.py; see its README.\n"
                              + yaml.safe_dump(spec, sort_keys=False, width=120))
        n_runs = sum(len(g["caps"]) for g in spec["grid"])
        print(f"{len(instances)} instances, {n_runs} runs -> {sweep_dir}", flush=True)
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "wattsched", "sweep", str(sweep_path), "--out", str(sweep_dir),
               "--workers", str(args.workers)]
        rc = subprocess.call(cmd)
        print(f"sweep finished with status {rc} in {time.monotonic() - t0:.0f} s", flush=True)
        if rc not in (0, 1):
            return rc
    store = sweep_dir / "results.sqlite"
    if not store.exists():
        print(f"{store}: no results yet; run without --report-only first", file=sys.stderr)
        return 1
    runs = _stored_runs(store)
    rows = b18.collate(runs, instances, dec_params, figures, budgets)
    meta = {"instances_per_point": n_inst, "budgets": budgets, "dec_max_jobs": args.dec_max_jobs,
            "dec": dec_params, "dec_instances": args.dec_instances, "dec_paper": {"instances": args.dec_paper_instances,
                                            "budgets": args.dec_paper_budgets}, "runs": len(runs)}
    b18_report.write(rows, results, figures, meta)
    # the comparison is computed from rows.csv as written, so that the committed rows regenerate it
    (results / "COMPARISON.md").write_text(b18_report.comparison(b18_report.read_rows(results / "rows.csv")))
    print(f"tables, figures and COMPARISON.md in {results}")
    return 0


def _stored_runs(store: Path) -> list[dict]:
    """Every finished run in the store of the sweep last run (of any earlier invocation of it, whatever figures it
    had); runs of an earlier version of the sweep whose keys it no longer has are left out."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=60)
    try:
        rows = con.execute("SELECT key, status, axes, row FROM runs").fetchall()
        meta = con.execute("SELECT value FROM meta WHERE name = 'sweep'").fetchone()
    finally:
        con.close()
    keys = set(json.loads(meta[0])["keys"]) if meta else None
    return [{**json.loads(axes), **json.loads(row), "status": status} for key, status, axes, row in rows
            if keys is None or key in keys]


def _instances(out: Path, figures, n_inst: int, platform, units: bool = False) -> list[dict]:
    """Write the job tables the figures need (kept across runs) with their uncapped reference peaks."""
    from wattsched.workload.tables import write_job_table

    store = out / "instances.json"
    known = {(i["family"], i["index"]): i for i in json.loads(store.read_text())} if store.exists() else {}
    families = {fam.key: fam for fig in figures for fam in fig.families}
    inst_dir = out / "instances"
    inst_dir.mkdir(exist_ok=True)
    records = []
    for key, fam in families.items():
        for k in range(n_inst):
            rec = known.get((key, k))
            # the sweep runs traces in name order: instance 0 of every family first
            path = inst_dir / f"i{k:02d}-{key}.csv"
            if rec is None or not path.exists():
                jobs = b18.make_instance(fam, k, platform, units)
                write_job_table(jobs, path)
                rec = {"family": key, "index": k, "path": str(path), "n_jobs": len(jobs),
                       "peak_dyn_w": b18.reference_peak_dyn_w(path, platform), "idle_w": platform.idle_power_w}
                known[(key, k)] = rec
                store.write_text(json.dumps(list(known.values()), indent=1))
            records.append(rec)
    # instance 0 of every family first: an interrupted campaign covers every figure evenly
    return sorted(records, key=lambda r: (r["index"], r["family"]))


if __name__ == "__main__":
    sys.exit(main())
