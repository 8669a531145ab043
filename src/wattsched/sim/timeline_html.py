"""The report's interactive timeline: the run's timeline packed for the page, and the page's chart code.

The charts are drawn by uPlot (MIT, vendored in ``wattsched/data/vendor/uplot``
and inlined into the page, so ``report.html`` works offline): about 50 kB,
no dependencies, and it draws some hundred thousand points on a canvas fast
enough to zoom and hover smoothly. Charting packages that embed their own
JavaScript (Bokeh, Plotly) add 1 to 4 MB to every page and a large
dependency to the package.

The timeline travels as typed arrays (times as float64, the series as
float32), their bytes grouped by place (:func:`_shuffled`), zlib-compressed
and base64-encoded; the page inflates them with the browser's own
``DecompressionStream``. Rows that hold no time are dropped.
A timeline of up to :data:`MAX_ROWS` rows travels whole, so the charts zoom
from the whole run down to single events; a longer one is reduced to
:data:`MAX_ROWS` / 2 equal time buckets, each drawn as its maximum then its
minimum (the envelope: peaks and troughs stay visible at every zoom).
"""

from __future__ import annotations

import base64
import html
import json
import math
import zlib
from importlib import resources

import numpy as np

__all__ = ["MAX_ROWS", "timeline_payload", "timeline_section"]

MAX_ROWS = 100_000
"""Rows above which the timeline is reduced to buckets (a year of KTH SP2 has some 56,000)."""

_SERIES = ("power_w", "cap_w", "busy_nodes", "pending_jobs")


