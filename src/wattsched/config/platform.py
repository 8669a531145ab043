"""Platform files: groups of nodes and their power model, read from YAML.

A platform file looks like::

    name: mycluster
    node_groups:
      - name: cpu
        count: 100
        cores: 32
        power: {idle_w: 110, busy_min_w: 200, busy_w: 350}
    response_classes:
      io: {model: cpi, cpi: 8, floor: 0.4}

Every key is described in ``docs/config.md``. The platforms packaged in
``wattsched/data/platforms/`` (:func:`packaged_platforms`) are ``default`` (the
Grid'5000 *taurus* power model that :class:`~wattsched.model.platform.NodePowerModel`
defaults to), ``marconi100``, ``eurora``, ``ahmed2017``, and the overprovisioned
``sarood-testbed`` and ``intrepid-overprovisioned``; :func:`load_platform` takes
their bare name.

Overprovisioned platforms
-------------------------
``budget_w``, ``cpu_power_levels_w``, ``base_w`` and ``mem_w`` describe a machine
with more nodes than its power budget feeds at full power (Sarood et al. 2014):
they become the :class:`~wattsched.model.platform.Platform` attributes of the
same names, ``None`` on every other platform. The sanity limit on the machine
size (:data:`DEFAULT_MAX_NODES`, ``max_nodes``) applies to packaged platforms
too; all of them are within the default, the largest being
``intrepid-overprovisioned`` (40,960 nodes), so naming one never trips it.

Response classes
----------------
:func:`load_platform` returns a plain :class:`~wattsched.model.platform.Platform`
with two extra attributes:

``response_classes``
    ``dict[str, ResponseModel]``: :data:`~wattsched.model.response.DEFAULT_CLASSES`
    updated with the file's ``response_classes`` (a file can override ``cpu``,
    ``memory``, ``mixed`` or add classes).
``source``
    The file it was read from.

A platform built elsewhere lacks them; :func:`response_classes_of` returns
``DEFAULT_CLASSES`` for it, so consumers should use that function.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import os
import re
import warnings
from importlib import resources
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from wattsched.config.base import StrictModel, field_problems, load_yaml_model
from wattsched.errors import ConfigError
from wattsched.model.platform import Node, NodePowerModel, Platform
from wattsched.model.response import (
    DEFAULT_CLASSES,
    CpiResponse,
    LinearResponse,
    PolynomialResponse,
    ResponseModel,
    response_from_spec,
)

__all__ = [
    "NodeGroupConfig", "PlatformConfig", "PlatformSizeWarning", "PowerModelConfig", "load_platform",
    "check_response_spec", "load_platform_config", "packaged_platforms", "platform_from_procs", "response_classes_of",
]

_D = NodePowerModel()

DEFAULT_MAX_NODES = 200_000
"""Largest machine built without being asked: the largest machines of the TOP500 have about 160,000
nodes, and a bigger count is usually a typo or an SWF ``MaxProcs`` in the wrong unit. Raise it with
``--max-nodes N`` (config key ``max_nodes``)."""


def too_many_nodes(count: int, limit: int | None) -> str | None:
    """The problem with a machine of ``count`` nodes, or ``None`` when it is within ``limit``.

    >>> too_many_nodes(10, 100) is None
    True
    >>> too_many_nodes(10**9, None)[:40]
    'a machine of 1,000,000,000 nodes is more'
    """
    limit = DEFAULT_MAX_NODES if limit is None else limit
    if count <= limit:
        return None
    return (f"a machine of {count:,} nodes is more than the sanity limit of {limit:,}; if it is meant, "
            f"raise the limit with --max-nodes {count} (config key max_nodes)")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class PowerModelConfig(StrictModel):
    """The ``power`` block of a node group; defaults are :class:`NodePowerModel`'s (taurus)."""

    doc_name: ClassVar[str] = "node power model"

    off_w: float = Field(
        default=_D.off_w,
        ge=0,
        description="Power of a node that is switched off (BMC and PSU standby), in watts. Default: `9.75` (taurus).",
    )
    idle_w: float = Field(
        default=_D.idle_w,
        ge=0,
        description="Power of a node that is on and runs no job, in watts. Default: `95` (taurus). Example: `110`.",
    )
    busy_w: float = Field(
        default=_D.busy_w,
        ge=0,
        description=(
            "Power of a node running a job at full load and maximum frequency, in watts, GPUs "
            "excluded (they add `gpu_tdp_w` each); used for jobs whose trace has no power data. "
            "Default: `190.738` (taurus, NAS EP class C at 2.301 GHz). Example: `350`."
        ),
    )
    busy_min_w: float = Field(
        default=_D.busy_min_w,
        ge=0,
        description=(
            "Low end of the busy power range, in watts: the least a running job draws; the power "
            "augmentation draws job powers between this and `busy_w`. Default: `125.88` (taurus, "
            "NAS EP class C at 1.2 GHz)."
        ),
    )
    gpu_tdp_w: float = Field(
        default=_D.gpu_tdp_w,
        ge=0,
        description=(
            "Maximum power of one GPU (its TDP), in watts, added to `busy_w` per GPU a job uses. "
            "Default: `0`. Example: `300` (NVIDIA V100 SXM2)."
        ),
    )
    switch_on_s: float = Field(
        default=_D.switch_on_s,
        ge=0,
        description="Time to boot a switched-off node, in seconds. Default: `151.52` (taurus).",
    )
    switch_on_w: float = Field(
        default=_D.switch_on_w,
        ge=0,
        description="Power while booting, in watts. Default: `125.174` (taurus).",
    )
    switch_off_s: float = Field(
        default=_D.switch_off_s,
        ge=0,
        description="Time to shut a node down, in seconds. Default: `6.1` (taurus).",
    )
    switch_off_w: float = Field(
        default=_D.switch_off_w,
        ge=0,
        description="Power while shutting down, in watts. Default: `100.997` (taurus).",
    )
    freq_levels_hz: tuple[float, ...] = Field(
        default=_D.freq_levels_hz,
        description=(
            "CPU frequencies a policy may set, in hertz (any order; stored ascending); the highest "
            "is the nominal one at which `busy_w` is measured. `[]` means no frequency control. "
            "Default: taurus's 13 levels, 1.2 GHz to 2.301 GHz. Example: `[1.2e9, 1.8e9, 2.4e9]`."
        ),
    )
    cap_min_w: float = Field(
        default=_D.cap_min_w,
        gt=0,
        description=(
            "Lowest power cap a node accepts (RAPL or IPMI DCMI limit), in watts. "
            "Default: `100` (an assumption for taurus: just above its idle power)."
        ),
    )
    cap_max_w: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Highest power cap a node accepts, in watts. Default: `busy_w` (so `190.738` for "
            "taurus); set it for GPU nodes whose maximum includes the GPUs. Example: `2100`."
        ),
    )

    @field_validator("freq_levels_hz")
    @classmethod
    def _freqs(cls, v: tuple[float, ...]):
        problems = [((i,), f"must be a positive frequency in Hz, got {f:g}") for i, f in enumerate(v) if not f > 0]
        problems += [((i,), f"{f:g} Hz is listed twice") for i, f in enumerate(v) if f in v[:i]]
        if problems:
            raise field_problems(problems)
        return tuple(sorted(v))

    @model_validator(mode="after")
    def _ranges(self):
        set_ = self.model_fields_set

        def value(name: str) -> str:
            v = getattr(self, name)
            return f"{v:g} W" + ("" if name in set_ else f", the default; set {name} too")

        problems = []
        for name in ("off_w", "idle_w", "busy_w", "busy_min_w", "gpu_tdp_w", "switch_on_w", "switch_off_w"):
            if not math.isfinite(getattr(self, name)):
                problems.append((name, "must be a finite number of watts"))
        if problems:
            raise field_problems(problems)
        if self.off_w > self.idle_w:
            problems.append(("off_w", f"must be ≤ idle_w ({value('idle_w')}), got {self.off_w:g}"))
        if self.idle_w > self.busy_w:
            problems.append(("idle_w", f"must be ≤ busy_w ({value('busy_w')}), got {self.idle_w:g}"))
        elif self.idle_w > self.busy_min_w:
            problems.append(("idle_w", f"must be ≤ busy_min_w ({value('busy_min_w')}), got {self.idle_w:g}"))
        if self.busy_min_w > self.busy_w:
            problems.append(("busy_min_w", f"must be ≤ busy_w ({value('busy_w')}), got {self.busy_min_w:g}"))
        if self.cap_min_w > self.cap_max:
            other = "cap_max_w" if self.cap_max_w is not None else "cap_max_w, which defaults to busy_w"
            problems.append(("cap_min_w", f"must be ≤ {other} ({self.cap_max:g} W), got {self.cap_min_w:g}"))
        if problems:
            raise field_problems(problems)
        return self

    @property
    def cap_max(self) -> float:
        return self.busy_w if self.cap_max_w is None else self.cap_max_w

    def to_model(self) -> NodePowerModel:
        return NodePowerModel(
            off_w=self.off_w,
            idle_w=self.idle_w,
            busy_w=self.busy_w,
            busy_min_w=self.busy_min_w,
            gpu_tdp_w=self.gpu_tdp_w,
            switch_on_s=self.switch_on_s,
            switch_on_w=self.switch_on_w,
            switch_off_s=self.switch_off_s,
            switch_off_w=self.switch_off_w,
            freq_levels_hz=self.freq_levels_hz,
            cap_min_w=self.cap_min_w,
            cap_max_w=self.cap_max,
        )


