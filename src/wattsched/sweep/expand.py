"""From a sweep file to its runs: the product of the axes, with ``zip`` groups and ``exclude`` rules.

Each run is a plain JSON-able dict (its *resolved spec*: everything that
determines its result) and the values of its axes (the columns of its result
row). Its key is a content hash of the resolved spec and the wattsched
version (:func:`run_key`), so a changed sweep file adds or removes only the
runs whose resolved spec changed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wattsched import __version__
from wattsched.config import SimConfig, error_items
from wattsched.config.base import _format_loc
from wattsched.errors import ConfigError, WattschedError
from wattsched.sweep.spec import AXES, MAX_RUNS, AxesConfig, CapScheduleValue, PluginEntry, SweepConfig

log = logging.getLogger("wattsched.sweep")


@dataclass
class Run:
    """One simulation run of a sweep."""

    key: str
    axes: dict[str, Any]
    spec: dict[str, Any] = field(repr=False)


def run_key(spec: dict) -> str:
    """Content hash of a resolved run spec and the wattsched version (16 hex digits).

    >>> run_key({"a": 1}) == run_key({"a": 1}), run_key({"a": 1}) == run_key({"a": 2})
    (True, False)
    """
    text = json.dumps({"spec": spec, "wattsched": __version__}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _grid_size(params: dict[str, Any]) -> int:
    """How many combinations :func:`_grid` gives, without making them.

    >>> _grid_size({"check": ["mean", "max"], "k": 1, "q": [1, 2, 3]})
    6
    """
    return math.prod(len(v) if isinstance(v, list) else 1 for v in params.values())


def count_runs(cfg: SweepConfig) -> int:
    """Runs of the sweep before ``exclude`` rules and duplicates, counted from the axes' lengths (nothing built).

    A ``zip`` group counts once; a ``slices`` axis counts its ``count``; a policy or predictor entry counts the
    product of its parameter lists.
    """
    total = 0
    for axes in cfg.blocks():
        given = axes.given()
        lengths = {}
        for name in given:
            val = getattr(axes, name)
            if name == "slices":
                lengths[name] = val.count
            elif name in ("policies", "predictors"):
                lengths[name] = sum(1 if e is None or isinstance(e, str) else _grid_size(e.params) for e in val)
            else:
                lengths[name] = len(val)
        zipped = {n for group in cfg.zip if all(m in given for m in group) for n in group}
        size = math.prod(lengths[n] for n in given if n not in zipped)
        for group in cfg.zip:
            if all(m in given for m in group):
                size *= max(lengths[m] for m in group)
        total += size
    return total


def check_run_count(cfg: SweepConfig) -> int:
    """The sweep's run count (:func:`count_runs`); above its ``max_runs`` bound, a :class:`ConfigError`."""
    n = count_runs(cfg)
    if n > cfg.max_runs:
        key = "grid" if cfg.grid else "axes"
        raise _err(cfg, (key,), f"the axes give {n:,} runs (before exclude rules), above the limit of "
                   f"{cfg.max_runs:,}; shrink the axes or raise the limit with max_runs: N in the sweep file")
    return n


