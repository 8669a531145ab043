"""The daemon's configuration: ``wattsched daemon --config wattsched.yaml``.

Validated with pydantic like every wattsched config: unknown keys are rejected and
every error names the file, the key and its line. ``wattsched check-config FILE``
recognises a daemon config by its ``kind: daemon`` key or its ``slurm`` block.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, ClassVar, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, PrivateAttr, field_validator, model_validator

from wattsched.config.base import StrictModel, field_problems, key_locator
from wattsched.config.caps import (
    CapEntryConfig,
    CapValue,
    DemandResponseEventConfig,
    _check_cap_entries,
    parse_cap_value,
    read_cap_entries,
)
from wattsched.config.platform import PowerModelConfig
from wattsched.model.recurrence import parse_recurrence


class SlurmConfig(StrictModel):
    """How the daemon reaches Slurm."""

    doc_name: ClassVar[str] = "slurm block"

    backend: Literal["cli", "pyslurm", "rest", "sim"] = Field(
        default="cli",
        description=(
            "`cli`: run `squeue`, `sinfo` and `scontrol` (every Slurm version; JSON where the version "
            "has it, plain text otherwise). `pyslurm`: the pyslurm library (extra `[pyslurm]`, Slurm "
            "25.11 only). `rest`: slurmrestd's REST API with a JWT (`url`, `token_file`), for a daemon "
            "off the head node (reads on Slurm 22.05+; pins and hold markers need 23.02+). "
            "`sim`: the built-in simulated cluster (see `sim`), no Slurm needed. "
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
            "`scontrol show nodes --json` from 23.02), `text` (`scontrol -d -o show jobs`, `scontrol -o show "
            "nodes`, for builds without JSON support), or `auto` (JSON, falling back to text if JSON fails). "
            "Default: `auto`."
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
    url: str | None = Field(
        default=None,
        description="With `backend: rest`: slurmrestd's base URL. Required for `rest`; `http://` only on loopback "
        "unless `allow_insecure_http`. Example: `https://slurmrestd:6820`.",
    )
    token_file: Path | None = Field(
        default=None,
        description=(
            "With `backend: rest`: file holding the JWT from `scontrol token` (the token alone or its "
            "`SLURM_JWT=` line), mode 0600, owned by the user running wattsched; re-read when it changes. "
            "Required for `rest`. Example: `/etc/wattsched/slurm-token`."
        ),
    )
    user: str = Field(
        default="root", min_length=1,
        description="With `backend: rest`: the user the token belongs to (`X-SLURM-USER-NAME`). Default: `root`.",
    )
    api_version: Literal[
        "auto", "0.0.38", "0.0.39", "0.0.40", "0.0.41", "0.0.42", "0.0.43", "0.0.44", "0.0.45"
    ] = Field(
        default="auto",
        description=(
            "With `backend: rest`: REST API version, or `auto` (the newest the server answers). Default: `auto`."
        ),
    )

    full_read_every: int = Field(
        default=10,
        ge=1,
        description=(
            "With `backend: rest`: jobs are read with slurmrestd's `update_time`, so a cycle in which no job "
            "changed costs Slurm an empty reply and the daemon reuses the last job set; every this many "
            "cycles the jobs are read in full all the same. `1` reads them in full every cycle. Default: `10`."
        ),
    )

    allow_insecure_http: bool = Field(
        default=False,
        description="With `backend: rest`: accept an `http://` `url` on a host other than loopback, although the "
        "JWT (often root's) then crosses the network in clear text. Default: `false` (use `https://`).",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        import urllib.parse

        if value is not None:
            parts = urllib.parse.urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError("must be an http:// or https:// URL, e.g. http://slurmrestd:6820")
        return value

    @model_validator(mode="after")
    def _rest_needs_url_and_token(self):
        if self.backend == "rest":
            missing = [((k,), "required with backend: rest") for k in ("url", "token_file")
                       if getattr(self, k) is None]
            if missing:
                raise field_problems(missing)
            if not self.allow_insecure_http and cleartext_remote(self.url):
                raise field_problems([("url", f"{self.url} would send the slurmrestd token in clear text to a host "
                                       "that is not loopback: use https://, or set slurm.allow_insecure_http: true "
                                       "on a network you trust")])
        return self


class SimBackendConfig(StrictModel):
    """The simulated cluster of ``slurm.backend: sim``."""

    doc_name: ClassVar[str] = "sim block"
    path_keys: ClassVar[tuple[str, ...]] = ("trace", "platform")

    trace: str = Field(
        default="bundled",
        description=(
            "Trace replayed as the cluster's job submissions: an SWF file or job table (relative to the config "
            "file's directory), or `bundled` (the packaged KTH-SP2 excerpt). Default: `bundled`."
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
    speedup: float | None = Field(
        default=None,
        gt=0,
        description="Simulated seconds per real second (`wattsched daemon --speed`). Default: `1` when a VTN is "
        "configured (`demand_response.openadr2` or `openadr3`: its events are in wall-clock time, so the simulated "
        "clock must keep to it), else `600` (a day in 2.4 minutes, the demo's pace).",
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

    source: Literal["none", "prometheus", "agents", "slurm"] = Field(
        default="none",
        description="`prometheus`: the Prometheus HTTP API at `url` with the PromQL `query`; `agents`: scrape the "
        "wattsched agents' `/metrics` directly (`agent_url`); `slurm`: the nodes' `CurrentWatts` as Slurm reports "
        "them (needs an `AcctGatherEnergyType` plugin; nodes reporting 0 have no data); `none`: predictions "
        "only. Default: `none`, and `slurm` with the simulated cluster (`slurm.backend: sim`, whose nodes "
        "report the simulated power as Slurm's `CurrentWatts`) when the file has no `telemetry` block.",
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
        "is (rate windows and scrape intervals make fresh jobs read low). Likewise a node whose job ended less than "
        "this long ago is taken at its predicted power (it would still read the job's). Set it to about the query's "
        "rate window plus two scrape intervals. Default: `60`.",
    )
    agent_url: str = Field(
        default="http://{address}:9818",
        description="URL of a node's agent; `{node}` and `{address}` (Slurm's NodeAddr) are filled in. "
        "Default: `http://{address}:9818`.",
    )


class ActuatorConfig(StrictModel):
    """How node power caps and CPU frequencies are applied."""

    doc_name: ClassVar[str] = "actuator block"

    kind: Literal["none", "agent", "ipmi", "sim"] = Field(
        default="none",
        description="`agent`: the wattsched node agent (RAPL and cpufreq, munge-authenticated, URL from "
        "`telemetry.agent_url`); `ipmi`: `ipmitool dcmi power set_limit` against each node's BMC (caps only); "
        "`sim`: the nodes of the simulated cluster (`slurm.backend: sim`); "
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
    rapl_offset_w: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="With `kind: agent`: the power of a node outside its RAPL packages (base and memory), taken "
        "off a node cap before the agent splits it over the packages, and added to the limit it reads back. "
        "Default: the platform file's `base_w + mem_w` when it has them (an overprovisioned machine for `parm`, "
        "whose node cap `base_w + mem_w + p` puts the CPU at `p`), else `0` (a node cap is the packages' "
        "limit). Example: `56`.",
    )


class ForecastConfig(StrictModel):
    doc_name: ClassVar[str] = "forecast block"

    horizon_s: float = Field(
        default=7200.0, gt=0, description="How far the rolling-horizon power forecast looks. Default: `7200` (2 h)."
    )
    step_s: float = Field(default=300.0, gt=0, description="Step of the forecast, in seconds. Default: `300`.")


class DaemonCapEntryConfig(CapEntryConfig):
    """An entry of the daemon's ``cap_schedule``: a step or window at fixed times, or a recurring window."""

    doc_name: ClassVar[str] = "daemon cap schedule entry"

    start_s: float | None = Field(
        default=None,
        description="Time the cap comes into force, in seconds since the Unix epoch (e.g. `date -d '2026-12-01 "
        "17:00' +%s`). Required unless `every` is given. Example: `1796144400`.",
    )
    every: str | None = Field(
        default=None,
        description="A recurring window instead of fixed times: `DAYS HH:MM-HH:MM` in the site's `timezone`, "
        "where DAYS is `daily`, `weekdays`, `weekends` or day names `mon`..`sun` with commas and ranges "
        "(`mon-thu,sat`); an end not after the start runs past midnight. The cap holds inside every "
        "occurrence; give no `start_s`/`end_s` with it. Default: none. Example: `\"weekdays 17:00-20:00\"`.",
    )

    @field_validator("every")
    @classmethod
    def _every(cls, v):
        if v is not None:
            parse_recurrence(v)
        return v

    @model_validator(mode="after")
    def _fixed_or_recurring(self):
        if self.every is not None and (self.start_s is not None or self.end_s is not None):
            raise field_problems([("every", "a recurring window has no start_s or end_s")])
        if self.every is None and self.start_s is None:
            raise field_problems([("start_s", "required (or give a recurring window with every)")])
        return self


