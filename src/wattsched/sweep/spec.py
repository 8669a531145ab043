"""The sweep file: a base simulation config plus axes, validated whole before any run starts.

Errors name the file, the line and the key (``FILE:LINE: axes.caps[2]: message``),
with the helpers of :mod:`wattsched.config`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from wattsched.config import (
    CapEntries,
    CapValue,
    EnergyBudgetConfig,
    SimConfig,
    StrictModel,
    field_problems,
    format_validation_error,
    parse_cap_value,
    read_yaml,
)
from wattsched.config.base import _require_mapping
from wattsched.errors import ConfigError

AXES = ("traces", "slices", "platforms", "policies", "predictors", "caps", "energy_budgets", "dr_events",
        "response", "seeds")
"""Axis names, in the order their columns appear in result rows."""


class PluginEntry(StrictModel):
    """A policy or predictor on an axis: a name and parameters; a parameter given as a list is a grid."""

    doc_name: ClassVar[str] = "policy or predictor entry"

    name: str = Field(min_length=1, description="Registered short name. Required. Example: `easy-pc`.")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Parameters; a list value is a grid (one run per value, product over parameters). "
            "Default: `{}`. Example: `{check: [mean, gaussian_99]}`."
        ),
    )


class PowerProfileConfig(StrictModel):
    """The steps of the augmentation's seeded power series (fluctuating real power) for a sweep's slices."""

    doc_name: ClassVar[str] = "power profile"

    step_s: float = Field(default=3600.0, gt=0, description="Length of a step in seconds. Default: `3600`.")
    max_steps: int = Field(default=12, gt=0, description="Most steps per job (longer steps for long jobs).")


class SlicesConfig(StrictModel):
    """Workload slices of one trace: ``count`` slices of ``length_h`` hours, each after a warm-up."""

    doc_name: ClassVar[str] = "workload slices"

    trace: Path = Field(description="The trace to cut (SWF), relative to the sweep file. Required.")
    count: int = Field(gt=0, description="Number of slices. Required. Example: `30`.")
    length_h: float = Field(gt=0, description="Hours of submissions measured per slice. Required. Example: `24`.")
    warmup_h: float = Field(
        default=0.0, ge=0,
        description=(
            "Hours of submissions replayed before each slice's t0 to fill the machine; these jobs run but "
            "are not measured (window metrics start at t0). Default: `0`. Example: `24`."
        ),
    )
    t0: Literal["strata", "load"] = Field(
        default="strata",
        description=(
            "How slice starts are chosen: `strata` draws one t0 (seeded) in each of `count` equal strata of "
            "the trace; `load` takes the `count` non-overlapping slices of highest offered load (busiest). "
            "Default: `strata`."
        ),
    )
    seed: int = Field(default=0, ge=0, description="Seed of the t0 draw; slice i's run seed is `seed*1000 + i`.")
    min_history_days: float = Field(
        default=0.0, ge=0,
        description="Earliest t0, in days after the trace's start (so users have a history). Default: `0`.",
    )
    t0_days: list[float] | None = Field(
        default=None, description="Explicit slice starts in trace days instead of a draw. Default: none.")
    cores_per_node: int = Field(default=1, gt=0, description="Trace processors per node. Default: `1`.")
    prime_history: bool = Field(
        default=False,
        description=(
            "Prime a `history` predictor with every trace job of the slice's users that really completed "
            "before the slice (warm-up included) starts. Default: `false`."
        ),
    )
    power_profile: PowerProfileConfig | None = Field(
        default=None,
        description=(
            "Steps of the augmentation's seeded power series for the slices' jobs (the `ar1` profile of "
            "`augment`, docs/simulator.md 2.4, with this `step_s` and `max_steps`; it is on even if the "
            "base sets `augment: {profile: constant}`). Default: none (the base's `augment` block decides: "
            "its defaults are fluctuating power with 1800 s steps, at most 3). "
            "Example: `{step_s: 3600, max_steps: 12}`."
        ),
    )

    @model_validator(mode="after")
    def _t0_days(self):
        if self.t0_days is not None and len(self.t0_days) != self.count:
            raise field_problems([("t0_days", f"gives {len(self.t0_days)} starts for count {self.count}")])
        return self


class CapWindowConfig(StrictModel):
    """Where the caps of the ``caps`` axis apply, in seconds relative to t0 (the end of the warm-up)."""

    doc_name: ClassVar[str] = "cap window"

    start_s: float = Field(default=0.0, description="Window start after t0. Default: `0`.")
    end_s: float = Field(description="Window end after t0. Required. Example: `10800`.")

    @model_validator(mode="after")
    def _order(self):
        if self.end_s <= self.start_s:
            raise field_problems([("end_s", f"must be after start_s ({self.start_s:g}), got {self.end_s:g}")])
        return self


class CapScheduleValue(StrictModel):
    """A cap axis value that is a whole schedule (times relative to t0)."""

    doc_name: ClassVar[str] = "cap schedule value"

    label: str = Field(min_length=1, description="Name of this schedule in results. Required.")
    schedule: CapEntries = Field(description="Cap schedule entries (see *Cap schedule entries*). Required.")


class AxesConfig(StrictModel):
    """Axes of a sweep: each given axis multiplies the runs by its length (unless zipped)."""

    doc_name: ClassVar[str] = "sweep axes"

    traces: list[Path] | None = Field(default=None, description="Whole traces to replay, relative to the file.")
    slices: SlicesConfig | None = Field(default=None, description="Workload slices of a trace (see below).")
    platforms: list[str] | None = Field(default=None, description="Platform names or files.")
    policies: list[PluginEntry | str] | None = Field(default=None, description="Policies with parameter grids.")
    predictors: list[PluginEntry | str | None] | None = Field(
        default=None, description="Predictors (`null`: none) with parameter grids.")
    caps: list[CapScheduleValue | CapValue] | None = Field(
        default=None,
        description=(
            "Caps: watts, a percentage (of `cap_reference_dyn_w` if given, else of the platform's maximum "
            "dynamic power), `null` (uncapped), or `{label, schedule}`. Applied in `cap_window` if given."
        ),
    )
    energy_budgets: list[list[EnergyBudgetConfig]] | None = Field(
        default=None, description="Lists of energy-budget windows (times relative to t0).")
    dr_events: list[CapEntries] | None = Field(
        default=None,
        description="Demand-response events: lists of cap windows (relative to t0), combined with the cap by minimum.")
    response: list[dict[str, dict[str, Any]]] | None = Field(
        default=None,
        description="Response-model overrides per class (merged into the platform's `response_classes`).")
    seeds: list[int] | None = Field(default=None, description="Seeds of the power augmentation and the engine.")

    @field_validator("caps", mode="before")
    @classmethod
    def _caps(cls, v):
        if not isinstance(v, list):
            return v
        out, problems = [], []
        for i, x in enumerate(v):
            try:
                out.append(x if isinstance(x, dict) else parse_cap_value(x))
            except ValueError as exc:
                problems.append(((i,), str(exc)))
        if problems:
            raise field_problems(problems)
        return out

    @field_validator("traces", "platforms", "policies", "predictors", "caps", "energy_budgets", "dr_events",
                     "response", "seeds")
    @classmethod
    def _not_empty(cls, v):
        if v is not None and len(v) == 0:
            raise ValueError("an axis needs at least one value (leave it out to use the base config)")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v):
        if v is not None and any(s < 0 for s in v):
            raise ValueError("seeds must be ≥ 0")
        return v

    def given(self) -> list[str]:
        return [a for a in AXES if getattr(self, a) is not None]


class ClusterConfig(StrictModel):
    """Where the runs execute: a local Dask cluster, or Dask workers started as Slurm jobs."""

    doc_name: ClassVar[str] = "sweep cluster"

    kind: Literal["local", "slurm"] = Field(default="local", description="`local` or `slurm`. Default: `local`.")
    workers: int | None = Field(
        default=None, gt=0,
        description="Worker processes (local: default the number of cores; slurm: Slurm jobs, default 1).")
    queue: str | None = Field(default=None, description="slurm: partition (`#SBATCH -p`). Default: Slurm's.")
    account: str | None = Field(default=None, description="slurm: account. Default: none.")
    walltime: str = Field(default="01:00:00", description="slurm: time limit of a worker job. Default: `01:00:00`.")
    cores: int = Field(default=1, gt=0, description="slurm: cores per worker job (one worker process each).")
    memory: str = Field(default="2GB", description="slurm: memory per worker job. Default: `2GB`.")
    job_extra_directives: list[str] = Field(default_factory=list, description="slurm: extra `#SBATCH` lines.")
    scheduler_host: str | None = Field(
        default=None,
        description=(
            "slurm: address the Dask scheduler listens on, reachable from the compute nodes. "
            "Default: the host's name."
        ),
    )
    python: str | None = Field(
        default=None, description="slurm: Python on the nodes (shared storage). Default: this interpreter.")
    local_directory: str | None = Field(default=None, description="Worker scratch directory. Default: Dask's.")


MAX_RUNS = 1_000_000
"""Default bound of a sweep's run count (the sweep file's ``max_runs`` raises it)."""


class SweepConfig(StrictModel):
    """A campaign: ``wattsched sweep SWEEP.yaml``."""

    path_keys: ClassVar[tuple[str, ...]] = ("out",)

    kind: Literal["sweep"] = Field(description="Marks a sweep file. Required: `sweep`.")
    name: str = Field(default="sweep", description="Name shown in the report. Default: `sweep`.")
    base: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Base simulation config: any key of a simulation config (see above) except `out`. Axes override "
            "its keys. `trace` is needed unless a `traces` or `slices` axis is given."
        ),
    )
    axes: AxesConfig = Field(default_factory=AxesConfig, description="Axes common to every grid block.")
    grid: list[AxesConfig] | None = Field(
        default=None,
        description=(
            "Blocks of axes; the runs are the union of each block's product (a block's axes override "
            "`axes`). Default: one block, `axes` alone."
        ),
    )
    zip: list[list[str]] = Field(
        default_factory=list,
        description="Groups of axes that advance together (equal lengths) instead of multiplying.")
    exclude: list[dict[str, Any]] = Field(
        default_factory=list,
        description=(
            "Rules dropping runs: a run is dropped when every `column: value` of a rule matches its axis "
            "columns (`policy`, `policy.check`, `predictor`, `cap`, `seed`, `slice`, ...)."
        ),
    )
    cap_window: CapWindowConfig | None = Field(
        default=None, description="Apply the `caps` values only in this window (relative to t0). Default: always.")
    cap_reference_dyn_w: float | None = Field(
        default=None, gt=0,
        description="Percentages on the caps axis are of this dynamic power (idle + p × this). Default: none.")
    metrics: list[str] = Field(
        default_factory=list,
        description=(
            "Extra per-run metrics: `FILE.py:function` (relative to the sweep file) or `module:function`, "
            "called as `function(result, run)` and returning a dict of columns."
        ),
    )
    run_tables: bool = Field(
        default=False,
        description=(
            "Also write each run's tables, as `wattsched simulate` writes them (`jobs.csv`, `jobs.parquet`, "
            "`timeline.csv`, ...), into `OUT/runs/KEY/`. Does not change the runs or their keys. Default: `false`."
        ),
    )
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="Where the runs execute.")
    out: Path | None = Field(default=None, description="Results directory. Default: `sweeps/NAME`.")
    max_runs: int = Field(
        default=MAX_RUNS, gt=0,
        description=(
            "Bound on the number of runs the axes give (counted before `exclude` rules, without building them): a "
            f"larger sweep is refused at once. Raise it if you mean it. Default: `{MAX_RUNS:_}`."
        ),
    )

    _source: str | None = PrivateAttr(default=None)
    _lines: dict = PrivateAttr(default_factory=dict)

    @field_validator("base")
    @classmethod
    def _base(cls, v):
        unsupported = {
            "out": "set by the sweep, not the base config",
            "kind": "set by the sweep, not the base config",
            "baseline": "not used in sweeps: add the baseline policy as runs of the sweep (a grid block)",
            "demand_response": "not used in sweeps yet: give events on the dr_events axis",
        }
        problems = [(k, unsupported.get(k, "not a key of the base simulation config")) for k in v
                    if k not in SimConfig.model_fields or k in unsupported]
        if problems:
            raise field_problems(problems)
        return v

    @field_validator("zip")
    @classmethod
    def _zip(cls, v):
        problems = []
        seen: set[str] = set()
        for i, group in enumerate(v):
            for j, name in enumerate(group):
                if name not in AXES:
                    problems.append(((i, j), f"unknown axis {name!r} (axes: {', '.join(AXES)})"))
                elif name in seen:
                    problems.append(((i, j), f"axis {name!r} is in two zip groups"))
                seen.add(name)
            if len(group) < 2:
                problems.append(((i,), "a zip group needs at least two axes"))
        if problems:
            raise field_problems(problems)
        return v

    @property
    def source(self) -> str:
        return self._source or "<sweep>"

    def blocks(self) -> list[AxesConfig]:
        if not self.grid:
            return [self.axes]
        common = self.axes.model_dump(exclude_none=True)
        return [AxesConfig.model_validate({**common, **b.model_dump(exclude_none=True)}) for b in self.grid]


def _resolve(base_dir: Path, p: Any) -> Any:
    if p is None or os.path.isabs(str(p)):
        return p
    return str((base_dir / str(p)).resolve()) if not str(p).startswith(("/",)) else p


def load_sweep(path: str | os.PathLike) -> SweepConfig:
    """Read and validate a sweep file; paths become absolute (relative to the file).

    Raises
    ------
    ConfigError
        One line per problem, naming the file, the key and its line.
    """
    label = os.fspath(path)
    raw, lines = read_yaml(path, label=label)
    _require_mapping(raw, label)
    base_dir = Path(path).resolve().parent
    data = _absolute_paths(raw, base_dir)
    try:
        cfg = SweepConfig.model_validate(data)
    except ValidationError as e:
        raise format_validation_error(e, data, label=label, root=SweepConfig, lines=lines) from None
    cfg._source = label
    cfg._lines = lines
    return cfg


def _absolute_paths(raw: dict, base_dir: Path) -> dict:
    """A copy of ``raw`` with the file's relative paths made absolute (traces, slices, base paths, out)."""
    import copy

    data = copy.deepcopy(raw)

    def fix(d: Any, key: str) -> None:
        if isinstance(d, dict) and isinstance(d.get(key), str):
            d[key] = _path(base_dir, d[key], key)

    base = data.get("base")
    if isinstance(base, dict):
        for key in SimConfig.path_keys:
            v = base.get(key)
            if isinstance(v, str) and (key != "platform" or "/" in v or v.endswith((".yaml", ".yml"))):
                base[key] = _path(base_dir, v, key)
    fix(data, "out")
    blocks = [data.get("axes")] + (list(data.get("grid") or []) if isinstance(data.get("grid"), list) else [])
    for axes in blocks:
        if not isinstance(axes, dict):
            continue
        if isinstance(axes.get("traces"), list):
            axes["traces"] = [_path(base_dir, t, "traces") if isinstance(t, str) else t for t in axes["traces"]]
        fix(axes.get("slices"), "trace")
        if isinstance(axes.get("platforms"), list):
            axes["platforms"] = [_path(base_dir, p, "platforms") if isinstance(p, str) and
                                 ("/" in p or p.endswith((".yaml", ".yml"))) else p for p in axes["platforms"]]
    if isinstance(data.get("metrics"), list):
        out = []
        for m in data["metrics"]:
            if isinstance(m, str) and ".py:" in m:
                file, _, func = m.rpartition(":")
                m = f"{_path(base_dir, file, 'metrics')}:{func}"
            out.append(m)
        data["metrics"] = out
    return data


