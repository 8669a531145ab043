"""The simulation config (``sim.yaml``): :class:`SimConfig`."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from wattsched.config.base import Loc, StrictModel, _looks_like_path, field_problems, key_locator, locate
from wattsched.config.caps import (
    CapEntries,
    CapValue,
    DemandResponseEventConfig,
    EnergyBudgetConfig,
    _cap_in_watts,
    cap_schedule_from_entries,
    parse_cap_value,
    read_cap_entries,
)
from wattsched.errors import ConfigError
from wattsched.model.constraints import CapSchedule, DemandResponseEvent, EnergyBudget
from wattsched.workload.moldable import MoldableParams

__all__ = [
    "SchedPassesConfig",
    "SimConfig",
]


class SchedPassesConfig(StrictModel):
    """The ``sched_passes`` block: jobs start only at Slurm's main scheduling passes."""

    doc_name: ClassVar[str] = "sched_passes block"

    interval_s: float = Field(
        default=3.0,
        ge=0,
        description=(
            "Least time between two passes of Slurm's main scheduler, in seconds: `batch_sched_delay` of "
            "the cluster's `SchedulerParameters` (`scontrol show config`; 3 when it is not set). "
            "Default: `3`. Example: `1`."
        ),
    )
    tick_s: float = Field(
        default=1.0,
        gt=0,
        description=(
            "Period of the loop of slurmctld that runs the passes, in seconds (Slurm's is one second). "
            "Passes fall on its ticks, counted from the run's first event. Default: `1`."
        ),
    )
    release_lag_s: float = Field(
        default=0.0,
        ge=0,
        description=(
            "Time from the policy's decision to the release that asks Slurm for a pass, in seconds: "
            "the daemon's poll (its `poll_interval_s`) when the policy is the daemon's, which holds jobs "
            "and releases them; 0 when the policy stands for Slurm's own scheduler. Default: `0`. "
            "Example: `1`."
        ),
    )