def _check_daemon_cap_entries(entries: list[DaemonCapEntryConfig]) -> list[DaemonCapEntryConfig]:
    fixed = [i for i, e in enumerate(entries) if e.every is None]
    try:
        _check_cap_entries([entries[i] for i in fixed])
    except Exception as exc:  # renumber the locations to the full list
        from pydantic_core import PydanticCustomError

        if isinstance(exc, PydanticCustomError) and exc.context and "problems" in exc.context:
            problems = [((fixed[loc[0]], *loc[1:]) if loc and isinstance(loc[0], int) else loc, msg)
                        for loc, msg in exc.context["problems"]]
            raise field_problems(problems) from None
        raise
    return entries


class DaemonBudgetConfig(StrictModel):
    """An energy budget of the daemon: fixed window (epoch seconds) or recurring (``every``)."""

    doc_name: ClassVar[str] = "daemon energy budget entry"

    start_s: float | None = Field(
        default=None, description="Start of the window, in seconds since the Unix epoch. Required unless `every`."
    )
    end_s: float | None = Field(
        default=None, description="End of the window, in seconds since the Unix epoch, after `start_s`. "
        "Required unless `every`."
    )
    every: str | None = Field(
        default=None,
        description="A recurring window (`DAYS HH:MM-HH:MM` in `timezone`, as in the cap schedule): the "
        "budget applies to each occurrence separately. Default: none. Example: `\"daily 00:00-24:00\"`.",
    )
    energy_j: float = Field(
        gt=0, description="Energy the managed nodes may use in the window, in joules (1 kWh = 3.6e6 J). "
        "Required. Example: `1.8e9` (500 kWh)."
    )
    label: str = Field(default="", description="Name shown in logs and metrics. Default: the window.")

    @field_validator("every")
    @classmethod
    def _every(cls, v):
        if v is not None:
            parse_recurrence(v)
        return v

    @model_validator(mode="after")
    def _window(self):
        if self.every is not None:
            if self.start_s is not None or self.end_s is not None:
                raise field_problems([("every", "a recurring budget has no start_s or end_s")])
            return self
        if self.start_s is None or self.end_s is None:
            raise field_problems([("start_s" if self.start_s is None else "end_s",
                                   "required (or give a recurring window with every)")])
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s)):
            raise field_problems([("end_s", "window bounds must be finite numbers of seconds")])
        if self.end_s <= self.start_s:
            raise field_problems([("end_s", f"must be after start_s ({self.start_s:g} s), got {self.end_s:g}")])
        return self


