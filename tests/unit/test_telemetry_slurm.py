"""Node power from Slurm's own node records (``telemetry.source: slurm``)."""

from __future__ import annotations

import math

from wattsched.config.daemon import DaemonConfig, TelemetryConfig
from wattsched.daemon.power import Telemetry
from wattsched.daemon.slurm.records import SlurmNode


def test_current_watts_are_read_and_nodes_without_energy_data_are_left_out():
    nodes = [SlurmNode("n1", "ALLOCATED", current_watts=212.5), SlurmNode("n2", "IDLE", current_watts=None),
             SlurmNode("n3", "IDLE", current_watts=math.nan), SlurmNode("n4", "IDLE", current_watts=95.0)]
    telemetry = Telemetry(TelemetryConfig(source="slurm"), clock=lambda: 1234.0)
    assert telemetry.read(nodes) == {"n1": 212.5, "n4": 95.0}
    assert telemetry.last_ok == 1234.0 and not telemetry.stale


def test_the_source_is_named_in_the_daemon_config():
    cfg = DaemonConfig.model_validate({"telemetry": {"source": "slurm", "settle_s": 0}})
    assert cfg.telemetry.source == "slurm"
    assert Telemetry(TelemetryConfig(source="none")).read([SlurmNode("n1", "IDLE", current_watts=200.0)]) == {}