class NodeGroupConfig(StrictModel):
    """An item of ``node_groups``: ``count`` identical nodes."""

    doc_name: ClassVar[str] = "node group"

    name: str = Field(
        description=(
            "Name of the group (letters, digits, `_`, `.`, `-`), unique in the file; it is also each "
            "node's `group` in reports. Required. Example: `gpu`."
        ),
    )
    count: int = Field(gt=0, description="Number of nodes in the group. Required. Example: `980`.")
    cores: int = Field(default=1, gt=0, description="Cores (processors) per node. Default: `1`. Example: `32`.")
    gpus: int = Field(default=0, ge=0, description="GPUs per node. Default: `0`. Example: `4`.")
    mics: int = Field(
        default=0,
        ge=0,
        description=(
            "Many-core accelerators (Xeon Phi, MIC) per node, a resource job units may ask for; their power "
            "is part of `power.busy_w`. Default: `0`. Example: `2`."
        ),
    )
    mem_mb: int = Field(
        default=0,
        ge=0,
        description=(
            "Memory per node, in megabytes (MiB, as Slurm counts). Default: `0` (not checked). "
            "Example: `262144`."
        ),
    )
    features: tuple[str, ...] = Field(
        default=(),
        description=(
            "Node features (Slurm `Features=`) that jobs may ask for, e.g. `[gpu, nvlink]`. Default: `[]`."
        ),
    )
    prefix: str | None = Field(
        default=None,
        description=(
            "Node names are `{prefix}{i:04d}` with `i` counting from 0 in the group (more digits "
            "past 9999 nodes); names must be unique across groups. Default: the group's `name`. "
            "Example: `node` gives `node0000`, `node0001`, ..."
        ),
    )
    power: PowerModelConfig = Field(
        default_factory=PowerModelConfig,
        description=(
            "Power model of every node in the group (see *Node power model keys*). Default: the "
            "taurus model, every key at its default."
        ),
    )

    @field_validator("name", "prefix")
    @classmethod
    def _node_name_part(cls, v: str | None):
        if v is not None and not _NAME_RE.match(v):
            raise ValueError(
                f"must start with a letter or digit and hold only letters, digits, '_', '.' and '-', got {v!r}"
            )
        return v

    @field_validator("features")
    @classmethod
    def _features(cls, v: tuple[str, ...]):
        problems = [((i,), "must be a non-empty name without commas or spaces") for i, f in enumerate(v)
                    if not f or "," in f or " " in f]
        if problems:
            raise field_problems(problems)
        return v

    def node_names(self) -> list[str]:
        prefix = self.name if self.prefix is None else self.prefix
        width = max(4, len(str(self.count - 1)))
        return [f"{prefix}{i:0{width}d}" for i in range(self.count)]


