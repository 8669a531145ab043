"""Node actuators: one protocol for the node agent, IPMI DCMI and dry-run.

A :class:`NodeActuator` sets a node's power cap or CPU frequency ceiling and
reads back what the node holds now. Failures come back as data
(:class:`Outcome` with ``ok=False`` and a reason); nothing here raises for a
node that refuses or cannot be reached, so the control loop audits and counts
every failure the same way, whichever actuator is configured (Ray's
``ICloudInstanceProvider`` reports errors the same way).

Values follow :mod:`wattsched.model.plan`: a cap of ``None`` means uncapped (the
hardware maximum), a frequency of ``None`` the nominal (highest) frequency.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from wattsched.config.daemon import ActuatorConfig, TelemetryConfig
from wattsched.daemon.slurm.records import SlurmNode
from wattsched.errors import ConfigError, WattschedError

log = logging.getLogger("wattsched.daemon")

CAP_TOLERANCE_W = 1.0
"""Observed and desired caps closer than this are the same (RAPL stores µW, BMCs whole watts)."""
FREQ_TOLERANCE_HZ = 1e6
"""Observed and desired frequency ceilings closer than this are the same (cpufreq stores kHz)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one request to a node.

    ``applied`` is the value the node holds afterwards as it reported it
    (``None``: uncapped or nominal), which may differ from the request when the
    hardware rounds; reconciliation compares later readings with it.
    """

    ok: bool
    detail: str
    applied: float | None = None

    @classmethod
    def failed(cls, detail: str) -> Outcome:
        return cls(False, detail)


@dataclass(frozen=True, slots=True)
class NodeSetting:
    """A node's cap and frequency ceiling as read back from it; ``error`` says why a reading is missing.

    ``cap_w`` is ``None`` when the node is uncapped (its limit is the hardware
    maximum); ``freq_hz`` is ``None`` at the nominal frequency. ``has_cap`` and
    ``has_freq`` say whether the actuator could read each at all.
    """

    cap_w: float | None = None
    freq_hz: float | None = None
    has_cap: bool = False
    has_freq: bool = False
    error: str = ""
    counters: tuple[tuple[int, int], ...] = ()
    """RAPL energy counters of the node's packages as ``(energy_uj, max_energy_range_uj)``, when the actuator
    reads them (the agent does): the daemon integrates energy budgets from them."""


@runtime_checkable
class NodeActuator(Protocol):
    """Sets and reads one node's power cap and CPU frequency ceiling; failures are returned, never raised."""

    name: str

    def set_cap(self, node: SlurmNode, cap_w: float | None, request_id: str) -> Outcome:
        """Set ``node``'s cap to ``cap_w`` watts (``None`` lifts it)."""

    def set_freq(self, node: SlurmNode, freq_hz: float | None, request_id: str) -> Outcome:
        """Set ``node``'s frequency ceiling (``None`` restores the nominal one)."""

    def observe(self, node: SlurmNode) -> NodeSetting:
        """What ``node`` holds now."""


def agent_url(template: str, node: SlurmNode) -> str:
    return template.format(node=node.name, address=node.address or node.name)


def same_cap(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) < CAP_TOLERANCE_W


def same_freq(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) < FREQ_TOLERANCE_HZ


def _agent_setting(state: dict) -> NodeSetting:
    """Cap and frequency out of an agent's ``/v1/state`` answer."""
    packages = state.get("packages") or []
    cap = None
    has_cap = False
    limits = [p.get("power_limit_w") for p in packages]
    maxima = [p.get("max_power_w") for p in packages]
    if packages and None not in limits:
        has_cap = True
        total = float(sum(limits))
        full = float(sum(maxima)) if None not in maxima and all(m > 0 for m in maxima) else None
        cap = None if full is not None and total >= full - CAP_TOLERANCE_W else total
    freq = state.get("freq")
    hz, has_freq = None, False
    if isinstance(freq, dict) and freq.get("scaling_max_freq_hz") is not None:
        has_freq = True
        hz = float(freq["scaling_max_freq_hz"])
        top = freq.get("max_freq_hz")
        if top is not None and hz >= float(top) - FREQ_TOLERANCE_HZ:
            hz = None
    errors = "; ".join(state.get("errors") or [])
    counters = tuple((p.get("energy_uj"), p.get("max_energy_range_uj")) for p in packages)
    if not counters or any(not isinstance(e, int) or not isinstance(r, int) or r <= 0 for e, r in counters):
        counters = ()
    return NodeSetting(cap, hz, has_cap, has_freq, errors, counters)