def _path(base_dir: Path, value: str, key: str) -> str:
    p = Path(os.path.expanduser(value))
    return str(p if p.is_absolute() else (base_dir / p))


def check_files(cfg: SweepConfig) -> None:
    """Every trace, slice trace, platform file and metrics file exists; else :class:`ConfigError` naming the key."""
    problems = []

    def where(loc: tuple, message: str) -> str:
        return located(cfg, loc, message)

    base_trace = cfg.base.get("trace")
    if base_trace is not None and not Path(base_trace).exists():
        problems.append(where(('base', 'trace'), f"no such file {base_trace!r}"))
    blocks = [("axes", cfg.axes)] + [(("grid", i), b) for i, b in enumerate(cfg.grid or [])]
    for prefix, axes in blocks:
        pre = prefix if isinstance(prefix, tuple) else (prefix,)
        for i, t in enumerate(axes.traces or []):
            if not Path(t).exists():
                problems.append(where((*pre, 'traces', i), f"no such file {str(t)!r}"))
        if axes.slices is not None and not Path(axes.slices.trace).exists():
            problems.append(where((*pre, 'slices', 'trace'), f"no such file {str(axes.slices.trace)!r}"))
    for i, axes in enumerate(cfg.blocks()):
        if axes.traces is None and axes.slices is None and base_trace is None:
            problems.append(where(("grid", i) if cfg.grid else ("axes",),
                                  "no trace: give base.trace, a traces axis or a slices axis"))
    for i, m in enumerate(cfg.metrics):
        file, sep, func = m.rpartition(":")
        if not sep or not func or not file:
            problems.append(where(('metrics', i), f"expected FILE.py:function or module:function, got {m!r}"))
        elif file.endswith(".py") and not Path(file).exists():
            problems.append(where(('metrics', i), f"no such file {file!r}"))
    if problems:
        raise ConfigError("\n".join(problems))