_RESPONSE_TYPES = {"linear": LinearResponse, "cpi": CpiResponse, "poly": PolynomialResponse}


def check_response_spec(spec: dict[str, Any]) -> str | None:
    """Why a response-model spec is invalid, or ``None``."""
    kind = spec.get("model", "linear")
    if not isinstance(kind, str) or kind not in _RESPONSE_TYPES:
        return f"model must be one of {', '.join(_RESPONSE_TYPES)}, got {kind!r}"
    try:
        model = response_from_spec(spec)
    except ValueError as e:
        return str(e)
    except TypeError:
        cls = _RESPONSE_TYPES.get(kind)
        names = [f.name for f in dataclasses.fields(cls)] if cls else []
        required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING] if cls else []
        unknown = sorted(set(spec) - set(names) - {"model"})
        missing = [n for n in required if n not in spec]
        if unknown:
            return f"unknown parameter {unknown[0]!r} for model {kind!r}; its parameters are {', '.join(names)}"
        if missing:
            return f"model {kind!r} needs {', '.join(missing)}"
        return f"invalid parameters for model {kind!r}: {spec}"
    for name in [f.name for f in dataclasses.fields(model) if f.name != "reading"]:  # reading: checked by the model
        value = getattr(model, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"{name} must be a number, got {value!r}"
    if not 0 <= model.floor < 1:
        return f"floor must be in [0, 1), got {model.floor}"
    if kind == "linear" and not 0 <= model.f <= 1:
        return f"f must be in [0, 1], got {model.f}"
    if kind == "cpi" and not model.cpi > 0:
        return f"cpi must be positive, got {model.cpi}"
    if kind == "poly" and not 0 < model.f_min_ghz < model.f_max_ghz:
        return f"need 0 < f_min_ghz < f_max_ghz, got {model.f_min_ghz} and {model.f_max_ghz}"
    if kind == "poly":
        (fp, p), (ft, t) = model.lowest()
        if not p > 0:
            return (f"p(f) = a + b f + c f^2 + d f^3 must be positive on [f_min_ghz, f_max_ghz], but p({fp:.4g} GHz) "
                    f"= {p:.4g} W")
        if not t > 0:
            return (f"t(f) = alpha + beta f + gamma f^2 must be positive on [f_min_ghz, f_max_ghz], but "
                    f"t({ft:.4g} GHz) = {t:.4g} s")
        t_max = model.time(model.f_max_ghz)
        if t < t_max * 0.99:  # (1 %: a fitted curve may dip a little near f_max; the engine reads that as 1)
            return (f"t(f) = alpha + beta f + gamma f^2 must not fall below t(f_max_ghz) on [f_min_ghz, "
                    f"f_max_ghz] (a job would run faster on a slower clock), but t({ft:.4g} GHz) = {t:.4g} s "
                    f"< t({model.f_max_ghz:.4g} GHz) = {t_max:.4g} s")
    return None


class PlatformConfig(StrictModel):
    """A platform file."""

    kind: Literal["platform"] = Field(
        default="platform",
        description="What this file configures. Optional: `wattsched check-config` recognises a platform file "
        "by its `node_groups` key. Default: `platform`.",
    )
    name: str = Field(
        min_length=1,
        description="Name of the platform, used in reports. Required. Example: `marconi100`.",
    )
    node_groups: list[NodeGroupConfig] = Field(
        min_length=1,
        description=(
            "The nodes, as groups of identical nodes (see *Node group keys*); nodes are numbered in "
            "file order. At least one group. Required."
        ),
    )
    response_classes: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description=(
            "Response models by application class: how a job's run time and power change under a "
            "cap or a lower frequency. Each value is `{model: linear|cpi|poly, ...}` with the "
            "model's parameters: `linear` (`f`, Borghesi's D' = max(1, F/M)·D; `reading: interpolated` for "
            "D' = D·(1 + F·(1/M − 1))), `cpi` (`cpi`), `poly` "
            "(`a b c d alpha beta gamma f_min_ghz f_max_ghz`, Ahmed/Liu), each with an optional "
            "`floor` (fraction of power a cap cannot remove, in [0, 1)). They extend or replace the "
            "built-in classes `cpu` (linear, f 1), `memory` (cpi 5) and `mixed` (linear, f 0.5), "
            "all with floor 0.3. Default: `{}`. Example: `{io: {model: cpi, cpi: 8, floor: 0.4}}`."
        ),
    )

    budget_w: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Power budget of the whole machine (`W_max` of Sarood et al. 2014), in watts: what an "
            "overprovisioned machine, one with more nodes than the budget can feed at full power, may draw. "
            "A simulation on the platform has it as its cap unless the simulation config gives `cap_w` or "
            "`cap_schedule`; `parm` plans within it (or within the cap in force, if lower). Default: none. "
            "Example: `3300`."
        ),
    )
    cpu_power_levels_w: tuple[float, ...] | None = Field(
        default=None,
        description=(
            "CPU (package) power caps a job's nodes may get (`P_j` of Sarood et al. 2014), in watts, "
            "positive and distinct, any order (stored ascending). A node at level `p` counts "
            "`base_w + mem_w + p` against `budget_w`; needs `base_w` and `mem_w`, and every node group's "
            "`busy_w` must be at least `base_w + mem_w +` the highest level. Default: none. "
            "Example: `[30, 32, 34, 39, 45, 55]`."
        ),
    )
    base_w: float | None = Field(
        default=None,
        ge=0,
        description=(
            "Base power of a node, in watts: what it draws besides its CPU and memory (Sarood et al. 2014 "
            "measure 38 W). With `cpu_power_levels_w`. Default: none. Example: `38`."
        ),
    )
    mem_w: float | None = Field(
        default=None,
        ge=0,
        description=(
            "Memory power of a node, in watts: its memory's power cap, counted in full (Sarood et al. 2014 "
            "cap it at 18 W). With `cpu_power_levels_w`. Default: none. Example: `18`."
        ),
    )

    @field_validator("cpu_power_levels_w")
    @classmethod
    def _levels(cls, v: tuple[float, ...] | None):
        if v is None:
            return v
        if not v:
            raise ValueError("give at least one level, e.g. [30, 45, 60], or leave the key out")
        problems = [((i,), f"must be a positive finite number of watts, got {p!r}") for i, p in enumerate(v)
                    if not (math.isfinite(p) and p > 0)]
        problems += [((i,), f"{p:g} W is listed twice") for i, p in enumerate(v) if p in v[:i]]
        if problems:
            raise field_problems(problems)
        return tuple(sorted(v))

    @model_validator(mode="after")
    def _overprovisioned(self):
        problems = []
        if self.cpu_power_levels_w is not None:
            for key in ("base_w", "mem_w"):
                if getattr(self, key) is None:
                    problems.append((key, "required with cpu_power_levels_w: a node at CPU level p counts "
                                          "base_w + mem_w + p watts (Sarood et al. 2014: base_w 38, mem_w 18)"))
            if problems:
                raise field_problems(problems)
            top = self.base_w + self.mem_w + self.cpu_power_levels_w[-1]
            for gi, group in enumerate(self.node_groups):
                if group.power.busy_w < top:
                    problems.append((("node_groups", gi, "power", "busy_w"),
                                     f"{group.power.busy_w:g} W is below base_w + mem_w + the highest CPU level "
                                     f"({self.base_w:g} + {self.mem_w:g} + {self.cpu_power_levels_w[-1]:g} = "
                                     f"{top:g} W): a node at that level would draw more than busy"))
        elif self.base_w is not None or self.mem_w is not None:
            key = "base_w" if self.base_w is not None else "mem_w"
            problems.append((key, "only means something with cpu_power_levels_w (the CPU caps a job may get); "
                                  "give both or neither"))
        if problems:
            raise field_problems(problems)
        return self

    @field_validator("response_classes")
    @classmethod
    def _responses(cls, v: dict[str, dict[str, Any]]):
        problems = []
        for name, spec in v.items():
            if not name:
                problems.append(((name,), "a class needs a non-empty name"))
                continue
            why = check_response_spec(spec)
            if why:
                problems.append(((name,), why))
        if problems:
            raise field_problems(problems)
        return v

    @model_validator(mode="after")
    def _unique(self, info: ValidationInfo):
        total = 0
        for gi, group in enumerate(self.node_groups):
            total += group.count
            why = too_many_nodes(total, (info.context or {}).get("max_nodes"))
            if why:
                raise field_problems([(("node_groups", gi, "count"), why)])
        problems = []
        groups: dict[str, int] = {}
        owner: dict[str, int] = {}
        for gi, group in enumerate(self.node_groups):
            if group.name in groups:
                first = groups[group.name]
                problems.append(((gi, "name"), f"group name {group.name!r} is already used by node_groups[{first}]"))
            groups.setdefault(group.name, gi)
            for node_name in group.node_names():
                if node_name in owner and owner[node_name] != gi:
                    key = "prefix" if group.prefix is not None else "name"
                    problems.append(
                        ((gi, key), f"node name {node_name!r} is also in node_groups[{owner[node_name]}]; "
                                    "give the groups different prefixes")
                    )
                    break
                owner[node_name] = gi
        if problems:
            raise field_problems((("node_groups", *loc), m) for loc, m in problems)
        return self

    def build(self, source: str | None = None) -> Platform:
        """The :class:`Platform`, with its ``response_classes`` and the ``source`` file it was read from."""
        nodes: list[Node] = []
        for group in self.node_groups:
            power = group.power.to_model()
            for node_name in group.node_names():
                nodes.append(
                    Node(
                        index=len(nodes),
                        name=node_name,
                        cores=group.cores,
                        gpus=group.gpus,
                        mem_mb=group.mem_mb,
                        features=group.features,
                        group=group.name,
                        power=power,
                        mics=group.mics,
                    )
                )
        return Platform(nodes, name=self.name, response_classes=self.build_response_classes(), source=source,
                        budget_w=self.budget_w, cpu_power_levels_w=self.cpu_power_levels_w, base_w=self.base_w,
                        mem_w=self.mem_w)

    def build_response_classes(self) -> dict[str, ResponseModel]:
        classes = dict(DEFAULT_CLASSES)
        classes.update({name: response_from_spec(spec) for name, spec in self.response_classes.items()})
        return classes


