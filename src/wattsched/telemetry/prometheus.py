"""Node power from a Prometheus server, through its HTTP API.

The query is a PromQL template that gives one series per node with its power
in watts (see :data:`PRESETS`); a label (``instance`` by default) names the
node, mapped to the Slurm node name by ``node_map``. The HTTP API is described
in prometheus/prometheus ``docs/querying/api.md``: POST form-encoded, JSON
replies whose sample values are *strings*, status codes 400 (bad query), 422
(execution error) and 503 (timeout).

Staleness. Prometheus decides whether a series is current: a target that
stops is marked stale at the next failed scrape, and an instant selector such
as ``ipmi_dcmi_power_consumption_watts`` then disappears at once, while
``rate(x[1m])`` keeps its last value until the samples leave its window.
An instant query stamps its samples with the evaluation time, so it cannot
tell how long ago the data went away; when none of the nodes asked for has a
value, :meth:`PrometheusSource.read` runs the template as a subquery over a
lookback window (``(query)[lookback:step]``) to find the last time it had one.
That is the reading's sample time, and the age grows from there.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from wattsched.errors import ConfigError, TelemetryError

log = logging.getLogger("wattsched.telemetry")

PRESETS: dict[str, str] = {
    # node_exporter's RAPL collector (package domains only; add DRAM with node_rapl_dram_joules_total).
    "rapl": "sum by (instance) (rate(node_rapl_package_joules_total[{range}]))",
    # ipmi_exporter's DCMI power reading (no labels of its own; one series per scraped BMC).
    "ipmi": "ipmi_dcmi_power_consumption_watts",
    # NVIDIA dcgm-exporter, GPUs only, summed per node.
    "dcgm": "sum by (instance) (DCGM_FI_DEV_POWER_USAGE)",
    # The wattsched node agent's RAPL energy counter.
    "agent": "sum by (instance) (rate(wattsched_agent_rapl_energy_joules_total[{range}]))",
}
"""Query templates by name. ``{range}`` is replaced by the rate window (``1m`` by default)."""

MAX_POINTS = 11_000
"""Points per series Prometheus returns at most from a range query (``web/api/v1/api.go``)."""

NodeMap = str | re.Pattern | Mapping[str, str] | None


@dataclass(frozen=True, slots=True)
class PowerReading:
    """Power of nodes at one instant.

    Attributes
    ----------
    watts
        Power by Slurm node name, only for nodes with fresh data. A node
        without data is in :attr:`missing`, never given 0 W.
    sample_time
        Epoch time of the newest sample behind the reading (``None`` when there
        is none).
    age_s
        ``read_at - sample_time`` (``inf`` without any sample).
    missing
        Nodes asked for (or seen) that have no fresh data.
    max_age_s
        Age beyond which the reading is :attr:`stale`.
    read_at
        When the reading was taken (the source's clock).
    unmatched
        Label values that ``node_map`` did not map to a node (ignored).
    errors
        Per-node errors (direct scraping: unreachable agents, counter resets).
    """

    watts: dict[str, float]
    sample_time: float | None
    age_s: float
    missing: set[str] = field(default_factory=set)
    max_age_s: float = 120.0
    read_at: float = 0.0
    unmatched: set[str] = field(default_factory=set)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def stale(self) -> bool:
        """The newest sample is older than ``max_age_s`` (or there is none)."""
        return not self.age_s <= self.max_age_s

    @property
    def total_w(self) -> float:
        """Sum over the nodes with data (the missing ones are not in it)."""
        return sum(self.watts.values())


class JobPower(NamedTuple):
    """Per-node power of a job over its run: mean, maximum and standard deviation (W)."""

    mean_w: float
    max_w: float
    std_w: float


def render_query(query: str, rate_window: str = "1m") -> str:
    """The PromQL of a preset name or template, with ``{range}`` replaced.

    Only ``{range}`` is substituted (label matchers use braces too, so this is
    not ``str.format``).

    >>> render_query("rapl")
    'sum by (instance) (rate(node_rapl_package_joules_total[1m]))'
    >>> render_query('rate(x{job="n"}[{range}])', "5m")
    'rate(x{job="n"}[5m])'
    """
    return PRESETS.get(query, query).replace("{range}", rate_window)


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}


def duration_s(text: str) -> float:
    """Seconds of a PromQL duration such as ``5s``, ``1m30s`` or ``500ms``.

    >>> duration_s("1m"), duration_s("1m30s"), duration_s("500ms")
    (60.0, 90.0, 0.5)

    Raises
    ------
    ValueError
        Not a PromQL duration (the message quotes it).
    """
    import re

    parts = re.findall(r"(\d+)(ms|[smhdwy])", text)
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ValueError(f"{text!r} is not a Prometheus duration such as 30s, 1m or 1m30s")
    return sum(int(n) * _DURATION_UNITS[u] for n, u in parts)


def reads_through_rate(query: str) -> bool:
    """The query (a preset name or template) reads power through a rate window (``{range}``), so that a sample
    at ``t`` tells the power over the window before ``t``.

    >>> reads_through_rate("rapl"), reads_through_rate("node_power_watts")
    (True, False)
    """
    return "{range}" in PRESETS.get(query, query)


def compile_node_map(node_map: NodeMap) -> Callable[[str], str | None]:
    """A function from label value to Slurm node name (``None``: not a node).

    ``node_map`` is ``None`` (the value is the name), a regex with a named
    group ``node`` (searched in the value; no match: not a node), or a dict
    (values not in it: not a node).

    >>> f = compile_node_map(r"^(?P<node>[^:]+):\\d+$")
    >>> f("cn01:9100"), f("cn01")
    ('cn01', None)
    >>> compile_node_map({"10.0.0.1:9100": "cn01"})("10.0.0.1:9100")
    'cn01'
    """
    if node_map is None:
        return lambda value: value or None
    if isinstance(node_map, Mapping):
        table = dict(node_map)
        return table.get
    try:
        pattern = re.compile(node_map)
    except re.error as exc:
        raise ConfigError(f"node_map: invalid regex {node_map!r}: {exc}") from exc
    if "node" not in pattern.groupindex:
        raise ConfigError(
            f"node_map: the regex {pattern.pattern!r} needs a named group 'node', e.g. '^(?P<node>[^:]+):\\d+$' "
            "to strip the port from an instance label"
        )

    def lookup(value: str) -> str | None:
        m = pattern.search(value)
        return m.group("node") if m and m.group("node") else None

    return lookup


def _float(value) -> float:
    """A sample value as Prometheus sends it (a string, possibly ``NaN`` or ``+Inf``)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


MAX_REPLY_BYTES = 32 * 1024 * 1024
"""Largest Prometheus reply read (one sample per node is ~200 bytes; a lookback subquery a few KiB per node)."""
MAX_ERROR_BYTES = 64 * 1024
"""Largest error reply read (for its message)."""


class PrometheusSource:
    """Node power read from Prometheus.

    Parameters
    ----------
    url
        Base URL of the Prometheus server, e.g. ``http://prometheus:9090`` (a
        path prefix such as ``/prometheus`` is kept).
    query
        A name in :data:`PRESETS` or a PromQL template giving one series per
        node in watts; ``{range}`` stands for ``rate_window``.
    node_label
        The label of the result that names the node.
    node_map
        From label value to Slurm node name: ``None`` (same), a regex with a
        named group ``node`` (``^(?P<node>[^:]+):\\d+$`` strips the port), or a
        dict. Values it does not map are ignored (listed in ``unmatched``).
    timeout_s
        HTTP timeout; Prometheus is asked to give up at the same time.
    max_age_s
        A reading whose newest sample is older is :attr:`PowerReading.stale`,
        and nodes whose own data is older are reported missing.
    rate_window
        Replaces ``{range}`` in the template.
    clock
        Returns the current epoch time (injected in tests).
    max_reply_bytes
        A larger reply is refused (:class:`TelemetryError` naming the URL and the limit) rather than read into
        the daemon's memory.
    """

    def __init__(
        self,
        url: str,
        query: str,
        node_label: str = "instance",
        node_map: NodeMap = None,
        timeout_s: float = 5,
        max_age_s: float = 120,
        *,
        rate_window: str = "1m",
        clock: Callable[[], float] = time.time,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ):
        self.url = url.rstrip("/")
        self.template = query
        self.query = render_query(query, rate_window)
        self.node_label = node_label
        self.node_map = node_map
        self.timeout_s = timeout_s
        self.max_age_s = max_age_s
        self.rate_window = rate_window
        self.clock = clock
        self.max_reply_bytes = max_reply_bytes
        self._map = compile_node_map(node_map)

    def __repr__(self) -> str:
        return f"PrometheusSource({self.url!r}, {self.query!r}, node_label={self.node_label!r})"

    # ------------------------------------------------------------------ HTTP

    def _post(self, endpoint: str, params: dict[str, str], query: str) -> dict:
        """POST form-encoded ``params`` to ``/api/v1/<endpoint>``; the ``data`` of a success reply."""
        address = f"{self.url}/api/v1/{endpoint}"
        body = urllib.parse.urlencode({**params, "timeout": f"{self.timeout_s:g}s"}).encode()
        request = urllib.request.Request(
            address, data=body, method="POST",
            headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
        )
        where = f"Prometheus at {self.url} (query {query!r})"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read(self.max_reply_bytes + 1)
        except urllib.error.HTTPError as exc:
            raise _http_error(exc, where) from exc
        except (OSError, http.client.HTTPException) as exc:  # URLError, refusals and timeouts are OSErrors
            reason = getattr(exc, "reason", exc)
            raise TelemetryError(
                f"cannot reach {where}: {reason}; check the URL and that Prometheus is up "
                "(power falls back to predictions meanwhile)"
            ) from exc
        except ValueError as exc:  # not an http(s) URL
            raise TelemetryError(f"{where}: {exc}; the URL must look like http://prometheus:9090") from exc
        if len(raw) > self.max_reply_bytes:
            raise TelemetryError(
                f"{where}: the reply from {address} is larger than {self.max_reply_bytes} bytes and was refused; "
                "narrow the query (one series per node) or raise max_reply_bytes"
            )
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise TelemetryError(f"{where}: the reply is not JSON ({raw[:100]!r}); is {self.url} Prometheus?") from exc
        if not isinstance(reply, dict) or reply.get("status") != "success":
            error = reply.get("error", "no error given") if isinstance(reply, dict) else reply
            kind = reply.get("errorType", "?") if isinstance(reply, dict) else "?"
            raise TelemetryError(f"{where} failed: {kind}: {error}")
        for warning in reply.get("warnings") or ():
            log.warning("%s: %s", where, warning)
        return reply.get("data") or {}

    # ------------------------------------------------------------------ reading

    def _subquery_window(self) -> tuple[int, int]:
        """Lookback and step (s) of the subquery that finds the age of the data."""
        step = int(max(1, min(15, self.max_age_s / 4)))
        lookback = int(max(300, 3 * self.max_age_s))
        step = max(step, math.ceil(lookback / MAX_POINTS))
        return lookback, step

    def read(self, nodes: Iterable[str] | None = None) -> PowerReading:
        """Power of ``nodes`` (all nodes in the result when ``None``).

        Nodes without a current value are in ``missing``, never given 0 W.
        When none has one, the reading's ``sample_time`` is the last time the
        query had a value for any of them (``None`` when not within the
        lookback of ``max(300 s, 3 × max_age_s)``), and ``age_s`` counts from it.

        Raises
        ------
        TelemetryError
            Prometheus is unreachable or rejected the query (the message names
            the URL and the query). A reachable server without recent data
            gives a :attr:`~PowerReading.stale` reading instead.
        """
        now = self.clock()
        data = self._post("query", {"query": self.query, "time": f"{now:.3f}"}, self.query)
        self._expect(data, "vector")
        latest, unmatched = self._latest(data.get("result") or [])
        asked = set(nodes) if nodes is not None else set(latest)
        watts: dict[str, float] = {}
        newest: float | None = None
        for node in asked & set(latest):
            ts, value = latest[node]
            newest = ts if newest is None else max(newest, ts)
            if now - ts <= self.max_age_s:
                watts[node] = value
        if newest is None and (asked or nodes is None):
            # Nothing current: find when the query last had a value for these nodes.
            lookback, step = self._subquery_window()
            wrapped = f"({self.query})[{lookback}s:{step}s]"
            data = self._post("query", {"query": wrapped, "time": f"{now:.3f}"}, self.query)
            self._expect(data, "matrix")
            before, _ = self._latest(data.get("result") or [])
            times = [before[n][0] for n in (asked if nodes is not None else before) if n in before]
            newest = max(times) if times else None
            if nodes is None:
                asked = set(before)
        # Never negative: the API rounds times to the millisecond, and clocks differ a little.
        age = max(0.0, now - newest) if newest is not None else math.inf
        return PowerReading(
            watts=watts, sample_time=newest, age_s=age, missing=asked - set(watts), max_age_s=self.max_age_s,
            read_at=now, unmatched=unmatched,
        )

    def _expect(self, data: dict, kind: str) -> None:
        got = data.get("resultType")
        if got != kind:
            raise TelemetryError(
                f"Prometheus at {self.url}: query {self.query!r} must give an instant vector (one series per "
                f"node), got a {got}"
            )

    def _latest(self, result: list[dict]) -> tuple[dict[str, tuple[float, float]], set[str]]:
        """Per node, ``(time, watts)`` of the newest finite point; series mapping to one node are summed."""
        per_node: dict[str, list[tuple[float, float]]] = {}
        unmatched: set[str] = set()
        for series in result:
            value = (series.get("metric") or {}).get(self.node_label, "")
            node = self._map(value) if value else None
            if node is None:
                unmatched.add(value)
                continue
            points = series.get("values") or ([series["value"]] if series.get("value") else [])
            for ts, v in reversed(points):
                w = _float(v)
                if math.isfinite(w):
                    per_node.setdefault(node, []).append((float(ts), w))
                    break
        # A node's age is that of its oldest series: a part that stopped reporting makes the sum stale.
        latest = {n: (min(ts for ts, _ in pts), sum(w for _, w in pts)) for n, pts in per_node.items()}
        return latest, unmatched

    def job_power(
        self, nodes: Iterable[str], start: float, end: float, step_s: float = 15
    ) -> JobPower | None:
        """Per-node power of a job that ran on ``nodes`` from ``start`` to ``end`` (epoch s).

        At each step the power of the job's nodes is averaged (steps where a
        node has no data are skipped: a partial average would be biased);
        returns the mean over time of that average, its maximum and its
        standard deviation, or ``None`` without any complete step. The step
        grows if needed to stay within :data:`MAX_POINTS` per series.
        """
        wanted = set(nodes)
        if not wanted or not end > start:
            return None
        step = max(step_s, math.ceil((end - start) / MAX_POINTS))
        params = {"query": self.query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        data = self._post("query_range", params, self.query)
        self._expect(data, "matrix")
        at: dict[float, dict[str, float]] = {}
        for series in data.get("result") or ():
            value = (series.get("metric") or {}).get(self.node_label, "")
            node = self._map(value) if value else None
            if node not in wanted:
                continue
            for ts, v in series.get("values") or ():
                w = _float(v)
                if math.isfinite(w):
                    slot = at.setdefault(round(float(ts), 3), {})
                    slot[node] = slot.get(node, 0.0) + w
        samples = [sum(by_node.values()) / len(wanted) for _, by_node in sorted(at.items())
                   if len(by_node) == len(wanted)]
        if not samples:
            return None
        mean = sum(samples) / len(samples)
        std = math.sqrt(sum((x - mean) ** 2 for x in samples) / len(samples))
        return JobPower(mean, max(samples), std)


    def node_series(self, start: float, end: float, step_s: float = 15) -> dict[str, list[tuple[float, float]]]:
        """Power of every node the query gives from ``start`` to ``end`` (epoch s): ``(time, watts)`` by node.

        Series that map to the same node are summed at each time; points that
        are not finite are left out. The step grows if needed to stay within
        :data:`MAX_POINTS` per series.
        """
        if not end > start:
            return {}
        step = max(step_s, math.ceil((end - start) / MAX_POINTS))
        params = {"query": self.query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        data = self._post("query_range", params, self.query)
        self._expect(data, "matrix")
        per_node: dict[str, dict[float, float]] = {}
        for series in data.get("result") or ():
            value = (series.get("metric") or {}).get(self.node_label, "")
            node = self._map(value) if value else None
            if node is None:
                continue
            slots = per_node.setdefault(node, {})
            for ts, v in series.get("values") or ():
                w = _float(v)
                if math.isfinite(w):
                    slots[float(ts)] = slots.get(float(ts), 0.0) + w
        return {node: sorted(slots.items()) for node, slots in per_node.items()}


_HINTS = {
    400: "the query does not parse or a parameter is wrong; try it in the Prometheus UI",
    422: "the query failed to execute; try it in the Prometheus UI",
    503: "the query timed out or was aborted; raise timeout_s or simplify the query",
    404: "no API at this address; the URL must be the Prometheus base URL, e.g. http://host:9090",
}


def _http_error(exc: urllib.error.HTTPError, where: str) -> TelemetryError:
    try:
        reply = json.loads(exc.read(MAX_ERROR_BYTES))
        detail = f"{reply.get('errorType', '?')}: {reply.get('error', '')}"
    except (ValueError, AttributeError, OSError):
        detail = str(exc.reason)
    hint = _HINTS.get(exc.code, "")
    return TelemetryError(f"{where} failed with HTTP {exc.code}: {detail}" + (f"; {hint}" if hint else ""))
