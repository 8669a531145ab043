"""PNG plots of a simulation run: power against the cap, utilization and queue, waits and slowdown.

The figures are drawn on matplotlib's Agg canvas directly (no pyplot, no
screen, no global backend switch), so plotting is safe in workers and threads.
Margins are fixed (no layout engine), which keeps a plot's cost that of drawing it.

Long timelines are reduced to at most ``max_points`` bins before drawing. The
reduction is exact for the piecewise-constant timeline: a bin's maximum is
over every row that holds during the bin (peaks stay visible) and its mean is
the time-weighted mean, computed from the exact running integral.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatterSciNotation

from wattsched.sim.metrics import _node_count, bounded_slowdown

__all__ = ["plot_power", "plot_utilization", "plot_wait_slowdown"]

MAX_POINTS = 1000
"""Default number of bins a long timeline is reduced to (and of points an empirical CDF is drawn through).

About one bin per pixel column of a plot's axes (a 9-inch figure at 110 dpi has
some 880 of them): more bins draw nothing more, only overlap within a pixel,
which blurs the bin maxima and means into one band and costs drawing time."""

_DPI = 110


def _time_unit(span_s: float) -> tuple[float, str]:
    """Scale and name of the time axis unit for a run of ``span_s``.

    >>> _time_unit(600.0), _time_unit(3 * 3600.0), _time_unit(30 * 86400.0)
    ((60.0, 'min'), (3600.0, 'h'), (86400.0, 'days'))
    """
    if span_s < 2 * 3600:
        return 60.0, "min"
    if span_s < 3 * 86400:
        return 3600.0, "h"
    return 86400.0, "days"


def _timeline(result: Any) -> tuple[np.ndarray, np.ndarray]:
    """Times of the rows that hold for some time, plus the end row; and their indices."""
    t = np.asarray(result.timeline["t_s"], dtype=np.float64)
    if t.size < 2:
        return t, np.arange(t.size)
    keep = np.ones(t.size, dtype=bool)
    keep[:-1] = np.diff(t) > 0
    idx = np.flatnonzero(keep)
    return t[idx], idx


def _column(result: Any, name: str, idx: np.ndarray, default: float = np.nan) -> np.ndarray:
    if name not in result.timeline:
        return np.full(idx.size, default)
    return np.asarray(result.timeline[name], dtype=np.float64)[idx]


class _Bins:
    """Reduction of a piecewise-constant series to equal-width time bins.

    ``t`` must be strictly increasing; row ``i`` holds on ``[t[i], t[i+1])`` and
    the last row marks the end.
    """

    def __init__(self, t: np.ndarray, n_bins: int):
        self.t = t
        self.edges = np.linspace(t[0], t[-1], n_bins + 1)
        rows = t[:-1]
        self.bin_of_row = np.clip(np.searchsorted(self.edges, rows, side="right") - 1, 0, n_bins - 1)
        self.first_row = np.searchsorted(self.bin_of_row, np.arange(n_bins), side="left")
        counts = np.diff(np.append(self.first_row, rows.size))
        self.nonempty = counts > 0
        # Row holding at each edge (it may have started in an earlier bin): the left edges' for the extremes, all
        # of them for the means
        self.at_edge = np.clip(np.searchsorted(t, self.edges, side="right") - 1, 0, rows.size - 1)
        self.at_start = self.at_edge[:-1]

    def reduce(self, v: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
        """``ufunc`` (``np.fmax`` or ``np.fmin``) over every row holding during each bin."""
        rows = v[:-1]
        out = rows[self.at_start].copy()
        if self.nonempty.any():
            # Bins in between empty ones are skipped, so each segment is one bin's rows.
            red = ufunc.reduceat(rows, self.first_row[self.nonempty])
            out[self.nonempty] = ufunc(out[self.nonempty], red)
        return out

    def mean(self, v: np.ndarray) -> np.ndarray:
        """Exact time-weighted mean of ``v`` over each bin."""
        t = self.t
        rows = np.nan_to_num(v[:-1])
        cum = np.concatenate(([0.0], np.cumsum(rows * np.diff(t))))
        k = self.at_edge
        integral = cum[k] + rows[k] * (self.edges - t[k])
        return np.diff(integral) / np.diff(self.edges)


def _steps(t: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points for ``step(where="post")``: the last value is repeated to the end time."""
    return t, np.append(values[:-1], values[-2:-1]) if values.size > 1 else values


def _binning(t: np.ndarray, max_points: int) -> _Bins | None:
    """The bins a timeline of times ``t`` is reduced to, ``None`` if it is short: made once, for all its series."""
    return _Bins(t, max_points) if t.size > max_points else None