def packaged_platforms() -> list[str]:
    """Names of the platforms shipped in ``wattsched/data/platforms``.

    >>> "default" in packaged_platforms() and "marconi100" in packaged_platforms()
    True
    """
    folder = resources.files("wattsched").joinpath("data", "platforms")
    return sorted(p.name.rsplit(".", 1)[0] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _is_bare_name(source: str) -> bool:
    return "/" not in source and os.sep not in source and not source.endswith((".yaml", ".yml"))


def load_platform_config(source: str | os.PathLike, *, max_nodes: int | None = None) -> tuple[PlatformConfig, str]:
    """Validate a platform file (a path, or the bare name of a packaged platform).

    Returns the model and the label of the file it came from. A file of more
    than ``max_nodes`` nodes (default :data:`DEFAULT_MAX_NODES`) is refused.
    """
    context = {"max_nodes": max_nodes}
    text = os.fspath(source)
    if isinstance(source, str) and _is_bare_name(text):
        resource = resources.files("wattsched").joinpath("data", "platforms", f"{text}.yaml")
        if not resource.is_file():
            raise ConfigError(
                f"{text}: no packaged platform of that name; packaged platforms are "
                f"{', '.join(packaged_platforms())} (give a path ending in .yaml for your own file)"
            )
        with resources.as_file(resource) as path:
            return load_yaml_model(path, PlatformConfig, label=os.fspath(path), context=context), os.fspath(path)
    return load_yaml_model(source, PlatformConfig, context=context), text


def load_platform(source: str | os.PathLike, *, max_nodes: int | None = None) -> Platform:
    """Read a platform file, or a packaged platform by name (``"default"``, ``"marconi100"``).

    The result carries ``response_classes`` (``DEFAULT_CLASSES`` updated with the
    file's classes) and ``source`` attributes.

    Raises
    ------
    ConfigError
        Naming the file and key of every problem, e.g.
        ``platform.yaml:9: node_groups[1].power.idle_w: must be ≤ busy_w (190.738 W), got 300``.

    Examples
    --------
    >>> p = load_platform("marconi100")
    >>> len(p), p.nodes[0].name, p.nodes[0].gpus, p.max_power_w / len(p)
    (980, 'm100n0000', 4, 2100.0)
    """
    config, label = load_platform_config(source, max_nodes=max_nodes)
    return config.build(source=label)


class PlatformSizeWarning(UserWarning):
    """``platform_from_procs`` had to round a processor count up to whole nodes."""


def platform_from_procs(
    max_procs: int,
    cores_per_node: int = 1,
    power: NodePowerModel | None = None,
    name: str | None = None,
    *,
    max_nodes: int | None = None,
) -> Platform:
    """A homogeneous cluster big enough for ``max_procs`` processors (e.g. an SWF ``MaxProcs``).

    It has ``ceil(max_procs / cores_per_node)`` nodes named ``node0000``...; if
    ``max_procs`` is not a multiple of ``cores_per_node`` the extra cores exist
    but the trace never had them, and a :class:`PlatformSizeWarning` says so.
    The power model defaults to :class:`NodePowerModel` (taurus, the same values
    as the packaged ``default`` platform).

    >>> p = platform_from_procs(100, cores_per_node=4)
    >>> len(p), p.total_cores, p.name
    (25, 100, '100-procs')
    """
    max_procs = _positive_int(max_procs, "procs", "a positive whole number of processors")
    cores_per_node = _positive_int(cores_per_node, "cores_per_node", "a positive whole number")
    count = -(-max_procs // cores_per_node)
    why = too_many_nodes(count, max_nodes)
    if why:
        raise ConfigError(f"procs: {why}")
    if max_procs % cores_per_node:
        warnings.warn(
            f"procs={max_procs} is not a multiple of cores_per_node={cores_per_node}: using {count} nodes "
            f"({count * cores_per_node} cores, {count * cores_per_node - max_procs} more than the trace had)",
            PlatformSizeWarning,
            stacklevel=2,
        )
    platform = Platform.homogeneous_cluster(
        count, cores=cores_per_node, power=power or NodePowerModel(), name=name or f"{max_procs}-procs"
    )
    return platform


def _positive_int(value: Any, key: str, what: str) -> int:
    """``value`` as an int (numpy integers included), or a ConfigError naming ``key``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise ConfigError(f"{key}: must be {what}, got {value!r}") from None
    if number < 1:
        raise ConfigError(f"{key}: must be {what}, got {value!r}")
    return number


def response_classes_of(platform: Platform) -> dict[str, ResponseModel]:
    """The platform's response classes: those of its file, or ``DEFAULT_CLASSES``."""
    return dict(platform.response_classes)
