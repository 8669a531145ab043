"""The leaf of the configuration package: strict models, YAML with line numbers, error locations, precedence layers.

Imports nothing of wattsched but the leaves :mod:`wattsched.errors` and
:mod:`wattsched.validation` (which reads a pydantic error as key paths and
messages, for the plugin registry too); every config model
(:mod:`~wattsched.config.caps`, :mod:`~wattsched.config.platform`,
:mod:`~wattsched.config.sim`, :mod:`~wattsched.config.daemon`) is built on it.

Precedence, highest first (STYLE.md §4):

1. the command line (``cli`` mapping of :func:`load_config` / :func:`merge_overrides`),
2. ``WATTSCHED_<KEY>`` environment variables, for top-level scalar keys only,
3. the config file,
4. the defaults in the models.

Relative paths written in a config file are relative to the directory of that
file; paths given on the command line or in the environment are relative to the
working directory.
"""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from wattsched.errors import ConfigError, describe, located
from wattsched.validation import Loc, _submodels, error_items

__all__ = [
    "CLI_OPTIONS", "ENV_PREFIX", "MAX_YAML_VALUES", "StrictModel", "error_items", "field_problems",
    "format_validation_error", "key_locator", "load_config", "load_yaml_model", "locate", "merge_overrides",
    "option_name", "read_yaml",
]


ENV_PREFIX = "WATTSCHED_"


class StrictModel(BaseModel):
    """Base of every config model: frozen, unknown keys rejected, surrounding whitespace of strings stripped,
    every number finite (``.inf`` and ``.nan`` refused; a field that means something by them says so)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=False, str_strip_whitespace=True,
                              defer_build=True, allow_inf_nan=False)


def field_problems(problems: Iterable[tuple[str | Loc, str]]) -> PydanticCustomError:
    """An error for cross-field checks that points at the offending keys.

    A model validator sees the whole model, so pydantic would place its error at
    the model's own location. Raise this instead, listing ``(key, message)``
    pairs (a key can be a tuple path such as ``(1, "start_s")``): the error
    formatter appends each key to the location, so the message reads
    ``node_groups[1].power.idle_w: must be ≤ busy_w``.
    """
    problems = [((p,) if isinstance(p, (str, int)) else tuple(p), msg) for p, msg in problems]
    summary = "; ".join(f"{_format_loc(p)}: {m}" if p else m for p, m in problems)
    return PydanticCustomError("wattsched_fields", "{summary}", {"summary": summary, "problems": problems})


def _looks_like_path(value: str) -> bool:
    """A platform given as a path (rather than a packaged name such as ``default``)."""
    return "/" in value or os.sep in value or value.endswith((".yaml", ".yml")) or value.startswith("~")


def _label(path: str | os.PathLike) -> str:
    return os.fspath(path)


def read_yaml(path: str | os.PathLike, *, label: str | None = None, text: str | None = None):
    """Read a YAML file; return ``(data, lines)``.

    ``lines`` maps each key path (a tuple such as ``("node_groups", 1, "power")``)
    to its 1-based line. Syntax errors, duplicate keys and unreadable files raise
    :class:`ConfigError` naming the file (and the line). ``text``, if given, is
    parsed instead of reading ``path`` (which then only names the source).
    """
    import yaml  # here: a run configured by its command line alone reads no YAML (a fiftieth of a short run)

    label = label or _label(path)
    if text is None:
        text = _read_text(path, label)
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # reads the first characters: may already refuse one
        node = loader.get_single_node()
        lines: dict[Loc, int] = {}
        if node is not None:
            _check_expanded_size(node, label)
            _walk_node(node, (), lines, label, set())
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = " ".join(str(x) for x in (e.context, e.problem) if x)
        column = f" (column {mark.column + 1})" if mark else ""
        raise ConfigError(located(label, mark.line + 1 if mark else None, None,
                                  f"invalid YAML{column}: {problem}")) from None
    except yaml.YAMLError as e:
        raise ConfigError(located(label, None, None, f"invalid YAML: {e}")) from None
    except RecursionError:
        raise ConfigError(located(label, None, None, "invalid YAML: nested too deeply")) from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, lines


MAX_YAML_VALUES = 100_000
"""Most values a config may hold once its aliases (``*name``) are expanded: a few aliases nested in
one another can otherwise stand for billions of values (the "billion laughs" file)."""


def _check_expanded_size(root, label: str) -> None:
    """Refuse a document whose aliases expand to more than :data:`MAX_YAML_VALUES` values.

    Sizes are memoised per node, so this costs one visit per distinct node however
    often aliases repeat it.
    """
    import yaml

    sizes: dict[int, int] = {}
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = ([n for kv in node.value for n in kv] if isinstance(node, yaml.MappingNode)
                    else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if done or not children:
            total = 1 + sum(sizes.get(id(c), 0) for c in children)
            sizes[id(node)] = total
            if total > MAX_YAML_VALUES:
                raise ConfigError(located(
                    label, node.start_mark.line + 1, None,
                    f"aliases expand to more than {MAX_YAML_VALUES:,} values here; write the values out "
                    "or use fewer nested aliases"))
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)


def _walk_node(node, path: Loc, lines: dict, label: str, seen_nodes: set) -> None:
    import yaml

    lines.setdefault(path, node.start_mark.line + 1)
    if id(node) in seen_nodes:  # reached again through an alias: its keys already have their lines
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.start_mark)
            line = key_node.start_mark.line + 1
            if key in seen and key != "<<":
                raise ConfigError(
                    located(label, line, _format_loc((*path, key)), f"duplicate key (first at line {seen[key]})")
                )
            seen[key] = line
            lines[(*path, key)] = line
            _walk_node(value_node, (*path, key), lines, label, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk_node(item, (*path, i), lines, label, seen_nodes)


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _format_loc(loc: Loc) -> str:
    """``("node_groups", 1, "power", "idle_w")`` -> ``node_groups[1].power.idle_w``.

    >>> _format_loc(("node_groups", 1, "power", "idle_w"))
    'node_groups[1].power.idle_w'
    >>> _format_loc(("response_classes", "io bound"))
    "response_classes['io bound']"
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENT.match(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{part!r}]"
    return out


