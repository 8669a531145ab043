"""Reproduce Dutot et al. 2017 (energy budgets) in one command: `python experiments/dutot2017/run.py --out DIR`.

Writes one sweep file per trace into DIR, runs each with `wattsched sweep`
(resumable: a rerun into the same DIR does only the missing runs), collects
one row per run in `DIR/rows.csv` and writes, from those rows,
`DIR/tables.md` (the analogues of Figs. 2-5 and Table II, normalized between
subjects as Morey 2008 does it), `DIR/COMPARISON.md` (each claim of the paper
beside our number, with a verdict) and the figures. Nothing is written into
the checkout unless `--write-results` is given; `--rows FILE` rebuilds the
tables and the comparison from a rows file without running anything.
"""

from __future__ import annotations

import argparse
import csv
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACE_DIR = HERE.parents[2] / "shared" / "traces"   # ../shared/traces of the repository, never copied in
TRACES = [  # name, trace, nodes, cores per node: the three of our traces with requested times and enough load
    ("kth", "KTH-SP2-1996-2.1-cln.swf", 100, 1),
    ("atlas", "LLNL-Atlas-2006-2.1-cln.swf.gz", 1152, 8),
    ("ricc", "RICC-2010-2.swf.gz", 1024, 8),   # not in the default campaign (README.md: run time)
]
DEFAULT_TRACES = "kth,atlas"
LEVELS = [100, 90, 80, 70, 60, 50, 49, 30]
QUICK_LEVELS = [100, 60, 30]
P_COMP_HAT_W = 203.12


def sweep_text(name: str, trace: str, nodes: int, cpn: int, count: int, levels: list[int], out: str,
               skip: list[int] = (), shutdown: str = "window") -> str:
    e100 = nodes * P_COMP_HAT_W * 3 * 86400
    budgets = [f"      - [{{start_s: 172800, end_s: 432000, energy_j: {e100 * p / 100:.6g}}}]   # {p} %"
               for p in levels]
    policies = "\n".join(
        f"      - {{name: {p}, params: {{p_comp_w: 203.12, p_idle_w: 100.0, shutdown: [never, {shutdown}]}}}}"
        for p in ("powercap-easy", "energy-bud", "reduce-pc"))
    return f"""# Dutot et al. 2017 on {trace}: the {count} busiest disjoint weeks, a budget on the 3 middle days.
# Written by run.py (edit TRACES or LEVELS there). 100 % = {nodes} nodes computing at 203.12 W for 3 days.
kind: sweep
name: dutot2017-{name}
base:
  procs: {nodes * cpn}
  cores_per_node: {cpn}
  augment: {{profile: constant}}  # as the committed results were made (the simulator's default fluctuates)
axes:
  slices:
    trace: {TRACE_DIR / trace}
    count: {count}
    length_h: 168               # one week of submissions, measured
    warmup_h: 0                 # the paper replays each week on an empty machine
    t0: load                    # the busiest disjoint weeks
    seed: 2017
    cores_per_node: {cpn}
grid:
  - policies: [easy]            # EASY knows no budget: once, at 100 %
    energy_budgets:
{budgets[0]}
  - policies:
{policies}
    energy_budgets:
{chr(10).join(budgets)}
metrics: ["{HERE / 'dutot_metrics.py'}:week_metrics"]
out: {out}
""" + ("exclude:   # --weeks: only the busiest of these weeks\n" + "".join(f"  - {{slice: {i}}}\n" for i in skip)
       if skip else "")


def by_load(path: Path, nodes: int) -> list[int]:
    """The slice indices of a sweep file, busiest week first."""
    from wattsched.sweep.slicing import load_trace, offered_load, slice_specs
    from wattsched.sweep.spec import load_sweep

    sl = load_sweep(path).axes.slices
    specs = slice_specs(sl, nodes)
    tr = load_trace(str(sl.trace), sl.cores_per_node, nodes)
    loads = [offered_load(tr, nodes, s.t0_s, s.t0_s + s.length_s) for s in specs]
    return sorted(range(len(specs)), key=lambda i: (-loads[i], i))


def md(head: list[str], rows: list[list]) -> str:
    """A Markdown table."""
    fmt = lambda v: "" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _num(v: str) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


COLS = {"week_utilization": "utilization", "week_mean_bsld": "AVEbsld", "week_jobs_started": "jobs started",
        "week_energy_j": "energy"}
