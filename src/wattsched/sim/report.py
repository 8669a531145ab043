"""Run directories: writing a run's tables, summary and plots, reading them back, and the HTML report.

A run directory holds (``docs/outputs.md`` gives every column with its unit):

``summary.json``
    ``{"summary": {...metrics...}, "info": {...run information...}}``; ``info["tables"]``
    gives the row count of each table.
``jobs.parquet``, ``jobs.csv``
    One row per job, columns :data:`~wattsched.sim.result.JOB_COLUMNS`.
``timeline.parquet``, ``timeline.csv``
    Columns :data:`~wattsched.sim.result.TIMELINE_COLUMNS` (piecewise constant).
``power.png``, ``utilization.png``, ``wait_slowdown.png``
    The plots.
``node_caps.csv``, ``node_caps.png``
    When the policy set node caps: every change and the caps over time
    (:mod:`wattsched.sim.nodecaps`).
``node_counts.csv``, ``node_counts.png``
    When moldable jobs ran: the node count each was given in its range
    (:mod:`wattsched.sim.nodecounts`).
``report.html``
    One self-contained page (plots embedded), written by :func:`write_html_report`.
``complete.json``
    The completion marker, written last: the format version and the row counts.
    A directory without it was not finished and is refused by :func:`load_run`.

Tables are written through pyarrow: Parquet (zstd) is what :func:`load_run` reads;
the CSV copies are for spreadsheets. Floats are written in their shortest exact
form, so the CSV files read back bit for bit too.
"""

from __future__ import annotations

import base64
import csv
import html
import json
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wattsched.errors import RunDirError
from wattsched.sim.result import JOB_COLUMNS, LEGACY_JOB_COLUMNS, TIMELINE_COLUMNS

PLOTS = ("power.png", "utilization.png", "wait_slowdown.png")
MARKER = "complete.json"
"""Name of the completion marker of a run directory."""
FORMAT_VERSION = 2
"""Version of the run-directory layout, recorded in the marker."""
_TEXT_COLUMNS = ("user", "state")
_INT_COLUMNS = ("id", "nodes", "evictions")
_TABLES = {"jobs": JOB_COLUMNS, "timeline": TIMELINE_COLUMNS}


@dataclass
class LoadedRun:
    """A run read back from its directory: what the plots and metrics need."""

    jobs: dict[str, np.ndarray]
    timeline: dict[str, np.ndarray]
    info: dict = field(default_factory=dict)
    baseline: dict | None = None
    """The summary of the run's uncapped baseline, when it had one."""
    verdicts: dict | None = None
    """The run's verdicts as ``summary.json`` holds them (:mod:`wattsched.sim.verdicts`)."""

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


def _arrow_type(pa, name: str):
    if name in _TEXT_COLUMNS:
        return pa.string()
    if name in _INT_COLUMNS:
        return pa.int64()
    return pa.float64()


def _arrow_table(columns: tuple[str, ...], table: dict[str, np.ndarray]):
    import pyarrow as pa

    from wattsched.workload.tables import arrow_column

    kinds = {c: "string" if c in _TEXT_COLUMNS else "int64" if c in _INT_COLUMNS else "float64" for c in columns}
    n = len(next(iter(table.values()))) if table else 0
    # a job table built before work_s existed (or by hand) writes it as NaN
    arrays = [arrow_column(table[c] if c in table or c != "work_s" else np.full(n, np.nan), kinds[c], nulls=False)
              for c in columns]
    return pa.Table.from_arrays(arrays, names=list(columns))


def jobs_arrow_table(jobs: dict[str, np.ndarray]):
    """The job table as ``jobs.csv`` and ``jobs.parquet`` hold it (an Arrow table, typed columns)."""
    return _arrow_table(JOB_COLUMNS, jobs)


def write_whole(path: Path, write: Callable[[Path], object]) -> None:
    """``write(partial)`` to a temporary name beside ``path``, renamed to ``path`` once whole; removed if it fails.

    The temporary name keeps the suffix (``.partial-NAME``), so writers that
    choose the format by it (``.csv.gz``) write the same file.
    """
    import os

    partial = path.with_name(f".partial-{path.name}")
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def write_tables(result: Any, out_dir: str | Path, only: tuple[str, ...] | None = None) -> dict[str, int]:
    """Write the run's tables (``jobs`` and ``timeline``, CSV and Parquet, or those named in ``only``), each with
    :func:`write_whole`; the row count of each (``{"jobs_rows": ..., "timeline_rows": ...}``).

    :func:`write_run` with ``tables=False`` leaves them to this (the plot
    worker calls it while the caller writes the summary and waits).
    """
    from wattsched.workload.tables import write_csv_table, write_parquet_table

    out = Path(out_dir)
    for name, cols in _TABLES.items():
        if only is not None and name not in only:
            continue
        at = _arrow_table(cols, getattr(result, name))
        write_whole(out / f"{name}.parquet", lambda p, at=at: write_parquet_table(at, p))
        write_whole(out / f"{name}.csv", lambda p, at=at: write_csv_table(at, p))
    return table_rows(result)


