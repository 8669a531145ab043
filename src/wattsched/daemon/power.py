"""The daemon's measuring half: node power telemetry (actuators are in :mod:`wattsched.daemon.actuators`).

Telemetry failures never stop a cycle: a stale or unreachable source is
reported (``wattsched_telemetry_stale``, ``wattsched_telemetry_age_seconds``)
and the daemon decides on predictions. A node without data is left out of the
measured set (it is never read as zero); its predicted power stands in for it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

from wattsched.config.daemon import TelemetryConfig
from wattsched.daemon.actuators import agent_url
from wattsched.daemon.slurm.records import SlurmNode
from wattsched.errors import TelemetryError, WattschedError

log = logging.getLogger("wattsched.daemon")


class Telemetry:
    """Reads node power each cycle from the configured source."""

    def __init__(self, cfg: TelemetryConfig, metrics=None, clock=time.time):
        self.cfg = cfg
        self.metrics = metrics
        self.clock = clock
        self.source = None
        self.last_ok: float | None = None
        self.stale = False
        if cfg.source == "prometheus":
            from wattsched.telemetry.prometheus import PRESETS, PrometheusSource

            query = PRESETS.get(cfg.query, cfg.query)
            self.source = PrometheusSource(cfg.url, query, node_label=cfg.node_label, node_map=cfg.node_map,
                                           timeout_s=cfg.timeout_s, max_age_s=cfg.max_age_s)

    def read(self, nodes: Sequence[SlurmNode]) -> dict[str, float]:
        """Watts per node name for the nodes with fresh data; empty when the source is stale or down."""
        if self.cfg.source == "none":
            return {}
        names = [n.name for n in nodes]
        if self.cfg.source == "slurm":  # read with the node records: as fresh as Slurm's energy polling
            self.last_ok = self.clock()
            return {n.name: n.current_watts for n in nodes
                    if n.current_watts is not None and math.isfinite(n.current_watts)}
        try:
            if self.cfg.source == "agents":
                if self.source is None or set(self.source.targets) != set(names):
                    from wattsched.telemetry.scrape import AgentScraper

                    self.source = AgentScraper({n.name: agent_url(self.cfg.agent_url, n) + "/metrics" for n in nodes},
                                               timeout_s=self.cfg.timeout_s)
            reading = self.source.read(names)
        except (TelemetryError, WattschedError, OSError) as exc:
            self._mark_stale(f"telemetry unavailable: {exc}")
            return {}
        age = reading.age_s if reading.age_s is not None else 0.0
        if getattr(reading, "stale", False) or age > self.cfg.max_age_s:
            self._mark_stale(f"telemetry {age:.0f} s old (max_age_s {self.cfg.max_age_s:g})", age)
            return {}
        wanted = set(names)
        watts = {n: w for n, w in reading.watts.items() if n in wanted and w is not None and math.isfinite(w)}
        self.last_ok = self.clock()
        if self.stale:
            log.info("telemetry is fresh again (%d of %d nodes)", len(watts), len(names))
        self.stale = False
        if self.metrics is not None:
            self.metrics.telemetry_age.set(age)
            self.metrics.telemetry_stale.set(0)
        missing = len(names) - len(watts)
        if missing:
            log.debug("telemetry: %d nodes without data use predictions", missing)
        return watts

    def _mark_stale(self, why: str, age: float | None = None) -> None:
        if not self.stale:
            log.warning("%s; deciding on predictions", why)
        self.stale = True
        if self.metrics is not None:
            if age is None:
                age = self.clock() - self.last_ok if self.last_ok is not None else float("inf")
            self.metrics.telemetry_age.set(age)
            self.metrics.telemetry_stale.set(1)

    def job_power(self, nodes: Sequence[str], start: float, end: float):
        """Per-node (mean, max, std) of a finished job from Prometheus, or ``None``.

        The first ``settle_s`` of the run are left out (a rate over a window that
        still covers the idle node before the job reads low); a job shorter than
        1.5 × ``settle_s`` gets no measurement.
        """
        if self.cfg.source != "prometheus" or self.source is None:
            return None
        # skip the start of the run, where rate windows still include the idle node
        start += self.cfg.settle_s
        if end - start < max(1.0, self.cfg.settle_s / 2):
            return None
        try:
            per_node = self.source.job_power(list(nodes), start, end)
        except (TelemetryError, WattschedError, OSError) as exc:
            log.warning("job power history: %s", exc)
            return None
        if per_node is None:
            return None
        return (per_node.mean_w, per_node.max_w, per_node.std_w)
