"""Cap schedules, energy budgets and demand-response events as written in config files (YAML or CSV).

Shared by the simulation config and the daemon config.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from wattsched.config.base import (
    Loc,
    StrictModel,
    _format_loc,
    _label,
    _read_text,
    error_items,
    field_problems,
    format_validation_error,
    read_yaml,
)
from wattsched.errors import ConfigError, located
from wattsched.model.constraints import CapSchedule, CapStep, DemandResponseEvent, EnergyBudget

__all__ = [
    "CapEntries", "CapEntryConfig", "CapValue", "DemandResponseEventConfig", "EnergyBudgetConfig",
    "cap_schedule_from_entries", "load_cap_schedule", "parse_cap_value", "read_cap_entries",
]


_PERCENT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*%\s*$")


def parse_cap_value(value: Any) -> float | str | None:
    """Normalize a cap written in a config: watts, ``"NN%"`` of the maximum dynamic power, or none.

    Returns a float (watts, ``inf`` for uncapped), a canonical ``"NN%"`` string,
    or ``None`` (no cap). Raises ``ValueError`` with a message for the user.

    >>> parse_cap_value(5000), parse_cap_value("60 %"), parse_cap_value("2.5e3"), parse_cap_value(None)
    (5000.0, '60%', 2500.0, None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"expected watts (a number) or a percentage such as '60%', got {value!r}")
    if isinstance(value, (int, float)):
        watts = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if text.lower() in ("none", "null", "~", ""):
            return None
        m = _PERCENT_RE.match(text)
        if m:
            pct = float(m.group(1))
            if not 0 < pct <= 100:
                raise ValueError(f"a percentage cap must be in (0%, 100%], got {value!r}")
            return f"{pct:g}%"
        try:
            watts = float(text)
        except ValueError:
            raise ValueError(
                f"expected watts (a number such as 50000) or a percentage of the platform's maximum "
                f"dynamic power (such as '60%'), got {value!r}"
            ) from None
    else:
        raise ValueError(f"expected watts (a number) or a percentage such as '60%', got {value!r}")
    if math.isnan(watts) or watts <= 0:
        raise ValueError(f"a cap in watts must be positive, got {value!r}")
    if math.isinf(watts):
        raise ValueError(f"a cap must be a finite number of watts, got {value!r}; for no cap leave it out "
                         "(or write null)")
    return watts


def _cap_in_watts(value: float | str | None, platform, where: str) -> float:
    """Resolve a parsed cap value to watts (``inf`` for uncapped)."""
    if value is None:
        return math.inf
    if isinstance(value, str):
        if platform is None:
            raise ConfigError(f"{where}: cap {value} is a fraction of the platform's power; a platform is needed")
        from wattsched.model.snapshot import fraction_cap

        return fraction_cap(platform, float(value[:-1]) / 100.0)
    return float(value)


CapValue = Annotated[float | str | None, Field(union_mode="left_to_right")]


class CapEntryConfig(StrictModel):
    """One entry of a cap schedule: a step (``start_s``, ``cap_w``) or a window (with ``end_s``)."""

    doc_name: ClassVar[str] = "cap schedule entry"

    start_s: float = Field(
        description=(
            "Time the cap comes into force, in seconds from the start of the trace (the first "
            "submission is at 0 s in the simulator). Required. Example: `3600`."
        ),
    )
    end_s: float | None = Field(
        default=None,
        description=(
            "Only for windows: time the cap is lifted, in seconds; must be after `start_s`. "
            "Default: none (the entry is a step that lasts until the next step). "
            "Entries of one schedule are either all steps or all windows. Example: `14400`."
        ),
    )
    cap_w: CapValue = Field(
        description=(
            "Platform power cap in watts, or a percentage of the platform's maximum dynamic power "
            "such as `\"60%\"` (see top-level `cap_w`), or `null` for no cap from `start_s` on. "
            "Required. Example: `450000`."
        ),
    )
    label: str = Field(
        default="",
        description="Free text shown in reports, e.g. `demand-response event`. Default: empty.",
    )

    @field_validator("cap_w", mode="before")
    @classmethod
    def _parse_cap(cls, v):
        return parse_cap_value(v)

    @field_validator("start_s", "end_s")
    @classmethod
    def _finite(cls, v):
        if v is not None and not math.isfinite(v):
            raise ValueError(f"must be a finite number of seconds, got {v}")
        if v is not None and v < 0:
            raise ValueError(f"must be >= 0 (seconds from the start of the trace), got {v:g}")
        return v

    @model_validator(mode="after")
    def _window_order(self):
        if self.end_s is not None and self.end_s <= self.start_s:
            raise field_problems([("end_s", f"must be after start_s ({self.start_s:g} s), got {self.end_s:g}")])
        return self

    @property
    def is_window(self) -> bool:
        return self.end_s is not None


def _check_nonempty(entries: list) -> list:
    if not entries:
        raise ValueError("the schedule has no entries; give at least one, or no schedule for an uncapped run")
    return entries