def _line_for(loc: Loc, lines: Mapping[Loc, int]) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def format_validation_error(
    err: ValidationError,
    raw: Any,
    *,
    label: str,
    root=None,
    lines: Mapping[Loc, int] | None = None,
    origins: Mapping[str, str] | None = None,
    prefix: Loc = (),
) -> ConfigError:
    """A :class:`ConfigError` with one ``FILE:LINE: key.path: message`` line per problem.

    ``origins`` maps a top-level key to where its value came from when that is
    not the file (an option such as ``--seed``, an environment variable such as
    ``WATTSCHED_SEED``); such problems read ``--seed: message`` (or ``--param:
    order: message`` for a key inside the option's value). ``prefix`` is
    prepended to every location (``raw`` sits at ``prefix`` in the file).
    """
    out = []
    for loc, msg in error_items(err, raw, root):
        loc = (*prefix, *loc)
        out.append(_locate(loc, msg, label=label, lines=lines, origins=origins))
    exc = ConfigError("\n".join(out))
    exc.problems = out
    return exc


def _locate(loc: Loc, msg: str, *, label: str, lines: Mapping[Loc, int] | None,
            origins: Mapping[str, str] | None) -> str:
    if origins and loc and loc[0] in origins:
        return located(origins[loc[0]], None, _format_loc(loc[1:]) or None, msg)
    line = _line_for(loc, lines) if lines else None
    return located(label, line, _format_loc(loc) or None, msg)


def locate(config: BaseModel, loc: str | Loc, message: str) -> str:
    """An error line for key ``loc`` of a loaded config: ``FILE:LINE: key: message``.

    The key is looked up where its value came from: the file (with its line), an
    option (``--param: order: message``) or an environment variable. A config
    built in code is labelled ``<config>``.

    >>> locate(SimConfig(trace="t.swf"), "seed", "too large")
    '<config>: seed: too large'
    """
    loc = (loc,) if isinstance(loc, str) else tuple(loc)
    label = getattr(config, "_source", None) or "<config>"
    return _locate(loc, message, label=label, lines=getattr(config, "_lines", None) or None,
                   origins=getattr(config, "_origins", None) or None)