def _series(t: np.ndarray, v: np.ndarray, kind: str, bins: _Bins | None) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` step points of a series, binned by ``kind`` ("max", "min", "mean") over ``bins`` if given."""
    if bins is None:
        return _steps(t, v)
    if kind == "mean":
        y = bins.mean(v)
    else:
        y = bins.reduce(v, np.fmax if kind == "max" else np.fmin)
    return bins.edges, np.append(y, y[-1])


def _margins(fig: Figure, width_in: float, height_in: float, *, top_in: float = 0.45, hspace: float = 0.12,
             wspace: float = 0.0) -> None:
    """Fixed margins in inches: a layout engine measures every label and costs more than drawing the figure."""
    fig.subplots_adjust(left=0.75 / width_in, right=1 - 0.2 / width_in, bottom=0.55 / height_in,
                        top=1 - top_in / height_in, hspace=hspace, wspace=wspace)


_MATHDEFAULT = re.compile(r"\$\\mathdefault\{(.*)\}\$")
_POWER = re.compile(r"\^\{(-?\d+)\}")
_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


class _PlainLogLabels(LogFormatterSciNotation):
    r"""Log-axis tick labels as plain text ("10³", "2×10⁻¹"), the look of matplotlib's own.

    matplotlib writes them as mathtext, and parsing mathtext costs about 20 ms
    a label in each new figure (the parser's cache belongs to the figure's
    renderer): more than drawing the rest of the figure.

    >>> f = _PlainLogLabels(labelOnlyBase=False)
    >>> f._plain(r"$\mathdefault{10^{-3}}$"), f._plain(r"$\mathdefault{2\times10^{1}}$"), f._plain("")
    ('10⁻³', '2×10¹', '')
    >>> f._plain(r"$\mathdefault{-10^{2}}$"), f._plain(r"$\mathdefault{0}$"), f._plain(r"$\mathdefault{0.5}$")
    ('−10²', '0', '0.5')
    """

    def __call__(self, x, pos=None) -> str:
        return self._plain(super().__call__(x, pos))

    @staticmethod
    def _plain(label: str) -> str:
        math = _MATHDEFAULT.fullmatch(label)
        if math is None:
            return label
        body = _POWER.sub(lambda m: m.group(1).translate(_SUPERSCRIPT), math.group(1).replace("\\times", "\u00d7"))
        return body.replace("-", "\u2212")  # the sign mathtext would draw


def _plain_log_labels(axis) -> None:
    """Replace the mathtext labels of a log or symlog ``axis`` by :class:`_PlainLogLabels` with the same settings."""
    for get, set_ in ((axis.get_major_formatter, axis.set_major_formatter),
                      (axis.get_minor_formatter, axis.set_minor_formatter)):
        f = get()
        if type(f) is LogFormatterSciNotation:
            set_(_PlainLogLabels(f._base, labelOnlyBase=f.labelOnlyBase, minor_thresholds=f.minor_thresholds,
                                 linthresh=f._linthresh))


def _new_figure(rows: int = 1, height: float = 3.6) -> tuple[Figure, list]:
    fig = Figure(figsize=(9.0, height * rows), dpi=_DPI)
    FigureCanvasAgg(fig)
    _margins(fig, 9.0, height * rows)
    axes = [fig.add_subplot(rows, 1, 1)]
    for i in range(2, rows + 1):
        axes.append(fig.add_subplot(rows, 1, i, sharex=axes[0]))
    return fig, axes


def _power_figure() -> tuple[Figure, list]:
    fig, axes = _new_figure(1, 4.4)
    _margins(fig, 9.0, 4.4, top_in=0.8)  # room for the legend in a row above the axes, under the title
    return fig, axes


def _wait_figure() -> tuple[Figure, list]:
    fig = Figure(figsize=(10.0, 3.8), dpi=_DPI)
    FigureCanvasAgg(fig)
    _margins(fig, 10.0, 3.8, top_in=0.75, wspace=0.18)
    return fig, list(fig.subplots(1, 2))


_FIGURES = {
    "power": lambda: _power_figure(),
    "utilization": lambda: _new_figure(2, 2.8),
    "wait_slowdown": _wait_figure,
}
"""How each plot's empty figure and axes are made."""

_AHEAD: dict[str, list[tuple[Figure, list]]] = {}
"""Figures made by :func:`prepare_figures`, taken by the next plot of their kind."""

_TICKS_AHEAD = {"power": [(9, 9, 0)], "utilization": [(9, 8, 0), (9, 8, 0)], "wait_slowdown": [(9, 7, 0), (9, 7, 48)]}
"""Ticks made ahead on each axis of each kind: x major, y major, x minor (the slowdown's log axis has minor
ticks), about what the plots of the traces in the Parallel Workloads Archive draw (a plot makes what more it
needs, and leaves what it does not need undrawn)."""


def _figure(kind: str) -> tuple[Figure, list]:
    """A new empty figure of ``kind`` and its axes: one :func:`prepare_figures` made, if there is one left."""
    try:
        return _AHEAD[kind].pop()
    except (KeyError, IndexError):
        return _FIGURES[kind]()


def prepare_figures() -> None:
    """Make the empty figure of each plot, with the tick objects of its axes, for the next plot of each kind.

    matplotlib makes a tick's lines and labels as objects when it first draws
    it, about a millisecond each, a third of the waits plot. The plot worker
    makes them while the simulation runs, and the plots then only draw.
    A figure made ahead draws exactly as a new one.
    """
    for kind, make in _FIGURES.items():
        fig, axes = make()
        for ax, (x_major, y_major, x_minor) in zip(axes, _TICKS_AHEAD[kind], strict=True):
            ax.xaxis.get_major_ticks(x_major)
            ax.yaxis.get_major_ticks(y_major)
            ax.xaxis.get_minor_ticks(x_minor)
        _AHEAD.setdefault(kind, []).append((fig, axes))


def _empty(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="0.4")


def _title(result: Any, what: str) -> str:
    info = getattr(result, "info", {}) or {}
    bits = [str(info[k]) for k in ("trace", "policy") if info.get(k) not in (None, "")]
    return f"{what} — {' / '.join(bits)}" if bits else what


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _print_png(fig, path)
    return path


_RENDER = {"text.hinting": "no_hinting"}
"""How text is drawn: without hinting, a seventh less time per plot (glyphs of this size look the same)."""


def _print_png(fig: Figure, target) -> None:
    with rc_context(_RENDER):
        # zlib level 1: flat-coloured plots compress almost as well as at the default 6, in a third of the time
        fig.savefig(target, format="png", pil_kwargs={"compress_level": 1})


def warm_up() -> None:
    """Draw a small figure with text into memory: loads the fonts and text caches a first plot would pay for.

    The plot worker calls it while the simulation runs, so that the real plots start warm.
    """
    from io import BytesIO

    fig, (ax,) = _new_figure(rows=1, height=2.0)
    ax.step([0.0, 1.0, 2.0], [0.0, 1.0, 0.5], where="post", label="warm")
    ax.set_title("warm — up", y=1.0)
    ax.set_xlabel("time (h)")
    ax.set_ylabel("power (kW)")
    ax.legend(loc="upper right", fontsize="small")
    ax.grid(True, alpha=0.3)
    _print_png(fig, BytesIO())


def plot_power(result: Any, path: str | Path, *, max_points: int = MAX_POINTS) -> Path:
    """Plot platform power against the cap over time and write it as a PNG.

    Parameters
    ----------
    result
        A :class:`~wattsched.sim.result.SimResult` or a reloaded run.
    path
        Where to write the PNG; parent directories are created.
    max_points
        Timelines longer than this are reduced to this many bins, drawing the
        per-bin maximum (so peaks stay visible) and the per-bin mean.

    Returns
    -------
    Path
        ``path``.

    Notes
    -----
    The cap is a step line (absent where no cap applies); the area where
    power exceeds it is shaded red, and the times it does are marked by a red
    strip along the bottom, visible at any time scale. The y axis spans the
    power's and the cap's range, not from 0; the legend sits above the axes.
    """
    fig, (ax,) = _figure("power")
    ax.set_title(_title(result, "Platform power"), y=1.0, pad=24)  # y given: no title placement pass; pad: legend
    t, idx = _timeline(result)
    if t.size < 2:
        _empty(ax, "empty timeline")
        return _save(fig, path)
    power = _column(result, "power_w", idx)
    cap = _column(result, "cap_w", idx, default=np.inf)
    cap = np.where(np.isfinite(cap), cap, np.nan)
    with np.errstate(invalid="ignore"):
        above = (power > cap).astype(np.float64)

    scale, unit = _time_unit(float(t[-1] - t[0]))
    peak = np.nanmax(np.concatenate((power, cap))) if np.isfinite(np.concatenate((power, cap))).any() else 0.0
    wscale, wunit = (1e6, "MW") if peak >= 1e7 else (1e3, "kW") if peak >= 1e4 else (1.0, "W")

    bins = _binning(t, max_points)
    binned = bins is not None
    x, p_max = _series(t, power, "max", bins)
    _, c_min = _series(t, cap, "min", bins)
    _, over = _series(t, above, "max", bins)
    xs = x / scale
    if binned:
        _, p_mean = _series(t, power, "mean", bins)
        ax.step(xs, p_max / wscale, where="post", color="C0", lw=0.8, label="power (bin max)")
        ax.step(xs, p_mean / wscale, where="post", color="C0", lw=0.8, alpha=0.45, label="power (bin mean)")
    else:
        ax.step(xs, p_max / wscale, where="post", color="C0", lw=1.0, label="power")
    if np.isfinite(c_min).any():
        ax.step(xs, c_min / wscale, where="post", color="k", lw=1.2, ls="--", label="cap")
        ax.fill_between(
            xs, c_min / wscale, p_max / wscale, where=over > 0, step="post",
            color="C3", alpha=0.35, lw=0,
        )
        # the same times as a strip along the bottom, in axes height: at a year's scale the shading above is a
        # hairline, the strip still shows when and how often power went above the cap
        ax.fill_between(xs, 0.0, 0.05, where=over > 0, step="post", color="C3", alpha=0.9, lw=0,
                        transform=ax.get_xaxis_transform(), label="above cap")
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel(f"power ({wunit})")
    ax.set_xlim(xs[0], xs[-1])
    # the power's own range, not from 0: a cap at 60 % and power around it would sit in the top third
    lows = np.concatenate((p_mean if binned else p_max, c_min)) / wscale
    highs = np.concatenate((p_max, c_min)) / wscale
    if np.isfinite(lows).any():
        lo, hi = float(np.nanmin(lows)), float(np.nanmax(highs))
        pad = 0.08 * (hi - lo) if hi > lo else 0.1 * abs(hi) or 1.0
        ax.set_ylim(max(0.0, lo - 2 * pad), hi + pad)  # twice below: room for the strip
    ax.grid(True, alpha=0.3)
    # in a row above the axes, not over the data
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=5, fontsize="small", frameon=False,
              borderaxespad=0.2)
    return _save(fig, path)


def plot_utilization(result: Any, path: str | Path, *, max_points: int = MAX_POINTS) -> Path:
    """Plot the busy (and powered-off) fraction of nodes and the queue length over time.

    Parameters
    ----------
    result
        A :class:`~wattsched.sim.result.SimResult` or a reloaded run.
    path
        Where to write the PNG.
    max_points
        Timelines longer than this are reduced to this many bins (time-weighted
        mean of the node fractions; mean and maximum of the queue).

    Returns
    -------
    Path
        ``path``.
    """
    fig, (ax_nodes, ax_queue) = _figure("utilization")
    ax_nodes.set_title(_title(result, "Utilization and queue"), y=1.0)
    t, idx = _timeline(result)
    if t.size < 2:
        _empty(ax_nodes, "empty timeline")
        return _save(fig, path)
    nodes = max(_node_count(result), 1)
    scale, unit = _time_unit(float(t[-1] - t[0]))
    bins = _binning(t, max_points)
    binned = bins is not None

    x, busy = _series(t, _column(result, "busy_nodes", idx) / nodes, "mean", bins)
    xs = x / scale
    ax_nodes.step(xs, busy, where="post", color="C0", lw=0.9, label="busy")
    if "off_nodes" in result.timeline:
        _, off = _series(t, _column(result, "off_nodes", idx) / nodes, "mean", bins)
        if np.nanmax(off) > 0:
            ax_nodes.step(xs, off, where="post", color="0.5", lw=0.9, label="off")
    ax_nodes.set_ylabel(f"fraction of {nodes:,} nodes")
    ax_nodes.set_ylim(0, 1.02)
    ax_nodes.legend(loc="upper right", fontsize="small")

    pending = _column(result, "pending_jobs", idx)
    if np.isfinite(pending).any():
        _, q = _series(t, pending, "max" if binned else "mean", bins)
        ax_queue.step(xs, q, where="post", color="C1", lw=0.9, label="pending (bin max)" if binned else "pending")
        if binned:
            _, qm = _series(t, pending, "mean", bins)
            ax_queue.step(xs, qm, where="post", color="C1", lw=0.8, alpha=0.45, label="pending (bin mean)")
        ax_queue.legend(loc="upper right", fontsize="small")
        ax_queue.set_ylim(bottom=0)
    else:
        _empty(ax_queue, "no queue length recorded")
    ax_queue.set_ylabel("pending jobs")
    ax_queue.set_xlabel(f"time ({unit})")
    ax_queue.set_xlim(xs[0], xs[-1])
    for ax in (ax_nodes, ax_queue):
        ax.grid(True, alpha=0.3)
    return _save(fig, path)


def _ecdf(values: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Points of the empirical CDF, at most ``max_points + 1`` of them (exact points, subsampled)."""
    v = np.sort(values)
    n = v.size
    idx = np.unique(np.linspace(0, n - 1, min(n, max_points + 1)).astype(np.int64))
    return v[idx], (idx + 1) / n


def plot_wait_slowdown(
    result: Any, path: str | Path, bsld_threshold_s: float = 10.0, *, max_points: int = MAX_POINTS,
    bsld_definition: str = "standard",
) -> Path:
    """Plot the distributions (empirical CDFs) of wait time and bounded slowdown.

    Parameters
    ----------
    result
        A :class:`~wattsched.sim.result.SimResult` or a reloaded run.
    path
        Where to write the PNG.
    bsld_threshold_s, bsld_definition
        Threshold and definition of the bounded slowdown, as in :func:`~wattsched.sim.metrics.summarize`.
    max_points
        The CDFs are drawn through at most this many of their exact points.

    Returns
    -------
    Path
        ``path``.

    Notes
    -----
    Waits use a symmetric-log axis (linear below 1 s) so that jobs that did
    not wait still show; slowdown, which is at least 1, a log axis. Jobs that
    never started are left out of the waits, jobs that never ended out of the
    slowdown.
    """
    fig, (ax_w, ax_b) = _figure("wait_slowdown")
    fig.suptitle(_title(result, "Waits and slowdown"))
    jobs = result.jobs
    n = len(next(iter(jobs.values()), ()))

    def col(name: str) -> np.ndarray:
        return np.asarray(jobs[name], dtype=np.float64) if name in jobs else np.full(n, np.nan)

    start, end, submit = col("start_s"), col("end_s"), col("submit_s")
    wait = col("wait_s") if "wait_s" in jobs else start - submit
    runtime = col("runtime_s") if "runtime_s" in jobs else end - start

    w = wait[np.isfinite(wait)]
    if w.size:
        scale, unit = (3600.0, "h") if np.median(w) >= 3600 else (60.0, "min") if np.median(w) >= 60 else (1.0, "s")
        x, y = _ecdf(w / scale, max_points)
        ax_w.step(x, y, where="post", color="C0")
        ax_w.set_xscale("symlog", linthresh=1.0 / scale)
        _plain_log_labels(ax_w.xaxis)
        ax_w.set_xlabel(f"wait ({unit})")
        zero = np.count_nonzero(w <= 0) / w.size
        ax_w.set_title(
            f"{w.size:,} started · median {np.median(w) / scale:.3g} {unit} · {100 * zero:.0f} % no wait",
            fontsize="medium", y=1.0,
        )
    else:
        _empty(ax_w, "no job started")
        ax_w.set_xlabel("wait")
    ax_w.set_ylabel("fraction of jobs")

    ended = np.isfinite(end)
    if bsld_definition == "borghesi2018" and "work_s" in jobs:
        from wattsched.sim.metrics import bounded_slowdown_eq3

        work = np.asarray(jobs["work_s"], dtype=float)
        b = bounded_slowdown_eq3(wait[ended], runtime[ended], work[ended], bsld_threshold_s)
    else:
        b = bounded_slowdown(wait[ended], runtime[ended], bsld_threshold_s)
    b = b[np.isfinite(b)]
    if b.size:
        x, y = _ecdf(b, max_points)
        ax_b.step(x, y, where="post", color="C2")
        ax_b.set_xscale("log")
        _plain_log_labels(ax_b.xaxis)
        if x[-1] <= x[0] * 1.0001:  # all equal (e.g. no waiting at all): give the log axis some room
            ax_b.set_xlim(x[0] / 1.5, x[0] * 1.5)
        ax_b.axvline(float(b.mean()), color="k", ls=":", lw=1, label=f"mean {b.mean():.3g}")
        ax_b.legend(loc="lower right", fontsize="small")
        eq = " · Eq. 3 (Borghesi 2018)" if bsld_definition == "borghesi2018" else ""
        ax_b.set_title(f"{b.size:,} ended · threshold {bsld_threshold_s:g} s{eq}", fontsize="medium", y=1.0)
    else:
        _empty(ax_b, "no job ended")
    ax_b.set_xlabel("bounded slowdown")
    for ax in (ax_w, ax_b):
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3, which="both")
    return _save(fig, path)
