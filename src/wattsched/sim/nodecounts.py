"""The node counts a scheduler chose for moldable jobs, in a run's outputs.

:func:`write_node_count_outputs` writes, in the run directory, when any job
with a node range (``min_nodes < max_nodes``) ran:

``node_counts.csv``
    one row per such job, in the order they left: ``id``, ``start_s``,
    ``end_s`` (empty: still running when the run stopped), ``nodes`` (the count
    it ran on at its end), ``min_nodes``, ``max_nodes`` and ``requested``;
``node_counts.png``
    above, each job's range at its start time (a bar from its least to its
    largest count) and the count it was given (a dot, coloured by the share of
    its request); below, over time, the busy nodes against the nodes the
    running moldable jobs had asked for.

The report (``report.html``) shows the plot with a line of figures.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

COLUMNS = ("id", "start_s", "end_s", "nodes", "min_nodes", "max_nodes", "requested")


def write_node_count_outputs(out_dir: Path, sizes: Sequence[tuple], timeline: dict, nodes: int) -> list[Path]:
    """Write ``node_counts.csv`` and ``node_counts.png`` (nothing without a moldable job that ran); ``timeline``
    is the run's (its busy nodes are drawn), ``nodes`` the platform's node count."""
    if not sizes:
        return []
    out_dir = Path(out_dir)
    path = out_dir / "node_counts.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for jid, start, end, used, lo, hi, req in sizes:
            w.writerow([jid, repr(float(start)), "" if math.isnan(end) else repr(float(end)), used, lo, hi, req])
    t_line = np.asarray(timeline["t_s"], dtype=float)
    busy = np.asarray(timeline["busy_nodes"], dtype=float)
    return [path, _plot(out_dir / "node_counts.png", np.asarray([s[1:] for s in sizes], dtype=float), t_line, busy,
                        nodes)]


def held_over_time(starts: np.ndarray, ends: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sum of ``counts`` over the intervals ``[start, end)`` in force at each change: ``(times, totals)``.

    >>> t, n = held_over_time(np.array([0.0, 5.0]), np.array([10.0, 20.0]), np.array([4.0, 2.0]))
    >>> t.tolist(), n.tolist()
    ([0.0, 5.0, 10.0, 20.0], [4.0, 6.0, 2.0, 0.0])
    """
    times = np.concatenate([starts, ends])
    deltas = np.concatenate([counts, -counts])
    order = np.argsort(times, kind="stable")
    times, totals = times[order], np.cumsum(deltas[order])
    last = np.r_[times[1:] != times[:-1], True]  # the total after every change at one time
    return times[last], totals[last]


def _plot(path: Path, rows: np.ndarray, t_line: np.ndarray, busy: np.ndarray, nodes: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start, end, used, lo, hi, req = rows.T
    end_s = float(t_line[-1]) if t_line.size else float(np.nanmax(end, initial=0.0))
    end = np.where(np.isnan(end), end_s, end)
    span = float(max(end.max(), start.max()) - start.min()) if start.size else 0.0
    scale, unit = (3600.0, "h") if span > 3 * 3600 else (1.0, "s")
    fig = plt.figure(figsize=(10, 7))
    grid = fig.add_gridspec(2, 2, width_ratios=(40, 1), height_ratios=(3, 2), wspace=0.05, hspace=0.12)
    ax1 = fig.add_subplot(grid[0, 0])
    ax2 = fig.add_subplot(grid[1, 0], sharex=ax1)
    cax = fig.add_subplot(grid[0, 1])
    ax1.vlines(start / scale, lo, hi, color="0.75", lw=1.2, label="node range (min..max)")
    share = used / np.maximum(req, 1)
    dots = ax1.scatter(start / scale, used, c=share, cmap="viridis", vmin=0.0, vmax=max(1.0, float(share.max())),
                       s=10, zorder=3, label="nodes given")
    fig.colorbar(dots, cax=cax, label="share of the request")
    ax1.tick_params(labelbottom=False)
    ax1.set_ylabel("nodes")
    ax1.set_title(f"moldable jobs: node counts chosen in their ranges ({len(start):,} jobs)", fontsize="medium")
    ax1.legend(loc="upper right", fontsize=8)
    t, asked = held_over_time(start, end, req)
    step = dict(where="post")
    ax2.step(t_line / scale, busy, color="tab:blue", lw=0.9, label="busy nodes (every job)", **step)
    ax2.step(t / scale, asked, color="0.5", lw=0.8, ls="--", label="nodes the running moldable jobs asked for",
             **step)
    ax2.axhline(nodes, color="crimson", lw=0.8, label=f"the platform's {nodes:,} nodes")
    ax2.set_ylabel("nodes")
    ax2.set_xlabel(f"time ({unit})")
    ax2.legend(loc="upper right", fontsize=8)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path
