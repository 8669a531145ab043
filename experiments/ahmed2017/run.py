"""Reproduce Ahmed, Liu and Wu 2017 (demand response for HPC) on SDSC-Par in one command.

Usage:
    python experiments/ahmed2017/run.py                 # Figs. 4-8: 52 runs, resumable
    python experiments/ahmed2017/run.py --quick         # the same figures on the first 300 jobs, a few minutes
    python experiments/ahmed2017/run.py --report-only   # tables and figures from the stored runs

``OUT`` is ``--out``, by default ``runs/ahmed2017`` under the current directory. It writes the traces,
platforms and two sweep files to ``OUT/inputs/``, runs them with
``wattsched sweep`` (runs already stored in ``OUT/sweep-*/results.sqlite`` are skipped, so an
interrupted reproduction picks up where it stopped), then ``OUT/runs.csv``, ``OUT/results.md``
(the paper's numbers beside ours), ``OUT/COMPARISON.md`` (each claim, ours, and whether it holds) and the
figures ``OUT/fig*.png``. See README.md.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TRACES = Path(os.environ.get("WATTSCHED_TRACES", HERE.parents[1] / ".." / "shared" / "traces"))
TRACE = TRACES / "SDSC-Par-1996-3.1-cln.swf"
SEED = 1
DAY_S = 86400.0


class Setup:
    """What one reproduction runs: the full set, or the quick one."""

    def __init__(self, quick: bool, jobs: int | None = None):
        self.quick = quick
        self.jobs = jobs or (300 if quick else 5000)
        self.sizes = (128, 512) if quick else (128, 256, 512)
        self.ratios = (0.2, 1.0) if quick else (0.2, 0.4, 0.6, 0.8, 1.0)
        self.errors = (0.1,) if quick else (0.02, 0.04, 0.06, 0.08, 0.10)
        self.fig4_size = 128
        self.fig4_levels = (50, 30, 41.7, 15, 30)  # % of peak, the paper's Fig. 4


def first_jobs(src: Path, n: int) -> tuple[list[str], list[list[str]]]:
    """Header lines and the fields of the first ``n`` jobs of an SWF trace."""
    header, rows = [], []
    with src.open() as fh:
        for line in fh:
            if line.startswith(";"):
                header.append(line)
                continue
            if len(rows) >= n:
                break
            if line.strip():
                rows.append(line.split())
    return header, rows


def write_swf(path: Path, header: list[str], rows: list[list[str]], note: str) -> None:
    with path.open("w") as fh:
        fh.writelines(header)
        fh.write(f"; wattsched reproduction of Ahmed et al. 2017: {note}\n")
        for r in rows:
            fh.write(" ".join(r) + "\n")


def with_requested(rows: list[list[str]], rel_error: float, seed: int) -> list[list[str]]:
    """Rows whose requested time (field 9) is the run time (field 4) times ``1 + u``, u uniform in ±rel_error."""
    rng = random.Random(seed)
    out = []
    for r in rows:
        r = list(r)
        run = float(r[3])
        u = rng.uniform(-rel_error, rel_error)
        if run > 0:
            r[8] = str(max(1, round(run * (1.0 + u))))
        out.append(r)
    return out


def platform_file(path: Path, procs: int) -> None:
    """The packaged ``ahmed2017`` platform at ``procs`` processors, idle processors counted at 0 W.

    The paper bounds the power of the running jobs only (Eq. 5, ``p_run = Σ p(j, f_j)``); a platform
    whose idle processors draw nothing makes wattsched's platform cap exactly that bound, and a
    percentage cap exactly a share of the 220 W peak per processor.
    """
    from importlib.resources import files

    data = yaml.safe_load((files("wattsched") / "data" / "platforms" / "ahmed2017.yaml").read_text())
    data["name"] = f"ahmed2017-{procs}"
    group = data["node_groups"][0]
    group["count"] = procs
    group["power"].update(off_w=0.0, idle_w=0.0, switch_on_w=0.0, switch_off_w=0.0)
    path.write_text("# Written by experiments/ahmed2017/run.py: the packaged ahmed2017 platform, "
                    "idle processors at 0 W (the paper's Eq. 5).\n" + yaml.safe_dump(data, sort_keys=False))


def events(span_s: float, ratio: float) -> list[dict]:
    """One event covering ``ratio`` of the submission span at a random time (seeded), at 80 % of peak."""
    from wattsched.sim.drevents import generate_events

    e = generate_events(span_s, ratio, events=1, notice_s=0.0, cap="80%", seed=SEED)[0]
    return [{"start_s": e["start_s"], "end_s": e["end_s"], "cap_w": "80%", "label": f"dr-{round(ratio * 100)}"}]


def fig4_schedule(span_s: float, levels) -> tuple[list[dict], float]:
    """The limit stepping through ``levels`` (% of peak) at regular intervals; and when to stop the run."""
    start, step = min(4 * DAY_S, 0.2 * span_s), min(DAY_S, 0.1 * span_s)
    sched = [{"start_s": round(start + i * step, 3), "end_s": round(start + (i + 1) * step, 3), "cap_w": f"{lv}%",
              "label": f"{lv}%"} for i, lv in enumerate(levels)]
    return sched, start + (len(levels) + 1) * step


def prepare(out: Path, setup: Setup) -> tuple[Path, Path]:
    """Write the traces, platforms and the two sweep files; return the sweep files (main, Fig. 4)."""
    inp = out / "inputs"
    inp.mkdir(parents=True, exist_ok=True)
    if not TRACE.exists():
        raise SystemExit(f"{TRACE}: not found (the SDSC-Par trace of ../shared/traces; set WATTSCHED_TRACES to "
                         "the directory that holds it)")
    header, rows = first_jobs(TRACE, setup.jobs)
    span = float(rows[-1][1]) - float(rows[0][1])
    traces = {"exact": inp / "sdsc-par-exact.swf", "users": inp / "sdsc-par-users.swf"}
    write_swf(traces["exact"], header, with_requested(rows, 0.0, SEED), f"first {setup.jobs} jobs, requested "
              "time = run time (the paper's exact time model)")
    write_swf(traces["users"], header, rows, f"first {setup.jobs} jobs, the users' requested times")
    for e in setup.errors:
        traces[f"t{e:g}"] = inp / f"sdsc-par-time-error-{round(e * 100)}.swf"
        write_swf(traces[f"t{e:g}"], header, with_requested(rows, e, SEED + round(e * 1000)),
                  f"first {setup.jobs} jobs, requested time = run time x (1 + u), u uniform in +-{e:g}")
    plats = {}
    for procs in sorted({*setup.sizes, setup.fig4_size}):
        plats[procs] = inp / f"ahmed2017-{procs}.yaml"
        platform_file(plats[procs], procs)

    def flow(x) -> str:
        return yaml.safe_dump(x, default_flow_style=True, sort_keys=False, width=10**6).strip()

    dr = {"name": "dr", "params": {"lookahead": False}}
    agnostic = [{"name": "performance", "params": {"cap_aware": False}},
                {"name": "powersave", "params": {"cap_aware": False}}]
    ev25 = events(span, 0.25)
    largest = max(setup.sizes)
    fig8 = (min(setup.sizes), largest)
    grid = [
        # Fig. 5: sizes x policies, one event over 25 % of the run at 80 % of peak; and a cap-aware performance
        {"traces": [traces["exact"].name], "platforms": [plats[p].name for p in setup.sizes],
         "policies": [dr, *agnostic, {"name": "performance", "params": {"cap_aware": True, "lookahead": False}}],
         "dr_events": [ev25]},
        # Figs. 6-7: the event ratio on the largest machine
        {"traces": [traces["exact"].name], "platforms": [plats[largest].name],
         "policies": [dr, *agnostic], "dr_events": [events(span, r) for r in setup.ratios]},
        # Fig. 8: errors in the power predictions (dr only: the agnostic baselines use no prediction)...
        # on the smallest machine (where the limit binds) and the largest (where it hardly does)...
        {"traces": [traces["exact"].name], "platforms": [plats[p].name for p in fig8],
         "policies": [dr], "predictors": [{"name": "oracle", "params": {"rel_error": list(setup.errors),
                                                                          "seed": SEED}}],
         "dr_events": [ev25]},
        # ... and in the time predictions (the requested times), with the users' own requested times
        {"traces": [traces[k].name for k in traces if k != "exact"], "platforms": [plats[p].name for p in fig8],
         "policies": [dr], "dr_events": [ev25]},
    ]
    # constant job power, as the committed results were made (the paper's jobs draw one power each); the
    # simulator's default since then is fluctuating power (docs/simulator.md 2.4)
    base = {"kill_at_walltime": False, "predictor": "oracle", "seed": SEED, "augment": {"profile": "constant"}}
    metrics = [f"{HERE / 'ahmed_metrics.py'}:dr_metrics"]
    main = inp / "ahmed2017.sweep.yaml"
    main.write_text(
        "# Ahmed, Liu and Wu 2017, Figs. 5-8, on SDSC-Par. Written by experiments/ahmed2017/run.py.\n"
        f"kind: sweep\nname: ahmed2017\nbase: {flow(base)}\ngrid:\n"
        + "".join("  - " + "\n    ".join(f"{k}: {flow(v)}" for k, v in block.items()) + "\n" for block in grid)
        + f"metrics: {flow(metrics)}\n")
    sched, limit = fig4_schedule(span, setup.fig4_levels)
    fig4 = inp / "ahmed2017-fig4.sweep.yaml"
    fig4.write_text(
        "# Ahmed, Liu and Wu 2017, Fig. 4: the limit steps through 50, 30, 41.7, 15 and 30 % of peak.\n"
        "# Written by experiments/ahmed2017/run.py.\n"
        f"kind: sweep\nname: ahmed2017-fig4\nbase: {flow({**base, 'time_limit_s': round(limit, 3)})}\naxes:\n"
        f"  traces: {flow([traces['exact'].name])}\n  platforms: {flow([plats[setup.fig4_size].name])}\n"
        f"  caps: {flow([{'label': 'fig4', 'schedule': sched}])}\n"
        f"grid:\n  - policies: {flow([dr, agnostic[0]])}\n"
        "  # dr admitting with power predictions wrong by up to the largest error margin: does the limit hold?\n"
        f"  - policies: {flow([dr])}\n"
        f"    predictors: {flow([{'name': 'oracle', 'params': {'rel_error': max(setup.errors), 'seed': SEED}}])}\n"
        f"metrics: {flow(metrics)}\n")
    return main, fig4


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="results directory (default runs/ahmed2017, runs/ahmed2017-quick with "
                    "--quick, under the current directory; experiments/ahmed2017/results is the committed set)")
    ap.add_argument("--quick", action="store_true", help="the first 300 jobs, 2 sizes, 2 ratios, 1 error level")
    ap.add_argument("--jobs", type=int, default=None, help="replay the first N jobs (default 5000, 300 with --quick)")
    ap.add_argument("--workers", type=int, default=None, help="local Dask workers (default: one per core)")
    ap.add_argument("--report-only", action="store_true", help="only rewrite runs.csv, results.md and the figures")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.jobs is not None and args.jobs < 10:
        ap.error("--jobs: must be at least 10")
    setup = Setup(args.quick, args.jobs)
    out = Path(args.out) if args.out else Path("runs") / ("ahmed2017-quick" if args.quick else "ahmed2017")
    main_sweep, fig4_sweep = prepare(out, setup)
    sweeps = [(fig4_sweep, out / "sweep-fig4"), (main_sweep, out / "sweep-main")]
    if not args.report_only:
        from wattsched.cli import main as wattsched

        for sweep, dest in sweeps:
            t = time.perf_counter()
            cmd = ["sweep", str(sweep), "--out", str(dest), "--no-report"]
            cmd += ["--workers", str(args.workers)] if args.workers else []
            cmd += ["-q"] if args.no_progress else []
            rc = wattsched(cmd)
            if rc:
                return rc
            print(f"{sweep.name}: {time.perf_counter() - t:.0f} s")
    from ahmed_compare import write as write_comparison
    from ahmed_report import collect, write_report

    rows, missing = collect(sweeps)
    write_report(out, rows, setup, missing)
    write_comparison(out, " (quick set)" if setup.quick else "")
    print(f"{len(rows)} runs in {out / 'runs.csv'}{f' ({len(missing)} not done)' if missing else ''}; "
          f"wrote {out / 'results.md'}, {out / 'COMPARISON.md'} and the figures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
