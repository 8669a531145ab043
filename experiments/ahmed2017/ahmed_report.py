"""Tables and figures of the Ahmed et al. 2017 reproduction, from the stored sweep runs.

:func:`collect` reads the runs of the sweep files back from their ``results.sqlite``;
:func:`write_report` writes ``runs.csv``, ``results.md`` (the paper's numbers beside ours) and
the figures ``fig4_power.png`` ... ``fig8_prediction_errors.png``.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

H = 3600.0
MJ = 1e6

PAPER = {
    "turnaround_vs_performance_pct": (4.4, 21.0),
    "energy_vs_powersave_pct": (-10.6, -2.9),
    "std_vs_performance_pct": (-15.6, -2.8),
    # §III-A: mean errors of the regression models
    "fit_time_error_pct": {"qe": 0.69, "gadget": 1.1, "seissol": 0.68, "walberla": 1.25},
    "fit_power_error_pct": {"qe": 0.14, "gadget": 0.44, "seissol": 1.01, "walberla": 0.82},
}


def _policy_label(sim: dict) -> str:
    name = sim.get("policy")
    params = sim.get("params") or {}
    if name == "performance" and params.get("cap_aware", True):
        return "performance (cap-aware)"
    return name


def _time_error(trace: str) -> float | str:
    stem = Path(trace).stem
    if stem.endswith("-exact"):
        return 0.0
    if stem.endswith("-users"):
        return "users"
    return int(stem.rsplit("-", 1)[1]) / 100.0


def collect(sweeps: list[tuple[Path, Path]]) -> tuple[list[dict], list[str]]:
    """One flat row per stored run of the sweep files, with the axes this experiment varies.

    Also returns a line per run that is not stored yet (an interrupted reproduction reports what it has).
    """
    from wattsched.sweep.expand import expand
    from wattsched.sweep.spec import load_sweep
    from wattsched.sweep.store import Store

    rows, missing = [], []
    for sweep_file, sweep_dir in sweeps:
        runs = expand(load_sweep(sweep_file))
        stored = {}
        if (Path(sweep_dir) / "results.sqlite").exists():
            store = Store(sweep_dir)
            stored = {r["key"]: r for r in store.rows({r.key for r in runs}) if r["status"] == "ok"}
            store.close()
        for run in runs:
            r = stored.get(run.key)
            if r is None:
                missing.append(f"{Path(sweep_file).name}: " + "  ".join(f"{k}={v}" for k, v in run.axes.items()))
                continue
            sim = run.spec["sim"]
            ev = run.spec.get("dr_events") or []
            cap = run.spec.get("cap")
            n_in, n_out = r.get("jobs_in") or 0, r.get("jobs_out") or 0
            e_in, e_out = r.get("energy_in_j"), r.get("energy_out_j")
            energy_mean = None
            if n_in + n_out:
                energy_mean = ((e_in or 0.0) * n_in + (e_out or 0.0) * n_out) / (n_in + n_out)
            rows.append({
                "experiment": "fig4" if isinstance(cap, dict) else "main",
                "procs": int(Path(sim["platform"]).stem.rsplit("-", 1)[1]),
                "policy": _policy_label(sim),
                "ratio": int(ev[0]["label"].split("-")[1]) / 100 if ev else None,
                "event_label": ev[0].get("label") if ev else (cap.get("label") if isinstance(cap, dict) else None),
                "event_start_s": ev[0]["start_s"] if ev else None, "event_end_s": ev[0]["end_s"] if ev else None,
                "power_error": float((sim.get("predictor_params") or {}).get("rel_error", 0.0)),
                "time_error": _time_error(run.spec["trace"]),
                "n_jobs": r["n_jobs"], "jobs_completed": r["jobs_completed"],
                "mean_turnaround_s": r["mean_turnaround_s"], "turnaround_in_s": r.get("turnaround_in_s"),
                "turnaround_out_s": r.get("turnaround_out_s"), "mean_energy_j": energy_mean,
                "energy_in_j": e_in, "energy_out_j": e_out, "jobs_in": n_in, "jobs_out": n_out,
                "energy_total_j": r["job_energy_j"], "event_cap_w": r.get("event_cap_w"),
                "event_mean_w": r.get("event_mean_w"), "event_std_w": r.get("event_std_w"),
                "event_max_w": r.get("event_max_w"), "time_above_cap_s": r["time_above_cap_s"],
                "max_overshoot_w": r["max_overshoot_w"], "evictions": r["evictions"], "wasted_j": r["wasted_j"],
                "makespan_s": r["makespan_s"], "sim_wall_s": r["sim_wall_s"],
                "steps": r.get("steps"), "timeline": {k: r[k] for k in ("timeline_t_s", "timeline_power_w",
                                                                        "timeline_max_w", "timeline_cap_w")
                                                      if k in r} or None,
            })
    return rows, missing


def _pct(a, b) -> float | None:
    if a is None or b is None or not b:
        return None
    return 100.0 * (a / b - 1.0)


def _d(v, by: float) -> float | None:
    """``v / by``, or None when ``v`` is undefined."""
    return None if v is None else v / by


def _nan(v) -> float:
    return math.nan if v is None else float(v)


def _f(v, fmt="{:.1f}") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return fmt.format(v)


def _table(head: list[str], rows: list[list]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                     + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def _find(rows, **kw) -> dict | None:
    for r in rows:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def write_report(out: Path, rows: list[dict], setup, missing: list[str] = ()) -> None:
    """``runs.csv``, ``results.md`` and the figures in ``out``."""
    out = Path(out)
    if not rows:
        raise SystemExit(f"no stored runs for {out}: run the reproduction first (without --report-only)")
    flat_keys = [k for k in rows[0] if k not in ("steps", "timeline", "label")]
    with (out / "runs.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=flat_keys)
        w.writeheader()
        for r in sorted(rows, key=lambda r: (r["experiment"], r["procs"], str(r["event_label"]), r["policy"],
                                             r["power_error"], str(r["time_error"]))):
            w.writerow({k: r[k] for k in flat_keys})
    main = [r for r in rows if r["experiment"] == "main"]
    exact = [r for r in main if r["power_error"] == 0 and r["time_error"] == 0.0]
    largest = max(setup.sizes)
    md: list[str] = [f"# Ahmed, Liu and Wu 2017 on SDSC-Par: results ({'quick' if setup.quick else 'full'} set)",
                     "", f"Written by `experiments/ahmed2017/run.py{' --quick' if setup.quick else ''}` from "
                     f"{len(rows)} runs (first {setup.jobs} jobs of SDSC-Par, seed 1). Turnaround and energy are "
                     "means over the finished jobs; \"in\"/\"out\": jobs that started inside/outside the event. "
                     "Power counts running jobs only (the paper's Eq. 5). `performance` and `powersave` ignore "
                     "the limit (the paper's DR-agnostic baselines); `performance (cap-aware)` admits by Eq. 7.", ""]

    # ---- Fig. 4
    f4 = sorted((r for r in rows if r["experiment"] == "fig4"), key=lambda r: (r["policy"], r["power_error"]))
    for r in f4:
        r["label"] = r["policy"] + (f", power predictions ±{100 * r['power_error']:.0f} %" if r["power_error"] else "")
    if f4:
        md += ["## Fig. 4: the limit stepping through 50, 30, 41.7, 15, 30 % of peak "
               f"({setup.fig4_size} processors)", "",
               "Paper: under the DR policy the power never goes above the limit; under performance-policy "
               "(no power capping) it often does (Fig. 4(b)).", ""]
        head = ["step (limit)", "limit W"] + [f"{r['label']}: max W / mean W / time above" for r in f4]
        body = []
        for i, st in enumerate(f4[0]["steps"] or []):
            line = [st["label"], _f(st["cap_w"], "{:,.0f}")]
            for r in f4:
                s = r["steps"][i]
                line.append(f"{_f(s['max_w'], '{:,.0f}')} / {_f(s['mean_w'], '{:,.0f}')} / "
                            f"{_f(100 * s['frac_above_cap'], '{:.0f}')} %")
            body.append(line)
        md += [_table(head, body), ""]
        md += ["Evictions: " + ", ".join(f"{r['label']} {r['evictions']}" for r in f4) + ".", ""]

    # ---- Fig. 5
    md += ["## Fig. 5: 128/256/512 processors, one event over 25 % of the run at 80 % of peak", "",
           "Paper: turnaround falls with the size for every policy; performance-policy has the smallest, DR is "
           "the same outside events and slightly worse inside; energy per job is about independent of the "
           "size, performance and powersave almost equal, DR about 15 % lower for the jobs of the event.", ""]
    head = ["procs", "policy", "turnaround all / in / out (h)", "energy per job all / in / out (MJ)",
            "event max / limit (kW)", "event std (kW)", "evictions", "turnaround vs performance",
            "energy vs powersave"]
    body = []
    for procs in setup.sizes:
        perf = _find(exact, procs=procs, policy="performance", event_label="dr-25")
        save = _find(exact, procs=procs, policy="powersave", event_label="dr-25")
        for pol in ("dr", "performance", "powersave", "performance (cap-aware)"):
            r = _find(exact, procs=procs, policy=pol, event_label="dr-25")
            if r is None:
                continue
            body.append([procs, pol, " / ".join(_f(x and x / H) for x in (r["mean_turnaround_s"],
                                                                            r["turnaround_in_s"],
                                                                            r["turnaround_out_s"])),
                         " / ".join(_f(x and x / MJ, "{:.2f}") for x in (r["mean_energy_j"], r["energy_in_j"],
                                                                         r["energy_out_j"])),
                         f"{_f(r['event_max_w'] and r['event_max_w'] / 1e3, '{:.2f}')} / "
                         f"{_f(r['event_cap_w'] and r['event_cap_w'] / 1e3, '{:.2f}')}",
                         _f(r["event_std_w"] and r["event_std_w"] / 1e3, "{:.2f}"), r["evictions"],
                         _f(_pct(r["mean_turnaround_s"], perf and perf["mean_turnaround_s"]), "{:+.1f} %"),
                         _f(_pct(r["mean_energy_j"], save and save["mean_energy_j"]), "{:+.1f} %")])
    md += [_table(head, body), ""]

    # ---- Figs. 6 and 7
    by_ratio = {}
    for r in exact:
        if r["procs"] == largest:
            by_ratio.setdefault(r["event_label"], {})[r["policy"]] = r
    labels = sorted(by_ratio, key=lambda x: int(x.split("-")[1]))
    md += [f"## Figs. 6 and 7: event ratio 20 to 100 % ({largest} processors)", "",
           "Paper: DR's turnaround is +4.4 to +21.0 % above performance-policy's; its energy -2.9 to -10.6 % "
           "below powersave-policy's, falling as the events last longer; the power standard deviation during "
           "the events -2.8 to -15.6 % below performance-policy's.", ""]
    head = ["event ratio", "turnaround dr / perf / save (h)", "dr vs performance", "energy per job dr / perf / "
            "save (MJ)", "dr vs powersave", "event std dr / perf (kW)", "dr vs performance (std)",
            "dr event max / limit (kW)", "dr evictions"]
    body, series = [], []
    for lab in labels:
        d, p, s = (by_ratio[lab].get(k) for k in ("dr", "performance", "powersave"))
        if not (d and p and s):
            continue
        tv, ev, sv = (_pct(d["mean_turnaround_s"], p["mean_turnaround_s"]),
                      _pct(d["mean_energy_j"], s["mean_energy_j"]), _pct(d["event_std_w"], p["event_std_w"]))
        series.append((int(lab.split("-")[1]), d, p, s, tv, ev, sv))
        body.append([f"{lab.split('-')[1]} %", " / ".join(_f(_d(x["mean_turnaround_s"], H)) for x in (d, p, s)),
                     _f(tv, "{:+.1f} %"), " / ".join(_f(_d(x["mean_energy_j"], MJ), "{:.2f}") for x in (d, p, s)),
                     _f(ev, "{:+.1f} %"), " / ".join(_f(_d(x["event_std_w"], 1e3), "{:.2f}") for x in (d, p)),
                     _f(sv, "{:+.1f} %"), f"{_f(_d(d['event_max_w'], 1e3), '{:.2f}')} / "
                     f"{_f(_d(d['event_cap_w'], 1e3), '{:.2f}')}", d["evictions"]])
    md += [_table(head, body), ""]
    if series:
        for name, i, key in (("turnaround vs performance", 4, "turnaround_vs_performance_pct"),
                             ("energy vs powersave", 5, "energy_vs_powersave_pct"),
                             ("power std vs performance", 6, "std_vs_performance_pct")):
            vals = [x[i] for x in series if x[i] is not None]
            plo, phi = PAPER[key]
            ours = f"{min(vals):+.1f} to {max(vals):+.1f} %" if vals else "undefined"
            md.append(f"- {name}: ours {ours}, paper {plo:+.1f} to {phi:+.1f} %")
        md.append("")

    # ---- Fig. 8
    f8_all = {}
    for size in sorted({min(setup.sizes), largest}):
        md_part, f8, perf = _fig8(main, exact, size)
        md += md_part
        f8_all[size] = (f8, perf)
    md += fit_error_section()
    if missing:
        md += [f"### Runs not done ({len(missing)})", "", "Rerun the command to do them (runs already stored are "
               "skipped).", ""] + [f"- `{m}`" for m in missing] + [""]
    (out / "results.md").write_text("\n".join(md) + "\n")
    write_figures(out, f4, setup, exact, series, f8_all)


def _fig8(main: list[dict], exact: list[dict], largest: int) -> tuple[list[str], list, dict | None]:
    """The Fig. 8 table of one machine size."""
    md = [f"## Fig. 8: prediction errors ({largest} processors, the 25 % event)", "",
           "Paper: with a random error of 0 to 10 % added to the jobs' power and execution time, the average "
           "energy of DR and performance-policy rises (by up to 10 %), DR's staying below performance's. Here "
           "the jobs stay as they are and DR *plans* with predictions that are wrong by up to the margin: "
           "power predictions (oracle x (1 + u), u uniform in +-margin) and execution times (requested time = "
           "run time x (1 + u)); `users`: SDSC-Par's own requested times.", ""]
    perf = _find(exact, procs=largest, policy="performance", event_label="dr-25")
    head = ["prediction", "margin", "dr turnaround (h)", "dr energy per job (MJ)", "dr vs performance (energy)",
            "event max / limit (kW)", "time above limit (s)", "evictions"]
    body = []
    f8 = []
    for kind in ("power", "time"):
        pts = [r for r in main if r["procs"] == largest and r["policy"] == "dr" and r["event_label"] == "dr-25"
               and ((kind == "power" and r["time_error"] == 0.0) or (kind == "time" and r["power_error"] == 0))]
        pts.sort(key=lambda r: (isinstance(r[f"{kind}_error"], str), r[f"{kind}_error"]
                                if not isinstance(r[f"{kind}_error"], str) else 0))
        for r in pts:
            m = r[f"{kind}_error"]
            if kind == "power" and isinstance(r["time_error"], str):
                continue
            f8.append((kind, m, r))
            body.append([kind, m if isinstance(m, str) else f"{100 * m:.0f} %", _f(_d(r["mean_turnaround_s"], H)),
                         _f(_d(r["mean_energy_j"], MJ), "{:.3f}"),
                         _f(_pct(r["mean_energy_j"], perf and perf["mean_energy_j"]), "{:+.1f} %"),
                         f"{_f(_d(r['event_max_w'], 1e3), '{:.2f}')} / {_f(_d(r['event_cap_w'], 1e3), '{:.2f}')}",
                         _f(r["time_above_cap_s"], "{:.0f}"), r["evictions"]])
    md += [_table(head, body), ""]
    if perf:
        md += [f"performance (uses no prediction): turnaround {_f(_d(perf['mean_turnaround_s'], H))} h, energy per "
               f"job {_f(_d(perf['mean_energy_j'], MJ), '{:.3f}')} MJ.", ""]
    return md, f8, perf


def fit_error_section() -> list[str]:
    """The packaged application models' fit errors beside the paper's §III-A values."""
    from wattsched.appmodels import packaged_fits

    fits = packaged_fits()
    body = [[app, f"{100 * f.power_error:.2f} %", f"{PAPER['fit_power_error_pct'].get(app, '-')} %",
             f"{100 * f.time_error:.2f} %", f"{PAPER['fit_time_error_pct'].get(app, '-')} %", f.points]
            for app, f in fits.items()]
    return ["### The application models' fit errors (§III-A)", "",
            "Mean relative error of the fitted polynomials (Eqs. 1-2) over the points they are fitted to "
            "(`wattsched models fit`); the paper's from its measurements.", "",
            _table(["application", "power, ours", "power, paper", "time, ours", "time, paper", "points"], body), ""]


def write_figures(out: Path, f4, setup, exact, series, f8_all) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if f4:
        fig, axes = plt.subplots(len(f4), 1, figsize=(8, 2.6 * len(f4)), sharex=True)
        for ax, r in zip(list(axes) if len(f4) > 1 else [axes], f4, strict=True):
            tl = r["timeline"]
            t = [x / H for x in tl["timeline_t_s"]]
            ax.step(t, [x / 1e3 for x in tl["timeline_max_w"]], where="post", lw=0.8, label="power (highest)")
            cap = [math.nan if c is None else c / 1e3 for c in tl["timeline_cap_w"]]
            ax.step(t, cap, where="post", color="red", lw=1.2, label="limit")
            ax.set_ylabel("kW")
            ax.set_title(r["label"] + (" (with power capping)" if r["policy"] == "dr" else
                                       " (without power capping)"), fontsize=9)
            ax.legend(fontsize=7, loc="upper right")
        (axes[-1] if len(f4) > 1 else axes).set_xlabel("time (h)")
        fig.suptitle(f"Fig. 4: power over time, limit at 50, 30, 41.7, 15, 30 % of peak "
                     f"({setup.fig4_size} processors)", fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "fig4_power.png", dpi=90)
        plt.close(fig)

    pols = ["dr", "performance", "powersave"]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6))
    width = 0.1
    for k, pol in enumerate(pols):
        for j, part in enumerate(("mean", "in", "out")):
            ys_t, ys_e = [], []
            for procs in setup.sizes:
                r = _find(exact, procs=procs, policy=pol, event_label="dr-25")
                key_t = "mean_turnaround_s" if part == "mean" else f"turnaround_{part}_s"
                key_e = "mean_energy_j" if part == "mean" else f"energy_{part}_j"
                ys_t.append(((r or {}).get(key_t) or math.nan) / H)
                ys_e.append(((r or {}).get(key_e) or math.nan) / MJ)
            xs = [i + (k * 3 + j - 4) * width for i in range(len(setup.sizes))]
            lab = f"{pol} {'all' if part == 'mean' else part + ' event'}"
            a1.bar(xs, ys_t, width, label=lab, color=f"C{k}", alpha=(1.0, 0.65, 0.35)[j])
            a2.bar(xs, ys_e, width, label=lab, color=f"C{k}", alpha=(1.0, 0.65, 0.35)[j])
    for a, yl in ((a1, "mean turnaround (h)"), (a2, "mean energy per job (MJ)")):
        a.set_xticks(range(len(setup.sizes)), [f"{p} processors" for p in setup.sizes])
        a.set_ylabel(yl)
    a1.set_yscale("log")
    a1.legend(fontsize=6, ncol=3)
    fig.suptitle("Fig. 5: one event over 25 % of the run at 80 % of peak", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "fig5_sizes.png", dpi=90)
    plt.close(fig)

    if series:
        x = [s[0] for s in series]
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
        for k, pol in enumerate(pols):
            a1.plot(x, [_nan(_d(s[1 + k]["mean_turnaround_s"], H)) for s in series], "o-", label=pol)
            a2.plot(x, [_nan(_d(s[1 + k]["mean_energy_j"], MJ)) for s in series], "o-", label=pol)
        a1.set_ylabel("mean turnaround (h)")
        a2.set_ylabel("mean energy per job (MJ)")
        a2.set_xlabel("demand-response event ratio (%)")
        a1.legend(fontsize=8)
        fig.suptitle(f"Fig. 6: event ratio ({max(setup.sizes)} processors)", fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "fig6_event_ratio.png", dpi=90)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(7, 3.5))
        for k, pol in enumerate(pols[:2]):
            ax.plot(x, [_nan(_d(s[1 + k]["event_std_w"], 1e3)) for s in series], "o-", label=pol)
        ax.set_xlabel("demand-response event ratio (%)")
        ax.set_ylabel("power std during events (kW)")
        ax.legend(fontsize=8)
        ax.set_title(f"Fig. 7: power stability during the events ({max(setup.sizes)} processors)", fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "fig7_power_std.png", dpi=90)
        plt.close(fig)

    sizes = [size for size in sorted(f8_all) if f8_all[size][0]]
    if sizes:
        fig, grid = plt.subplots(len(sizes), 2, figsize=(9, 3.2 * len(sizes)), squeeze=False)
    for row, size in enumerate(sizes):
        f8, perf = f8_all[size]
        axes = grid[row]
        for ax, kind in zip(axes, ("power", "time"), strict=True):
            pts = [(m, r) for k, m, r in f8 if k == kind and not isinstance(m, str)]
            ax.plot([100 * m for m, _ in pts], [_nan(_d(r["mean_energy_j"], MJ)) for _, r in pts], "o-", label="dr")
            if perf and perf["mean_energy_j"] is not None:
                ax.axhline(perf["mean_energy_j"] / MJ, color="C1", ls="--", label="performance")
            users = [r for k, m, r in f8 if k == kind and isinstance(m, str)]
            if users and users[0]["mean_energy_j"] is not None:
                ax.axhline(users[0]["mean_energy_j"] / MJ, color="C2", ls=":", label="dr, users' requested times")
            ax.set_xlabel(f"error margin of the {kind} predictions (%)")
            ax.legend(fontsize=7)
        axes[0].set_ylabel(f"{size} processors:\nmean energy per job (MJ)")
    if sizes:
        fig.suptitle("Fig. 8: prediction errors (25 % event)", fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "fig8_prediction_errors.png", dpi=90)
        plt.close(fig)
    (out / "figures.json").write_text(json.dumps(sorted(p.name for p in out.glob("fig*.png"))) + "\n")
