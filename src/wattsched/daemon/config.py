"""The daemon's configuration: ``wattsched daemon --config wattsched.yaml``.

Validated with pydantic like every wattsched config: unknown keys are rejected and
every error names the file, the key and its line. ``wattsched check-config FILE``
recognises a daemon config by its ``kind: daemon`` key or its ``slurm`` block.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from wattsched.config import CapValue, StrictModel, field_problems, parse_cap_value, register_config_kind


class SlurmConfig(StrictModel):
    """How the daemon reaches Slurm."""

    doc_name: ClassVar[str] = "slurm block"

    backend: Literal["cli", "pyslurm", "sim"] = Field(
        default="cli",
        description=(
            "`cli`: run `squeue`, `sinfo` and `scontrol` (every Slurm version; JSON where the version "
            "has it, plain text otherwise). `pyslurm`: the pyslurm library (extra `[pyslurm]`, Slurm "
            "25.11 only). `sim`: the built-in simulated cluster (see `sim`), no Slurm needed. "
            "Default: `cli`."
        ),
    )
    conf: Path | None = Field(
        default=None,
        description=(
            "slurm.conf to use, passed to Slurm commands as `SLURM_CONF`. Default: none (Slurm's own "
            "default, usually `/etc/slurm/slurm.conf`). Example: `/etc/slurm/slurm.conf`."
        ),
    )
    bin_dir: Path | None = Field(
        default=None,
        description="Directory of the Slurm commands. Default: none (found on `PATH`). Example: `/usr/bin`.",
    )
    output: Literal["auto", "json", "text"] = Field(
        default="auto",
        description=(
            "How to read Slurm's state: `json` (`squeue --json`; nodes from `sinfo --json` on 22.05 and "
            "`scontrol show nodes --json` from 23.02), `text` (`scontrol -o show jobs|nodes`, for builds "
            "without JSON support), or `auto` (JSON, falling back to text if JSON fails). Default: `auto`."
        ),
    )
    timeout_s: float = Field(
        default=30.0, gt=0, description="Time limit of one Slurm command, in seconds. Default: `30`."
    )
    retries: int = Field(
        default=2,
        ge=0,
        description=(
            "Retries of a Slurm command that failed to reach slurmctld or timed out, with exponential "
            "backoff from `retry_backoff_s`. Commands Slurm refused (bad job id, permission) are not "
            "retried. Default: `2`."
        ),
    )
    retry_backoff_s: float = Field(
        default=1.0, ge=0, description="First retry delay in seconds; doubles at each retry. Default: `1`."
    )


class SimBackendConfig(StrictModel):
    """The simulated cluster of ``slurm.backend: sim``."""

    doc_name: ClassVar[str] = "sim block"

    trace: str = Field(
        default="bundled",
        description=(
            "Trace replayed as the cluster's job submissions: an SWF file or job table, or `bundled` "
            "(the packaged KTH-SP2 excerpt). Default: `bundled`."
        ),
    )
    platform: str = Field(
        default="default",
        description="Packaged platform name or platform YAML file of the simulated cluster. Default: `default`.",
    )
    nodes: int | None = Field(
        default=100, gt=0,
        description="Use only the first N nodes of the platform. Default: `100` (the size of KTH-SP2).",
    )
    speedup: float = Field(
        default=600.0,
        gt=0,
        description="Simulated seconds per real second. Default: `600` (a day in 2.4 minutes).",
    )
    seed: int = Field(default=0, ge=0, description="Seed of the trace's power augmentation. Default: `0`.")


class MetricsConfig(StrictModel):
    doc_name: ClassVar[str] = "metrics block"

    port: int = Field(
        default=9817, ge=0, le=65535,
        description="Port of the `/metrics` endpoint (0: no endpoint). Default: `9817`.",
    )
    address: str = Field(
        default="127.0.0.1", description="Address the endpoint listens on. Default: `127.0.0.1`."
    )


class TelemetryConfig(StrictModel):
    """Where the daemon reads node power."""

    doc_name: ClassVar[str] = "telemetry block"

    source: Literal["none", "prometheus", "agents"] = Field(
        default="none",
        description="`prometheus`: the Prometheus HTTP API at `url` with the PromQL `query`; `agents`: scrape the "
        "wattsched agents' `/metrics` directly (`agent_url`); `none`: predictions only. Default: `none`.",
    )
    url: str = Field(
        default="http://127.0.0.1:9090",
        description="Base URL of the Prometheus server. Default: `http://127.0.0.1:9090`.",
    )
    query: str = Field(
        default="rapl",
        description="Node power in watts per node as PromQL, or a preset: `rapl` (node_exporter's "
        "`rate(node_rapl_package_joules_total[1m])` summed per node), `ipmi` (`ipmi_dcmi_power_consumption_watts`), "
        "`dcgm` (GPU power summed per node), `agent` (the wattsched agents' RAPL counters). Default: `rapl`.",
    )
    node_label: str = Field(
        default="instance",
        description="Series label that names the node. Default: `instance`. Example: `node`.",
    )
    node_map: str | dict[str, str] | None = Field(
        default=None,
        description="From label values to Slurm node names: a regular expression with a named group `node` "
        "(e.g. `^(?P<node>[^.:]+)` drops domain and port) or a mapping. Default: none (the value is the name).",
    )
    @field_validator("node_map")
    @classmethod
    def _node_map(cls, value):
        if isinstance(value, str):
            try:
                pattern = re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
            if "node" not in pattern.groupindex:
                raise ValueError("the regular expression needs a named group (?P<node>...)")
        return value

    max_age_s: float = Field(
        default=120.0, gt=0,
        description="Telemetry older than this is stale: the daemon falls back to predictions. Default: `120`.",
    )
    timeout_s: float = Field(default=5.0, gt=0, description="Time limit of one telemetry request. Default: `5`.")
    settle_s: float = Field(
        default=60.0, ge=0,
        description="A job's measured power is used only once it has run this long; before, its predicted power "
        "is (rate windows and scrape intervals make fresh jobs read low). Set it to about the query's rate window "
        "plus two scrape intervals. Default: `60`.",
    )
    agent_url: str = Field(
        default="http://{address}:9818",
        description="URL of a node's agent; `{node}` and `{address}` (Slurm's NodeAddr) are filled in. "
        "Default: `http://{address}:9818`.",
    )


class ActuatorConfig(StrictModel):
    """How node power caps and CPU frequencies are applied."""

    doc_name: ClassVar[str] = "actuator block"

    kind: Literal["none", "agent", "ipmi"] = Field(
        default="none",
        description="`agent`: the wattsched node agent (RAPL and cpufreq, munge-authenticated, URL from "
        "`telemetry.agent_url`); `ipmi`: `ipmitool dcmi power set_limit` against each node's BMC (caps only); "
        "`none`: caps and frequencies are audited as skipped. Default: `none`.",
    )
    munge_socket: Path | None = Field(
        default=None,
        description="munged socket used to sign agent commands. Default: none (munge's default socket).",
    )
    ipmi_credentials: Path | None = Field(
        default=None,
        description="With `kind: ipmi`: file of BMC hosts and credentials, mode 0600. Required for `ipmi`.",
    )
    timeout_s: float = Field(default=10.0, gt=0, description="Time limit of one actuation. Default: `10`.")


class ForecastConfig(StrictModel):
    doc_name: ClassVar[str] = "forecast block"

    horizon_s: float = Field(
        default=7200.0, gt=0, description="How far the rolling-horizon power forecast looks. Default: `7200` (2 h)."
    )
    step_s: float = Field(default=300.0, gt=0, description="Step of the forecast, in seconds. Default: `300`.")


class DaemonConfig(StrictModel):
    """The live daemon: ``wattsched daemon --config wattsched.yaml``."""

    path_keys: ClassVar[tuple[str, ...]] = ("state_dir", "heartbeat_file")

    kind: Literal["daemon"] = Field(
        default="daemon",
        description="What this file configures. Optional: a file with a `slurm` block is a daemon config.",
    )
    policy: str = Field(
        default="easy", min_length=1,
        description="Policy, by registered name (see `docs/policies.md`): the same code as in the simulator. "
        "Default: `easy`.",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="Parameters of the policy. Default: `{}`. Example: `{check: gaussian_99}`."
    )
    predictor: str | None = Field(
        default=None,
        description="Power predictor by registered name (`history`, `naive`, ...); its history is kept in the "
        "state store. Default: none (nominal busy power of a node).",
    )
    predictor_params: dict[str, Any] = Field(
        default_factory=dict,
        description="Parameters of the predictor, checked against its own parameter model. Default: `{}`. "
        "Example: `{alpha: 2}`.",
    )
    cap_w: CapValue = Field(
        default=None,
        description="Constant platform power cap: watts, or a percentage of the managed nodes' maximum dynamic "
        "power such as `\"60%\"`. Default: none (uncapped). Example: `\"60%\"`.",
    )
    node_power: dict[str, float] = Field(
        default_factory=dict,
        description="Power model of the managed nodes (keys of a platform file's `power` block: `idle_w`, "
        "`busy_w`, `off_w`, `gpu_tdp_w`, ...). Default: `{}` (the packaged default model).",
    )
    partitions: list[str] = Field(
        default_factory=list,
        description="Partitions the daemon manages: their nodes, and the jobs submitted to them. "
        "Default: `[]` (all partitions).",
    )
    gate: Literal["lua", "daemon"] = Field(
        default="lua",
        description="Who holds new jobs: `lua` (the `deploy/slurm/job_submit.lua` gate, at submission, only "
        "while the heartbeat is fresh) or `daemon` (the daemon holds them each cycle; a job can start "
        "between its submission and the next cycle). With `lua`, the daemon still holds jobs the gate "
        "let through while it was down. Default: `lua`.",
    )
    poll_interval_s: float = Field(
        default=30.0, gt=0, description="Seconds between cycles. Default: `30`."
    )
    dry_run: bool = Field(
        default=False,
        description="Compute, audit and export every decision, change nothing in Slurm or on the nodes. "
        "Default: `false`.",
    )
    evict: Literal["requeue", "cancel"] = Field(
        default="requeue",
        description="What an eviction does: `requeue` (the job goes back to the queue; jobs that cannot be "
        "requeued are left running and the refusal is audited) or `cancel`. Default: `requeue`.",
    )
    start_timeout_cycles: int = Field(
        default=3, ge=1,
        description="A released job that Slurm has not started after this many cycles is held again, "
        "logged and counted. Default: `3`.",
    )
    on_stop: Literal["release", "keep"] = Field(
        default="release",
        description="On SIGTERM: `release` every job the daemon holds (Slurm schedules them itself) or "
        "`keep` them held for the next start. Default: `release`.",
    )
    state_dir: Path = Field(
        default=Path("/var/lib/wattsched"),
        description="Directory of the state store (`state.db`, SQLite). Default: `/var/lib/wattsched`.",
    )
    heartbeat_file: Path | None = Field(
        default=None,
        description="File the daemon writes the time into each cycle; the lua gate holds jobs only while it "
        "is fresh. Default: `STATE_DIR/heartbeat`.",
    )
    slurm: SlurmConfig = Field(
        default_factory=SlurmConfig,
        description="How the daemon reaches Slurm: backend, slurm.conf, commands, time limits (see *Slurm block*).",
    )
    sim: SimBackendConfig = Field(
        default_factory=SimBackendConfig,
        description="The simulated cluster used with `slurm.backend: sim` (see *Sim block*).",
    )
    metrics: MetricsConfig = Field(
        default_factory=MetricsConfig,
        description="The Prometheus `/metrics` endpoint: address and port (see *Metrics block*).",
    )
    telemetry: TelemetryConfig = Field(
        default_factory=TelemetryConfig,
        description="Measured node power: Prometheus, the agents, or none (see *Telemetry block*).",
    )
    actuator: ActuatorConfig = Field(
        default_factory=ActuatorConfig,
        description="How node caps and CPU frequencies are applied: agent, IPMI or none (see *Actuator block*).",
    )
    forecast: ForecastConfig = Field(
        default_factory=ForecastConfig,
        description="The rolling-horizon forecast of platform power (see *Forecast block*).",
    )

    _source: str | None = PrivateAttr(default=None)  # where it was read from, for error lines
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)
    _lines: dict = PrivateAttr(default_factory=dict)

    @field_validator("node_power")
    @classmethod
    def _node_power(cls, value: dict[str, float]) -> dict[str, float]:
        from dataclasses import fields

        from wattsched.model.platform import NodePowerModel

        known = {f.name for f in fields(NodePowerModel)} - {"freq_levels_hz"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        # the same rules as a platform file's power block (off <= idle <= busy_min <= busy, cap range)
        from pydantic import ValidationError

        from wattsched.config import error_items
        from wattsched.sim.platforms import PowerModelConfig

        try:
            PowerModelConfig.model_validate(value)
        except ValidationError as exc:
            raise field_problems(error_items(exc, value, PowerModelConfig)) from None
        return value

    @field_validator("heartbeat_file")
    @classmethod
    def _heartbeat_file(cls, value: Path | None) -> Path | None:
        if value is not None and value.is_dir():
            raise ValueError(f"{str(value)!r} is a directory; name a file (the daemon writes the time into it)")
        return value

    @field_validator("cap_w", mode="before")
    @classmethod
    def _cap(cls, value):
        return parse_cap_value(value)

    @model_validator(mode="after")
    def _ipmi_needs_credentials(self):
        if self.actuator.kind == "ipmi" and self.actuator.ipmi_credentials is None:
            raise field_problems([(("actuator", "ipmi_credentials"), "required with actuator.kind: ipmi")])
        return self

    @property
    def heartbeat_path(self) -> Path:
        return self.heartbeat_file or self.state_dir / "heartbeat"


register_config_kind("daemon", DaemonConfig, ("slurm", "gate", "poll_interval_s"))