def _held_rows(timeline: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    t = np.asarray(timeline.get("t_s", ()), dtype=np.float64)
    keep = np.ones(t.size, dtype=bool)
    if t.size > 1:
        keep[:-1] = np.diff(t) > 0  # of rows at one time, the last holds
    cols = {}
    for name in _SERIES:
        v = np.asarray(timeline[name], dtype=np.float64)[keep] if name in timeline else np.full(keep.sum(), np.nan)
        cols[name] = np.where(np.isfinite(v), v, np.nan)  # an absent cap (inf) is a gap
    return t[keep], cols


def _budget_use(t: np.ndarray, power: np.ndarray, budgets: list[dict]) -> np.ndarray | None:
    """Fraction of each budget used by each row's time, inside its window (NaN outside every window)."""
    if not budgets or t.size < 2:
        return None
    cum = np.concatenate(([0.0], np.cumsum(np.nan_to_num(power[:-1]) * np.diff(t))))

    def energy_at(x: np.ndarray) -> np.ndarray:
        k = np.clip(np.searchsorted(t, x, side="right") - 1, 0, t.size - 1)
        return cum[k] + np.nan_to_num(power[k]) * (x - t[k]) * (k < t.size - 1)

    use = np.full(t.size, np.nan)
    for b in budgets:
        start, end, energy = float(b["start_s"]), float(b["end_s"]), float(b["energy_j"])
        inside = (t >= start) & (t <= end) & np.isnan(use)
        use[inside] = (energy_at(t[inside]) - energy_at(np.array([start]))[0]) / energy
    return use


def _buckets(t: np.ndarray, cols: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Each of ``n`` equal buckets as two rows: its maximum at its start, its minimum at its middle (the cap: its
    minimum both times); the end row kept.

    A bucket's extremes are over every row that holds during it: the one holding at its start and those that
    start inside it (as :class:`wattsched.sim.plots._Bins` reduces the PNG plots' timelines).

    >>> t = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    >>> bt, b = _buckets(t, {"power_w": np.array([5.0, 9.0, 1.0, 7.0, 0.0])}, 2)
    >>> bt.tolist(), b["power_w"].tolist()
    ([0.0, 1.0, 2.0, 3.0, 4.0], [9.0, 5.0, 7.0, 1.0, 0.0])
    """
    edges = np.linspace(t[0], t[-1], n + 1)
    rows = t.size - 1
    bucket_of_row = np.clip(np.searchsorted(edges, t[:-1], side="right") - 1, 0, n - 1)
    first = np.searchsorted(bucket_of_row, np.arange(n), side="left")
    nonempty = np.diff(np.append(first, rows)) > 0
    at_start = np.clip(np.searchsorted(t, edges[:-1], side="right") - 1, 0, rows - 1)
    out_t = np.empty(2 * n + 1)
    out_t[0:-1:2] = edges[:-1]
    out_t[1:-1:2] = (edges[:-1] + edges[1:]) / 2
    out_t[-1] = t[-1]

    def reduce(v: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
        held = v[:-1]
        out = held[at_start].copy()
        if nonempty.any():  # empty buckets in between are skipped, so each segment is one bucket's rows
            out[nonempty] = ufunc(out[nonempty], ufunc.reduceat(held, first[nonempty]))
        return out

    out = {}
    for name, v in cols.items():
        lo = reduce(v, np.fmin)
        series = np.empty(2 * n + 1)
        series[0:-1:2] = lo if name == "cap_w" else reduce(v, np.fmax)
        series[1:-1:2] = lo
        series[-1] = v[-1]
        out[name] = series
    return out_t, out


def timeline_payload(timeline: dict[str, np.ndarray], info: dict, max_rows: int = MAX_ROWS) -> dict:
    """What the page's charts read: the packed columns and how to show them.

    >>> tl = {"t_s": np.array([0.0, 5.0, 5.0, 10.0]), "power_w": np.array([1.0, 2.0, 3.0, 0.0]),
    ...       "cap_w": np.array([np.inf, 2.5, 2.5, 2.5])}
    >>> p = timeline_payload(tl, {})
    >>> p["rows"], p["columns"], p["binned"]
    (3, ['power_w', 'cap_w', 'busy_nodes', 'pending_jobs'], False)
    """
    t, cols = _held_rows(timeline)
    rows = t.size
    use = _budget_use(t, cols["power_w"], list(info.get("energy_budgets") or ()))
    binned = rows > max_rows
    if binned:
        held_t = t
        t, cols = _buckets(t, cols, max_rows // 2)
        if use is not None:  # a running sum: sampled at the bucket times
            use = np.interp(t, held_t, np.nan_to_num(use, nan=-1.0))
            use[use < 0] = np.nan
    if use is not None:
        cols["budget_use"] = use
    names = list(cols)
    packed = _shuffled(t.astype("<f8")) + b"".join(_shuffled(cols[c].astype("<f4")) for c in names)
    power = cols["power_w"]
    peak = float(np.nanmax(power)) if np.isfinite(power).any() else 0.0
    scale, unit = (1e6, "MW") if peak >= 1e7 else (1e3, "kW") if peak >= 1e4 else (1.0, "W")
    origin = info.get("origin_unix_s")
    return {
        "rows": int(t.size),
        "source_rows": int(rows),
        "binned": bool(binned),
        "columns": names,
        "origin_unix_s": float(origin) if origin is not None and math.isfinite(float(origin)) else None,
        "power_scale": scale,
        "power_unit": unit,
        "nodes": info.get("nodes"),
        "data": base64.b64encode(_deflated(packed)).decode("ascii"),
    }


def _deflated(data: bytes) -> bytes:
    """``data`` as a zlib stream (what the page's ``DecompressionStream("deflate")`` reads), run-length matches only.

    On shuffled columns the matches are runs of one byte: zlib's run-length strategy finds them at level 1
    in three fifths of the time of its default one, and packs them a little smaller (KTH-SP2's 78,615 rows:
    7.8 ms and 455 kB against 12.8 ms and 472 kB).
    """
    packer = zlib.compressobj(1, zlib.DEFLATED, zlib.MAX_WBITS, 8, zlib.Z_RLE)
    return packer.compress(data) + packer.flush()


def _shuffled(values: np.ndarray) -> bytes:
    """The bytes of ``values`` grouped by their place in each value (every first byte, then every second, ...).

    Neighbouring values share their sign, exponent and high mantissa bytes, which then sit together: zlib at
    level 1 packs them smaller than the plain bytes at level 6, in a sixth of the time (the page undoes it).

    >>> _shuffled(np.array([1, 2], dtype="<u2"))
    b'\\x01\\x02\\x00\\x00'
    """
    return np.ascontiguousarray(values.view(np.uint8).reshape(-1, values.itemsize).T).tobytes()


def _asset(name: str) -> str:
    return (resources.files("wattsched") / "data" / "vendor" / "uplot" / name).read_text(encoding="utf-8")


def timeline_section(timeline: dict[str, np.ndarray], info: dict) -> str:
    """The HTML of the timeline section: the data, uPlot and the chart code, all inline."""
    payload = timeline_payload(timeline, info)
    if payload["rows"] < 2:
        return "<h2>Timeline</h2><p>The run has no timeline to draw.</p>"
    how = (f"{payload['source_rows']:,} rows reduced to {payload['rows'] // 2:,} buckets, each drawn as its highest "
           "then its lowest value" if payload["binned"] else f"all {payload['rows']:,} rows of the run")
    when = "UTC dates from the trace's start time" if payload["origin_unix_s"] is not None else "time since t = 0"
    data = json.dumps(payload).replace("</", "<\\/")
    return f"""<h2 id=timeline-title>Timeline</h2>
<p class=hint>Drag across a chart to zoom in, scroll to zoom at the cursor, double-click to see the whole run; the
values at the cursor show below each chart. Drawn from {html.escape(how)}; {html.escape(when)}.</p>
<div id=timeline><div id=tl-power></div><div id=tl-nodes></div></div>
<p id=tl-error class=warn></p>
<noscript><p>The timeline needs JavaScript; the plots below show the same run.</p></noscript>
<style>{_asset("uPlot.min.css")}</style>
<script>{_asset("uPlot.iife.min.js")}</script>
<script type="application/json" id=tl-data>{data}</script>
<script>{_CHART_JS}</script>
"""


_CHART_JS = r"""
(async function () {
  const P = JSON.parse(document.getElementById("tl-data").textContent);
  const bytes = Uint8Array.from(atob(P.data), c => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  const packed = new Uint8Array(await new Response(stream).arrayBuffer());
  const n = P.rows;
  const origin = P.origin_unix_s;
  // each column's bytes come grouped by their place in the value (see _shuffled): put every value together
  const column = (offset, size) => {
    const out = new Uint8Array(n * size);
    for (let j = 0; j < size; j++) {
      const from = offset + j * n;
      for (let i = 0; i < n; i++) out[i * size + j] = packed[from + i];
    }
    return out.buffer;
  };
  const t = new Float64Array(column(0, 8));
  const x = Array.from(t, v => v + (origin === null ? 0 : origin));
  const col = {};
  P.columns.forEach((name, i) => {
    col[name] = Array.from(new Float32Array(column(8 * n + 4 * n * i, 4)), v => Number.isNaN(v) ? null : v);
  });
  const ws = P.power_scale, wu = P.power_unit;
  const power = col.power_w.map(v => v === null ? null : v / ws);
  const cap = col.cap_w.map(v => v === null ? null : v / ws);
  const above = power.map((v, i) => v !== null && cap[i] !== null && v > cap[i] ? v : null);
  const num = (v, d) => v === null || v === undefined ? "—" : v.toLocaleString("en", {maximumFractionDigits: d});
  const rel = s => {
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    const sec = Math.round(s % 60);
    return (d ? d + " d " : "") + String(h).padStart(2, "0") + ":" + String(m).padStart(2, "0") +
      (sec ? ":" + String(sec).padStart(2, "0") : "");
  };
  const timed = origin !== null;
  const xLegend = timed
    ? (u, v) => v === null ? "—" : new Date(v * 1000).toISOString().replace("T", " ").replace(".000Z", " UTC")
    : (u, v) => v === null ? "—" : "t = " + rel(v);
  const xAxis = timed ? {} : {values: (u, splits) => splits.map(rel), space: 80};
  const stepped = uPlot.paths.stepped({align: 1});
  const full = [x[0], x[n - 1]];
  const charts = [];
  let syncing = false;
  const wheelZoom = {hooks: {ready: u => {
    u.over.addEventListener("wheel", e => {
      e.preventDefault();
      const at = u.posToVal(u.cursor.left >= 0 ? u.cursor.left : u.over.clientWidth / 2, "x");
      const min = u.scales.x.min, max = u.scales.x.max;
      const f = e.deltaY < 0 ? 0.7 : 1 / 0.7;
      let lo = at - (at - min) * f, hi = at + (max - at) * f;
      if (hi - lo < 30) return;  // thirty seconds across the chart is as close as it goes
      lo = Math.max(lo, full[0]); hi = Math.min(hi, full[1]);
      u.setScale("x", {min: lo, max: hi});
    }, {passive: false});
    u.over.addEventListener("dblclick", () => u.setScale("x", {min: full[0], max: full[1]}));
  }}};
  const syncX = (u, key) => {
    if (key !== "x" || syncing) return;
    syncing = true;
    charts.forEach(c => { if (c !== u) c.setScale("x", {min: u.scales.x.min, max: u.scales.x.max}); });
    syncing = false;
  };
  const box = document.getElementById("timeline");
  const width = Math.max(400, Math.min(box.clientWidth || 1000, 1100));
  const base = (title, height) => ({
    title, width, height, plugins: [wheelZoom],
    scales: {x: {time: timed}},
    tzDate: ts => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    cursor: {sync: {key: "wattsched-timeline"}, drag: {x: true, y: false, setScale: true}},
    hooks: {setScale: [syncX]},
  });
  const pSeries = [
    {value: xLegend},
    {label: "power", stroke: "#1f77b4", width: 1, paths: stepped, scale: "W", value: (u, v) => num(v, 2) + " " + wu},
    {label: "cap", stroke: "#000", dash: [6, 4], width: 1.5, paths: stepped, scale: "W",
     value: (u, v) => num(v, 2) + " " + wu},
    {label: "above cap", stroke: "#d62728", fill: "rgba(214,39,40,0.25)", width: 2.5, paths: stepped, scale: "W",
     value: (u, v) => v === null ? "no" : num(v, 2) + " " + wu},
  ];
  const pData = [x, power, cap, above];
  const pAxes = [xAxis, {scale: "W", label: "power (" + wu + ")", size: 60}];
  if (col.budget_use) {
    pSeries.push({label: "budget used", stroke: "#2ca02c", width: 1.5, scale: "%",
                  value: (u, v) => v === null ? "—" : num(100 * v, 1) + " %"});
    pData.push(col.budget_use);
    pAxes.push({scale: "%", side: 1, label: "budget used", values: (u, s) => s.map(v => Math.round(100 * v) + " %"),
                grid: {show: false}, size: 60});
  }
  let lo = Infinity;
  for (let i = 0; i < n; i++) {
    if (power[i] !== null && power[i] < lo) lo = power[i];
    if (cap[i] !== null && cap[i] < lo) lo = cap[i];
  }
  const pOpts = Object.assign(base("Platform power against the cap", 280), {series: pSeries, axes: pAxes});
  pOpts.scales.W = {range: (u, min, max) => {
    const pad = 0.05 * (max - min || max || 1);
    return [Math.max(0, Math.min(min, isFinite(lo) ? lo : min) - pad), max + pad];
  }};
  charts.push(new uPlot(pOpts, pData, document.getElementById("tl-power")));
  const nOpts = Object.assign(base("Busy nodes and pending jobs", 220), {
    series: [
      {value: xLegend},
      {label: "busy nodes", stroke: "#1f77b4", width: 1, paths: stepped, scale: "nodes", value: (u, v) => num(v, 0)},
      {label: "pending jobs", stroke: "#ff7f0e", width: 1, paths: stepped, scale: "jobs", value: (u, v) => num(v, 0)},
    ],
    axes: [xAxis, {scale: "nodes", label: "busy nodes" + (P.nodes ? " (of " + P.nodes + ")" : ""), size: 60},
           {scale: "jobs", side: 1, label: "pending jobs", grid: {show: false}, size: 60}],
  });
  nOpts.scales.nodes = {range: (u, min, max) => [0, Math.max(P.nodes || 0, max) * 1.02 || 1]};
  nOpts.scales.jobs = {range: (u, min, max) => [0, Math.max(max, 1) * 1.05]};
  charts.push(new uPlot(nOpts, [x, col.busy_nodes, col.pending_jobs], document.getElementById("tl-nodes")));
  window.wattschedTimeline = charts;  // the uPlot instances, for a reader's own scripting in the console
  document.getElementById("timeline").dataset.rendered = String(n);
})().catch(e => {
  document.getElementById("tl-error").textContent = "The timeline could not be drawn: " + e;
  console.error(e);
});
"""
