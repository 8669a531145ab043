"""COMPARISON.md of the Ahmed et al. 2017 reproduction: each claim of the paper beside ours, from ``runs.csv``.

Every number of the table is computed from the rows of ``runs.csv`` (what ``run.py`` stores, one row per run),
and so is every verdict: **holds** (ours meets the claim), **partly** (the same direction, not the same
size or not everywhere), **does not**. The committed ``results/runs.csv`` regenerates the committed
``results/COMPARISON.md`` byte for byte::

    python experiments/ahmed2017/ahmed_compare.py experiments/ahmed2017/results
"""

from __future__ import annotations

import csv
import itertools
import sys
from pathlib import Path

H = 3600.0

HOLDS, PARTLY, NOT = "holds", "partly", "does not"

# Figs. 6 and 7 (§V-D): the paper's ranges over event ratios 20 to 100 %, in % against the reference policy.
PAPER_RANGES = {
    "turnaround": (4.4, 21.0),   # DR's turnaround above performance-policy's
    "energy": (-10.6, -2.9),     # DR's energy per job below powersave-policy's
    "std": (-15.6, -2.8),        # DR's power standard deviation in the events below performance-policy's
}
ABOUT_EQUAL_PCT = 5.0  # "almost equal", "about independent", "the same": within 5 %
EVENT_SAVING_PCT = 15.0  # "DR about 15 % lower for the jobs of the event": within 5 points of it


def read_rows(path: Path) -> list[dict]:
    """``runs.csv`` with its numbers as floats (empty cells as None)."""
    def num(v: str):
        if v in ("", "None"):
            return None
        try:
            return float(v)
        except ValueError:
            return v

    with Path(path).open(newline="") as fh:
        return [{k: num(v) for k, v in r.items()} for r in csv.DictReader(fh)]


def _pct(a, b) -> float | None:
    return None if a is None or not b else 100.0 * (a / b - 1.0)


def _share(n: int, of: int) -> str:
    return HOLDS if n == of and of else PARTLY if n else NOT


def _range_verdict(lo: float, hi: float, plo: float, phi: float) -> str:
    """Ours inside the paper's range: holds; overlapping it or of the same sign: partly; else does not."""
    if plo <= lo and hi <= phi:
        return HOLDS
    same_sign = (lo > 0 and plo > 0) or (hi < 0 and phi < 0)
    return PARTLY if (lo <= phi and plo <= hi) or same_sign else NOT