ALGOS = ["easy"] + [f"{p} {m}" for p in ("powercap-easy", "reduce-pc", "energy-bud") for m in ("IDLE", "SHUT")]


def annotate(rows: list[dict]) -> list[dict]:
    """The runs that finished, each with its algorithm, subject (week), budget and normalized measures (`*_n`).

    Normalized between subjects as the paper's [28] (Morey 2008) does it: a run's value minus the mean of
    its week's runs plus the mean of every run (`normalize_between_subjects`, additive).
    """
    from wattsched.sim.metrics import normalize_between_subjects

    runs = [r for r in rows if r.get("status") == "ok"]
    for r in runs:
        shut = r.get("policy.shutdown") in ("window", "always")
        r["algo"] = "easy" if r["policy"] == "easy" else f"{r['policy']} {'SHUT' if shut else 'IDLE'}"
        r["subject"] = f"{r['trace']}#{r['slice']}"
        r["budget"] = int(float(r["budget_pct"]))
    for col in COLS:
        vals = {(r["subject"], i): _num(r.get(col)) for i, r in enumerate(runs) if _num(r.get(col)) is not None}
        norm = normalize_between_subjects(vals)
        for i, r in enumerate(runs):
            r[col + "_n"] = norm.get((r["subject"], i))
    return runs


def _mean(vals):
    vals = [v for v in vals if v is not None]
    return sum(vals) / len(vals) if vals else None


def table_ii(runs: list[dict]) -> dict[tuple[str, str], float | None]:
    """Table II: mean percent change of SHUT over IDLE, same algorithm, week and budget, by (policy, column)."""
    got = {}
    for p in ("powercap-easy", "reduce-pc", "energy-bud"):
        for col in COLS:
            pairs = {}
            for r in runs:
                if r["policy"] == p:
                    pairs.setdefault((r["subject"], r["budget"]), {})[r["algo"].endswith("SHUT")] = r[col + "_n"]
            ch = [(v[True] - v[False]) / v[False] for v in pairs.values()
                  if v.get(True) is not None and v.get(False)]
            got[(p, col)] = 100 * _mean(ch) if ch else None
    return got


def tables(rows: list[dict]) -> str:
    from wattsched.sim.metrics import theoretical_baseline

    runs = annotate(rows)
    cols = COLS
    algos = ALGOS
    budgets = sorted({r["budget"] for r in runs}, reverse=True)
    mean = _mean
    out = [f"{len(runs)} runs, {len({r['subject'] for r in runs})} weeks.", ""]
    easy_u = mean(r["week_utilization_n"] for r in runs if r["algo"] == "easy") or 0.0
    for col, label in cols.items():
        head = ["budget %", *algos] + (["baseline (§V-G)"] if col == "week_utilization" else [])
        table = []
        for b in budgets:
            line = [b] + [mean(r[col + "_n"] for r in runs if r["algo"] == a and r["budget"] == b) for a in algos]
            if col == "week_utilization":
                line.append(theoretical_baseline(easy_u, b / 100))
            table.append(line)
        out += [f"### Normalized mean {label}", "", md(head, table), ""]
    # Table II: percent change of SHUT over IDLE, same algorithm, budget and week.
    t2v = table_ii(runs)
    t2 = [[p] + [f"{t2v[(p, col)]:+.1f} %" if t2v[(p, col)] is not None else "" for col in cols]
          for p in ("powercap-easy", "reduce-pc", "energy-bud")]
    out += ["### Table II: SHUT over IDLE", "", md(["algorithm", *cols.values()], t2), ""]
    rel = [[b] + [mean(_num(r.get("budget_window_relative_energy")) for r in runs
                       if r["algo"] == a and r["budget"] == b) for a in algos] for b in budgets]
    out += ["### Energy of the budget window / budget (not normalized)", "", md(["budget %", *algos], rel), ""]
    # Per trace: the utilization and AVEbsld tables over that trace's weeks alone.
    traces = sorted({r["trace"] for r in runs})
    for tr in traces if len(traces) > 1 else []:
        mine = [r for r in runs if r["trace"] == tr]
        out += [f"### {tr}: {len({r['subject'] for r in mine})} weeks", ""]
        for col, label in (("week_utilization", "utilization"), ("week_mean_bsld", "AVEbsld")):
            table = [[b] + [mean(r[col + "_n"] for r in mine if r["algo"] == a and r["budget"] == b) for a in algos]
                     for b in budgets]
            out += [f"Normalized mean {label}:", "", md(["budget %", *algos], table), ""]
    return "\n".join(out)