class DaemonDemandResponseEventConfig(DemandResponseEventConfig):
    """One demand-response event of the daemon: the simulator's event with times in seconds since the epoch."""

    doc_name: ClassVar[str] = "daemon demand-response event"

    notice_s: float | None = Field(
        default=None,
        description="When the event is announced, in seconds since the Unix epoch: policies see it from then "
        "on (never earlier), so they can prepare. Must not be after `start_s`. Default: `start_s` (no notice).",
    )
    start_s: float = Field(description="Start of the event, in seconds since the Unix epoch. Required.")
    end_s: float = Field(description="End of the event, in seconds since the Unix epoch. Required.")
    reduction_w: float | None = Field(
        default=None, gt=0,
        description="Target as a reduction: the platform power measured when the daemon first sees the event "
        "(at its notice time; kept in the state store across restarts) minus this many watts. Give `cap_w` or "
        "`reduction_w`. Example: `20000`.",
    )

    @property
    def visible_from_s(self) -> float:
        return self.start_s if self.notice_s is None else self.notice_s


class OptRuleConfig(StrictModel):
    """When wattsched takes part in an event from the grid (opts in) and when it declines (opts out)."""

    doc_name: ClassVar[str] = "demand-response opt rule"

    min_notice_s: float = Field(
        default=0.0, ge=0,
        description="Opt out of events announced less than this many seconds before their start (the policy "
        "could not prepare). Default: `0` (any notice).",
    )
    max_duration_s: float | None = Field(
        default=None, gt=0,
        description="Opt out of events longer than this many seconds. Default: none (any length).",
    )
    below_idle: Literal["opt_out", "opt_in"] = Field(
        default="opt_out",
        description="An event whose target is below the idle power of the managed nodes cannot be met without "
        "powering nodes down: `opt_out` declines it, `opt_in` takes part anyway. Default: `opt_out`.",
    )


