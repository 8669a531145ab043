"""Run directories: writing a run's tables, summary and plots, reading them back, and the HTML report.

A run directory holds:

``summary.json``
    ``{"summary": {...metrics...}, "info": {...run information...}}``.
``jobs.csv``
    One row per job, columns :data:`~wattsched.sim.result.JOB_COLUMNS`.
``timeline.csv``
    Columns :data:`~wattsched.sim.result.TIMELINE_COLUMNS` (piecewise constant).
``power.png``, ``utilization.png``, ``wait_slowdown.png``
    The plots.
``report.html``
    One self-contained page (plots embedded), written by :func:`write_html_report`.

Numbers are written with ``repr`` so they read back exactly.
"""

from __future__ import annotations

import base64
import csv
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wattsched.errors import WattschedError
from wattsched.sim.result import JOB_COLUMNS, TIMELINE_COLUMNS

PLOTS = ("power.png", "utilization.png", "wait_slowdown.png")
_TEXT_COLUMNS = ("user", "state")
_INT_COLUMNS = ("id", "nodes", "evictions")


@dataclass
class LoadedRun:
    """A run read back from its directory: what the plots and metrics need."""

    jobs: dict[str, np.ndarray]
    timeline: dict[str, np.ndarray]
    info: dict = field(default_factory=dict)

    @property
    def nodes(self) -> int | None:
        return self.info.get("nodes")


def _json_default(value: Any):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _clean(value: Any) -> Any:
    """JSON has no inf or NaN: write them as strings that read back with float()."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _write_csv(path: Path, columns: tuple[str, ...], table: dict[str, np.ndarray]) -> None:
    cols = [table[c].tolist() for c in columns]
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(columns)
        w.writerows(zip(*cols))


def _read_csv(path: Path, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or tuple(header) != columns:
            raise WattschedError(f"{path}: unexpected columns {header}; expected {list(columns)}")
        rows = list(reader)
    raw = list(zip(*rows)) if rows else [() for _ in columns]
    out: dict[str, np.ndarray] = {}
    for name, values in zip(columns, raw):
        if name in _TEXT_COLUMNS:
            out[name] = np.array(values, dtype=object)
        elif name in _INT_COLUMNS:
            out[name] = np.array([int(v) for v in values], dtype=np.int64)
        else:
            out[name] = np.array([float(v) for v in values], dtype=np.float64)
    return out


def write_plots(result: Any, out_dir: Path, bsld_threshold_s: float = 10.0) -> list[Path]:
    from wattsched.sim.plots import plot_power, plot_utilization, plot_wait_slowdown

    return [
        plot_power(result, out_dir / "power.png"),
        plot_utilization(result, out_dir / "utilization.png"),
        plot_wait_slowdown(result, out_dir / "wait_slowdown.png", bsld_threshold_s),
    ]


def write_run(result: Any, out_dir: str | Path, summary: dict, *, plots: bool = True) -> Path:
    """Write ``result`` and its ``summary`` into ``out_dir`` (created if needed)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(out / "jobs.csv", JOB_COLUMNS, result.jobs)
    _write_csv(out / "timeline.csv", TIMELINE_COLUMNS, result.timeline)
    doc = {"summary": _clean(summary), "info": _clean(result.info)}
    (out / "summary.json").write_text(json.dumps(doc, indent=2, default=_json_default) + "\n", encoding="utf-8")
    if plots:
        write_plots(result, out, summary.get("bsld_threshold_s") or 10.0)
    return out


def load_run(run_dir: str | Path) -> tuple[LoadedRun, dict]:
    """Read a run directory back: ``(run, summary)``."""
    run_dir = Path(run_dir)
    path = run_dir / "summary.json"
    if not path.exists():
        raise WattschedError(f"{run_dir}: not a run directory (no summary.json); run `wattsched simulate --out DIR`")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise WattschedError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    jobs = _read_csv(run_dir / "jobs.csv", JOB_COLUMNS)
    timeline = _read_csv(run_dir / "timeline.csv", TIMELINE_COLUMNS)
    return LoadedRun(jobs, timeline, doc.get("info", {})), doc.get("summary", {})