LABELS = {"easy": "EASY", "powercap-easy IDLE": "PC_IDLE", "powercap-easy SHUT": "PC_SHUT",
          "reduce-pc IDLE": "reducePC_IDLE", "reduce-pc SHUT": "reducePC_SHUT",
          "energy-bud IDLE": "energyBud_IDLE", "energy-bud SHUT": "energyBud_SHUT"}
STYLE = {"easy": ("k", "o", "-"), "powercap-easy IDLE": ("tab:blue", "s", "--"),
         "powercap-easy SHUT": ("tab:blue", "s", "-"), "reduce-pc IDLE": ("tab:orange", "^", "--"),
         "reduce-pc SHUT": ("tab:orange", "^", "-"), "energy-bud IDLE": ("tab:green", "D", "--"),
         "energy-bud SHUT": ("tab:green", "D", "-")}


def figures(rows: list[dict], out: Path, tag: str = "") -> list[Path]:
    """The analogues of Figs. 2-5 as PNG files, from rows that :func:`tables` has normalized."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wattsched.sim.metrics import theoretical_baseline

    runs = [r for r in rows if r.get("status") == "ok" and "algo" in r]
    if not runs:
        return []
    algos = [a for a in LABELS if any(r["algo"] == a for r in runs)]
    budgets = sorted({r["budget"] for r in runs}, reverse=True)

    def mean(col, algo, b=None):
        vals = [r[col] for r in runs if r["algo"] == algo and (b is None or r["budget"] == b) and r[col] is not None]
        return sum(vals) / len(vals) if vals else None

    weeks = len({r["subject"] for r in runs})
    written = []
    for fig_no, col, label in ((2, "week_utilization_n", "normalized mean utilization (week)"),
                               (3, "week_mean_bsld_n", "normalized mean AVEbsld (all jobs)"),
                               (4, "week_energy_j_n", "normalized mean energy (week)")):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for a in algos:
            c, m, ls = STYLE[a]
            if a == "easy":
                y = mean(col, a)
                ax.plot([100], [y], marker=m, color=c, ls="none", label=LABELS[a])
                continue
            pts = [(b, mean(col, a, b)) for b in budgets]
            pts = [(b, y) for b, y in pts if y is not None]
            ax.plot([b for b, _ in pts], [y for _, y in pts], marker=m, color=c, ls=ls, label=LABELS[a])
        if fig_no == 2:
            u = mean(col, "easy") or 0.0
            ax.plot(budgets, [theoretical_baseline(u, b / 100) for b in budgets], color="k", lw=1,
                    label="baseline (§V-G)")
        ax.set_xlabel("energy budget (% of all nodes computing for 3 days)")
        ax.set_ylabel(label)
        ax.invert_xaxis()
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        ax.set_title(f"Fig. {fig_no} analogue: {weeks} weeks", fontsize=9)
        path = out / f"fig{fig_no}{tag}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    # Fig. 5: performance against energy for five budgets.
    five = [b for b in (100, 80, 60, 49, 30) if b in budgets] or budgets[:5]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, col, label in ((axes[0], "week_utilization_n", "normalized mean utilization"),
                           (axes[1], "week_mean_bsld_n", "normalized mean AVEbsld")):
        for a in algos:
            c, m, ls = STYLE[a]
            pts = [(mean("week_energy_j_n", a, b), mean(col, a, b), b) for b in (five if a != "easy" else [100])]
            pts = [p for p in pts if p[0] is not None and p[1] is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=m, color=c, ls=ls, label=LABELS[a])
            if a != "easy":
                for x, y, b in pts:
                    ax.annotate(str(b), (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
        ax.set_xlabel("normalized mean energy (week)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_title("(a) utilization against energy", fontsize=9)
    axes[1].set_title("(b) AVEbsld against energy", fontsize=9)
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = out / f"fig5{tag}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


# Table II of the paper: percent change of the normalized measure, SHUT over IDLE.
PAPER_T2 = {("powercap-easy", "week_mean_bsld"): 0.16, ("reduce-pc", "week_mean_bsld"): 0.88,
            ("energy-bud", "week_mean_bsld"): -8.61,
            ("powercap-easy", "week_utilization"): -0.05, ("reduce-pc", "week_utilization"): 4.95,
            ("energy-bud", "week_utilization"): 5.74,
            ("powercap-easy", "week_jobs_started"): -0.05, ("reduce-pc", "week_jobs_started"): 1.4,
            ("energy-bud", "week_jobs_started"): 1.47,
            ("powercap-easy", "week_energy_j"): -4.74, ("reduce-pc", "week_energy_j"): -1.78,
            ("energy-bud", "week_energy_j"): -1.42}
NAMES = {"powercap-easy": "powercap", "reduce-pc": "reducePC", "energy-bud": "energyBud"}
VERDICT_RULES = ("Verdicts. A percent change: where the paper's is under 1 % in size, *holds* if ours is too, *partly* "
                 "if ours is under 5 %; otherwise *holds* if ours has the same sign and is within a factor of 2, "
                 "*partly* if it has the same sign only, *does not* if the sign differs. A count of cells: *holds* "
                 "if every cell agrees, *partly* if at least half do, else *does not*.")


def pct_verdict(paper: float, ours: float | None) -> str:
    """The verdict of a percent change of ours against the paper's (VERDICT_RULES)."""
    if ours is None:
        return "not run"
    if abs(paper) < 1:
        return "holds" if abs(ours) < 1 else "partly" if abs(ours) < 5 else "does not"
    if ours * paper > 0:
        return "holds" if 0.5 <= ours / paper <= 2 else "partly"
    return "does not"