def cleartext_remote(url: str | None) -> bool:
    """Whether ``url`` is plain ``http://`` to a host other than loopback (credentials there travel in clear).

    >>> cleartext_remote("http://slurmrestd:6820"), cleartext_remote("http://127.0.0.1:6820")
    (True, False)
    >>> cleartext_remote("http://[::1]:8080/api"), cleartext_remote("http://localhost"), cleartext_remote("https://x")
    (False, False, False)
    """
    import ipaddress
    import urllib.parse

    if not url:
        return False
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "http":
        return False
    host = (parts.hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def _env_zone(tz: str) -> ZoneInfo | None:
    """The zone a ``TZ`` value names (an IANA name, or ``:``/a path to a zone file); UTC when empty; None if unknown.

    >>> _env_zone("") == ZoneInfo("UTC"), _env_zone("Narnia/Cair_Paravel")
    (True, None)
    """
    name = tz.lstrip(":")
    if not name:
        return ZoneInfo("UTC")
    try:
        if name.startswith("/"):
            with open(name, "rb") as fh:
                return ZoneInfo.from_file(fh, key=name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _check_url(value: str) -> str:
    if not re.match(r"^https?://[^/\s]+", value):
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value


def _check_levels(levels: dict[int, float]) -> dict[int, float]:
    for level, value in levels.items():
        if not 0 < level <= 3:
            raise ValueError(f"SIMPLE levels are 1, 2 and 3, got {level}")
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"level {level}: the reduction must be a positive number, got {value}")
    return levels


class OpenADR2Config(StrictModel):
    """The OpenADR 2.0b VEN (openleadr, extra ``[openadr]``): registers with the utility's VTN and polls it."""

    doc_name: ClassVar[str] = "openadr2 block"

    vtn_url: str = Field(
        description="Base URL of the VTN's OpenADR 2.0b services (the `EiRegisterParty`, `EiEvent`, `EiReport` "
        "and `OadrPoll` endpoints are under it). Required. Example: `https://vtn.utility.example/OpenADR2/Simple/2.0b`.",
    )
    ven_name: str = Field(min_length=1, description="Name this VEN registers under. Required. Example: `hpc-centre`.")
    ven_id: str | None = Field(
        default=None, description="VEN id agreed with the utility. Default: none (the VTN assigns one)."
    )
    cert: Path | None = Field(default=None, description="PEM certificate that signs messages (with `key`). "
                              "Default: none (messages unsigned).")
    key: Path | None = Field(default=None, description="PEM private key of `cert`. Default: none.")
    ca_file: Path | None = Field(default=None, description="PEM CA bundle that verifies the VTN's TLS "
                                 "certificate. Default: none.")
    vtn_fingerprint: str | None = Field(
        default=None, description="Fingerprint of the VTN's certificate; messages not signed by it are ignored. "
        "Required unless `allow_unsigned_events: true`.",
    )
    allow_unsigned_events: bool = Field(
        default=False,
        description="Run without `vtn_fingerprint`: events are then accepted whoever signed them (or nobody), so "
        "anyone who can answer for the VTN's address can cap the cluster; a warning is logged at start. "
        "Default: `false`.",
    )
    simple_levels: dict[int, float] = Field(
        default_factory=lambda: {1: 0.1, 2: 0.2, 3: 0.4},
        description="`SIMPLE` event levels as reductions: a level maps to a fraction of the platform power at "
        "the notice time (a value below 1) or to watts (a value of 1 or more). Level 0 is normal operation. "
        "Default: `{1: 0.1, 2: 0.2, 3: 0.4}` (moderate, high, special: 10, 20 and 40 %).",
    )
    load_dispatch_unit_w: float = Field(
        default=1000.0, gt=0,
        description="Watts per unit of a `LOAD_DISPATCH` payload (`setpoint`: the limit; `delta`: the "
        "reduction). Default: `1000` (kW).",
    )
    report_interval_s: float = Field(
        default=60.0, gt=0,
        description="Shortest sampling period wattsched offers for its telemetry report of measured platform "
        "power (`TELEMETRY_USAGE`, `RealPower` in W; up to an hour); the VTN chooses sampling and reporting "
        "periods in that range. Default: `60`.",
    )
    retry_s: float = Field(
        default=30.0, gt=0,
        description="Seconds between attempts to register with a VTN that cannot be reached. Default: `30`.",
    )

    @field_validator("vtn_url")
    @classmethod
    def _url(cls, v):
        return _check_url(v)

    @field_validator("simple_levels")
    @classmethod
    def _levels(cls, v):
        return _check_levels(v)

    @field_validator("cert", "key", "ca_file")
    @classmethod
    def _pem_file(cls, v):
        # checked at load, so that check-config refuses it and the VEN does not die of it at its first message
        if v is not None:
            if not v.exists():
                raise ValueError(f"no such file {str(v)!r}")
            if not v.is_file():
                raise ValueError(f"{str(v)!r} is not a file; name the PEM file")
            if not os.access(v, os.R_OK):
                raise ValueError(f"{str(v)!r} cannot be read by this user")
        return v

    @model_validator(mode="after")
    def _pair(self):
        if (self.cert is None) != (self.key is None):
            raise field_problems([("key" if self.key is None else "cert", "give cert and key together")])
        if self.vtn_fingerprint is None and not self.allow_unsigned_events:
            raise field_problems([("vtn_fingerprint", "required: without it events signed by anyone (or unsigned) "
                                   "are obeyed; give the fingerprint of the VTN's certificate, or set "
                                   "allow_unsigned_events: true to accept that")])
        return self


class OpenADR3Config(StrictModel):
    """An OpenADR 3.0 VEN: polls the VTN's REST API for programs and events, posts reports."""

    doc_name: ClassVar[str] = "openadr3 block"

    vtn_url: str = Field(
        description="Base URL of the VTN's OpenADR 3.0 REST API (`/programs`, `/events`, `/reports` under it). "
        "Required. Example: `https://vtn.utility.example/openadr3/3.0.1`.",
    )
    ven_name: str = Field(min_length=1, description="`clientName` of the reports this VEN posts. Required.")
    token_file: Path | None = Field(
        default=None,
        description="File holding the OAuth2 bearer token the VTN issued (read at every poll, so a rotated token "
        "is picked up). Default: none (no Authorization header).",
    )
    program: str | None = Field(
        default=None, description="Take events of this program only (its `programName`). Default: all programs."
    )
    unit_w: float = Field(
        default=1000.0, gt=0,
        description="Watts per unit of a payload value when the event's payload descriptor gives no units "
        "(`W`, `KW`, `MW` are understood). Default: `1000` (kW).",
    )
    simple_levels: dict[int, float] = Field(
        default_factory=lambda: {1: 0.1, 2: 0.2, 3: 0.4},
        description="`SIMPLE` payload levels as reductions, as in the openadr2 block. Default: `{1: 0.1, 2: 0.2, "
        "3: 0.4}`.",
    )
    poll_interval_s: float = Field(default=30.0, gt=0, description="Seconds between polls. Default: `30`.")
    timeout_s: float = Field(default=10.0, gt=0, description="Time limit of one request. Default: `10`.")
    report: bool = Field(
        default=True,
        description="Post a report of measured platform power (`USAGE`, W) for each event opted in, at every "
        "poll while it is in force. Default: `true`.",
    )
    allow_insecure_http: bool = Field(
        default=False,
        description="Accept an `http://` `vtn_url` on a host other than loopback together with `token_file`, "
        "although the bearer token then crosses the network in clear text. Default: `false`.",
    )

    @field_validator("vtn_url")
    @classmethod
    def _url(cls, v):
        return _check_url(v)

    @field_validator("simple_levels")
    @classmethod
    def _levels(cls, v):
        return _check_levels(v)

    @model_validator(mode="after")
    def _token_over_tls(self):
        if self.token_file is not None and not self.allow_insecure_http and cleartext_remote(self.vtn_url):
            raise field_problems([("vtn_url", f"{self.vtn_url} would send the bearer token of token_file in clear "
                                   "text to a host that is not loopback: use https://, or set "
                                   "allow_insecure_http: true on a network you trust")])
        return self


class DemandResponseConfig(StrictModel):
    doc_name: ClassVar[str] = "demand_response block"

    events: list[DaemonDemandResponseEventConfig] = Field(
        default_factory=list,
        description="Demand-response events known in advance (see *Daemon demand-response event keys*); each lowers "
        "the cap between its start and end, and policies see it from its notice time. Default: `[]`.",
    )
    deadline_s: float = Field(
        default=300.0, ge=0,
        description="The reduction is verified against measured platform power from this many seconds after an "
        "event's start: above the target then is a miss (logged, audited, counted, and the "
        "`WattschedDemandResponseMissed` alert). Default: `300`.",
    )
    tolerance_w: float = Field(
        default=0.0, ge=0,
        description="Measured power may exceed the target by this much without a miss. Default: `0`.",
    )
    opt: OptRuleConfig = Field(
        default_factory=OptRuleConfig,
        description="When to take part in events from the grid (see *Demand-response opt rule keys*).",
    )
    openadr2: OpenADR2Config | None = Field(
        default=None,
        description="Receive events from an OpenADR 2.0b VTN (see *Openadr2 block*). Default: none.",
    )
    openadr3: OpenADR3Config | None = Field(
        default=None,
        description="Receive events from an OpenADR 3.0 VTN (see *Openadr3 block*). Default: none.",
    )


def sim_backend(slurm) -> bool:
    """Whether a ``slurm`` block (a mapping or a :class:`SlurmConfig`) selects the simulated cluster."""
    backend = slurm.get("backend") if isinstance(slurm, dict) else getattr(slurm, "backend", None)
    return backend == "sim"


DEMO_SPEED = 600.0
"""Simulated seconds per real second of the simulated cluster without a VTN (the demo's pace)."""


def sim_speed(config: DaemonConfig, source: str | None = None) -> float:
    """The simulated cluster's speed: ``sim.speedup`` (``--speed``), else 1 with a VTN and 600 without.

    A VTN's events are in wall-clock time: a simulated clock running ahead of it would see them arrive already
    started (and be judged to miss them), so a speed other than 1 with a VTN is refused (the error names
    ``source``, else the config key).
    """
    from wattsched.errors import ConfigError

    dr = config.demand_response
    vtn = "openadr2" if dr.openadr2 is not None else "openadr3" if dr.openadr3 is not None else None
    speed = config.sim.speedup
    if speed is None:
        return 1.0 if vtn else DEMO_SPEED
    if vtn and speed != 1:
        where = source or key_locator(config, "sim")(("speedup",)) or "sim.speedup"
        raise ConfigError(f"{where}: {speed:g} with demand_response.{vtn}: a VTN's events are in wall-clock "
                          f"time, and a simulated clock {speed:g} times faster would see them arrive already "
                          "started; use --speed 1 (the default with a VTN), or drop the VTN for the demo's pace")
    return speed


def with_sim_telemetry(config: DaemonConfig) -> DaemonConfig:
    """``config``, reading the nodes' reported power when it runs on the simulated cluster without a
    ``telemetry`` block (for a backend chosen on the command line, after the file was validated)."""
    if sim_backend(config.slurm) and "telemetry" not in config.model_fields_set:
        return config.model_copy(update={"telemetry": config.telemetry.model_copy(update={"source": "slurm"})})
    return config


class JobClassAllowedConfig(StrictModel):
    """Which application classes a job's comment may declare, by user and by account."""

    doc_name: ClassVar[str] = "job_class_allowed block"

    users: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Classes each Slurm user's jobs may declare, by user name. Default: `{}`. Example: "
        "`{alice: [memory, mixed]}`.",
    )
    accounts: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Classes the jobs of each Slurm account (`sbatch --account`) may declare, for every user of "
        "it. Default: `{}`. Example: `{climate: [memory]}`.",
    )


