"""The config package's sections of the configuration reference (``docs/config.md``, ``make docs``).

:func:`model_reference` renders one model's keys (type, default, description);
the simulation config, the daemon config and platform files each have a
function giving their sections. :mod:`wattsched.reference`, above every package
whose files it documents, puts them in order with the sweep file's sections
(:func:`wattsched.sweep.spec.config_reference`) under the document's header.
Only the documentation imports this module (that one and the sweep file's
sections, for :func:`model_reference`); it imports every config model.
"""

from __future__ import annotations

import os
import typing
from typing import Literal

from pydantic import (
    BaseModel,
)
from pydantic_core import PydanticUndefined

from wattsched.config.base import _flatten_union
from wattsched.config.caps import CapEntryConfig, DemandResponseEventConfig, EnergyBudgetConfig
from wattsched.config.sim import SchedPassesConfig, SimConfig
from wattsched.workload.moldable import MoldableParams

__all__ = [
    "daemon_reference", "model_reference", "platform_reference", "sim_reference",
]


def _type_name(ann) -> str:
    """Human name of a field type for the reference."""
    parts = _flatten_union(ann)
    names = []
    for a in parts:
        origin = typing.get_origin(a)
        if a is type(None):
            continue
        if origin is Literal:
            names.extend(f"`{v}`" for v in typing.get_args(a))
        elif origin in (list, tuple):
            args = [x for x in typing.get_args(a) if x is not Ellipsis]
            inner = _type_name(args[0]) if args else "value"
            names.append(f"list of {inner}")
        elif origin is dict:
            names.append("mapping")
        elif a is bool:
            names.append("boolean")
        elif a is int:
            names.append("integer")
        elif a is float:
            names.append("number")
        elif a is str:
            names.append("string")
        elif isinstance(a, type) and issubclass(a, os.PathLike):
            names.append("path")
        elif isinstance(a, type) and issubclass(a, BaseModel):
            names.append(getattr(a, "doc_name", a.__name__))
        else:
            names.append(str(a))
    if type(None) in parts:
        names.append("null")
    return " or ".join(dict.fromkeys(names))


def _default_text(field) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "none"
    if isinstance(value, BaseModel):
        return "every key at its default"
    if value == "":
        return '`""` (empty)'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, float) for v in value):
        return "`[" + ", ".join(f"{v:.10g}" for v in value) + "]`"
    if isinstance(value, float):
        return f"`{value:.10g}`"
    if isinstance(value, (tuple, list)):
        return f"`{list(value)}`"
    return f"`{value}`"


def model_reference(model: type[BaseModel], heading: str, intro: str, overrides=None) -> list[str]:
    """The section ``## heading`` of ``model``: ``intro``, then each key with its type, default and description.

    ``overrides`` maps a key to the ``type`` or ``default`` text to show instead of the one derived from the field.
    """
    overrides = overrides or {}
    out = [f"## {heading}", "", intro, ""]
    for name, f in model.model_fields.items():
        type_text = overrides.get(name, {}).get("type") or _type_name(f.annotation)
        default = overrides.get(name, {}).get("default") or _default_text(f)
        out.append(f"### `{name}`")
        out.append("")
        out.append(f"*Type:* {type_text} · *Default:* {default}")
        out.append("")
        out.append(f.description or "")
        out.append("")
    return out


_PLATFORM_INTRO = """\
A platform file describes the cluster: groups of identical nodes and their power
model. `wattsched` ships `default` (128 nodes with the power model measured on
Grid'5000's *taurus* nodes), `marconi100` (980 nodes of CINECA's Marconi100) and
`eurora` (64 nodes of CINECA's Eurora, half with GPUs, half with Xeon Phi),
`ahmed2017` (128 processors with application models), and two overprovisioned
machines of Sarood et al. 2014, `sarood-testbed` (38 nodes, 3,300 W budget) and
`intrepid-overprovisioned` (40,960 nodes, 4,751,360 W budget);
name them in `platform:` or copy them from `src/wattsched/data/platforms/` as a
starting point.

```yaml
name: mycluster
node_groups:
  - name: cpu
    count: 100
    cores: 32
    prefix: cpu             # cpu0000 ... cpu0099
    power: {idle_w: 110, busy_min_w: 200, busy_w: 350, cap_min_w: 150}
  - name: gpu
    count: 8
    cores: 32
    gpus: 4
    features: [gpu]
    power: {idle_w: 300, busy_min_w: 400, busy_w: 900, gpu_tdp_w: 300, cap_min_w: 500, cap_max_w: 2100}
response_classes:
  io: {model: cpi, cpi: 8, floor: 0.4}
```

Nodes are numbered in file order, group after group; a node is named
`{prefix}{i:04d}` where `i` counts from 0 within its group. Names must be unique
across groups.
"""