def located(cfg: SweepConfig, loc: tuple, message: str) -> str:
    """``FILE:LINE: key.path: message``, the format of every config error."""
    from wattsched.config.base import _format_loc, _line_for
    from wattsched.errors import located as _located

    return _located(cfg.source, _line_for(loc, cfg._lines), _format_loc(loc), message)


def config_reference() -> list[str]:
    """The sweep-file sections of ``docs/config.md``, under their own ``# Sweep files`` title."""
    from wattsched.config.reference import model_reference

    lines = ["# Sweep files", "",
             "`wattsched sweep SWEEP.yaml` runs a campaign: a base simulation config and axes whose product "
             "(with `zip` groups and `exclude` rules, and optional `grid` blocks whose union is taken) gives "
             "the runs. See docs/sweeps.md for a worked example.", ""]
    lines += model_reference(SweepConfig, "Sweep keys", "Top level of a sweep file. Only `kind: sweep` is required.",
                             overrides={"axes": {"type": "axes block"}, "grid": {"type": "list of axes blocks"},
                                        "cluster": {"type": "cluster block"},
                                        "cap_window": {"type": "cap window block"}})
    lines += model_reference(AxesConfig, "Axes (`axes`, items of `grid`)",
                             "Each axis given multiplies the runs by its number of values (unless zipped). "
                             "Result rows carry one column per axis (`trace`, `slice`, `t0_s`, `platform`, "
                             "`policy` and `policy.PARAM`, `predictor` and `predictor.PARAM`, `cap`, "
                             "`energy_budget`, `dr_events`, `response`, `seed`).",
                             overrides={"slices": {"type": "slices block"},
                                        "caps": {"type": "list of watts, percentage, null or {label, schedule}"},
                                        "policies": {"type": "list of name or {name, params}"},
                                        "predictors": {"type": "list of name, null or {name, params}"}})
    lines += model_reference(SlicesConfig, "Workload slices (`axes.slices`)",
                             "Slices of one trace, each replayed after a warm-up whose jobs run but are not "
                             "measured. `wattsched traces slice SWEEP.yaml` lists them with their offered load.")
    lines += model_reference(CapWindowConfig, "Cap window (`cap_window`)", "Times in seconds after t0.")
    lines += model_reference(ClusterConfig, "Cluster (`cluster`)",
                             "Where the runs execute. `--scheduler ADDRESS` on the command line overrides it.")
    return lines


def base_platform(cfg: SweepConfig, trace=None):
    """The machine of the base config for ``trace`` (default: the base trace), used to cut and describe slices.

    Built as every run builds it (:func:`wattsched.sim.build.build_platform`): ``platform`` or ``procs``,
    else the SWF header of the trace.
    """
    from wattsched.sim.build import build_platform

    machine = {k: cfg.base[k] for k in ("platform", "procs", "cores_per_node", "max_nodes") if k in cfg.base}
    trace = trace if trace is not None else cfg.base.get("trace")
    if trace is None and not machine.get("platform") and not machine.get("procs"):
        machine["platform"] = "default"
    return build_platform(SimConfig.model_validate({"trace": str(trace or "unused.swf"), **machine}))
