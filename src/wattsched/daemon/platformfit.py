"""A platform file fitted to a site: node groups with the idle and busy power their nodes really drew.

:func:`fit_platform` takes each node's power series (Prometheus,
:meth:`~wattsched.telemetry.prometheus.PrometheusSource.node_series`) and the
recorded runs of an imported trace (:func:`~wattsched.daemon.traceimport.read_recorded`):
a sample is *busy* when a recorded job held the node at that time, else *idle*.
Power read through a rate window (``rate(counter[W])``, as RAPL and IPMI
energy counters are) tells at ``t`` the power over the window before ``t``:
with ``settle_s`` the window, samples in the first ``settle_s`` of a busy span
(part idle) and of an idle gap (part busy) are left out, or a busy cluster's
short gaps between jobs would read as a high idle power.
Nodes are grouped by their size from Slurm's node records (CPUs, GPUs, memory;
``sinfo --json`` or ``scontrol show nodes --json``), or all in one group without them.
Per group:

- ``idle_w``: the median of the idle samples of its nodes;
- ``busy_w``: the 95th percentile of the busy samples (full load; jobs with no power
  of their own are simulated at it);
- ``busy_min_w``: the 5th percentile of the busy samples (at least ``idle_w``);
- ``off_w``, ``cap_min_w``: kept at their defaults unless above ``idle_w`` (then ``idle_w``);
  ``freq_levels_hz``: ``[]`` (telemetry does not say which frequencies a policy may set).

The result is a :class:`dict` in the platform file's layout (``--platform FILE`` reads it).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from wattsched.errors import TraceError

__all__ = ["GroupFit", "fit_platform", "platform_yaml"]


@dataclass(frozen=True)
class GroupFit:
    """The fit of one node group: its nodes, their size and the power figures with their sample counts."""

    name: str
    nodes: tuple[str, ...]
    cores: int
    gpus: int
    mem_mb: int
    idle_w: float
    busy_w: float
    busy_min_w: float
    idle_samples: int
    busy_samples: int


def _percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) of sorted ``values``, linear between ranks.

    >>> _percentile([1.0, 2.0, 3.0, 4.0], 0.5)
    2.5
    """
    pos = (len(values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def _busy_intervals(recorded: Iterable) -> dict[str, list[tuple[float, float]]]:
    """Per node, the disjoint, sorted ``[start, end)`` spans during which a recorded job held it."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for job in recorded:
        for node in job.nodes:
            spans.setdefault(node, []).append((job.start, job.end))
    merged: dict[str, list[tuple[float, float]]] = {}
    for node, items in spans.items():
        out: list[tuple[float, float]] = []
        for start, end in sorted(items):
            if out and start <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], end))
            else:
                out.append((start, end))
        merged[node] = out
    return merged


def _is_busy(spans: list[tuple[float, float]], t: float) -> bool:
    """``t`` falls in one of the disjoint sorted ``spans``.

    >>> _is_busy([(0.0, 10.0), (20.0, 30.0)], 10.0), _is_busy([(0.0, 10.0), (20.0, 30.0)], 25.0)
    (False, True)
    """
    i = bisect.bisect_right(spans, (t, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= t < spans[i][1]


def _classify(spans: list[tuple[float, float]], t: float, settle_s: float = 0.0) -> bool | None:
    """A sample at ``t`` is busy (``True``), idle (``False``), or neither (``None``: within ``settle_s`` after the
    start of the busy span or of the idle gap it falls in, read through a window that reaches into the other).

    >>> spans = [(0.0, 10.0), (20.0, 30.0)]
    >>> [_classify(spans, t, 5.0) for t in (2.0, 7.0, 12.0, 17.0, 22.0, 40.0)]
    [None, True, None, False, None, False]
    >>> [_classify(spans, t) for t in (2.0, 12.0)]
    [True, False]
    """
    i = bisect.bisect_right(spans, (t, float("inf"))) - 1
    if i < 0:
        return False
    start, end = spans[i]
    if t < end:
        return True if t >= start + settle_s else None
    return False if t >= end + settle_s else None


def fit_platform(
    series: Mapping[str, Sequence[tuple[float, float]]],
    recorded: Iterable,
    *,
    name: str = "fitted",
    node_info: Iterable | None = None,
    source: str = "telemetry",
    settle_s: float = 0.0,
) -> tuple[dict, list[GroupFit]]:
    """A platform file (as a dict) and the per-group fits.

    Parameters
    ----------
    series
        Per node, ``(epoch time, watts)`` samples.
    recorded
        Recorded runs with ``start``, ``end`` (epoch s) and ``nodes`` (names).
    node_info
        Slurm node records (:class:`~wattsched.daemon.slurm.records.SlurmNode`) to group nodes by size;
        nodes of the series that Slurm does not list are left out. ``None``: one group of every node.
    settle_s
        The rate window the power was read through (0: a gauge): samples that
        soon after a job's start or end are neither busy nor idle.

    Raises
    ------
    TraceError
        No node has samples, or a group has no idle or no busy sample (the message names the group and says
        to widen the window).
    """
    if not series:
        raise TraceError(source, None, "no node power samples in the window; check the query and the window")
    busy = _busy_intervals(recorded)
    groups: dict[tuple[int, int, int], list[str]] = {}
    if node_info is None:
        groups[(1, 0, 0)] = sorted(series)
    else:
        for node in node_info:
            if node.name in series:
                gpus = _gpus(node.gres)
                groups.setdefault((node.cpus or 1, gpus, node.real_memory_mb), []).append(node.name)
        if not groups:
            raise TraceError(source, None, f"none of the nodes with power ({', '.join(sorted(series)[:5])}...) is in "
                             "Slurm's node list; check --node-label/--node-map")
    fits: list[GroupFit] = []
    single = len(groups) == 1
    for k, ((cores, gpus, mem), nodes) in enumerate(sorted(groups.items())):
        gname = "nodes" if single else f"g{k}-{cores}c" + (f"{gpus}g" if gpus else "")
        idle: list[float] = []
        load: list[float] = []
        for node in nodes:
            spans = busy.get(node, [])
            for t, w in series[node]:
                kind = _classify(spans, t, settle_s)
                if kind is not None:
                    (load if kind else idle).append(w)
        if not idle or not load:
            what = "idle" if not idle else "busy"
            settle = (f" (samples within the {settle_s:g} s rate window after a job's start or end are neither)"
                      if settle_s else "")
            raise TraceError(source, None, f"group {gname} ({', '.join(nodes[:5])}) has no {what} sample{settle}; "
                             "widen the window so that it covers both jobs and idle time")
        idle.sort()
        load.sort()
        idle_w = statistics.median(idle)
        busy_w = max(_percentile(load, 0.95), idle_w)
        busy_min_w = min(max(_percentile(load, 0.05), idle_w), busy_w)
        fits.append(GroupFit(gname, tuple(nodes), cores, gpus, mem, idle_w, busy_w, busy_min_w, len(idle), len(load)))
    platform = {
        "name": name,
        "node_groups": [_group_doc(f) for f in fits],
    }
    return platform, fits


def _gpus(gres: str) -> int:
    """GPUs in a gres string such as ``gpu:a100:4(S:0-1)``.

    >>> _gpus("gpu:a100:4(S:0-1),mps:100")
    4
    """
    total = 0
    for item in (gres or "").split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def _group_doc(fit: GroupFit) -> dict:
    from wattsched.model.platform import NodePowerModel

    d = NodePowerModel()
    r = lambda w: round(w, 3)  # noqa: E731
    power = {
        "off_w": r(min(d.off_w, fit.idle_w)),
        "idle_w": r(fit.idle_w),
        "busy_w": r(fit.busy_w),
        "busy_min_w": r(fit.busy_min_w),
        "freq_levels_hz": [],
        "cap_min_w": r(min(d.cap_min_w, fit.busy_w)) or r(fit.busy_w),
        "cap_max_w": r(fit.busy_w),
    }
    group = {"name": fit.name, "count": len(fit.nodes), "cores": fit.cores}
    if fit.gpus:
        group["gpus"] = fit.gpus
    if fit.mem_mb:
        group["mem_mb"] = fit.mem_mb
    group["power"] = power
    return group


def platform_yaml(platform: dict, fits: Sequence[GroupFit], *, source: str) -> str:
    """The platform file's text: a header saying where each figure came from, then the YAML."""
    import yaml

    lines = [f"# Fitted by `wattsched platform fit` from {source}.",
             "# Idle power: median of samples of nodes without a job; busy: 95th percentile of samples of",
             "# nodes running one (busy_min_w: 5th). Nodes are named {prefix}NNNN in the simulator; the site's:"]
    for f in fits:
        lines.append(f"#   {f.name}: {', '.join(f.nodes)} ({f.idle_samples} idle, {f.busy_samples} busy samples)")
    return "\n".join(lines) + "\n" + yaml.safe_dump(platform, sort_keys=False)