def count_verdict(k: int, n: int) -> str:
    """The verdict of a claim that holds in k of n cells."""
    if n == 0:
        return "not run"
    return "holds" if k == n else "partly" if 2 * k >= n else "does not"


def comparison(rows: list[dict], quick: bool = False) -> str:
    """COMPARISON.md: one row per claim of the paper, its number beside ours and a verdict, from the rows."""
    from wattsched.sim.metrics import theoretical_baseline

    runs = annotate(rows)
    budgets = sorted({r["budget"] for r in runs}, reverse=True)
    m = {}
    for r in runs:
        for col in COLS:
            m.setdefault((r["algo"], r["budget"], col), []).append(r[col + "_n"])
        m.setdefault((r["algo"], r["budget"], "rel"), []).append(_num(r.get("budget_window_relative_energy")))
    m = {k: _mean(v) for k, v in m.items()}

    def get(algo, b, col):
        return m.get((algo, b, col))

    claims: list[list] = []

    def add(claim, paper, ours, verdict):
        claims.append([claim, paper, ours, verdict])

    t2 = table_ii(runs)
    for col in COLS:
        for p in ("powercap-easy", "reduce-pc", "energy-bud"):
            ours = t2[(p, col)]
            add(f"Table II, {COLS[col]}: {NAMES[p]} SHUT over IDLE", f"{PAPER_T2[(p, col)]:+.2f} %",
                "" if ours is None else f"{ours:+.2f} %", pct_verdict(PAPER_T2[(p, col)], ours))
    below = [b for b in budgets if b < 100]

    def cells(test):
        ok = [(b, mode) for b in below for mode in ("IDLE", "SHUT") if test(b, mode)]
        return len(ok), 2 * len(below)

    def best(col, sign):
        def test(b, mode):
            eb = get(f"energy-bud {mode}", b, col)
            others = [get(f"{p} {mode}", b, col) for p in ("powercap-easy", "reduce-pc")]
            if eb is None or None in others:
                return False
            return all(sign * (eb - o) >= -1e-9 for o in others)
        return test

    for col, sign, label in (("week_utilization", 1, "highest utilization (Fig. 2)"),
                             ("week_mean_bsld", -1, "lowest AVEbsld (Fig. 3)")):
        k, n = cells(best(col, sign))
        add(f"energyBud has the {label} of the three, with and without shutdown, budgets under 100 %",
            "yes", f"{k} of {n} (budget, mode) cells", count_verdict(k, n))
    ok = [b for b in below if None not in (get("reduce-pc SHUT", b, "week_utilization"),
                                           get("energy-bud IDLE", b, "week_utilization"))
          and get("reduce-pc SHUT", b, "week_utilization") > get("energy-bud IDLE", b, "week_utilization")]
    add("reducePC SHUT has a higher utilization than energyBud IDLE (Fig. 2)", "yes",
        f"{len(ok)} of {len(below)} budgets", count_verdict(len(ok), len(below)))
    low = [b for b in budgets if b < 49]
    spread = []
    for b in low:
        for col in ("week_utilization", "week_mean_bsld", "week_energy_j"):
            v = [get(f"{p} IDLE", b, col) for p in ("powercap-easy", "reduce-pc", "energy-bud")]
            if None not in v and max(v):
                spread.append((max(v) - min(v)) / abs(max(v)))
    if spread:
        worst = 100 * max(spread)
        add("below 49 %, the three algorithms without shutdown give the same results (Fig. 2-4)", "the same",
            f"largest spread {worst:.2f} %", "holds" if worst < 0.5 else "partly" if worst < 5 else "does not")
    for col, label in (("week_utilization", "utilization"), ("week_mean_bsld", "AVEbsld")):
        gaps = [(abs(get("powercap-easy SHUT", b, col) - get("powercap-easy IDLE", b, col))
                 / abs(get("powercap-easy IDLE", b, col)), b) for b in below
                if get("powercap-easy SHUT", b, col) is not None and get("powercap-easy IDLE", b, col)]
        if gaps:
            g, b = max(gaps)
            add(f"powercap: the same {label} with and without shutdown (PC_SHUT = PC, Figs. 2-3)", "the same",
                f"largest gap {100 * g:.1f} % (at {b} %: {get('powercap-easy SHUT', b, col):.3f} against "
                f"{get('powercap-easy IDLE', b, col):.3f})",
                "holds" if g < 0.01 else "partly" if g < 0.05 else "does not")
    pairs = [(p, b) for p in ("powercap-easy", "reduce-pc", "energy-bud") for b in budgets
             if get(f"{p} SHUT", b, "week_energy_j") is not None and get(f"{p} IDLE", b, "week_energy_j") is not None]
    k = sum(get(f"{p} SHUT", b, "week_energy_j") < get(f"{p} IDLE", b, "week_energy_j") for p, b in pairs)
    add("with shutdown the cluster consumes less energy (Fig. 4)", "yes", f"{k} of {len(pairs)} (algorithm, budget)",
        count_verdict(k, len(pairs)))

    def order(b, mode):
        v = [get(f"{p} {mode}", b, "week_energy_j") for p in ("energy-bud", "reduce-pc", "powercap-easy")]
        return None not in v and v[0] >= v[1] >= v[2]
    k, n = cells(order)
    add("energy: energyBud ≥ reducePC ≥ powercap (Fig. 4)", "yes", f"{k} of {n} (budget, mode) cells",
        count_verdict(k, n))
    for b in [b for b in budgets if b < 49][:1]:
        v = [get(f"{p} IDLE", b, "rel") for p in ("powercap-easy", "reduce-pc", "energy-bud")]
        v = [x for x in v if x is not None]
        add(f"without shutdown, the energy of the window exceeds a {b} % budget (below idle)", "yes",
            "window / budget " + ", ".join(f"{x:.3f}" for x in v), count_verdict(sum(x > 1 for x in v), len(v)))
    kept = [r for r in runs if r["policy"] != "easy" and r["budget"] >= 49
            and _num(r.get("budget_window_relative_energy")) is not None]
    over = [r for r in kept if _num(r["budget_window_relative_energy"]) > 1.001]
    worst = max((_num(r["budget_window_relative_energy"]) for r in kept), default=None)
    add("the budget is respected (§IV-A), budgets of 49 % and above", "strictly",
        f"{len(kept) - len(over)} of {len(kept)} runs at or under it (+0.1 %)"
        + ("" if worst is None else f"; highest {worst:.4f}"), count_verdict(len(kept) - len(over), len(kept)))
    gains = [t2[(p, "week_utilization")] for p in ("energy-bud", "reduce-pc", "powercap-easy")]
    if None not in gains:
        add("energyBud takes the most of shutdown: utilization gain energyBud > reducePC > powercap (Table II)",
            "+5.74 > +4.95 > −0.05 %", " > ".join(f"{g:+.2f}" for g in gains) + " %",
            "holds" if gains[0] > gains[1] > gains[2] else "partly" if gains[0] > gains[2] else "does not")
    easy_u = _mean(r["week_utilization_n"] for r in runs if r["algo"] == "easy")
    if easy_u is not None:
        def above(algo, b):
            v = get(algo, b, "week_utilization")
            return v is not None and v >= theoretical_baseline(easy_u, b / 100) - 1e-9
        if 90 in budgets:
            algos = [a for a in ALGOS[1:] if get(a, 90, "week_utilization") is not None]
            k = sum(above(a, 90) for a in algos)
            add("§V-G: at 90 % every algorithm is above the baseline", "yes", f"{k} of {len(algos)} algorithms",
                count_verdict(k, len(algos)))
        for algo, lowest in (("energy-bud SHUT", 60), ("energy-bud IDLE", 80)):
            bs = [b for b in below if get(algo, b, "week_utilization") is not None]
            agree = [b for b in bs if above(algo, b) == (b >= lowest)]
            where = ", ".join(f"{b} %" for b in bs if above(algo, b)) or "no budget"
            add(f"§V-G: {NAMES[algo.split()[0]]} {algo.split()[1]} above the baseline at {lowest} % and above "
                "only", "yes", f"above at: {where}; {len(agree)} of {len(bs)} budgets agree",
                count_verdict(len(agree), len(bs)))
    weeks = len({r["subject"] for r in runs})
    traces = ", ".join(f"{t} {len({r['subject'] for r in runs if r['trace'] == t})}"
                       for t in sorted({r["trace"] for r in runs}))
    wall = sum(_num(r.get("sim_wall_s")) or 0.0 for r in runs)
    verdicts = [c[3] for c in claims]
    head = [f"# Dutot et al. 2017 against our runs{' (quick)' if quick else ''}", "",
            f"Computed by `experiments/dutot2017/run.py` from {len(runs)} runs over {weeks} weeks ({traces}); "
            f"measures normalized between weeks as Morey 2008 does it (additive). Sum of the simulations' wall "
            f"times: {wall:.0f} s.", "", VERDICT_RULES, "",
            f"{verdicts.count('holds')} hold, {verdicts.count('partly')} partly, {verdicts.count('does not')} do "
            f"not, of {len(claims)} claims.", ""]
    return "\n".join([*head, md(["claim", "paper", "ours", "verdict"], claims), ""])