def table_rows(result: Any) -> dict[str, int]:
    """The row count of each of the run's tables, as :func:`write_tables` gives it, without writing them."""
    return {f"{name}_rows": len(next(iter(getattr(result, name).values()), ())) for name in _TABLES}


TABLE_FILES = tuple(f"{name}.{suffix}" for name in _TABLES for suffix in ("csv", "parquet"))
"""The files of the run's tables."""


def _read_table(run_dir: Path, name: str, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
    import pyarrow as pa

    path = run_dir / f"{name}.parquet"
    try:
        if path.exists():
            import pyarrow.parquet as pq

            at = pq.read_table(path)
        else:
            import pyarrow.csv as pacsv

            path = run_dir / f"{name}.csv"
            if not path.exists():
                raise RunDirError(f"{run_dir}: incomplete run directory: {name}.parquet and {name}.csv are "
                                     "missing; run `wattsched simulate` again")
            types = {c: _arrow_type(pa, c) for c in columns}
            at = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=types,
                                                                             strings_can_be_null=False))
    except (pa.ArrowException, OSError) as exc:
        raise RunDirError(f"{path}: cannot read the table: {exc}") from None
    if name == "jobs" and tuple(at.column_names) == LEGACY_JOB_COLUMNS:
        import pyarrow as pa

        at = at.append_column("work_s", pa.array(np.full(at.num_rows, np.nan)))
    if tuple(at.column_names) != columns:
        raise RunDirError(f"{path}: unexpected columns {at.column_names}; expected {list(columns)}")
    out: dict[str, np.ndarray] = {}
    for c in columns:
        col = at.column(c)
        if c in _TEXT_COLUMNS:
            out[c] = np.array(col.to_pylist(), dtype=object)
        else:
            out[c] = col.to_numpy()
    if name == "jobs":
        _check_job_rows(path, out)
    return out


def _check_job_rows(path: Path, jobs: dict[str, np.ndarray]) -> None:
    """Refuse a jobs table no run writes (edited by hand): ``FILE:LINE: column: what is wrong``.

    Every row: at least one node, a whole number of them; an id no other row
    has; a state a job can have; an end not before its start, a start not
    before its submission; a run time that is its end minus its start. Unfinished
    jobs (NaN start or end) are rows too.
    """
    from wattsched.errors import located
    from wattsched.model.job import JobState

    states = {s.value for s in JobState}
    csv_file = path.suffix == ".csv"

    def bad(i: int, column: str, message: str) -> RunDirError:
        where = located(str(path), i + 2 if csv_file else None, None if csv_file else f"row {i + 1}", "")
        return RunDirError(f"{where}{column}: {message}; the table was changed after the run, run `wattsched "
                           "simulate` again")

    nodes = np.asarray(jobs["nodes"], dtype=float)
    wrong = np.flatnonzero(~(nodes >= 1) | (nodes != np.floor(nodes)))
    if len(wrong):
        raise bad(int(wrong[0]), "nodes", f"{nodes[wrong[0]]:g} nodes (job {jobs['id'][wrong[0]]}); a job runs on "
                  "a whole number of nodes, at least one")
    ids = np.asarray(jobs["id"])
    _, first, counts = np.unique(ids, return_index=True, return_counts=True)
    if (counts > 1).any():
        dup = ids[first[np.argmax(counts > 1)]]
        i = int(np.flatnonzero(ids == dup)[1])
        raise bad(i, "id", f"job {dup} appears more than once")
    for i, state in enumerate(jobs["state"]):
        if state not in states:
            raise bad(i, "state", f"{str(state)[:40]!r} is not a job state ({', '.join(sorted(states))})")
    submit, start, end = (np.asarray(jobs[c], dtype=float) for c in ("submit_s", "start_s", "end_s"))
    with np.errstate(invalid="ignore"):
        wrong = np.flatnonzero((end < start) | (start < submit))
    if len(wrong):
        i = int(wrong[0])
        column = "end_s" if end[i] < start[i] else "start_s"
        raise bad(i, column, f"job {ids[i]} submitted at {submit[i]:g} s, started at {start[i]:g} s, ended at "
                  f"{end[i]:g} s")
    if "runtime_s" in jobs:  # runtime_s = end_s - start_s for a job that ran (NaN for one that did not end)
        runtime = np.asarray(jobs["runtime_s"], dtype=float)
        ran = np.isfinite(start) & np.isfinite(end)
        with np.errstate(invalid="ignore"):
            wrong = np.flatnonzero(ran & ~(np.abs(runtime - (end - start)) <= 1e-6 * np.maximum(1.0, np.abs(end))))
        if len(wrong):
            i = int(wrong[0])
            raise bad(i, "runtime_s", f"job {ids[i]} ran from {start[i]:g} s to {end[i]:g} s, but its run time "
                      f"reads {runtime[i]:g} s")


