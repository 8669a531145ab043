"""The user documentation names what the code has: policies, failure stages, metrics, backends."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from wattsched.daemon.metrics import DaemonMetrics
from wattsched.policies import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LOOP = ROOT / "src" / "wattsched" / "daemon" / "loop.py"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else None]


def _table_names(section: str, header: str) -> set[str]:
    """The backticked names in the first column of the section's table whose header row starts with ``header``."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    names = set()
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        names |= set(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


# --------------------------------------------------------------------------- policies


def test_every_registered_policy_is_in_the_built_in_table_of_policies_md():
    text = (DOCS / "policies.md").read_text()
    table = _table_names(_section(text, "## 3. Built-in policies"), "| name |")
    assert set(REGISTRY.builtin) <= table, f"missing from docs/policies.md §3: {set(REGISTRY.builtin) - table}"
    assert table <= set(REGISTRY.builtin), f"not registered: {table - set(REGISTRY.builtin)}"


def test_the_registry_section_lists_every_policy_in_registry_order():
    registry = _section((DOCS / "policies.md").read_text(), "## 2. The registry")
    row = next(line for line in registry.splitlines() if line.startswith("| `available()`"))
    assert re.findall(r"`([^`(]+)`", row.split("|")[2]) == list(REGISTRY.builtin)
    for line in registry.splitlines():
        if "unknown policy 'nope'; available:" in line:
            assert line.split("available: ", 1)[1].split(", ") == list(REGISTRY.builtin)


def test_policies_md_does_not_call_the_daemon_unreleased():
    assert "not part of this release" not in (DOCS / "policies.md").read_text()


# --------------------------------------------------------------------------- operations.md


def _scrape(registry: CollectorRegistry) -> set[str]:
    """Every sample name a scrape of ``registry`` can show (counters' ``_total``, histograms' parts, ...)."""
    text = generate_latest(registry).decode()
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)", text, re.M):
        names.add(name)
        names |= {"counter": {f"{name}_total"}, "info": {f"{name}_info"},
                  "histogram": {f"{name}_bucket", f"{name}_sum", f"{name}_count"}}.get(kind, set())
    names |= set(re.findall(r"^([a-zA-Z_:][\w:]*)[{ ]", text, re.M))
    return names


@pytest.fixture(scope="module")
def exported() -> set[str]:
    """What the daemon's metrics module and the node agent export, from real registries."""
    from wattsched.agent.auth import Verifier
    from wattsched.agent.server import AgentServer
    from wattsched.agent.sysfs import Sysfs

    names = _scrape(DaemonMetrics().registry)
    with AgentServer(Sysfs("/nonexistent-sysfs"), Verifier({0}, node="node1"), port=0,
                     registry=CollectorRegistry()) as agent:
        names |= _scrape(agent.registry)
    return names


def test_every_metric_operations_md_names_is_exported(exported):
    text = (DOCS / "operations.md").read_text()
    mentioned = set(re.findall(r"\bwattsched_\w+", text))
    assert len(mentioned) > 30
    missing = {m for m in mentioned if m not in exported
               and not (m.endswith("_") and any(e.startswith(m) for e in exported))}  # `wattsched_agent_*`
    assert not missing, f"docs/operations.md names metrics nothing defines: {sorted(missing)}"


def _code_stages() -> set[str]:
    source = LOOP.read_text()
    stages = set(re.findall(r"\.stage = \"(\w+)\"", source))
    stages |= set(re.findall(r"getattr\(exc, \"stage\", \"(\w+)\"\)", source))
    registry = DaemonMetrics().registry
    stages |= {s.labels["stage"] for fam in registry.collect() if fam.name == "wattsched_cycle_failures"
               for s in fam.samples if "stage" in s.labels}
    return stages


def test_cycle_failure_stages_in_operations_md_are_those_of_the_code():
    text = (DOCS / "operations.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `wattsched_cycle_failures_total{stage}`"))
    documented = set(re.findall(r"`(\w+)` \(", row.split("|")[2]))
    code = _code_stages()
    assert {"observe", "decide"} <= code
    assert documented == code, f"documented {sorted(documented)}, in the code {sorted(code)}"


# --------------------------------------------------------------------------- cli.md


def _daemon_backends() -> list[str]:
    from wattsched.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    daemon = sub.choices["daemon"]
    return list(next(a for a in daemon._actions if "--backend" in a.option_strings).choices)


def test_cli_md_synopsis_has_every_daemon_backend():
    backends = "|".join(_daemon_backends())
    assert "rest" in backends
    text = (DOCS / "cli.md").read_text()
    lines = [line for line in text.splitlines() if line.strip().startswith("wattsched daemon [")]
    assert len(lines) >= 2 and all(f"[--backend {backends}]" in line for line in lines), lines
    assert f"`--backend {backends}`" in text


def test_the_prometheus_rule_tests_use_real_stages():
    used = set()
    for path in (ROOT / "deploy").rglob("*.yml"):
        used |= set(re.findall(r"wattsched_cycle_failures_total\{stage=\"(\w+)\"", path.read_text()))
    assert used and used <= _code_stages(), f"stages that do not exist: {sorted(used - _code_stages())}"