def _grid(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Product over parameters whose value is a list.

    >>> _grid({"check": ["mean", "max"], "k": 1})
    [{'check': 'mean', 'k': 1}, {'check': 'max', 'k': 1}]
    """
    keys = list(params)
    values = [v if isinstance(v, list) else [v] for v in params.values()]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def _label_number(x: float) -> Any:
    return int(x) if float(x).is_integer() else x


def _cap_label(v: Any) -> Any:
    if v is None:
        return "none"
    if isinstance(v, CapScheduleValue):
        return v.label
    if isinstance(v, float):
        return "none" if math.isinf(v) else _label_number(v)
    return v


class _Values:
    """The values of one axis of one block: a list of ``(columns, spec fragment, source location)``."""

    def __init__(self, name: str, items: list[tuple[dict, dict, tuple]]):
        self.name = name
        self.items = items


def _axis_values(cfg: SweepConfig, axes: AxesConfig, where: tuple, name: str, machine_nodes) -> _Values:
    val = getattr(axes, name)
    items: list[tuple[dict, dict, tuple]] = []
    loc = (*where, name)
    if name == "traces":
        for i, t in enumerate(val):
            items.append(({"trace": Path(t).name}, {"trace": str(t), "slice": None}, (*loc, i)))
    elif name == "slices":
        from wattsched.sweep.slicing import slice_specs

        try:
            specs = slice_specs(val, machine_nodes(val))
        except (ValueError, WattschedError) as exc:
            raise _err(cfg, loc, str(exc)) from None
        for s in specs:
            items.append(({"trace": Path(s.trace).name, "slice": s.index, "t0_s": s.t0_s},
                          {"trace": s.trace, "slice": s.as_dict()}, loc))
    elif name == "platforms":
        for i, p in enumerate(val):
            items.append(({"platform": Path(p).stem if "/" in p else p}, {"platform": p}, (*loc, i)))
    elif name in ("policies", "predictors"):
        key = name[:-1] if name == "policies" else "predictor"
        key = "policy" if name == "policies" else "predictor"
        for i, entry in enumerate(val):
            if entry is None:
                items.append(({key: "none"}, {key: None, f"{key}_params": {}}, (*loc, i)))
                continue
            if isinstance(entry, str):
                entry = PluginEntry(name=entry)
            for params in _grid(entry.params):
                cols = {key: entry.name, **{f"{key}.{k}": _jsonable(v) for k, v in params.items()}}
                frag_key = "params" if key == "policy" else "predictor_params"
                items.append((cols, {key: entry.name, frag_key: params}, (*loc, i)))
    elif name == "caps":
        for i, v in enumerate(val):
            frag = v.model_dump(mode="json") if isinstance(v, CapScheduleValue) else v
            items.append(({"cap": _cap_label(v)}, {"cap": frag}, (*loc, i)))
    elif name == "energy_budgets":
        for i, v in enumerate(val):
            items.append(({"energy_budget": i}, {"energy_budgets": [b.model_dump(mode="json") for b in v]},
                          (*loc, i)))
    elif name == "dr_events":
        for i, v in enumerate(val):
            items.append(({"dr_events": i}, {"dr_events": [e.model_dump(mode="json") for e in v]}, (*loc, i)))
    elif name == "response":
        from wattsched.config.platform import check_response_spec
        from wattsched.model.response import response_from_spec

        for i, v in enumerate(val):
            for cls, m in v.items():
                try:
                    response_from_spec(dict(m))
                except (TypeError, ValueError) as exc:
                    raise _err(cfg, (*loc, i, cls), str(exc)) from None
                why = check_response_spec(dict(m))  # the platform file's rules too (p(f), t(f) > 0, ...)
                if why:
                    raise _err(cfg, (*loc, i, cls), why)
            label = ",".join(f"{c}:{'/'.join(f'{k}={x}' for k, x in sorted(m.items()))}" for c, m in sorted(v.items()))
            items.append(({"response": label}, {"response": v}, (*loc, i)))
    elif name == "seeds":
        for i, s in enumerate(val):
            items.append(({"seed": s}, {"seed": s}, (*loc, i)))
    return _Values(name, items)


def _jsonable(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool)) or v is None else json.dumps(v, sort_keys=True)


def _err(cfg: SweepConfig, loc: tuple, message: str) -> ConfigError:
    from wattsched.sweep.spec import located

    return ConfigError(located(cfg, loc, message))


def _matches(rule: dict, cols: dict) -> bool:
    for k, v in rule.items():
        if k not in cols:
            return False
        c = cols[k]
        if c != v and str(c) != str(v):
            return False
    return True


def expand(cfg: SweepConfig) -> list[Run]:
    """Every run of the sweep, in a stable order; duplicate runs (same resolved spec) appear once.

    Validates the whole sweep first: every policy and predictor with its
    parameters, every combination's simulation config, the zip groups'
    lengths, the exclude rules' columns. Raises :class:`ConfigError` naming the
    file, the key and its line.
    """
    from wattsched.sweep.spec import check_files

    check_run_count(cfg)
    check_files(cfg)
    def machine_nodes(slices_cfg) -> int:
        from wattsched.sweep.spec import base_platform

        return len(base_platform(cfg, slices_cfg.trace))

    runs: list[Run] = []
    seen: set[str] = set()
    columns: set[str] = set()
    blocks = cfg.blocks()
    checked_plugins: set[tuple] = set()
    checked_sims: set[str] = set()
    matched: set[int] = set()
    for b, axes in enumerate(blocks):
        where = ("grid", b) if cfg.grid else ("axes",)
        given = axes.given()
        values = {name: _axis_values(cfg, axes, where, name, machine_nodes) for name in given}
        groups: list[list[str]] = []
        zipped = set()
        for g, group in enumerate(cfg.zip):
            present = [n for n in group if n in values]
            if not present:
                continue
            if len(present) != len(group):
                missing = [n for n in group if n not in values]
                raise _err(cfg, ("zip", g), f"axis {missing[0]!r} is not given "
                           f"{'in grid block ' + str(b) if cfg.grid else 'in axes'}")
            lengths = {n: len(values[n].items) for n in group}
            if len(set(lengths.values())) > 1:
                text = ", ".join(f"{n}: {k}" for n, k in lengths.items())
                raise _err(cfg, ("zip", g), f"zipped axes need equal lengths, got {text}")
            groups.append(group)
            zipped.update(group)
        groups += [[n] for n in given if n not in zipped]
        per_group = [list(zip(*(values[n].items for n in group))) for group in groups]
        for combo in itertools.product(*per_group):
            cols: dict[str, Any] = {}
            frag: dict[str, Any] = {}
            locs: dict[str, tuple] = {}
            for entries in combo:
                for c, f, loc in entries:
                    cols.update(c)
                    frag.update(f)
                    for k in f:
                        locs[k] = loc
            columns.update(cols)
            hits = [i for i, rule in enumerate(cfg.exclude) if _matches(rule, cols)]
            if hits:
                matched.update(hits)
                continue
            spec = _resolve(cfg, frag, locs, checked_plugins, checked_sims)
            key = run_key(spec)
            if key in seen:
                continue
            seen.add(key)
            runs.append(Run(key, cols, spec))
    for i, rule in enumerate(cfg.exclude):
        unknown = [k for k in rule if k not in columns]
        if unknown:
            raise _err(cfg, ("exclude", i, unknown[0]), f"no axis column {unknown[0]!r} "
                       f"(columns: {', '.join(sorted(columns))})")
    for i, rule in enumerate(cfg.exclude):
        if i not in matched:
            log.warning("%s", _err(cfg, ("exclude", i), "matches no run (is a value misspelt? rule "
                                   f"{json.dumps(rule, default=str)}); it drops nothing"))
    return runs


_SIM_KEYS = ("platform", "procs", "cores_per_node", "policy", "params", "predictor", "predictor_params", "seed",
             "kill_at_walltime", "default_walltime", "bsld_threshold_s", "skip_bad_lines", "augment", "tick_s",
             "time_limit_s", "cap_w", "cap_schedule", "energy_budgets", "bsld_definition", "response", "max_nodes",
             "max_ticks", "moldable", "naive_cpu_w")


def _resolve(cfg: SweepConfig, frag: dict, locs: dict, checked_plugins: set, checked_sims: set) -> dict:
    """The resolved spec of one run: base config overridden by the axes' fragments, validated."""
    from wattsched.policies import make_policy
    from wattsched.predictors import make_predictor

    base = dict(cfg.base)
    sim = {k: v for k, v in base.items() if k != "trace"}
    for k in ("platform", "policy", "params", "predictor", "predictor_params", "seed", "energy_budgets"):
        if k in frag:
            sim[k] = frag[k]
    trace = frag.get("trace", base.get("trace"))
    slice_ = frag.get("slice")
    if "seed" not in frag and slice_ is not None:
        sim["seed"] = slice_["seed"]
    if "cap" in frag:
        sim.pop("cap_w", None)
        sim.pop("cap_schedule", None)
    # validate through the simulation config model, pointing errors at the sweep file's keys
    sim_key = json.dumps({**sim, "trace": str(trace)}, sort_keys=True, default=str)
    if sim_key not in checked_sims:
        try:
            validated = SimConfig.model_validate({**sim, "trace": str(trace)})
        except ValidationError as e:
            problems = []
            for loc, msg in error_items(e, {**sim, "trace": trace}, SimConfig):
                top = loc[0] if loc else ""
                src = locs.get(top) or locs.get({"params": "policy", "predictor_params": "predictor"}.get(top, ""))
                problems.append(str(_err(cfg, src if src else ("base", *loc), f"{_format_loc(loc)}: {msg}")))
            raise ConfigError("\n".join(problems)) from None
        checked_sims.add(sim_key)
        sim = json.loads(validated.model_dump_json(include={k for k in _SIM_KEYS if k in sim or k == "seed"}))
    else:
        sim = json.loads(SimConfig.model_validate({**sim, "trace": str(trace)}).model_dump_json(
            include={k for k in _SIM_KEYS if k in sim or k == "seed"}))
    for kind in ("policy", "predictor"):
        name = sim.get(kind, "easy" if kind == "policy" else None)
        if name is None:
            continue
        params = sim.get("params" if kind == "policy" else "predictor_params") or {}
        pkey = (kind, name, json.dumps(params, sort_keys=True, default=str))
        if pkey in checked_plugins:
            continue
        src = locs.get(kind) or ("base", kind)
        try:
            from wattsched.config.base import _line_for

            line = _line_for(src, cfg._lines)
            where = cfg.source if line is None else f"{cfg.source}:{line}"
            label = f"{where}: {_format_loc(src)}" + (".params" if src[-1] != kind else "")
            (make_policy if kind == "policy" else make_predictor)(name, params, source=label,
                                                                  name_source=f"{where}: {_format_loc(src)}")
        except WattschedError as exc:
            raise ConfigError(str(exc)) from None
        checked_plugins.add(pkey)
    spec = {
        "trace": str(trace),
        "slice": slice_,
        "sim": sim,
        "cap": frag.get("cap", "__base__"),
        "cap_window": None if cfg.cap_window is None else [cfg.cap_window.start_s, cfg.cap_window.end_s],
        "cap_reference_dyn_w": cfg.cap_reference_dyn_w,
        "dr_events": frag.get("dr_events"),
        "response": frag.get("response"),
        "metrics": list(cfg.metrics),
    }
    if spec["cap"] == "__base__":
        spec["cap"] = None
        spec["base_cap"] = {k: sim.pop(k) for k in ("cap_w", "cap_schedule") if k in sim}
    if "%" not in json.dumps([spec["cap"], spec["dr_events"], spec.get("base_cap")]):
        # the reference only matters to percentages: changing it must not redo the other runs
        del spec["cap_reference_dyn_w"]
    return spec


def axis_columns(runs: list[Run]) -> list[str]:
    """Axis columns of ``runs`` in axis order, then parameters."""
    order = {"trace": 0, "slice": 1, "t0_s": 2, "platform": 3, "policy": 4, "predictor": 5, "cap": 6,
             "energy_budget": 7, "dr_events": 8, "response": 9, "seed": 10}
    cols: list[str] = []
    for r in runs:
        for c in r.axes:
            if c not in cols:
                cols.append(c)
    return sorted(cols, key=lambda c: (order.get(c.split(".")[0], 99), c))


__all__ = ["AXES", "MAX_RUNS", "Run", "axis_columns", "check_run_count", "count_runs", "expand", "run_key"]