def write_plots(result: Any, out_dir: Path, bsld_threshold_s: float = 10.0,
                bsld_definition: str = "standard", only: Collection[str] = PLOTS) -> list[Path]:
    """Draw the run's plots (those of :data:`PLOTS` named in ``only``) into ``out_dir``."""
    from wattsched.sim.plots import plot_power, plot_utilization, plot_wait_slowdown

    unknown = set(only) - set(PLOTS)
    if unknown:
        raise ValueError(f"no such plot: {', '.join(sorted(unknown))}")
    drawn = []
    if "power.png" in only:
        drawn.append(plot_power(result, out_dir / "power.png"))
    if "utilization.png" in only:
        drawn.append(plot_utilization(result, out_dir / "utilization.png"))
    if "wait_slowdown.png" in only:
        drawn.append(plot_wait_slowdown(result, out_dir / "wait_slowdown.png", bsld_threshold_s,
                                        bsld_definition=bsld_definition))
    return drawn


def write_run(result: Any, out_dir: str | Path, summary: dict, *, plots: bool = True,
              marker: bool = True, tables: bool = True, baseline: dict | None = None,
              verdicts: dict | None = None) -> dict[str, int]:
    """Write ``result`` and its ``summary`` into ``out_dir`` (created if needed), the marker last.

    Parameters
    ----------
    result
        A :class:`~wattsched.sim.result.SimResult` (or a :class:`LoadedRun`).
    out_dir
        The run directory. :func:`wattsched.sim.run.run_simulation` passes a
        temporary directory that it renames into place once complete.
    summary
        The summary metrics.
    plots
        Also draw the PNG plots.
    marker
        Write the completion marker (a caller that adds more files writes it
        itself with :func:`write_marker` when it is done).
    tables
        Write the tables (CSV and Parquet; otherwise the caller has them
        written, e.g. by :func:`write_tables` in the plot worker).
    baseline, verdicts
        The baseline's summary and the run's verdicts, written as
        ``summary.json``'s ``baseline`` and ``verdicts`` (the verdicts are
        computed here when not given).

    Returns
    -------
    dict
        The row count of each table: ``{"jobs_rows": ..., "timeline_rows": ...}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).unlink(missing_ok=True)
    rows = write_tables(result, out) if tables else table_rows(result)
    info = {**result.info, "tables": rows}
    if verdicts is None:
        from wattsched.sim.verdicts import verdicts as judge

        verdicts = judge(summary, result.info, result.timeline, result.jobs)
    doc = {"summary": _clean(summary), "verdicts": _clean(verdicts), "info": _clean(info)}
    if baseline is not None:
        doc["baseline"] = _clean(baseline)
    (out / "summary.json").write_text(json.dumps(doc, indent=2, default=_json_default) + "\n", encoding="utf-8")
    if plots:
        write_plots(result, out, summary.get("bsld_threshold_s") or 10.0, summary.get("bsld_definition") or "standard")
    if marker:
        write_marker(out, rows)
    return rows


def write_marker(out_dir: str | Path, rows: dict[str, int]) -> Path:
    """Write the completion marker of a run directory: the format version and the tables' row counts."""
    path = Path(out_dir) / MARKER
    path.write_text(json.dumps({"format_version": FORMAT_VERSION, **rows}) + "\n", encoding="utf-8")
    return path


def _read_json(path: Path) -> Any:
    """A JSON file of a run directory; whatever is wrong with it names the file."""
    from wattsched.errors import describe

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{path}: {describe(exc)}") from None
    except OSError as exc:
        raise RunDirError(f"{path}: cannot read: {exc.strerror or exc}") from None