_CAP_TYPE = 'number (watts), a percentage string such as `"60%"`, or null'


def sim_reference() -> list[str]:
    """The sections of the simulation config (``sim.yaml``) and its cap schedule, budget and event entries."""
    lines = model_reference(
        SimConfig,
        "Simulation config (`sim.yaml`)",
        "Run with `wattsched simulate --config sim.yaml`. Only `trace` is required; without `platform` "
        "or `procs` the machine comes from the SWF header.",
        overrides={
            "cap_schedule": {"type": "list of cap schedule entry, or path of a YAML or CSV file"},
            "platform": {"type": "string (path or packaged platform name)"},
            "cap_w": {"type": _CAP_TYPE},
        },
    )
    lines += model_reference(
        CapEntryConfig,
        "Cap schedule entries",
        "Items of `cap_schedule` (or rows of a cap-schedule CSV file, or items of a YAML file holding a "
        "list or `{cap_schedule: [...]}`). An entry without `end_s` is a *step*: its cap holds until the "
        "next step. An entry with `end_s` is a *window*: the cap holds in `[start_s, end_s)`, the platform "
        "is uncapped outside windows, and windows must not overlap.",
        overrides={"cap_w": {"type": _CAP_TYPE}},
    )
    lines += model_reference(
        EnergyBudgetConfig, "Energy budget entries", "Items of `energy_budgets`."
    )
    lines += model_reference(
        MoldableParams, "Moldable block keys (`moldable`)",
        "The rule of Sarood et al. 2014, §VII-A, that turns a rigid trace into moldable jobs: with probability "
        "`fraction` a job that asked `n` nodes gets `min_nodes = max(1, ceil(θ·n))`, `max_nodes = n`, θ uniform "
        "in `theta`; every job gets an application (`app`). A job whose trace already gives a range or an "
        "application keeps it; jobs of units stay rigid. Draws depend only on the seed and the job id.",
        overrides={"theta": {"type": "list of two numbers"}, "apps": {"type": "list of string"}},
    )
    lines += model_reference(
        SchedPassesConfig, "sched_passes block keys (`sched_passes`)",
        "Slurm's controller starts jobs only in passes of its main scheduler. A submission, a job's end "
        "or a release asks for a pass; the pass comes at the first tick of slurmctld's loop (`tick_s`) "
        "at least `interval_s` after the previous pass, and starts what it can. The simulator's policy "
        "decides as before; each start it decides waits for the first pass at or after "
        "`release_lag_s` from the decision.",
    )
    lines += model_reference(
        DemandResponseEventConfig, "Demand-response event entries",
        "Items of `demand_response`. The event's window joins the cap schedule a policy sees from its notice "
        "time on; a `reduction_w` target is taken from the platform power at that time.",
        overrides={"cap_w": {"type": _CAP_TYPE}},
    )
    return lines