class AgentActuator:
    """The wattsched node agent (RAPL powercap and cpufreq), commands signed with munge."""

    name = "agent"

    def __init__(self, url_template: str, munge_socket=None, timeout_s: float = 10.0, rapl_offset_w: float = 0.0):
        self.url_template = url_template
        self.munge_socket = munge_socket
        self.timeout_s = timeout_s
        self.rapl_offset_w = rapl_offset_w
        """Node power outside the RAPL packages: a node cap less this is the packages' limit."""

    def _client(self, node: SlurmNode):
        from wattsched.agent.client import AgentClient

        return AgentClient(agent_url(self.url_template, node), node.name, munge_socket=self.munge_socket,
                           timeout_s=self.timeout_s)

    def _post(self, node: SlurmNode, what: str, send) -> Outcome:
        try:
            answer = send(self._client(node))
        except WattschedError as exc:  # unreachable agent, munged down
            return Outcome.failed(f"{node.name}: {what}: {exc}")
        if not answer.get("ok", False):
            return Outcome.failed(f"{node.name}: {what} refused by the agent: {answer.get('error', answer)}")
        setting = self._node_setting(answer.get("state") or {})
        applied = setting.cap_w if what == "set cap" else setting.freq_hz
        return Outcome(True, f"{what} via agent", applied)

    def _node_setting(self, state: dict) -> NodeSetting:
        setting = _agent_setting(state)
        if self.rapl_offset_w and setting.cap_w is not None:
            setting = dataclasses.replace(setting, cap_w=setting.cap_w + self.rapl_offset_w)
        return setting

    def set_cap(self, node: SlurmNode, cap_w: float | None, request_id: str) -> Outcome:
        if cap_w is not None and self.rapl_offset_w:
            if cap_w <= self.rapl_offset_w:
                return Outcome.failed(f"{node.name}: set cap: {cap_w:g} W leaves nothing for the CPU packages "
                                      f"after the node's {self.rapl_offset_w:g} W outside them "
                                      "(actuator.rapl_offset_w)")
            package_w = cap_w - self.rapl_offset_w
            return self._post(node, "set cap", lambda c: c.set_cap(package_w, request_id=request_id))
        return self._post(node, "set cap", lambda c: c.set_cap(cap_w, request_id=request_id))

    def set_freq(self, node: SlurmNode, freq_hz: float | None, request_id: str) -> Outcome:
        return self._post(node, "set frequency", lambda c: c.set_freq(freq_hz, request_id=request_id))

    def observe(self, node: SlurmNode) -> NodeSetting:
        try:
            return self._node_setting(self._client(node).state())
        except WattschedError as exc:
            return NodeSetting(error=f"{node.name}: {exc}")


class IpmiNodeActuator:
    """IPMI DCMI power limits through ``ipmitool`` (caps only: DCMI has no frequency control)."""

    name = "ipmi"

    def __init__(self, ipmi):
        self.ipmi = ipmi

    def set_cap(self, node: SlurmNode, cap_w: float | None, request_id: str) -> Outcome:
        try:
            if cap_w is None:
                self.ipmi.remove_limit(node.name)
                return Outcome(True, "limit deactivated via IPMI", None)
            limit = self.ipmi.set_limit(node.name, cap_w)
        except (WattschedError, ValueError) as exc:
            return Outcome.failed(f"{node.name}: set cap: {exc}")
        return Outcome(True, f"{limit} W via IPMI DCMI", float(limit))

    def set_freq(self, node: SlurmNode, freq_hz: float | None, request_id: str) -> Outcome:
        return Outcome.failed(f"{node.name}: actuator 'ipmi' cannot set CPU frequencies (use the agent)")

    def observe(self, node: SlurmNode) -> NodeSetting:
        try:
            limit = self.ipmi.get_limit(node.name)
        except (WattschedError, ValueError) as exc:
            return NodeSetting(error=f"{node.name}: {exc}")
        return NodeSetting(float(limit.limit_w) if limit.active else None, None, True, False)


class NoActuator:
    """No actuator configured: every request is refused with that reason, nothing is read."""

    name = "none"

    def set_cap(self, node: SlurmNode, cap_w: float | None, request_id: str) -> Outcome:
        return Outcome.failed("no node actuator configured (actuator.kind: none)")

    def set_freq(self, node: SlurmNode, freq_hz: float | None, request_id: str) -> Outcome:
        return Outcome.failed("no node actuator configured (actuator.kind: none)")

    def observe(self, node: SlurmNode) -> NodeSetting:
        return NodeSetting()


class DryRunActuator:
    """Reads through the configured actuator, applies nothing (``dry_run: true``)."""

    name = "dry-run"

    def __init__(self, inner: NodeActuator):
        self.inner = inner

    def set_cap(self, node: SlurmNode, cap_w: float | None, request_id: str) -> Outcome:
        return Outcome(True, "dry-run: not applied", cap_w)

    def set_freq(self, node: SlurmNode, freq_hz: float | None, request_id: str) -> Outcome:
        return Outcome(True, "dry-run: not applied", freq_hz)

    def observe(self, node: SlurmNode) -> NodeSetting:
        return self.inner.observe(node)


def make_actuator(cfg: ActuatorConfig, telemetry: TelemetryConfig, dry_run: bool = False,
                  backend=None, platform_offset_w: float = 0.0) -> NodeActuator:
    """The actuator ``cfg`` names, wrapped for dry-run if asked (``sim`` is the simulated cluster ``backend``'s)."""
    actuator: NodeActuator
    match cfg.kind:
        case "sim":
            if not hasattr(backend, "node_actuator"):
                raise ConfigError("actuator.kind: sim needs slurm.backend: sim (the simulated cluster)")
            actuator = backend.node_actuator()
        case "agent":
            offset = platform_offset_w if cfg.rapl_offset_w is None else cfg.rapl_offset_w
            actuator = AgentActuator(telemetry.agent_url, cfg.munge_socket, cfg.timeout_s, offset)
        case "ipmi":
            from wattsched.daemon.ipmi import IpmiActuator, IpmiCredentials

            actuator = IpmiNodeActuator(IpmiActuator(IpmiCredentials.load(cfg.ipmi_credentials),
                                                     timeout_s=cfg.timeout_s))
        case _:
            actuator = NoActuator()
    return DryRunActuator(actuator) if dry_run else actuator