ROW_FIELDS = ["trace", "slice", "policy", "policy.shutdown", "budget_pct", "status", "week_utilization",
              "week_mean_bsld", "week_jobs_started", "week_energy_j", "budget_window_relative_energy", "sim_wall_s"]


def read_rows(path: Path) -> list[dict]:
    """The rows of a rows file (`rows.csv`), as strings."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    missing = [k for k in ("trace", "slice", "policy", "status") if rows and k not in rows[0]]
    if missing:
        raise SystemExit(f"{path}:1: expected the columns of run.py's rows.csv, missing {', '.join(missing)}")
    return rows


def write_rows(path: Path, rows: list[dict]) -> None:
    """One row per run, the columns the tables and the comparison read, in a stable order."""
    def key(r):
        return (r["trace"], int(r["slice"]), r["policy"], r.get("policy.shutdown") or "",
                _num(r.get("budget_pct")) or 0)

    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=ROW_FIELDS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(sorted(rows, key=key))


def run_sweeps(args, weeks: dict[str, int], out: Path) -> list[dict] | int:
    """Run the sweep of each wanted trace into `out`; the rows of every run, or an exit code."""
    wattsched = Path(sys.executable).with_name("wattsched")
    rows: list[dict] = []
    wanted = set(args.traces.split(","))
    for name, trace, nodes, cpn in TRACES:
        if name not in wanted:
            continue
        tag = f"quick-{name}" if args.quick else name
        path = out / f"{tag}.sweep.yaml"
        count = 2 if args.quick else 10
        levels = QUICK_LEVELS if args.quick else LEVELS
        path.write_text(sweep_text(name, trace, nodes, cpn, count, levels, tag, shutdown=args.shutdown))
        n = weeks.get(name, 10)
        if not args.quick and n < count:
            path.write_text(sweep_text(name, trace, nodes, cpn, count, levels, tag,
                                       sorted(by_load(path, nodes)[n:]), shutdown=args.shutdown))
        workers = ["--workers", str(args.workers)] if args.workers else []
        rc = subprocess.call([str(wattsched), "sweep", str(path), *workers])
        csv_path = out / tag / "runs.csv"
        if rc not in (0, 1) or not csv_path.exists():
            print(f"run.py: sweep {path.name} failed (exit {rc})", file=sys.stderr)
            return rc or 1
        with open(csv_path, newline="") as f:
            rows += [dict(r, trace=name) for r in csv.DictReader(f)]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "wattsched-dutot2017",
                    help="directory of the sweeps, rows, tables and comparison (default: %(default)s)")
    ap.add_argument("--quick", action="store_true", help="2 weeks of KTH-SP2, budgets 100, 60, 30 %%")
    ap.add_argument("--traces", default=None,
                    help=f"comma-separated, of kth,atlas,ricc (default {DEFAULT_TRACES}; --quick: kth)")
    ap.add_argument("--weeks", default="10", metavar="N|NAME=N,...",
                    help="run only the N busiest of the 10 weeks, for every trace or per trace (kth=10,atlas=3); "
                         "the others are excluded from the sweep, so a later run with a larger N reuses these runs; "
                         "default 10")
    ap.add_argument("--workers", type=int, metavar="N", help="local Dask workers of each sweep (default: cores)")
    ap.add_argument("--shutdown", choices=["window", "always"], default="window",
                    help="SHUT runs power nodes down only in the budget window (default, as the authors' code) "
                         "or at any time")
    ap.add_argument("--rows", type=Path, metavar="FILE",
                    help="run nothing: rebuild the tables and COMPARISON.md from this rows file "
                         "(e.g. experiments/dutot2017/results/rows.csv)")
    ap.add_argument("--write-results", action="store_true",
                    help="also copy rows.csv, tables.md, COMPARISON.md and the figures into experiments/dutot2017/"
                         "results (the only way this script writes into the checkout)")
    args = ap.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        ap.error(f"--workers: expected a positive integer, got {args.workers}")
    args.traces = args.traces or ("kth" if args.quick else DEFAULT_TRACES)
    names = [t[0] for t in TRACES]
    if not set(args.traces.split(",")) <= set(names):
        ap.error(f"--traces: names are {', '.join(names)}, got {args.traces!r}")
    try:
        weeks = {name: int(args.weeks) for name in names} if "=" not in args.weeks else \
            {k.strip(): int(v) for k, v in (part.split("=") for part in args.weeks.split(","))}
    except ValueError:
        ap.error(f"--weeks: give N or NAME=N,... (e.g. kth=10,atlas=3), got {args.weeks!r}")
    if any(not 1 <= n <= 10 for n in weeks.values()) or set(weeks) - set(names):
        ap.error(f"--weeks: trace names are {', '.join(names)} and N is 1 to 10, got {args.weeks!r}")
    suffix = "-quick" if args.quick else ""
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    if args.rows is not None:
        if not args.rows.exists():
            ap.error(f"--rows: no such file {args.rows}")
        rows_path = args.rows
    else:
        got = run_sweeps(args, weeks, out)
        if isinstance(got, int):
            return got
        rows_path = out / f"rows{suffix}.csv"
        write_rows(rows_path, got)
    elapsed = time.monotonic() - t
    rows = read_rows(rows_path)   # the tables and the comparison always come from the rows file as written
    text = tables(rows)
    cmp_text = comparison(rows, quick=args.quick)
    written = []
    for name, body in ((f"tables{suffix}.md", text), (f"COMPARISON{suffix}.md", cmp_text)):
        (out / name).write_text(body)
        written.append(out / name)
    if rows_path.resolve() != (out / f"rows{suffix}.csv"):
        shutil.copyfile(rows_path, out / f"rows{suffix}.csv")
    written.append(out / f"rows{suffix}.csv")
    written += figures(rows, out, suffix)
    print(cmp_text)
    for path in written:
        print(f"written {path}")
    if args.rows is None:
        print(f"run.py: {len(rows)} rows in {elapsed:.0f} s")
    if args.write_results:
        dest = HERE / "results"
        dest.mkdir(exist_ok=True)
        for path in written:
            if path.resolve() != (dest / path.name).resolve():
                shutil.copyfile(path, dest / path.name)
            print(f"written {dest / path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