class DaemonConfig(StrictModel):
    """The live daemon: ``wattsched daemon --config wattsched.yaml``."""

    path_keys: ClassVar[tuple[str, ...]] = ("state_dir", "heartbeat_file", "platform", "cap_schedule")

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
        "power such as `\"60%\"`. Give either `cap_w` or `cap_schedule`. Default: none (uncapped). "
        "Example: `\"60%\"`.",
    )
    cap_schedule: list[DaemonCapEntryConfig] | None = Field(
        default=None,
        description="A cap that changes with the time of day or date: a list of entries (see *Daemon cap "
        "schedule entries*) or the path of a YAML or CSV file in the simulator's cap-schedule format, with "
        "times in seconds since the Unix epoch. Fixed entries are steps (until the next step) or windows "
        "(with `end_s`); recurring windows (`every: \"weekdays 17:00-20:00\"`) repeat in `timezone`. Where "
        "entries overlap the lowest cap holds; outside every entry the platform is uncapped (add a step "
        "`{start_s: 0, cap_w: ...}` for a base cap). Policies see the schedule ahead. Default: none. "
        "Example: `[{every: \"weekdays 17:00-20:00\", cap_w: \"50%\"}]`.",
    )
    timezone: str | None = Field(
        default=None,
        description="IANA time zone of recurring windows (`every`). Default: the `TZ` environment variable (a "
        "zone it names that is unknown is an error, as in this key), else UTC. Example: `Europe/Paris`.",
    )
    energy_budgets: list[DaemonBudgetConfig] = Field(
        default_factory=list,
        description="Energy budget windows of the managed nodes (see *Daemon energy budget entries*). "
        "Energy consumed so far is integrated from measured node power (predicted where unmeasured) each "
        "cycle and kept in the state store across restarts; policies see each window in force or ahead with "
        "its consumed energy. Default: `[]`. Example: `[{every: \"daily 00:00-24:00\", energy_j: 1.8e9}]`.",
    )
    demand_response: DemandResponseConfig = Field(
        default_factory=DemandResponseConfig,
        description="Demand-response events (see *Demand_response block*). Default: none.",
    )
    platform: str | None = Field(
        default=None,
        description="Platform file of the managed nodes (the simulator's format: `node_groups` with a power "
        "model each), or a packaged platform name. A Slurm node gets the power model of the group holding "
        "its name, else of the group whose `prefix` and number match (`wst3` is `wst0003` of a group with "
        "prefix `wst`), else of a group named by one of its Slurm features, else of the first group. Give "
        "either `platform` or `node_power`. Default: none (the `node_power` model for every node). "
        "Example: `/etc/wattsched/platform.yaml`.",
    )
    node_power: PowerModelConfig | None = Field(
        default=None,
        description="Shorthand for a platform of one group: the power model of every managed node (keys of a "
        "platform file's `power` block: `idle_w`, `busy_w`, `off_w`, `gpu_tdp_w`, ...; see *Node power model "
        "keys*). Default: none (the packaged default model).",
    )
    job_class: str = Field(
        default="",
        description="Application class of the managed jobs: a response class of the platform (`cpu`, `memory`, "
        "`mixed` or one of the platform file's `response_classes`), which sets how a lower frequency or a node "
        "cap slows them (`dvfs` slows only jobs with a class). A job names its own in its Slurm comment with "
        "`wattsched:class=NAME` (`sbatch --comment`), as `job_class_from_comment` allows. Default: none. "
        "Example: `cpu`.",
    )
    job_class_from_comment: Literal["trusted", "ignored", "validated"] = Field(
        default="trusted",
        description="Whether the class a job's comment declares (`wattsched:class=NAME`) is used. The class "
        "steers how `dvfs` and the demand-response policies slow or evict the job under a cap, and the comment "
        "is the job's user's text. `trusted`: used as declared (every user is trusted with it); `ignored`: "
        "never used, every job gets `job_class`; `validated`: used only when `job_class_allowed` lists it for "
        "the job's user or account, else the job gets `job_class`. A declared class not used is logged once "
        "per job with the reason. Default: `trusted` (the behaviour before this key).",
    )
    job_class_allowed: JobClassAllowedConfig | None = Field(
        default=None,
        description="With `job_class_from_comment: validated`: the classes each user's or account's jobs may "
        "declare (see *Job_class_allowed block*); each must be a response class of the platform. Default: none "
        "(with `validated`, no declared class is used).",
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
        "let through while it was down, and takes over holds users put on jobs of its partitions (the gate "
        "refuses their releases). Default: `lua`.",
    )
    poll_interval_s: float = Field(
        default=30.0, gt=0, description="Seconds between cycles. Default: `30`."
    )
    dry_run: bool = Field(
        default=False,
        description="Compute, audit and export every decision, change nothing in Slurm or on the nodes. "
        "Default: `false`.",
    )
    shadow: bool = Field(
        default=False,
        description="Shadow mode: decide as in dry-run (nothing is applied) and record, each cycle and in one "
        "transaction, what the daemon observed (jobs' submit, start and end with their nodes, node states, measured "
        "power, the cap and demand-response events in force) in the state store, for `wattsched shadow replay`. "
        "Implies `dry_run` (`dry_run: false` with it is an error). Default: `false`.",
    )
    shadow_record: bool = Field(
        default=False,
        description="Record what the daemon observed, as shadow mode does, while it acts (not a dry run): the "
        "live schedule wattsched made can then be replayed with `wattsched shadow replay` and set beside the "
        "simulator's, e.g. to measure how well a replay predicts the live cluster. Implied by `shadow`. "
        "Default: `false`.",
    )
    shadow_retention_s: float = Field(
        default=7 * 86400.0, gt=0,
        description="How far back the shadow record goes: cycles older than this are deleted as new ones are "
        "recorded (with the jobs that ended before), so the record stays bounded. Default: `604800` (7 days).",
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

    @model_validator(mode="before")
    @classmethod
    def _sim_reports_power(cls, data):
        """With the simulated cluster and no ``telemetry`` block, read the nodes' power as Slurm reports it.

        The simulated cluster gives every node the engine's power as ``CurrentWatts``; without this the
        daemon would export predictions only.
        """
        if isinstance(data, dict) and "telemetry" not in data and sim_backend(data.get("slurm")):
            data = {**data, "telemetry": {"source": "slurm"}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _shadow_is_dry_run(cls, data):
        """``shadow: true`` without a ``dry_run`` key is a dry run (shadow mode applies nothing)."""
        if isinstance(data, dict) and data.get("shadow") is True and "dry_run" not in data:
            data = {**data, "dry_run": True}
        return data

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

    @field_validator("cap_schedule", mode="before")
    @classmethod
    def _cap_schedule_file(cls, v):
        if isinstance(v, (str, os.PathLike)):
            if not Path(v).exists():  # named here, so the error gives the config file and the key
                raise ValueError(f"no such file {os.fspath(v)!r}")
            return [e.model_dump(exclude_unset=True) for e in read_cap_entries(v)]
        return v

    @field_validator("cap_schedule")
    @classmethod
    def _cap_entries(cls, v):
        return None if v is None else _check_daemon_cap_entries(v)

    @field_validator("platform")
    @classmethod
    def _platform(cls, v):
        if v is not None:
            from wattsched.config.platform import load_platform_config
            from wattsched.errors import ConfigError

            try:
                load_platform_config(v)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v):
        if v is not None:
            try:
                ZoneInfo(v)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"unknown time zone {v!r}; use an IANA name such as Europe/Paris or UTC") from None
        return v

    @model_validator(mode="after")
    def _ipmi_needs_credentials(self):
        problems = []
        if self.actuator.kind == "ipmi" and self.actuator.ipmi_credentials is None:
            problems.append((("actuator", "ipmi_credentials"), "required with actuator.kind: ipmi"))
        if self.cap_w is not None and self.cap_schedule is not None:
            problems.append(("cap_schedule", "give either cap_w or cap_schedule, not both"))
        if self.platform is not None and self.node_power is not None:
            problems.append(("node_power", "give either platform or node_power, not both"))
        if self.shadow and not self.dry_run:
            problems.append(("shadow", "shadow mode applies nothing: it cannot run with dry_run: false"))
        classes = self._response_class_names() if self.job_class or self.job_class_allowed else None
        if self.job_class:
            if classes is not None and self.job_class not in classes:
                problems.append(("job_class", f"unknown application class {self.job_class!r}; the platform's "
                                              f"response classes are {', '.join(sorted(classes))}"))
        if self.job_class_allowed is not None:
            if self.job_class_from_comment != "validated":
                problems.append(("job_class_allowed", "used only with job_class_from_comment: validated (it is "
                                                      f"{self.job_class_from_comment}); remove it or set that"))
            for kind, table in (("users", self.job_class_allowed.users), ("accounts", self.job_class_allowed.accounts)):
                for name, listed in table.items():
                    unknown = [c for c in listed if classes is not None and c not in classes]
                    if unknown:
                        problems.append((("job_class_allowed", kind, name),
                                         f"unknown application class {unknown[0]!r}; the platform's response "
                                         f"classes are {', '.join(sorted(classes or ()))}"))
        if problems:
            raise field_problems(problems)
        return self

    def _response_class_names(self) -> set[str] | None:
        """Names of the platform's response classes (None when the platform file cannot be read)."""
        from wattsched.model.response import DEFAULT_CLASSES

        if self.platform is None:
            return set(DEFAULT_CLASSES)
        from wattsched.config.platform import load_platform_config
        from wattsched.errors import ConfigError

        try:
            return set(DEFAULT_CLASSES) | set(load_platform_config(self.platform)[0].response_classes)
        except ConfigError:
            return None  # the platform key reports it

    @model_validator(mode="after")
    def _tz_from_environment(self):
        # Without a timezone key, recurring windows follow TZ: a zone unknown there is the same error as in the
        # key, rather than a silent fall-back to UTC that moves every window by the zone's offset.
        recurring = any(e.every for e in self.cap_schedule or ()) or any(b.every for b in self.energy_budgets)
        if self.timezone is None and recurring and _env_zone(os.environ.get("TZ", "")) is None:
            raise field_problems([("timezone", f"unknown time zone {os.environ['TZ']!r} (from the TZ environment "
                                               "variable, used when timezone is not set); use an IANA name such "
                                               "as Europe/Paris or UTC")])
        return self

    @property
    def zone(self) -> ZoneInfo:
        """The time zone of recurring windows: ``timezone``, else the ``TZ`` environment variable, else UTC."""
        if self.timezone:
            return ZoneInfo(self.timezone)
        return _env_zone(os.environ.get("TZ", "")) or ZoneInfo("UTC")

    @property
    def heartbeat_path(self) -> Path:
        return self.heartbeat_file or self.state_dir / "heartbeat"
