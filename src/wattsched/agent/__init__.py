"""The wattsched node agent: RAPL powercap and cpufreq through sysfs, served over authenticated HTTP.

- :mod:`wattsched.agent.sysfs` reads and writes ``/sys/class/powercap`` and ``/sys/devices/system/cpu/cpufreq``.
- :mod:`wattsched.agent.auth` signs and verifies commands with munge credentials, the Slurm-native way.
- :mod:`wattsched.agent.server` is the agent (``wattsched agent``); :mod:`wattsched.agent.client` talks to it.

A faithful fake of those trees, for tests and the test cluster's power emulator, is
:mod:`wattsched.testing.fake_sysfs`.

Submodules are imported on demand so that ``import wattsched.agent`` stays cheap.
"""

from __future__ import annotations

__all__ = ["AgentClient", "AgentError", "AgentServer", "Sysfs", "SysfsError", "Verifier", "sign"]

_LAZY = {
    "AgentClient": "wattsched.agent.client",
    "AgentError": "wattsched.agent.client",
    "AgentServer": "wattsched.agent.server",
    "Sysfs": "wattsched.agent.sysfs",
    "SysfsError": "wattsched.agent.sysfs",
    "Verifier": "wattsched.agent.auth",
    "sign": "wattsched.agent.auth",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'wattsched.agent' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