def load_run(run_dir: str | Path) -> tuple[LoadedRun, dict]:
    """Read a run directory back: ``(run, summary)``.

    Raises
    ------
    RunDirError
        The directory is not a run directory, was not completed (no marker), or its
        tables disagree with its summary or marker (row counts).
    """
    run_dir = Path(run_dir)
    path = run_dir / "summary.json"
    if not path.exists():
        raise RunDirError(f"{run_dir}: not a run directory (no summary.json); run `wattsched simulate --out DIR`")
    doc = _read_json(path)
    marker_path = run_dir / MARKER
    if not marker_path.exists():
        raise RunDirError(
            f"{run_dir}: incomplete run directory (no {MARKER}): the run that wrote it did not finish or was made "
            "by an older wattsched; run `wattsched simulate` again")
    marker = _read_json(marker_path)
    info = doc.get("info", {}) if isinstance(doc, dict) else {}
    summary = doc.get("summary", {}) if isinstance(doc, dict) else {}
    tables = {name: _read_table(run_dir, name, cols) for name, cols in _TABLES.items()}
    expected = (info.get("tables") or {}) if isinstance(info, dict) else {}
    for name, table in tables.items():
        n = len(table[_TABLES[name][0]])
        key = f"{name}_rows"
        for source, counts in ((path, expected), (marker_path, marker if isinstance(marker, dict) else {})):
            if counts.get(key) != n:
                raise RunDirError(
                    f"{source}: {key}: says {counts.get(key)!r} but {name} has {n} rows; the directory was "
                    "changed after the run; run `wattsched simulate` again")
    if isinstance(summary.get("n_jobs"), int) and summary["n_jobs"] != len(tables["jobs"]["id"]):
        raise RunDirError(
            f"{path}: summary: n_jobs: says {summary['n_jobs']} but the jobs table has {len(tables['jobs']['id'])} "
            "rows; run `wattsched simulate` again")
    baseline = doc.get("baseline") if isinstance(doc, dict) else None
    verdicts = doc.get("verdicts") if isinstance(doc, dict) else None
    return LoadedRun(tables["jobs"], tables["timeline"], info, baseline if isinstance(baseline, dict) else None,
                     verdicts if isinstance(verdicts, dict) else None), summary