def _check_cap_entries(entries: list[CapEntryConfig]) -> list[CapEntryConfig]:
    problems: list[tuple[Loc, str]] = []
    windows = [e.is_window for e in entries]
    if any(windows) and not all(windows):
        first_step = windows.index(False)
        problems.append(((first_step,), "a schedule is either all steps (no end_s) or all windows (with end_s)"))
        raise field_problems(problems)
    order = sorted(range(len(entries)), key=lambda i: entries[i].start_s)
    for a, b in itertools.pairwise(order):
        ea, eb = entries[a], entries[b]
        if not windows or not windows[0]:
            if ea.start_s == eb.start_s:
                problems.append(((b, "start_s"), f"two steps start at {eb.start_s:g} s (entries {a} and {b})"))
        elif eb.start_s < ea.end_s:
            problems.append(
                ((b, "start_s"), f"window starts at {eb.start_s:g} s, inside entry {a} ({ea.start_s:g}-{ea.end_s:g} s)")
            )
    if problems:
        raise field_problems(problems)
    return entries


CapEntries = Annotated[list[CapEntryConfig], AfterValidator(_check_nonempty), AfterValidator(_check_cap_entries)]


def cap_schedule_from_entries(entries: Sequence[CapEntryConfig], platform=None, where: str = "cap_schedule"):
    """Turn validated entries into a :class:`CapSchedule`; percentages need ``platform``."""
    steps: list[CapStep] = []
    ordered = sorted(entries, key=lambda e: e.start_s)
    for i, e in enumerate(ordered):
        cap = _cap_in_watts(e.cap_w, platform, where)
        steps.append(CapStep(e.start_s, cap, e.label))
        if e.is_window:
            nxt = ordered[i + 1].start_s if i + 1 < len(ordered) else math.inf
            if nxt > e.end_s:  # an adjacent window takes over at end_s by itself
                steps.append(CapStep(e.end_s, math.inf, ""))
    return CapSchedule(steps)


class EnergyBudgetConfig(StrictModel):
    """At most ``energy_j`` joules between ``start_s`` and ``end_s``."""

    doc_name: ClassVar[str] = "energy budget entry"

    start_s: float = Field(description="Start of the budget window, in seconds from the start of the trace. Required.")
    end_s: float = Field(description="End of the budget window, in seconds; must be after `start_s`. Required.")
    energy_j: float = Field(
        gt=0,
        description=(
            "Energy the platform may use inside the window, in joules (1 kWh = 3.6e6 J). Must be "
            "positive. Required. Example: `3.6e9` (1 MWh)."
        ),
    )

    @model_validator(mode="after")
    def _order(self):
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s)):
            raise field_problems([("end_s", "window bounds must be finite numbers of seconds")])
        if self.end_s <= self.start_s:
            raise field_problems([("end_s", f"must be after start_s ({self.start_s:g} s), got {self.end_s:g}")])
        return self

    def to_budget(self) -> EnergyBudget:
        return EnergyBudget(self.start_s, self.end_s, self.energy_j)


class DemandResponseEventConfig(StrictModel):
    """One demand-response event of a replay: announced at ``notice_s``, in force from ``start_s`` to ``end_s``."""

    doc_name: ClassVar[str] = "demand-response event"

    notice_s: float | None = Field(
        default=None,
        description="When the event is announced, in seconds from the start of the trace: policies see it from "
        "then on (never earlier). Must not be after `start_s`. Default: `start_s` (no notice).",
    )
    start_s: float = Field(description="Start of the event, in seconds from the start of the trace. Required.")
    end_s: float = Field(description="End of the event, in seconds; must be after `start_s`. Required.")
    cap_w: CapValue = Field(
        default=None,
        description="Target: the platform may draw at most this during the event (watts, or a percentage of the "
        "maximum dynamic power). Give `cap_w` or `reduction_w`. Example: `\"50%\"`.",
    )
    reduction_w: float | None = Field(
        default=None, gt=0,
        description="Target as a reduction: the platform power at the notice time minus this many watts. Give "
        "`cap_w` or `reduction_w`. Example: `20000`.",
    )
    label: str = Field(default="demand response", description="Name of the event in the cap schedule. "
                       "Default: `demand response`.")

    @field_validator("cap_w", mode="before")
    @classmethod
    def _cap(cls, value):
        return parse_cap_value(value)

    @model_validator(mode="after")
    def _check(self):
        problems = []
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s)):
            problems.append(("end_s", "event bounds must be finite numbers of seconds"))
        elif self.end_s <= self.start_s:
            problems.append(("end_s", f"must be after start_s ({self.start_s:g} s), got {self.end_s:g}"))
        if self.notice_s is not None and not self.notice_s <= self.start_s:
            problems.append(("notice_s", f"must not be after start_s ({self.start_s:g} s), got {self.notice_s:g}"))
        if (self.cap_w is None) == (self.reduction_w is None):
            problems.append(("cap_w", "give exactly one target: cap_w or reduction_w"))
        if problems:
            raise field_problems(problems)
        return self

    def to_event(self, platform, where: str) -> DemandResponseEvent:
        cap = None if self.cap_w is None else _cap_in_watts(self.cap_w, platform, f"{where}: cap_w")
        return DemandResponseEvent(self.start_s if self.notice_s is None else self.notice_s, self.start_s,
                                   self.end_s, cap, self.reduction_w, self.label)