def key_locator(config: BaseModel, key: str):
    """A function of a key path under ``key`` giving the ``FILE:LINE: key.path`` prefix of an error line.

    For plugin parameters: ``make_policy(name, config.params, source=key_locator(config, "params"))``.
    """
    return lambda sub=(): locate(config, (key, *sub), "").removesuffix(": ")


def load_yaml_model(path: str | os.PathLike, model: type[BaseModel], *, label: str | None = None,
                    context: dict | None = None):
    """Read a YAML file into ``model`` (``context`` goes to its validators); every problem raises one
    :class:`ConfigError`."""
    label = label or _label(path)
    raw, lines = read_yaml(path, label=label)
    _require_mapping(raw, label)
    try:
        return model.model_validate(raw, context=context)
    except ValidationError as e:
        raise format_validation_error(e, raw, label=label, root=model, lines=lines) from None


def _require_mapping(raw: Any, label: str) -> None:
    if raw is None:
        raise ConfigError(f"{label}: the file is empty; expected a mapping of keys to values")
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{label}: expected a mapping of keys to values at the top level, got {type(raw).__name__}")
    bad = [k for k in raw if not isinstance(k, str)]
    if bad:
        raise ConfigError(located(label, None, repr(bad[0]), "keys must be strings"))


def _read_text(path, label: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{label}: no such file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{label}: {describe(e)}") from None
    except OSError as e:
        raise ConfigError(f"{label}: cannot read: {e.strerror or e}") from None


def _resolve_paths(raw: dict, model: type[BaseModel], base_dir: Path) -> dict:
    raw = dict(raw)
    for key in getattr(model, "path_keys", ()):
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            continue
        if key == "platform" and not _looks_like_path(value):
            continue  # a packaged platform name
        if key == "trace" and value == "bundled":
            continue  # the packaged trace
        p = Path(value).expanduser()
        raw[key] = str(p if p.is_absolute() else base_dir / p)
    for key, field in model.model_fields.items():  # blocks with paths of their own (the daemon's sim block)
        block = field.annotation
        if isinstance(raw.get(key), dict) and isinstance(block, type) and getattr(block, "path_keys", ()):
            raw[key] = _resolve_paths(raw[key], block, base_dir)
    return raw


# Alternatives that exclude one another: a higher-precedence layer that sets any key of
# one alternative removes the other alternatives set by lower layers.
_EXCLUSIVE: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("platform",), ("procs", "cores_per_node")),
    (("cap_w",), ("cap_schedule",)),
)


def _scalar_keys(model: type[BaseModel]) -> list[str]:
    keys = []
    for name, f in model.model_fields.items():
        if name == "kind":
            continue
        ann = f.annotation
        origins = {typing.get_origin(a) for a in _flatten_union(ann)}
        if _submodels(ann) or origins & {list, tuple, dict}:
            continue
        keys.append(name)
    return keys


def _flatten_union(ann) -> list:
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        out = []
        for a in typing.get_args(ann):
            out.extend(_flatten_union(a))
        return out
    if typing.get_origin(ann) is Annotated:
        return _flatten_union(typing.get_args(ann)[0])
    return [ann]


def _env_layer(model: type[BaseModel], env: Mapping[str, str] | None) -> tuple[dict, dict]:
    """Values and origins from ``WATTSCHED_<KEY>`` variables (top-level scalar keys only).

    Variables that name no key of ``model`` are ignored (they may configure
    something else); a variable naming a list or mapping key is an error.
    """
    if not env:
        return {}, {}
    scalar = set(_scalar_keys(model))
    values, origins = {}, {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX):].lower()
        if key in scalar:
            if value == "":
                continue
            values[key] = value
            origins[key] = name
        elif key in model.model_fields and key != "kind":
            raise ConfigError(
                f"{name}: {key} is a list or mapping and cannot be set from the environment; set it in the config file"
            )
    return values, origins


def _cli_layer(model: type[BaseModel], cli: Mapping[str, Any] | None) -> tuple[dict, dict]:
    if not cli:
        return {}, {}
    values = {k: v for k, v in cli.items() if v is not None}
    unknown = [k for k in values if k not in model.model_fields]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(model.model_fields), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{option_name(unknown[0])}: unknown option{hint}")
    return values, {k: option_name(k) for k in values}