def _embed(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def write_html_report(run_dir: str | Path) -> Path:
    """Write ``report.html`` in ``run_dir``: run information, the summary table and the plots, in one file.

    Plots missing from the directory are drawn again from the CSV tables.
    """
    from wattsched.sim.metrics import summary_rows

    run_dir = Path(run_dir)
    run, summary = load_run(run_dir)
    if any(not (run_dir / p).exists() for p in PLOTS):
        write_plots(run, run_dir, summary.get("bsld_threshold_s") or 10.0)
    info = run.info
    esc = html.escape
    facts = [
        ("trace", info.get("trace") or info.get("trace_path")),
        ("policy", f"{info.get('policy')} {json.dumps(info.get('params') or {})}"),
        ("platform", f"{info.get('platform')} ({info.get('nodes')} nodes)"),
        ("predictor", "oracle (real values: a baseline, not a prediction)" if info.get("oracle")
         else (info.get("predictor") or "none (node maximum)")),
        ("cap", _cap_text(info.get("cap"))),
        ("seed", info.get("seed")),
        ("kill at walltime", info.get("kill_at_walltime")),
        ("power", "augmented (seeded; see workload.csv.gz)" if info.get("power_augmented") else "from the trace"),
        ("jobs dropped by cleaning", json.dumps((info.get("cleaning") or {}).get("dropped", {}))),
        ("events / policy calls", f"{info.get('events')} / {info.get('policy_calls')}"),
        ("plans rejected by the guard", info.get("plans_rejected", 0)),
        ("simulation wall time", f"{float(info.get('wall_time_s', 0)):.2f} s"),
    ]
    notes = "".join(f"<li>{esc(str(n))}</li>" for n in info.get("notes") or [])
    rows = []
    last_section = None
    for section, label, value in summary_rows(_restore(summary)):
        if section != last_section:
            rows.append(f"<tr><th colspan=2>{esc(section)}</th></tr>")
            last_section = section
        rows.append(f"<tr><td>{esc(label)}</td><td class=num>{esc(value)}</td></tr>")
    rows = "".join(rows)
    fact_rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(str(v))}</td></tr>" for k, v in facts)
    images = "".join(f"<figure>{_embed(run_dir / p)}</figure>" for p in PLOTS if (run_dir / p).exists())
    images += _dr_section(run_dir)
    title = f"wattsched run: {info.get('trace', '')} / {info.get('policy', '')}"
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; }}
h1 {{ font-size: 1.4em; }} h2 {{ font-size: 1.1em; margin-top: 1.5em; }}
table {{ border-collapse: collapse; }} td {{ padding: 2px 10px; border-bottom: 1px solid #eee; }}
th {{ text-align: left; padding-top: 0.6em; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.cols {{ display: flex; gap: 2em; flex-wrap: wrap; }} img {{ max-width: 100%; }}
figure {{ margin: 0.5em 0; }}
</style></head><body>
<h1>{esc(title)}</h1>
<div class=cols>
<div><h2>Run</h2><table>{fact_rows}</table>{f"<h2>Notes</h2><ul>{notes}</ul>" if notes else ""}</div>
<div><h2>Summary</h2><table>{rows}</table></div>
</div>
<h2>Plots</h2>
{images}
</body></html>
"""
    out = run_dir / "report.html"
    out.write_text(page, encoding="utf-8")
    return out


def _restore(summary: dict) -> dict:
    return {k: (float(v) if isinstance(v, str) and v in ("inf", "-inf", "nan") else v) for k, v in summary.items()}


def _cap_text(cap) -> str:
    if not cap:
        return "none"
    parts = []
    for start, watts, _label in cap:
        w = float(watts)
        value = "uncapped" if not math.isfinite(w) else f"{w:,.0f} W"
        s = float(start)
        parts.append(value if not math.isfinite(s) else f"from t={s:,.0f} s: {value}")
    return "; ".join(parts)


def _dr_section(run_dir: Path) -> str:
    """Demand-response events and the actions taken (``wattsched.sim.drlog``), when the run had any."""
    if not (run_dir / "dr_events.csv").exists():
        return ""
    esc = html.escape
    parts = ["<h2>Demand response</h2>"]
    if (run_dir / "dr.png").exists():
        parts.append(f"<figure>{_embed(run_dir / 'dr.png')}</figure>")
    for name, title, limit in (("dr_events.csv", "Events", 1000), ("dr_actions.csv", "Frequencies and evictions",
                                                                      500)):
        path = run_dir / name
        if not path.exists():
            continue
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
        if not rows:
            continue
        head = "".join(f"<th>{esc(c)}</th>" for c in rows[0])
        body = "".join("<tr>" + "".join(f"<td class=num>{esc(c)}</td>" for c in r) + "</tr>"
                       for r in rows[1:limit + 1])
        more = f"<p>{len(rows) - 1 - limit} more rows in {name}</p>" if len(rows) - 1 > limit else ""
        parts.append(f"<h3>{title}</h3><table><tr>{head}</tr>{body}</table>{more}")
    return "".join(parts)