def read_cap_entries(path: str | os.PathLike, *, label: str | None = None) -> list[CapEntryConfig]:
    """Validated entries of a cap-schedule file: YAML (a list, or a mapping with ``cap_schedule``) or CSV."""
    label = label or _label(path)
    if os.fspath(path).lower().endswith(".csv"):
        return _read_cap_csv(path, label)
    raw, lines = read_yaml(path, label=label)
    prefix: Loc = ()
    data = raw
    if isinstance(raw, Mapping):
        unknown = [k for k in raw if k != "cap_schedule"]
        if unknown or "cap_schedule" not in raw:
            raise ConfigError(f"{label}: expected a list of cap steps, or a mapping with the single key cap_schedule")
        data, prefix = raw["cap_schedule"], ("cap_schedule",)
    if not isinstance(data, list):
        raise ConfigError(f"{label}: expected a list of cap steps such as '- {{start_s: 0, cap_w: 50000}}'")
    adapter = TypeAdapter(CapEntries)
    try:
        return adapter.validate_python(data)
    except ValidationError as e:
        raise format_validation_error(
            e, data, label=label, root=list[CapEntryConfig], lines=lines, prefix=prefix
        ) from None


_CSV_COLUMNS = ("start_s", "end_s", "cap_w", "label")


def _read_cap_csv(path, label: str) -> list[CapEntryConfig]:
    text = _read_text(path, label)
    reader = csv.reader(io.StringIO(text))
    header = None
    rows: list[dict] = []
    row_lines: list[int] = []
    for cells in reader:
        if not cells or not any(c.strip() for c in cells) or cells[0].lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in cells]
        if header is None:
            header = cells
            unknown = [c for c in header if c not in _CSV_COLUMNS]
            missing = [c for c in ("start_s", "cap_w") if c not in header]
            if unknown or missing or len(set(header)) != len(header):
                raise ConfigError(located(
                    label, reader.line_num, None, "header must name the columns start_s,cap_w and "
                    f"optionally end_s and label, got {','.join(header)!r}"
                ))
            continue
        if len(cells) != len(header):
            raise ConfigError(located(label, reader.line_num, None,
                                      f"expected {len(header)} columns, got {len(cells)}"))
        row = dict(zip(header, cells))
        if row.get("end_s") == "":
            row["end_s"] = None
        if row["cap_w"].lower() in ("inf", "none", ""):
            row["cap_w"] = None
        rows.append(row)
        row_lines.append(reader.line_num)
    if header is None:
        raise ConfigError(f"{label}: empty CSV; expected a header start_s,cap_w[,label] and one row per step")
    try:
        return TypeAdapter(CapEntries).validate_python(rows)
    except ValidationError as e:
        out = []
        for loc, msg in error_items(e, rows, list[CapEntryConfig]):
            if loc and isinstance(loc[0], int):
                out.append(located(label, row_lines[loc[0]], _format_loc(loc[1:]) or None, msg))
            else:
                out.append(located(label, None, _format_loc(loc) or None, msg))
        exc = ConfigError("\n".join(out))
        exc.problems = out
        raise exc from None


def load_cap_schedule(
    path_or_list: str | os.PathLike | Sequence[Mapping[str, Any]], platform=None, *, label: str | None = None
) -> CapSchedule:
    """Read a cap schedule from a YAML or CSV file, or from a list of entry mappings.

    Parameters
    ----------
    path_or_list
        A ``.csv`` file (header ``start_s,cap_w[,label]``, or with ``end_s`` for
        windows), a YAML file holding a list of entries (or ``{cap_schedule:
        [...]}``), or the list itself.
    platform
        Needed only if a cap is given as a percentage of the platform's maximum
        dynamic power.
    label
        Name used for the source in error messages.

    Examples
    --------
    >>> s = load_cap_schedule([{"start_s": 0, "end_s": 3600, "cap_w": 5000}])
    >>> s.cap_at(10.0), s.cap_at(3600.0)
    (5000.0, inf)
    """
    if isinstance(path_or_list, (str, os.PathLike)):
        label = label or _label(path_or_list)
        entries = read_cap_entries(path_or_list, label=label)
    else:
        label = label or "cap schedule"
        data = list(path_or_list)
        try:
            entries = TypeAdapter(CapEntries).validate_python(data)
        except ValidationError as e:
            raise format_validation_error(e, data, label=label, root=list[CapEntryConfig]) from None
    return cap_schedule_from_entries(entries, platform, label)