CLI_OPTIONS: dict[str, str] = {
    "cap_w": "--cap", "tick_s": "--tick", "time_limit_s": "--time-limit", "bsld_threshold_s": "--bsld-threshold",
    "params": "--param", "predictor_params": "--predictor-param", "kill_at_walltime": "--no-kill-at-walltime",
    "poll_interval_s": "--poll-interval",
}
"""Config keys whose command-line option is not ``--`` plus the key with dashes."""


def option_name(key: str) -> str:
    """The command-line option that sets config key ``key``.

    >>> option_name("cap_w"), option_name("cores_per_node")
    ('--cap', '--cores-per-node')
    """
    return CLI_OPTIONS.get(key, "--" + key.replace("_", "-"))


def _merge(layers: Sequence[tuple[dict, dict]]) -> tuple[dict, dict]:
    """Merge ``(values, origins)`` layers, lowest precedence first."""
    merged: dict = {}
    origins: dict = {}
    for values, layer_origins in layers:
        for alternatives in _EXCLUSIVE:
            for alt in alternatives:
                if any(k in values for k in alt):
                    for other in alternatives:
                        if other is alt:
                            continue
                        for k in other:
                            if k not in values:
                                merged.pop(k, None)
                                origins.pop(k, None)
        merged.update(values)
        for k in values:
            if k in layer_origins:
                origins[k] = layer_origins[k]
            else:
                origins.pop(k, None)
    return merged, origins


def _validate(model, raw, *, label, lines, origins):
    try:
        config = model.model_validate(raw)
    except ValidationError as e:
        raise format_validation_error(e, raw, label=label, root=model, lines=lines, origins=origins) from None
    private = type(config).__private_attributes__
    if "_source" in private:
        config._source = label
        config._origins = dict(origins)
    if "_lines" in private:
        config._lines = dict(lines or {})
    return config


def load_config(
    path: str | os.PathLike,
    model: type[BaseModel],
    *,
    cli: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
):
    """Read and validate a config file.

    Parameters
    ----------
    path
        The YAML file.
    model
        The model to validate against (see :data:`wattsched.config.kinds.CONFIG_KINDS`).
    cli, env
        Overrides, highest precedence first: ``cli`` (a mapping of top-level
        keys; ``None`` values are ignored, as argparse leaves unset options)
        then ``env`` (``WATTSCHED_<KEY>`` variables; pass ``os.environ``). Both
        are applied before validation, so a required key may come from them.
        ``env`` defaults to none so that a library call is not affected by the
        caller's environment; the CLI passes ``os.environ``.

    Raises
    ------
    ConfigError
        Listing every problem, one per line, as ``FILE:LINE: key.path: message``.
    """
    label = _label(path)
    raw, lines = read_yaml(path, label=label)
    _require_mapping(raw, label)
    raw = _resolve_paths(raw, model, Path(path).parent)
    merged, origins = _merge([(raw, {}), _env_layer(model, env), _cli_layer(model, cli)])
    return _validate(model, merged, label=label, lines=lines, origins=origins)


def merge_overrides(config: BaseModel, cli: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None):
    """A new validated config with environment and command-line overrides applied.

    Precedence: ``cli`` > ``env`` > the values of ``config`` > defaults. ``env``
    defaults to ``os.environ``. Setting ``procs`` on top of a file's
    ``platform`` (or ``cap_w`` on top of a ``cap_schedule``, and vice versa)
    replaces it rather than conflicting with it.

    >>> from wattsched.config import SimConfig
    >>> c = SimConfig(trace="t.swf", procs=4)
    >>> merge_overrides(c, {"seed": 7}, env={"WATTSCHED_SEED": "3", "WATTSCHED_POLICY": "fcfs"}).seed
    7
    """
    if env is None:
        env = os.environ
    model = type(config)
    label = getattr(config, "_source", None) or "<config>"
    base = config.model_dump(exclude_unset=True)
    merged, origins = _merge([(base, {}), _env_layer(model, env), _cli_layer(model, cli)])
    prior = dict(getattr(config, "_origins", {}) or {})
    for k, v in prior.items():
        if k in merged and k not in origins:
            origins[k] = v
    return _validate(model, merged, label=label, lines=getattr(config, "_lines", None), origins=origins)