def claims(rows: list[dict]) -> list[list[str]]:
    """One ``[section, claim, paper, ours, verdict]`` per claim the rows can answer."""
    out: list[list[str]] = []
    fig4 = [r for r in rows if r["experiment"] == "fig4" and not r["power_error"]]
    main = [r for r in rows if r["experiment"] == "main"]
    exact = [r for r in main if not r["power_error"] and r["time_error"] == 0.0]

    def find(**kw) -> dict | None:
        return next((r for r in exact if all(r.get(k) == v for k, v in kw.items())), None)

    # ---- Fig. 4
    dr4 = [r for r in fig4 if r["policy"] == "dr"]
    perf4 = [r for r in fig4 if r["policy"] == "performance"]
    if dr4:
        above = max(r["time_above_cap_s"] for r in dr4)
        out.append(["Fig. 4", "under DR the power never goes above the limit", "never",
                    f"{above:,.0f} s above", HOLDS if above == 0 else NOT])
    if perf4:
        above = max(r["time_above_cap_s"] for r in perf4)
        out.append(["Fig. 4", "performance-policy (no capping) often goes above the limit", "often",
                    f"{above / H:,.1f} h above", HOLDS if above > 0 else NOT])

    # ---- Fig. 5 (the 25 % event on each machine size)
    sizes = sorted({int(r["procs"]) for r in exact if r["event_label"] == "dr-25"})
    pols = ("dr", "performance", "powersave")
    at = {(p, s): find(procs=float(s), policy=p, event_label="dr-25") for p in pols for s in sizes}
    if len(sizes) > 1 and all(at.values()):
        falls = [p for p in pols if all(at[(p, a)]["mean_turnaround_s"] > at[(p, b)]["mean_turnaround_s"]
                                        for a, b in itertools.pairwise(sizes))]
        out.append(["Fig. 5", "turnaround falls with the machine size, every policy", "every policy",
                    f"{len(falls)} of {len(pols)} ({', '.join(falls) or 'none'})", _share(len(falls), len(pols))])
        least = [s for s in sizes if min(pols, key=lambda p: at[(p, s)]["mean_turnaround_s"]) == "performance"]
        out.append(["Fig. 5", "performance-policy has the smallest turnaround", "at every size",
                    f"at {len(least)} of {len(sizes)} sizes", _share(len(least), len(sizes))])
        same = [_pct(at[("dr", s)]["turnaround_out_s"], at[("performance", s)]["turnaround_out_s"]) for s in sizes]
        close = [v for v in same if v is not None and abs(v) <= ABOUT_EQUAL_PCT]
        out.append(["Fig. 5", "DR's turnaround is the same as performance's outside the event",
                    f"same (within {ABOUT_EQUAL_PCT:g} %)", " / ".join(f"{v:+.1f} %" for v in same if v is not None),
                    _share(len(close), len(sizes))])
        inside = [_pct(at[("dr", s)]["turnaround_in_s"], at[("performance", s)]["turnaround_in_s"]) for s in sizes]
        worse = [v for v in inside if v is not None and v > 0]
        out.append(["Fig. 5", "DR's turnaround is slightly worse inside the event", "worse",
                    " / ".join(f"{v:+.1f} %" for v in inside if v is not None), _share(len(worse), len(sizes))])
        spread = {p: 100.0 * (max(at[(p, s)]["mean_energy_j"] for s in sizes)
                              / min(at[(p, s)]["mean_energy_j"] for s in sizes) - 1.0) for p in pols}
        flat = [p for p, v in spread.items() if v <= ABOUT_EQUAL_PCT]
        out.append(["Fig. 5", "energy per job is about independent of the size", f"within {ABOUT_EQUAL_PCT:g} %",
                    ", ".join(f"{p} {v:.1f} %" for p, v in spread.items()), _share(len(flat), len(pols))])
        gap = [_pct(at[("performance", s)]["mean_energy_j"], at[("powersave", s)]["mean_energy_j"]) for s in sizes]
        equal = [v for v in gap if abs(v) <= ABOUT_EQUAL_PCT]
        out.append(["Fig. 5", "performance and powersave use almost the same energy per job",
                    f"within {ABOUT_EQUAL_PCT:g} %", " / ".join(f"{v:+.1f} %" for v in gap),
                    _share(len(equal), len(sizes))])
        save = [_pct(at[("dr", s)]["energy_in_j"], at[("performance", s)]["energy_in_j"]) for s in sizes]
        save = [v for v in save if v is not None]
        near = [v for v in save if abs(v + EVENT_SAVING_PCT) <= 5.0]
        lower = [v for v in save if v < 0]
        out.append(["Fig. 5", "DR's energy per job of the event's jobs is about 15 % below performance's",
                    f"-{EVENT_SAVING_PCT:g} %", " / ".join(f"{v:+.1f} %" for v in save),
                    HOLDS if save and len(near) == len(save) else PARTLY if lower else NOT])

    # ---- Figs. 6 and 7 (event ratio on the largest machine)
    if sizes:
        big = float(max(int(r["procs"]) for r in exact))
        by = {}
        for r in exact:
            if r["procs"] == big and str(r["event_label"]).startswith("dr-"):
                by.setdefault(int(str(r["event_label"])[3:]), {})[r["policy"]] = r
        ratios = sorted(k for k, v in by.items() if all(p in v for p in pols))
        if ratios:
            series = {
                "turnaround": [_pct(by[k]["dr"]["mean_turnaround_s"], by[k]["performance"]["mean_turnaround_s"])
                               for k in ratios],
                "energy": [_pct(by[k]["dr"]["mean_energy_j"], by[k]["powersave"]["mean_energy_j"]) for k in ratios],
                "std": [_pct(by[k]["dr"]["event_std_w"], by[k]["performance"]["event_std_w"]) for k in ratios],
            }
            what = {"turnaround": "DR's turnaround above performance-policy's",
                    "energy": "DR's energy per job below powersave-policy's",
                    "std": "DR's power std in the events below performance-policy's"}
            for key, vals in series.items():
                vals = [v for v in vals if v is not None]
                if not vals:
                    continue
                plo, phi = PAPER_RANGES[key]
                out.append(["Figs. 6-7", f"{what[key]} (event ratio {ratios[0]}-{ratios[-1]} %)",
                            f"{plo:+.1f} to {phi:+.1f} %", f"{min(vals):+.1f} to {max(vals):+.1f} %",
                            _range_verdict(min(vals), max(vals), plo, phi)])
            e = series["energy"]
            if len(e) > 1 and None not in e:
                falling = sum(1 for a, b in itertools.pairwise(e) if b < a)
                out.append(["Figs. 6-7", "DR's energy saving grows as the events last longer", "yes",
                            f"grows in {falling} of {len(e) - 1} steps", _share(falling, len(e) - 1)])

    # ---- Fig. 8 (power prediction errors, smallest machine, the 25 % event)
    if sizes:
        small = float(min(sizes))
        perf = find(procs=small, policy="performance", event_label="dr-25")
        errs = sorted((r for r in main if r["procs"] == small and r["policy"] == "dr" and r["event_label"] == "dr-25"
                       and r["time_error"] == 0.0), key=lambda r: r["power_error"])
        if perf and len(errs) > 1:
            below = [r for r in errs if r["mean_energy_j"] < perf["mean_energy_j"]]
            out.append(["Fig. 8", "with prediction errors DR's energy per job stays below performance-policy's",
                        "at every error", f"at {len(below)} of {len(errs)} error levels (0-"
                        f"{100 * errs[-1]['power_error']:.0f} %)", _share(len(below), len(errs))])
            above = max(r["time_above_cap_s"] for r in errs)
            out.append(["Fig. 8", "the limit still holds with wrong power predictions (ours: DR plans with them)",
                        "(not stated)", f"{above:,.0f} s above at worst", HOLDS if above == 0 else PARTLY])
    return out


def comparison(rows: list[dict], title: str = "") -> str:
    """COMPARISON.md's text."""
    table = claims(rows)
    counts = {v: sum(1 for c in table if c[4] == v) for v in (HOLDS, PARTLY, NOT)}
    lines = [f"# Ahmed, Liu and Wu 2017: the paper's claims beside ours{title}", "",
             f"Computed by `experiments/ahmed2017/ahmed_compare.py` from `runs.csv` ({len(rows)} runs). "
             f"{len(table)} claims: {counts[HOLDS]} hold, {counts[PARTLY]} partly, {counts[NOT]} do not. "
             "Why each differs: README.md, \"How this differs from the paper\".", "",
             "| figure | claim | paper | ours | verdict |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(c) + " |" for c in table]
    return "\n".join(lines) + "\n"


def write(out: Path, title: str = "") -> Path:
    """``out/COMPARISON.md`` from ``out/runs.csv``."""
    out = Path(out)
    dest = out / "COMPARISON.md"
    dest.write_text(comparison(read_rows(out / "runs.csv"), title))
    return dest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: ahmed_compare.py DIR   (DIR holds runs.csv; writes DIR/COMPARISON.md)")
    print(write(Path(sys.argv[1])))
