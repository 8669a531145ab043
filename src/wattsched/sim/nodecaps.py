"""Node caps over time in a run's outputs: the caps a policy set with ``SetNodeCap``, per node.

:func:`write_node_cap_outputs` writes, in the run directory,

``node_caps.csv``
    one row per change of a node's own cap, in time order: ``t_s``, ``node``
    (index), ``name`` (the platform's node name) and ``cap_w`` (empty: the
    cap was removed);
``node_caps.png``
    the caps of every node over time as a heat map (one row per node; white
    where a node has no cap), above the least, mean and largest node cap and
    the sum of the node caps against the platform cap.

Nothing is written when the policy never set a node cap. The report
(``report.html``) shows the plot and the first rows of the table.
"""

from __future__ import annotations

import csv
import math
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

COLUMNS = ("t_s", "node", "name", "cap_w")


def cap_changes(log: Sequence[tuple[float, str, int, float, int]]) -> list[tuple[float, int, float]]:
    """``(t_s, node, cap_w)`` of the engine's control log's ``cap`` entries (``nan``: removed), in time order.

    >>> cap_changes([(0.0, "cap", 1, 200.0, -1), (5.0, "freq", 1, 1e9, 3), (9.0, "cap", 1, math.nan, -1)])
    [(0.0, 1, 200.0), (9.0, 1, nan)]
    """
    return [(t, node, value) for t, kind, node, value, _job in log if kind == "cap"]


