"""Ahmed, Liu and Wu 2017, Fig. 5 and Fig. 7 on SDSC-Par: dr against performance and powersave under one event.

One command: ``.venv/bin/python experiments/ahmed2017/run.py [--out DIR] [--sizes 128 256 512]``.

For each machine size (processors of the packaged ``ahmed2017`` platform: 220 W peak, levels 1.2-2.4 GHz and
2.7 GHz, the four applications' polynomial models assigned to jobs at random, seeded) the first 5,000 jobs of
SDSC-Par are replayed through ``dr``, ``performance`` and ``powersave`` with one demand-response event that
covers 25 % of the submission span at a random time (seeded), capping the platform at 80 % of its peak
(0.8 x 220 W per processor). It
writes ``results.csv`` (one row per run) and prints the comparisons of the paper's §V.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import numpy as np
import yaml

from wattsched.config import SimConfig
from wattsched.sim.drevents import generate_events
from wattsched.sim.run import run_simulation

HERE = Path(__file__).resolve().parent
TRACE = HERE.parents[1] / ".." / "shared" / "traces" / "SDSC-Par-1996-3.1-cln.swf"
JOBS = 5000
POLICIES = ("dr", "performance", "powersave")


def first_jobs(src: Path, dst: Path, n: int) -> float:
    """Write the header and first ``n`` jobs of an SWF trace; return the last submission time."""
    last = 0.0
    kept = 0
    with src.open() as fin, dst.open("w") as fout:
        for line in fin:
            if line.startswith(";"):
                fout.write(line)
                continue
            if kept >= n:
                break
            fout.write(line)
            kept += 1
            last = float(line.split()[1])
    return last


def platform_file(out: Path, procs: int) -> Path:
    from importlib.resources import files

    data = yaml.safe_load((files("wattsched") / "data" / "platforms" / "ahmed2017.yaml").read_text())
    data["name"] = f"ahmed2017-{procs}"
    data["node_groups"][0]["count"] = procs
    path = out / f"platform-{procs}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def window_stats(timeline: dict, t0: float, t1: float) -> tuple[float, float, float]:
    """Time-weighted mean, standard deviation and maximum of the platform power over [t0, t1)."""
    t = np.asarray(timeline["t_s"], dtype=float)
    p = np.asarray(timeline["power_w"], dtype=float)[:-1]
    lo, hi = np.maximum(t[:-1], t0), np.minimum(t[1:], t1)
    w = np.clip(hi - lo, 0, None)
    if w.sum() <= 0:
        return math.nan, math.nan, math.nan
    mean = float((p * w).sum() / w.sum())
    std = float(math.sqrt(((p - mean) ** 2 * w).sum() / w.sum()))
    return mean, std, float(p[w > 0].max())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/ahmed2017", help="output directory (default runs/ahmed2017)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512], help="machine sizes (processors)")
    ap.add_argument("--ratio", type=float, default=0.25, help="share of the span under the event (default 0.25)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the event time and the augmentation")
    args = ap.parse_args(argv)
    if not TRACE.exists():
        print(f"{TRACE}: not found (the SDSC-Par trace of ../shared/traces)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trace = out / "SDSC-Par-first5000.swf"
    span = first_jobs(TRACE, trace, JOBS)
    rows = []
    for procs in args.sizes:
        plat = platform_file(out, procs)
        # the paper's limit: 80 % of the peak power (220 W per processor), idle power included
        event = generate_events(span, args.ratio, events=1, notice_s=0.0, cap=0.8 * 220.0 * procs,
                                seed=args.seed)[0]
        for policy in POLICIES:
            # jobs run to their end however slow (the paper's simulator does not kill them at their requested time)
            cfg = SimConfig(trace=str(trace), platform=str(plat), policy=policy, seed=args.seed, kill_at_walltime=False,
                            demand_response=[event], out=str(out / f"{procs}-{policy}"))
            res = run_simulation(cfg, progress=False, report=False)
            jobs = res.result.jobs
            start, end = event["start_s"], event["end_s"]
            cap_w = next(iter(csv.DictReader((Path(cfg.out) / "dr_events.csv").open())))["cap_w"]
            s = np.asarray(jobs["start_s"], dtype=float)
            inside = (s >= start) & (s < end)
            e = np.asarray(jobs["energy_j"], dtype=float)
            ta = np.asarray(jobs["end_s"], dtype=float) - np.asarray(jobs["submit_s"], dtype=float)
            mean_w, std_w, max_w = window_stats(res.result.timeline, start, end)
            rows.append({
                "procs": procs, "policy": policy, "jobs": len(ta), "event_start_s": start, "event_end_s": end,
                "cap_w": float(cap_w), "mean_turnaround_s": float(np.nanmean(ta)),
                "turnaround_in_event_s": float(np.nanmean(ta[inside])) if inside.any() else math.nan,
                "turnaround_outside_s": float(np.nanmean(ta[~inside])),
                "energy_per_job_in_event_j": float(np.nanmean(e[inside])) if inside.any() else math.nan,
                "energy_per_job_outside_j": float(np.nanmean(e[~inside])),
                "energy_total_j": float(np.nansum(e)), "event_power_mean_w": mean_w, "event_power_std_w": std_w,
                "event_power_max_w": max_w, "evictions": int(np.nansum(jobs["evictions"])),
            })
            print(f"{procs:4d} {policy:12s} turnaround {rows[-1]['mean_turnaround_s'] / 3600:8.2f} h  energy "
                  f"{rows[-1]['energy_total_j'] / 3.6e9:8.2f} MWh  event power max {max_w:8.0f} W (cap "
                  f"{float(cap_w):.0f}), std {std_w:7.0f} W, evictions {rows[-1]['evictions']}", flush=True)
    with (out / "results.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    by = {(r["procs"], r["policy"]): r for r in rows}
    print("\nprocs  turnaround dr vs performance  energy/job dr vs powersave (in event)  power std dr vs performance"
          "  dr max power <= cap")
    for procs in args.sizes:
        d, p, s = by[procs, "dr"], by[procs, "performance"], by[procs, "powersave"]
        print(f"{procs:5d}  {100 * (d['mean_turnaround_s'] / p['mean_turnaround_s'] - 1):+26.1f} %"
              f"  {100 * (d['energy_per_job_in_event_j'] / s['energy_per_job_in_event_j'] - 1):+36.1f} %"
              f"  {100 * (d['event_power_std_w'] / p['event_power_std_w'] - 1):+26.1f} %"
              f"  {d['event_power_max_w'] <= d['cap_w'] + 1e-6!s:>18s}")
    print(f"\nwrote {out / 'results.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
