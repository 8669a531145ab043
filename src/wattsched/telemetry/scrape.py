"""Node power scraped straight from the wattsched agents' ``/metrics``, without a Prometheus server.

An agent exports a RAPL energy counter (``wattsched_agent_rapl_energy_joules_total``,
one series per RAPL zone). Power is the increase of the counter between two
scrapes divided by the time between them, so the first :meth:`AgentScraper.read`
only takes a baseline. A counter that goes down was reset (the agent
restarted) unless ``wrap_j`` says it wraps (a raw RAPL counter wraps at
``max_energy_range_uj``); a reset interval gives no power for that node.
"""

from __future__ import annotations

import math
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from prometheus_client.parser import text_string_to_metric_families

from wattsched.errors import TelemetryError
from wattsched.telemetry.prometheus import PowerReading

ENERGY_METRIC = "wattsched_agent_rapl_energy_joules_total"

Counters = dict[tuple[tuple[str, str], ...], tuple[float, float]]
"""Counter series by their sorted labels: ``(value, time)``."""


def parse_counters(text: str, metric: str, now: float) -> Counters:
    """Samples named ``metric`` in an exposition, by labels; ``now`` stamps samples without a timestamp.

    >>> parse_counters('# TYPE e counter\\ne_total{zone="p0"} 12.5\\n', "e_total", 100.0)
    {(('zone', 'p0'),): (12.5, 100.0)}
    """
    out: Counters = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != metric:
                continue
            ts = float(sample.timestamp) if sample.timestamp is not None else now
            out[tuple(sorted(sample.labels.items()))] = (float(sample.value), ts)
    return out


def power_from_counters(prev: Counters, cur: Counters, wrap_j: float | None = None) -> float | None:
    """Watts between two readings of the same counters (summed over series); ``None`` after a reset.

    >>> power_from_counters({(): (100.0, 0.0)}, {(): (1100.0, 10.0)})
    100.0
    >>> power_from_counters({(): (900.0, 0.0)}, {(): (100.0, 10.0)}) is None  # reset
    True
    >>> power_from_counters({(): (900.0, 0.0)}, {(): (100.0, 10.0)}, wrap_j=1000.0)  # wrapped at 1000 J
    20.0
    """
    if not cur or set(prev) != set(cur):
        return None  # a series appeared or vanished: the sum is not comparable
    watts = 0.0
    for key, (value, ts) in cur.items():
        old, old_ts = prev[key]
        dt = ts - old_ts
        if not dt > 0:
            return None
        delta = value - old
        if delta < 0:
            if not wrap_j:
                return None
            delta += wrap_j
        watts += delta / dt
    return watts if math.isfinite(watts) else None


class AgentScraper:
    """Power of nodes scraped from their agents.

    Parameters
    ----------
    targets
        Agent ``/metrics`` URL by Slurm node name, e.g. ``{"cn01": "http://cn01:9818/metrics"}``.
    metric
        The energy counter sample name.
    timeout_s
        HTTP timeout of one scrape.
    max_age_s
        Age beyond which a reading is stale.
    wrap_j
        Range of the counter in joules if it wraps (a raw RAPL counter);
        ``None``: a decrease is a reset.
    clock
        Returns the current epoch time (injected in tests).
    max_workers
        Scrapes run in parallel on this many threads.
    max_reply_bytes
        A larger answer is refused (that node is missing, the error names the URL and the limit).
    """

    def __init__(
        self,
        targets: Mapping[str, str],
        metric: str = ENERGY_METRIC,
        timeout_s: float = 5,
        max_age_s: float = 120,
        wrap_j: float | None = None,
        *,
        clock: Callable[[], float] = time.time,
        max_workers: int = 16,
        max_reply_bytes: int = 1024 * 1024,
    ):
        self.targets = dict(targets)
        self.metric = metric
        self.timeout_s = timeout_s
        self.max_age_s = max_age_s
        self.wrap_j = wrap_j
        self.clock = clock
        self.max_workers = max_workers
        self.max_reply_bytes = max_reply_bytes
        self._last: dict[str, Counters] = {}

    def __repr__(self) -> str:
        return f"AgentScraper({len(self.targets)} targets, metric={self.metric!r})"

    def _scrape(self, node: str) -> Counters:
        url = self.targets[node]
        request = urllib.request.Request(url, headers={"Accept": "text/plain;version=0.0.4"})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            raw = response.read(self.max_reply_bytes + 1)
        if len(raw) > self.max_reply_bytes:
            raise TelemetryError(f"the answer is larger than {self.max_reply_bytes} bytes and was refused "
                                 "(an agent's /metrics is a few KiB)")  # read() puts the URL in front
        text = raw.decode("utf-8", "replace")
        counters = parse_counters(text, self.metric, self.clock())
        if not counters:
            raise TelemetryError(f"{url} exports no {self.metric}")
        return counters

    def read(self, nodes: Iterable[str] | None = None) -> PowerReading:
        """Scrape ``nodes`` (all targets when ``None``) and return their power since the previous read.

        A node is missing when it has no target, its agent cannot be reached
        (reason in ``errors``), it has no previous reading yet, or its counter
        was reset.

        Raises
        ------
        TelemetryError
            No agent could be scraped at all.
        """
        asked = set(nodes) if nodes is not None else set(self.targets)
        todo = sorted(n for n in asked if n in self.targets)
        errors: dict[str, str] = {n: "no agent target configured" for n in asked - set(todo)}
        scraped: dict[str, Counters] = {}
        if todo:
            with ThreadPoolExecutor(max_workers=max(1, min(self.max_workers, len(todo)))) as pool:
                futures = {n: pool.submit(self._scrape, n) for n in todo}
            for node, future in futures.items():
                try:
                    scraped[node] = future.result()
                except Exception as exc:  # unreachable, bad reply: that node is missing, the others go on
                    errors[node] = f"{self.targets[node]}: {getattr(exc, 'reason', exc)}"
        if todo and not scraped:
            shown = "; ".join(errors[n] for n in todo[:3]) + (" ..." if len(todo) > 3 else "")
            raise TelemetryError(f"no wattsched agent could be scraped ({shown}); check that the agents run")
        now = self.clock()
        watts: dict[str, float] = {}
        newest: float | None = None
        for node, cur in scraped.items():
            prev = self._last.get(node)
            self._last[node] = cur
            if prev is None:
                errors[node] = "first reading (baseline only)"
                continue
            w = power_from_counters(prev, cur, self.wrap_j)
            if w is None:
                errors[node] = "counter reset or changed; new baseline taken"
                continue
            watts[node] = w
            ts = max(t for _, t in cur.values())
            newest = ts if newest is None else max(newest, ts)
        age = max(0.0, now - newest) if newest is not None else math.inf
        return PowerReading(
            watts=watts, sample_time=newest, age_s=age, missing=asked - set(watts), max_age_s=self.max_age_s,
            read_at=now, errors=errors,
        )