def cap_matrix(changes: Sequence[tuple[float, int, float]], nodes: int, end_s: float,
               max_rows: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Node caps as a step function: ``(times, caps)`` with ``caps[i, n]`` in force on node ``n`` from ``times[i]``.

    ``times`` are the distinct change times plus ``end_s``; ``caps`` has one
    row per interval (``NaN``: no cap on that node then). With more than
    ``max_rows`` change times, the caps are sampled at ``max_rows`` evenly
    spaced times instead (the state in force at each), which bounds the
    memory and the plot whatever the run's length.

    >>> t, c = cap_matrix([(0.0, 0, 200.0), (0.0, 1, 100.0), (10.0, 0, 150.0)], 2, 30.0)
    >>> t.tolist(), c.tolist()
    ([0.0, 10.0, 30.0], [[200.0, 100.0], [150.0, 100.0]])
    >>> t, c = cap_matrix([(float(i), 0, float(i)) for i in range(100)], 1, 100.0, max_rows=4)
    >>> t.tolist(), c[:, 0].tolist()
    ([0.0, 25.0, 50.0, 75.0, 100.0], [0.0, 25.0, 50.0, 75.0])
    """
    times = sorted({t for t, _, _ in changes})
    if not times:
        return np.array([end_s]), np.empty((0, nodes))
    end_s = max(end_s, times[-1])
    if len(times) > max_rows:
        grid = [times[0] + (end_s - times[0]) * k / max_rows for k in range(max_rows)]
    else:
        grid = times
    current = np.full(nodes, np.nan)
    rows = []
    i = 0
    for t in grid:
        while i < len(changes) and changes[i][0] <= t:
            current[changes[i][1]] = changes[i][2]
            i += 1
        rows.append(current.copy())
    return np.array([*grid, end_s], dtype=float), np.array(rows)


def write_node_cap_outputs(out_dir: Path, log: Sequence[tuple], timeline: dict,
                           node_names: Sequence[str]) -> list[Path]:
    """Write ``node_caps.csv`` and ``node_caps.png`` in ``out_dir`` (nothing if no node cap was ever set)."""
    changes = sorted(cap_changes(log), key=lambda c: c[0])
    if not changes:
        return []
    out_dir = Path(out_dir)
    csv_path = out_dir / "node_caps.csv"
    with csv_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for t, node, cap in changes:
            w.writerow([repr(float(t)), node, node_names[node], "" if math.isnan(cap) else repr(float(cap))])
    t_line = np.asarray(timeline["t_s"], dtype=float)
    end_s = float(t_line[-1]) if t_line.size else changes[-1][0]
    # rows x nodes stays within MAX_CELLS (a 40,960-node machine is sampled at 97 times, not 2,000)
    max_rows = max(50, min(2000, MAX_CELLS // max(1, len(node_names))))
    times, caps = cap_matrix(changes, len(node_names), end_s, max_rows)
    return [csv_path, _plot(out_dir / "node_caps.png", times, caps, timeline)]


MAX_CELLS = 4_000_000
"""The most node-by-time cells of the cap matrix the plot is drawn from (32 MB of doubles)."""

MAX_HEAT_ROWS = 512
"""The most rows of the heat map: beyond it, nodes are drawn in groups of consecutive nodes (their mean cap)."""


def node_groups(caps: np.ndarray, rows: int = MAX_HEAT_ROWS) -> tuple[np.ndarray, int]:
    """``caps`` (times x nodes) with nodes averaged in groups of ``k`` consecutive nodes, at most ``rows`` groups.

    A group with no capped node is NaN (drawn white). Returns the grouped matrix and ``k``.

    >>> g, k = node_groups(np.array([[1.0, 3.0, np.nan, np.nan, 5.0]]), rows=3)
    >>> k, g.tolist()
    (2, [[2.0, nan, 5.0]])
    """
    n = caps.shape[1]
    if n <= rows:
        return caps, 1
    k = -(-n // rows)
    padded = np.full((caps.shape[0], k * (-(-n // k))), np.nan)
    padded[:, :n] = caps
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a group of uncapped nodes: all NaN
        return np.nanmean(padded.reshape(caps.shape[0], -1, k), axis=2), k


def _hours_or_seconds(span_s: float) -> tuple[float, str]:
    return (3600.0, "h") if span_s > 3 * 3600 else (1.0, "s")


def _plot(path: Path, times: np.ndarray, caps: np.ndarray, timeline: dict) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale, unit = _hours_or_seconds(float(times[-1] - times[0]) if times.size else 0.0)
    x = times / scale
    # the colorbar gets its own column beside the heat map; below it, room for the kW axis of the lower panel
    fig = plt.figure(figsize=(10, 7))
    grid = fig.add_gridspec(2, 2, width_ratios=(40, 1), height_ratios=(3, 2), wspace=0.12, hspace=0.12)
    ax1 = fig.add_subplot(grid[0, 0])
    ax2 = fig.add_subplot(grid[1, 0], sharex=ax1)
    cax = fig.add_subplot(grid[0, 1])
    heat, k = node_groups(caps)
    masked = np.ma.masked_invalid(heat.T)
    mesh = ax1.pcolormesh(x, np.arange(heat.shape[1] + 1) * k, masked, cmap="viridis", shading="flat")
    fig.colorbar(mesh, cax=cax, label="node cap (W)" if k == 1 else f"mean node cap of {k} nodes (W)")
    ax1.tick_params(labelbottom=False)
    ax1.set_ylabel("node")
    ax1.set_title("node caps over time (white: no cap)", fontsize="medium")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # intervals where no node has a cap: all-NaN rows
        lo, mean, hi = np.nanmin(caps, axis=1), np.nanmean(caps, axis=1), np.nanmax(caps, axis=1)
        total = np.nansum(caps, axis=1)
    step = dict(where="post")
    ax2.step(x, np.append(hi, hi[-1:]), color="tab:orange", lw=0.9, label="largest node cap", **step)
    ax2.step(x, np.append(mean, mean[-1:]), color="tab:blue", lw=0.9, label="mean node cap", **step)
    ax2.step(x, np.append(lo, lo[-1:]), color="tab:green", lw=0.9, label="least node cap", **step)
    ax2.set_ylabel("W per node")
    ax3 = ax2.twinx()
    ax3.step(x, np.append(total, total[-1:]) / 1e3, color="0.4", lw=0.8, ls="--", label="sum of node caps", **step)
    cap = np.asarray(timeline.get("cap_w", []), dtype=float)
    t_line = np.asarray(timeline.get("t_s", []), dtype=float) / scale
    if cap.size and np.isfinite(cap).any():
        ax3.step(t_line, np.where(np.isfinite(cap), cap, np.nan) / 1e3, color="crimson", lw=1.0,
                 label="platform cap", **step)
    ax3.set_ylabel("kW")
    lines = ax2.get_legend_handles_labels()
    more = ax3.get_legend_handles_labels()
    ax2.legend(lines[0] + more[0], lines[1] + more[1], loc="lower right", fontsize=8)
    ax2.set_xlabel(f"time ({unit})")
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path