def _embed(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def write_html_report(run_dir: str | Path, run: Any = None, summary: dict | None = None, *,
                      baseline: dict | None = None, verdicts: dict | None = None) -> Path:
    """Write ``report.html`` in ``run_dir``: the verdicts, the interactive timeline, the run and its summary
    (beside its baseline's), the notes and the plots, in one self-contained file.

    Parameters
    ----------
    run_dir
        The run directory.
    run, summary
        The run and its summary when the caller has them in memory (as
        ``simulate`` does); otherwise they are read with :func:`load_run`.
        Plots missing from the directory are drawn again.
    baseline, verdicts
        The baseline's summary and the verdicts when the caller has them; a
        run read back brings its own, and verdicts missing from an older run
        directory are computed.

    Returns
    -------
    Path
        ``run_dir / "report.html"``.
    """
    return prepare_html_report(run_dir, run, summary, baseline=baseline, verdicts=verdicts)()


def prepare_html_report(run_dir: str | Path, run: Any = None, summary: dict | None = None, *,
                        baseline: dict | None = None, verdicts: dict | None = None) -> Callable[[], Path]:
    """Everything of :func:`write_html_report` but the plots, made now; the function returned embeds the plots
    (drawing those missing) and writes the file.

    ``simulate`` makes the page while its plot worker draws, and finishes it once the worker is done.
    """
    from wattsched.sim.metrics import cleaning_text, comparison_rows, readable, summary_rows
    from wattsched.sim.timeline_html import timeline_section
    from wattsched.sim.verdicts import finished_text, repeats_a_warning
    from wattsched.sim.verdicts import verdicts as judge

    run_dir = Path(run_dir)
    if run is None or summary is None:
        run, summary = load_run(run_dir)
    baseline = baseline if baseline is not None else getattr(run, "baseline", None)
    verdicts = verdicts if verdicts is not None else getattr(run, "verdicts", None)
    summary = _restore(summary)
    if verdicts is None:
        verdicts = judge(summary, run.info, run.timeline, run.jobs)
    info = run.info
    esc = html.escape
    facts = [
        ("trace", info.get("trace") or info.get("trace_path")),
        ("policy", f"{info.get('policy')}" + (f" ({readable(info.get('params'))})" if info.get("params") else "")),
        ("platform", f"{info.get('platform')} ({info.get('nodes')} nodes)"),
        ("predictor", "oracle (real values: a baseline, not a prediction)" if info.get("oracle")
         else (info.get("predictor") or "none (node maximum)")),
        ("cap", _cap_text(info.get("cap"))),
        ("seed", info.get("seed")),
        ("kill at walltime", readable(info.get("kill_at_walltime"))),
        ("power", "augmented (seeded; see workload.csv.gz)" if info.get("power_augmented") else "from the trace"),
        ("cleaning", cleaning_text(info.get("cleaning") or {})),
        ("events / policy calls", f"{info.get('events')} / {info.get('policy_calls')}"),
        ("plans rejected by the guard", info.get("plans_rejected", 0)),
        ("simulation wall time", f"{float(info.get('wall_time_s', 0)):.2f} s"),
    ]
    notes = "".join(f"<li>{esc(str(n))}</li>" for n in info.get("notes") or [] if not repeats_a_warning(str(n)))
    rows = []
    last_section = None
    if baseline is not None:
        name = f"{summary.get('baseline_policy') or 'baseline'} (uncapped)"
        rows.append(f"<tr><th></th><th class=num>{esc(str(info.get('policy') or 'run'))}</th>"
                    f"<th class=num>{esc(name)}</th><th class=num>change</th></tr>")
        for section, label, value, base, change in comparison_rows(summary, _restore(baseline)):
            if section != last_section:
                rows.append(f"<tr><th colspan=4>{esc(section)}</th></tr>")
                last_section = section
            rows.append(f"<tr><td>{esc(label)}</td><td class=num>{esc(value)}</td><td class=num>{esc(base)}</td>"
                        f"<td class=num>{esc(change)}</td></tr>")
    else:
        for section, label, value in summary_rows(summary):
            if section != last_section:
                rows.append(f"<tr><th colspan=2>{esc(section)}</th></tr>")
                last_section = section
            rows.append(f"<tr><td>{esc(label)}</td><td class=num>{esc(value)}</td></tr>")
    rows = "".join(rows)
    finished = finished_text(verdicts["finished"])
    if baseline is not None:
        base_n = int(baseline.get("n_jobs") or 0)
        finished += f" (baseline: {base_n - int(baseline.get('jobs_unfinished') or 0):,} of {base_n:,})"
    finished_note = (f"<p class=hint>Waits, turnaround and slowdown are {esc(finished)}; jobs that never finished "
                     "are not in them.</p>")
    fact_rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(str(v))}</td></tr>" for k, v in facts)
    title = f"wattsched run: {info.get('trace', '')} / {info.get('policy', '')}"
    head = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; padding: 0 1em; }}