def daemon_reference() -> list[str]:
    """The sections of the daemon config, under its own ``# Daemon config`` title."""
    from wattsched.config.daemon import (
        ActuatorConfig,
        DaemonBudgetConfig,
        DaemonCapEntryConfig,
        DaemonConfig,
        DaemonDemandResponseEventConfig,
        DemandResponseConfig,
        ForecastConfig,
        JobClassAllowedConfig,
        MetricsConfig,
        OpenADR2Config,
        OpenADR3Config,
        OptRuleConfig,
        SimBackendConfig,
        SlurmConfig,
        TelemetryConfig,
    )

    lines = ["# Daemon config", "",
              "The live daemon's file (`wattsched daemon --config /etc/wattsched/wattsched.yaml`); "
              "`deploy/examples/` has commented examples and `docs/operations.md` the procedures.", ""]
    lines += model_reference(
        DaemonConfig, "Daemon keys", "Top level of the daemon config. Every key is optional.",
        overrides={"cap_w": {"type": _CAP_TYPE}, "slurm": {"type": "slurm block"}, "sim": {"type": "sim block"},
                   "metrics": {"type": "metrics block"}, "telemetry": {"type": "telemetry block"},
                   "actuator": {"type": "actuator block"}, "forecast": {"type": "forecast block"},
                   "node_map": {"type": "regular expression or mapping"},
                   "cap_schedule": {"type": "list of daemon cap schedule entry, or path of a YAML or CSV file"},
                   "platform": {"type": "string (path or packaged platform name)"},
                   "node_power": {"type": "node power model"},
                   "demand_response": {"type": "demand_response block"},
                   "job_class_allowed": {"type": "job_class_allowed block"}},
    )
    lines += model_reference(
        DaemonCapEntryConfig, "Daemon cap schedule entries",
        "Items of the daemon's `cap_schedule`: the simulator's cap schedule entries with times in seconds "
        "since the Unix epoch, or recurring windows (`every`). Fixed entries are all steps or all windows, as "
        "in the simulator; recurring windows may be mixed with them. Where entries overlap the lowest cap "
        "holds.", overrides={"cap_w": {"type": _CAP_TYPE}},
    )
    lines += model_reference(DaemonBudgetConfig, "Daemon energy budget entries", "Items of `energy_budgets`.")
    lines += model_reference(DemandResponseConfig, "Demand_response block (`demand_response`)",
                              "Demand-response events: from this file, and from the grid operator's VTN over "
                              "OpenADR 2.0b or 3.0; each is added to the cap schedule from its notice time on and "
                              "its reduction verified against measured power after `deadline_s`.",
                              overrides={"opt": {"type": "demand-response opt rule"},
                                         "openadr2": {"type": "openadr2 block"},
                                         "openadr3": {"type": "openadr3 block"}})
    lines += model_reference(DaemonDemandResponseEventConfig, "Daemon demand-response event keys",
                              "Items of `demand_response.events`.", overrides={"cap_w": {"type": _CAP_TYPE}})
    lines += model_reference(OptRuleConfig, "Demand-response opt rule keys (`demand_response.opt`)",
                              "Events from a VTN are taken part in (opted in) unless one of these rules declines "
                              "them; the decision and its reason are audited (`dr_opt`) and sent to the VTN.")
    lines += model_reference(OpenADR2Config, "Openadr2 block (`demand_response.openadr2`)",
                              "The OpenADR 2.0b VEN (extra `[openadr]`, the openleadr library): `SIMPLE` and "
                              "`LOAD_DISPATCH` events, telemetry reports of measured platform power.")
    lines += model_reference(OpenADR3Config, "Openadr3 block (`demand_response.openadr3`)",
                              "An OpenADR 3.0 VEN over plain HTTP: `SIMPLE`, `IMPORT_CAPACITY_LIMIT`, "
                              "`DISPATCH_SETPOINT` and `DISPATCH_SETPOINT_RELATIVE` events; `USAGE` reports.")
    lines += model_reference(SlurmConfig, "Slurm block (`slurm`)", "How the daemon reaches Slurm.")
    lines += model_reference(SimBackendConfig, "Sim block (`sim`)",
                              "The simulated cluster of `slurm.backend: sim` (`wattsched daemon --backend sim`).")
    lines += model_reference(MetricsConfig, "Metrics block (`metrics`)", "The Prometheus endpoint.")
    lines += model_reference(TelemetryConfig, "Telemetry block (`telemetry`)",
                              "Measured node power. Missing or stale data is never read as zero: the daemon "
                              "uses its predictions for those nodes and exports `wattsched_telemetry_stale`.",
                              overrides={"node_map": {"type": "regular expression or mapping"}})
    lines += model_reference(ActuatorConfig, "Actuator block (`actuator`)",
                              "How the plan's SetNodeCap and SetNodeFreq actions reach the nodes.")
    lines += model_reference(JobClassAllowedConfig, "Job_class_allowed block (`job_class_allowed`)",
                              "With `job_class_from_comment: validated`, a job's declared class is used when "
                              "it is listed for the job's user or for its account. The power history gives no "
                              "evidence of a job's class (it records power per node, not how a lower frequency "
                              "slowed the job), so the site states who may declare what.")
    lines += model_reference(ForecastConfig, "Forecast block (`forecast`)",
                              "Exported as `wattsched_forecast_power_watts{horizon}` and given to policies in the "
                              "snapshot.")
    return lines


def platform_reference() -> list[str]:
    """The sections of platform files, under their own ``# Platform files`` title."""
    from wattsched.config.platform import NodeGroupConfig, PlatformConfig, PowerModelConfig

    lines = ["# Platform files", "", _PLATFORM_INTRO]
    lines += model_reference(PlatformConfig, "Platform keys", "Top level of a platform file.")
    lines += model_reference(
        NodeGroupConfig,
        "Node group keys",
        "Items of `node_groups`.",
        overrides={"prefix": {"default": "the group's `name`"}},
    )
    lines += model_reference(
        PowerModelConfig,
        "Node power model keys (`power`)",
        "The `power` block of a node group: one node's power in each state and its control range. "
        "Every key is optional; the defaults are the Grid'5000 *taurus* measurements (batsim's "
        "`cluster_energy_128.xml`, NAS EP class C). Values must satisfy "
        "`off_w ≤ idle_w ≤ busy_min_w ≤ busy_w` and `cap_min_w ≤ cap_max_w`; when you change "
        "`idle_w` or `busy_w`, set the others too (an error names any default that no longer fits).",
        overrides={
            "freq_levels_hz": {
                "type": "list of number (Hz, positive, distinct)",
                "default": "taurus's 13 levels, `[1.2e9, 1.3e9, ..., 2.3e9, 2.301e9]`",
            },
            "cap_max_w": {"default": "`busy_w`"},
        },
    )
    return lines
