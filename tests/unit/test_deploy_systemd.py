"""The systemd units in deploy/systemd: their sandboxing directives, and systemd's own check of them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SYSTEMD = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
DAEMON = SYSTEMD / "wattsched.service"
AGENT = SYSTEMD / "wattsched-agent.service"


def service(path: Path) -> dict[str, list[str]]:
    """The [Service] section: each key with its values in order (a key may repeat)."""
    out: dict[str, list[str]] = {}
    section = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        if section == "Service":
            out.setdefault(key.strip(), []).append(value.strip())
    return out


COMMON = {
    "CapabilityBoundingSet": "",
    "SystemCallFilter": "@system-service",
    "PrivateDevices": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectClock": "yes",
    "RestrictNamespaces": "yes",
    "ProtectHome": "yes",
    "ProtectSystem": "strict",
    "NoNewPrivileges": "yes",
    "MemoryDenyWriteExecute": "yes",
}


@pytest.mark.parametrize("unit", [DAEMON, AGENT], ids=lambda p: p.name)
def test_units_are_sandboxed(unit):
    s = service(unit)
    assert {k: s.get(k, [None])[-1] for k in COMMON} == COMMON


def test_daemon_state_is_private_but_the_heartbeat_reachable():
    s = service(DAEMON)
    assert s["UMask"] == ["0077"]
    # 0711: slurmctld's SlurmUser opens the heartbeat (0644) by name; state.db is 0600 anyway
    assert s["StateDirectoryMode"] == ["0711"]
    assert s["ReadWritePaths"] == ["/var/lib/wattsched"]


def test_agent_writes_only_powercap_and_cpufreq():
    paths = " ".join(service(AGENT)["ReadWritePaths"]).split()
    assert sorted(paths) == ["/sys/devices/system/cpu/cpufreq", "/sys/devices/virtual/powercap"]
    # not /sys/devices/system/cpu as a whole: cpuN/online takes CPUs offline
    assert "/sys/devices/system/cpu" not in paths


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("unit", [DAEMON, AGENT], ids=lambda p: p.name)
def test_systemd_analyze_verify_finds_nothing(unit, tmp_path):
    # verify insists that ExecStart exists: point it at a binary that does
    copy = tmp_path / unit.name
    copy.write_text(unit.read_text().replace("/usr/local/bin/wattsched", shutil.which("true")))
    proc = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60)
    # an unknown key or a bad value is only a warning on stderr, with status 0
    assert proc.returncode == 0 and str(copy) not in proc.stderr, proc.stderr
    assert "Unknown" not in proc.stderr and "Failed to parse" not in proc.stderr, proc.stderr