h1 {{ font-size: 1.4em; }} h2 {{ font-size: 1.1em; margin-top: 1.5em; }}
table {{ border-collapse: collapse; }} td {{ padding: 2px 10px; border-bottom: 1px solid #eee; }}
th {{ text-align: left; padding-top: 0.6em; }} th.num {{ text-align: right; padding: 2px 10px; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.cols {{ display: flex; gap: 2em; flex-wrap: wrap; }} img {{ max-width: 100%; }}
figure {{ margin: 0.5em 0; }} .hint {{ color: #555; font-size: 0.9em; }}
#verdict {{ border: 1px solid #ccc; border-radius: 6px; padding: 0.6em 1em; background: #fafafa; }}
#verdict h2 {{ margin-top: 0.2em; }}
#verdict td, #verdict th {{ border: 0; vertical-align: top; padding: 2px 10px 2px 0; }}
#timeline .u-legend {{ margin-bottom: 1em; }}
.badge {{ display: inline-block; min-width: 8em; white-space: nowrap;
  text-align: center; font-weight: 600; border-radius: 4px;
  padding: 1px 6px; color: #fff; }}
.pass .badge {{ background: #2e7d32; }} .fail .badge {{ background: #c62828; }} .na .badge {{ background: #757575; }}
ul.warnings {{ margin: 0.5em 0 0.2em; padding-left: 1.2em; }} .warn {{ color: #8a4b00; }}
</style></head><body>
<h1>{esc(title)}</h1>
{_verdict_section(verdicts)}
{timeline_section(run.timeline, info)}
<div class=cols>
<div><h2>Run</h2><table>{fact_rows}</table>{f"<h2>Notes</h2><ul>{notes}</ul>" if notes else ""}</div>
<div><h2>Summary</h2>{finished_note}<table>{rows}</table></div>
</div>
<h2>Plots</h2>
"""

    def finish() -> Path:
        if any(not (run_dir / p).exists() for p in PLOTS):
            write_plots(run, run_dir, summary.get("bsld_threshold_s") or 10.0,
                        summary.get("bsld_definition") or "standard")
        images = "".join(f"<figure>{_embed(run_dir / p)}</figure>" for p in PLOTS if (run_dir / p).exists())
        images += _dr_section(run_dir)
        images += _node_caps_section(run_dir)
        images += _node_counts_section(run_dir)
        out = run_dir / "report.html"
        out.write_text(f"{head}{images}\n</body></html>\n", encoding="utf-8")
        return out

    return finish


def _verdict_section(verdicts: dict) -> str:
    """The page's header: one line per verdict (cap, budgets, events, queue) and the warnings."""
    from wattsched.sim.verdicts import verdict_lines

    esc = html.escape
    rows = []
    for subject, passed, text in verdict_lines(verdicts):
        word, _, rest = text.partition(": ")
        kind = "na" if passed is None else "pass" if passed else "fail"
        rows.append(f"<tr class={kind}><th>{esc(subject)}</th><td><span class=badge>{esc(word.upper())}</span></td>"
                    f"<td>{esc(rest)}</td></tr>")
    warnings = "".join(f'<li class=warn data-kind="{esc(str(w["kind"]))}">{esc(str(w["message"]))}</li>'
                       for w in verdicts.get("warnings") or ())
    warned = f"<ul class=warnings>{warnings}</ul>" if warnings else ""
    return f"<section id=verdict><h2>Verdict</h2><table>{''.join(rows)}</table>{warned}</section>"


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


def _node_caps_section(run_dir: Path, limit: int = 200) -> str:
    """The node caps the policy set over time (``wattsched.sim.nodecaps``), when it set any."""
    path = run_dir / "node_caps.csv"
    if not path.exists():
        return ""
    esc = html.escape
    parts = ["<h2>Node caps</h2>"]
    if (run_dir / "node_caps.png").exists():
        parts.append(f"<figure>{_embed(run_dir / 'node_caps.png')}</figure>")
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if len(rows) > 1:
        nodes = len({r[1] for r in rows[1:]})
        parts.append(f"<p>{len(rows) - 1:,} cap changes on {nodes:,} nodes (all in node_caps.csv; an empty cap_w "
                     "is a cap removed).</p>")
        head = "".join(f"<th>{esc(c)}</th>" for c in ("time", "node", "name", "cap"))
        body = "".join(f"<tr><td class=num>{esc(_short(r[0], ' s'))}</td><td class=num>{esc(r[1])}</td>"
                       f"<td>{esc(r[2])}</td><td class=num>{esc(_short(r[3], ' W') or 'none')}</td></tr>"
                       for r in rows[1:limit + 1])
        more = f"<p>{len(rows) - 1 - limit:,} more rows in node_caps.csv</p>" if len(rows) - 1 > limit else ""
        parts.append(f"<h3>First changes</h3><table><tr>{head}</tr>{body}</table>{more}")
    return "".join(parts)


def _node_counts_section(run_dir: Path) -> str:
    """The node counts chosen for moldable jobs (``wattsched.sim.nodecounts``), when any ran."""
    path = run_dir / "node_counts.csv"
    if not path.exists():
        return ""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    parts = ["<h2>Node counts</h2>"]
    if (run_dir / "node_counts.png").exists():
        parts.append(f"<figure>{_embed(run_dir / 'node_counts.png')}</figure>")
    if rows:
        used = [int(r["nodes"]) for r in rows]
        req = [int(r["requested"]) for r in rows]
        below = sum(u < q for u, q in zip(used, req, strict=True))
        share = sum(used) / max(1, sum(req))
        parts.append(f"<p>{len(rows):,} moldable jobs ran; {below:,} on fewer nodes than they asked for; together "
                     f"they held {share:.0%} of the node-count they asked for (every job in node_counts.csv).</p>")
    return "".join(parts)


def _short(text: str, unit: str) -> str:
    """A number of the CSV for a page: one decimal and its unit ('' stays '').

    >>> _short("152.44279999999998", " W"), _short("", " W")
    ('152.4 W', '')
    """
    try:
        return f"{float(text):,.1f}{unit}"
    except ValueError:
        return text