class SimConfig(StrictModel):
    """A simulation run: ``wattsched simulate sim.yaml``."""

    # top-level keys that hold paths written relative to the config file
    path_keys: ClassVar[tuple[str, ...]] = ("trace", "out", "platform", "cap_schedule")

    kind: Literal["simulation"] = Field(
        default="simulation",
        description=(
            "What this file configures. Optional: `wattsched check-config` recognises a simulation "
            "config by its `trace` key. Default: `simulation`."
        ),
    )
    trace: Path = Field(
        description=(
            "Workload trace to replay: an SWF file (`.swf`, `.swf.gz`) or another format the "
            "simulator reads. Relative to the config file's directory. Required. "
            "Example: `traces/KTH-SP2-1996-2.1-cln.swf`."
        ),
    )
    platform: str | None = Field(
        default=None,
        description=(
            "The cluster: a platform YAML file (see *Platform files* below; a value containing `/` or "
            "ending in `.yaml` is a path, relative to the config file) or the name of a packaged "
            "platform: `default` (Grid'5000 taurus power model, 128 nodes), `marconi100`, `eurora`, `ahmed2017`, or "
            "the overprovisioned `sarood-testbed` and `intrepid-overprovisioned`. "
            "Give either `platform` or `procs`, not both; with neither, the machine is derived from "
            "the trace's header (`MaxProcs` processors, `cores_per_node` per node). Default: none. "
            "Example: `marconi100`."
        ),
    )
    procs: int | None = Field(
        default=None,
        gt=0,
        description=(
            "Instead of `platform`: build a homogeneous cluster of `ceil(procs / cores_per_node)` "
            "nodes with the default (taurus) power model, e.g. the `MaxProcs` of an SWF header. "
            "If `procs` is not a multiple of `cores_per_node` the last node is partly unused and a "
            "warning says so. Default: none. Example: `100`."
        ),
    )
    cores_per_node: int = Field(
        default=1,
        gt=0,
        description=(
            "With `procs` only: processors (cores) per node. Default: `1` (one trace processor is "
            "one node, as in batsim's platforms). Example: `16`."
        ),
    )
    policy: str = Field(
        default="easy",
        min_length=1,
        description=(
            "Scheduling policy, by its registered short name (see `docs/policies.md`). "
            "Default: `easy` (EASY backfilling). Example: `fcfs`."
        ),
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Parameters of the policy, checked against the policy's own parameter model when the "
            "policy is built. Default: `{}` (the policy's defaults). Example: `{order: saf}`."
        ),
    )
    cap_w: CapValue = Field(
        default=None,
        description=(
            "A constant platform power cap for the whole run: watts, or a percentage of the "
            "platform's maximum dynamic power, such as `\"60%\"`, meaning idle power + 60 % of "
            "(maximum power - idle power), the convention of Carastan-Santos et al. 2024. "
            "Give either `cap_w` or `cap_schedule`, not both. Default: none (uncapped). "
            "Example: `450000` or `\"60%\"`."
        ),
    )
    cap_schedule: CapEntries | None = Field(
        default=None,
        description=(
            "A power cap that changes over time (capped windows, demand-response events): either a "
            "list of entries (see *Cap schedule entries*) or the path of a YAML or CSV file holding "
            "them (CSV columns `start_s,cap_w[,label]` or `start_s,end_s,cap_w[,label]`). Steps hold "
            "until the next step; windows lift the cap at `end_s`. Before the first entry the "
            "platform is uncapped. Default: none. "
            "Example: `[{start_s: 0, end_s: 10800, cap_w: \"50%\"}]`."
        ),
    )
    energy_budgets: list[EnergyBudgetConfig] = Field(
        default_factory=list,
        description=(
            "Energy-budget windows (see *Energy budget entries*): the platform may use at most "
            "`energy_j` joules between `start_s` and `end_s`. Windows may overlap. Default: `[]`. "
            "Example: `[{start_s: 0, end_s: 86400, energy_j: 2.0e10}]`."
        ),
    )
    demand_response: list[DemandResponseEventConfig] = Field(
        default_factory=list,
        description=(
            "Demand-response events (see *Demand-response event entries*): each lowers the cap between its "
            "`start_s` and `end_s`, and policies see it only from its `notice_s` on. Default: `[]`. "
            "Example: `[{notice_s: 3600, start_s: 7200, end_s: 10800, reduction_w: 20000}]`."
        ),
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=2**32 - 1,
        description=(
            "Seed of the power augmentation of traces without power data; the same config and "
            "seed give the same results. Default: `0`. Example: `3`."
        ),
    )
    out: Path | None = Field(
        default=None,
        description=(
            "Run directory for the results (summary.json, jobs.csv, timeline.csv, plots, report.html, "
            "and the augmented workload); created if missing. Relative to the config file. Default: "
            "`runs/TRACE-POLICY` in the working directory. Example: `results/kth-easy`."
        ),
    )
    kill_at_walltime: bool = Field(
        default=True,
        description=(
            "Kill a job when it reaches its requested time, as Slurm does. If false, jobs run to "
            "their real end. Default: `true`."
        ),
    )
    default_walltime: float | Literal["runtime"] = Field(
        default="runtime",
        description=(
            "Requested time to assume for a job whose trace record has none: `runtime` (its real "
            "run time, a perfect estimate) or a number of seconds. Default: `runtime`. "
            "Example: `86400`."
        ),
    )
    bsld_threshold_s: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Threshold of the bounded slowdown, in seconds: `max(1, (wait + run) / max(run, "
            "threshold))`. The papers use 10 s (Carastan-Santos 2024) and 300 s (Borghesi 2018). "
            "Default: `300` for the policies of Borghesi et al. 2018 (`ls`, `dec`, `bf`, `dvfs`, `simple`, "
            "`dynshare`, `dec+rapl`), `10` for the others."
        ),
    )
    bsld_definition: Literal["standard", "borghesi2018"] | None = Field(
        default=None,
        description=(
            "Which bounded slowdown the summary reports: `standard`, `max(1, (wait + run) / max(run, "
            "threshold))` with the run time as it happened; or `borghesi2018`, Eq. 3 of Borghesi et al. "
            "2018, `max(1, (wait + run') / max(threshold, run))`, the slowed-down run time `run'` over the "
            "job's run time at nominal speed `run`. Default: `borghesi2018` for the policies of that "
            "paper, `standard` for the others."
        ),
    )
    response: str | None = Field(
        default=None,
        description=(
            "How jobs slow down under node caps and lower frequencies in this run (Borghesi et al. 2018, "
            "§5.1.1; the same as a policy's `response` parameter): `mixed` (a factor F drawn per job by "
            "application class), `cpi` (Eq. 4, a CPI drawn per class), a factor F in [0, 1] "
            "(`D' = F·D/M` for every job), or `classes` (each class's model of the platform). "
            "Default: the policy's `response` parameter if it has one, else `classes`. Example: `mixed`."
        ),
    )
    skip_bad_lines: bool = Field(
        default=False,
        description=(
            "Skip malformed trace lines (they are counted in the cleaning report) instead of "
            "stopping at the first one with an error naming the line. Default: `false`."
        ),
    )
    augment: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Options of the power augmentation, which gives jobs of a trace without power data a "
            "seeded per-user mean power, per-job spread, an application class and a fluctuating power "
            "series (docs/simulator.md 2.4); passed through unchanged and checked by the augmentation "
            "itself. `{profile: constant}` keeps each job at its mean power; `{enabled: false}` turns it "
            "off. Default: `{}` (its defaults). Example: `{profile: constant}`."
        ),
    )
    naive_cpu_w: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Replace an overprovisioned platform by its naive strategy (Sarood et al. 2014, §VII-D): every node "
            "at this one CPU power level (W), and as many nodes as the budget feeds at it, "
            "`floor(budget_w / (base_w + mem_w + naive_cpu_w))` (55,248 for `intrepid-overprovisioned` at "
            "30 W). Run it with `easy` for the paper's naive baseline. Default: none. Example: `30`."
        ),
    )
    moldable: MoldableParams | None = Field(
        default=None,
        description=(
            "Make the trace's jobs moldable (Sarood et al. 2014, PARM): a job that asked `n` nodes may run on "
            "`ceil(θ·n)` to `n` nodes, θ uniform per job, and every job gets a PASS application (see "
            "*Moldable block keys*); seeded, applied after the power augmentation. `{}` turns it on with "
            "every key at its default. The range changes no schedule of a policy that starts jobs on their "
            "requested nodes. Default: none (jobs keep the range of their trace, rigid for SWF). "
            "Example: `{fraction: 1.0, theta: [0.2, 0.6], malleable: true}`."
        ),
    )
    tick_s: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Monitoring period in seconds: the simulator samples platform power and calls the "
            "policy at least this often. Default: none (only at events). Example: `60`."
        ),
    )
    sched_passes: SchedPassesConfig | None = Field(
        default=None,
        description=(
            "Start jobs only at Slurm's main scheduling passes, as a live Slurm does: every submission, "
            "job end and release asks for a pass, which comes at the first tick of slurmctld's loop at "
            "least `interval_s` (`batch_sched_delay`) after the previous one (see *sched_passes block "
            "keys*). A started job holds its nodes, at idle power, from the decision to the pass, and its "
            "start is the pass. For comparing a replay with a live cluster (`shadow replay "
            "--sched-passes`). Default: none (jobs start when the policy decides). Example: "
            "`{interval_s: 3, release_lag_s: 1}`."
        ),
    )
    time_limit_s: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Stop the simulation at this simulated time, in seconds from the start of the trace. "
            "Default: none (run until every job has ended). Example: `604800` (one week)."
        ),
    )
    predictor: str | None = Field(
        default=None,
        description=(
            "Power predictor whose estimates the policy sees: `naive`, `history`, `learned`, "
            "`per-user-tree` or `oracle` (the real values: a baseline, labelled as such in every "
            "output). Jobs are predicted at submission; the predictor learns each job's measured power "
            "when it ends. Default: none (power-aware policies then see the node maximum, as `naive`). "
            "Example: `history`."
        ),
    )
    predictor_params: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Parameters of the predictor, validated against its parameter model. Default: `{}`. "
            "Example: `{alpha: 1, window_s: 2592000}`."
        ),
    )
    baseline: str | None = Field(
        default=None,
        description=(
            "Also simulate the same workload, uncapped, with this policy (usually `easy`) and report "
            "the change of mean turnaround against it (`mean_turnaround_change_pct`). Default: none. "
            "Example: `easy`."
        ),
    )

    max_nodes: int = Field(
        default=200_000,
        gt=0,
        description=(
            "Sanity limit on the size of the simulated machine, in nodes: a platform, `procs` or an SWF "
            "`MaxProcs` giving more nodes is refused before anything is built (a typo there would "
            "otherwise fill the memory). Raise it for a larger machine. Default: `200000`. "
            "Example: `500000`."
        ),
    )
    max_ticks: int = Field(
        default=1_000_000,
        gt=0,
        description=(
            "Sanity limit on the number of monitoring ticks (`tick_s`), each of which calls the policy "
            "and adds a timeline row: a run whose trace span divided by `tick_s` exceeds it is refused "
            "before it starts, and a run that reaches it stops with an error. Raise it for a finer "
            "tick over a long trace. Default: `1000000`. Example: `5000000`."
        ),
    )

    _source: str | None = PrivateAttr(default=None)
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)
    _lines: dict[Loc, int] = PrivateAttr(default_factory=dict)

    @field_validator("cap_w", mode="before")
    @classmethod
    def _parse_cap(cls, v):
        return parse_cap_value(v)

    @field_validator("cap_schedule", mode="before")
    @classmethod
    def _cap_schedule_file(cls, v):
        if isinstance(v, (str, os.PathLike)):
            if not Path(v).exists():
                raise ValueError(f"no such file {os.fspath(v)!r}")
            return [e.model_dump(exclude_unset=True) for e in read_cap_entries(v)]
        return v

    @field_validator("default_walltime", mode="before")
    @classmethod
    def _parse_walltime(cls, v):
        if isinstance(v, str) and v.strip().lower() == "runtime":
            return "runtime"
        if isinstance(v, bool):
            raise ValueError(f"expected 'runtime' or a number of seconds, got {v!r}")
        try:
            seconds = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"expected 'runtime' or a number of seconds, got {v!r}") from None
        if not (seconds > 0 and math.isfinite(seconds)):
            raise ValueError(f"a default walltime must be a positive number of seconds, got {v!r}")
        return seconds

    @field_validator("platform")
    @classmethod
    def _platform_name(cls, v):
        if v is not None and not v:
            raise ValueError("must name a platform file or a packaged platform such as 'default'")
        return v

    @model_validator(mode="after")
    def _exclusive(self):
        problems = []
        if self.platform is not None and self.procs is not None:
            problems.append(("procs", "give either platform or procs, not both"))
        if "cores_per_node" in self.model_fields_set and self.platform is not None:
            problems.append(("cores_per_node", "not used with a platform file, which sets cores per node group"))
        if self.cap_w is not None and self.cap_schedule is not None:
            problems.append(("cap_schedule", "give either cap_w or cap_schedule, not both"))
        if problems:
            raise field_problems(problems)
        return self

    # -- building the model objects ----------------------------------------------------------

    @property
    def source(self) -> str:
        """The file this config was read from (``"<config>"`` if built in code)."""
        return self._source or "<config>"

    def build_platform(self):
        """The :class:`~wattsched.model.platform.Platform` this config names (reads the platform file)."""
        from wattsched.config.platform import load_platform, platform_from_procs, too_many_nodes

        if self.platform is not None:
            if _looks_like_path(self.platform) and not Path(self.platform).expanduser().exists():
                raise ConfigError(locate(self, "platform", f"no such file {self.platform!r}"))
            return load_platform(self.platform, max_nodes=self.max_nodes)
        why = too_many_nodes(-(-self.procs // self.cores_per_node), self.max_nodes)
        if why:
            raise ConfigError(locate(self, "procs", why))
        return platform_from_procs(self.procs, self.cores_per_node, max_nodes=self.max_nodes)

    def build_cap_schedule(self, platform=None) -> CapSchedule:
        """The cap schedule in watts; a cap given as a percentage needs the platform."""
        if self.cap_schedule is not None:
            return cap_schedule_from_entries(self.cap_schedule, platform, key_locator(self, "cap_schedule")())
        if self.cap_w is None:
            budget = getattr(platform, "budget_w", None)
            # an overprovisioned machine's budget is its cap (Sarood et al. 2014): what every policy is held to
            return CapSchedule([]) if budget is None else CapSchedule.constant(budget)
        return CapSchedule.constant(_cap_in_watts(self.cap_w, platform, key_locator(self, "cap_w")()))

    def build_energy_budgets(self) -> list[EnergyBudget]:
        return [b.to_budget() for b in self.energy_budgets]

    def build_dr_events(self, platform=None) -> list[DemandResponseEvent]:
        """The demand-response events; a cap given as a percentage needs the platform."""
        return [e.to_event(platform, f"{self.source}: demand_response[{i}]")
                for i, e in enumerate(self.demand_response)]
