"""Telemetry adapters: node power from Prometheus or straight from the agents, and the power forecast.

:mod:`~wattsched.telemetry.forecast` is pure (no I/O); the readers do HTTP and
raise :class:`~wattsched.errors.TelemetryError` when they cannot read, so that
the daemon falls back to predicted power.
"""

from wattsched.telemetry.forecast import HORIZONS, Forecast, forecast
from wattsched.telemetry.prometheus import PRESETS, JobPower, PowerReading, PrometheusSource, render_query
from wattsched.telemetry.scrape import AgentScraper

__all__ = [
    "HORIZONS", "PRESETS", "AgentScraper", "Forecast", "JobPower", "PowerReading", "PrometheusSource",
    "forecast", "render_query",
]
