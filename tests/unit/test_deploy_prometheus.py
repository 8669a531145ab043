"""deploy/prometheus: the config and the alert rules pass promtool, and the alerts' own unit tests pass."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")

needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)"
)


def promtool(*args):
    proc = subprocess.run([PROMTOOL, *args], cwd=DEPLOY, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"promtool {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def test_config_scrapes_daemon_nodes_and_agents_and_loads_the_alerts():
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    assert config["rule_files"] == ["wattsched-alerts.yml"]
    targets = {
        job["job_name"]: [t for sc in job.get("static_configs", []) for t in sc["targets"]]
        for job in config["scrape_configs"]
    }
    assert any(t.endswith(":9817") for t in targets["wattsched"])
    assert all(t.endswith(":9100") for t in targets["node"])
    assert all(t.endswith(":9818") for t in targets["wattsched-agent"])
    assert "ipmi_exporter" in (DEPLOY / "prometheus.yml").read_text()


def test_every_alert_has_a_unit_test():
    rules = yaml.safe_load((DEPLOY / "wattsched-alerts.yml").read_text())
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert names == {"WattschedPowerAboveCap", "WattschedTelemetryStale", "WattschedDaemonDown",
                     "WattschedCyclesFailing", "WattschedDemandResponseMissed", "WattschedPlanRejected",
                     "WattschedVTNDisconnected", "WattschedVTNSilent", "WattschedEnergyBudgetOnTrack"}
    tests = yaml.safe_load((DEPLOY / "wattsched-alerts.test.yml").read_text())
    fired = {c["alertname"] for t in tests["tests"] for c in t["alert_rule_test"] if c["exp_alerts"]}
    quiet = {c["alertname"] for t in tests["tests"] for c in t["alert_rule_test"] if not c["exp_alerts"]}
    assert fired == names, "each alert must be shown to fire"
    assert quiet == names, "each alert must be shown not to fire"


@needs_promtool
def test_promtool_check_config():
    out = promtool("check", "config", "prometheus.yml")
    assert "1 rule files found" in out


@needs_promtool
def test_promtool_check_rules():
    out = promtool("check", "rules", "wattsched-alerts.yml")
    assert "9 rules found" in out


def test_every_alert_reads_metrics_the_daemon_exports():
    import re

    from prometheus_client import CollectorRegistry

    from wattsched.daemon.metrics import DaemonMetrics

    exported = set()
    for family in DaemonMetrics(CollectorRegistry()).registry.collect():
        exported.add(family.name + ("_total" if family.type == "counter" else ""))
    rules = yaml.safe_load((DEPLOY / "wattsched-alerts.yml").read_text())
    used = {name for g in rules["groups"] for r in g["rules"] for name in re.findall(r"\bwattsched_\w+", r["expr"])}
    assert used - exported == set()
    assert {"wattsched_plan_rejections_total", "wattsched_dr_vtn_connected",
            "wattsched_dr_vtn_last_contact_timestamp_seconds", "wattsched_energy_budget_projected_joules"} <= used


@needs_promtool
def test_promtool_test_rules():
    out = promtool("test", "rules", "wattsched-alerts.test.yml")
    assert "SUCCESS" in out
