"""Pydantic validation errors as wattsched's problems: one ``(key path, message)`` pair per problem.

A leaf like :mod:`wattsched.errors`: it imports nothing of wattsched, so the
config package (:mod:`wattsched.config.base`, which puts a file and a line in
front of each pair) and the plugin registry (:mod:`wattsched.plugins`, which
checks a policy's or predictor's parameters, every layer below the config
included) read a bad key the same way.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["Loc", "error_items"]


Loc = tuple[Any, ...]


def _real_loc(loc: Loc, raw: Any) -> Loc:
    """Drop pydantic's union/function tags from ``loc`` by walking the raw input alongside it."""
    out: list = []
    node = raw
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, Mapping):
            if part in node or last:
                out.append(part)
                node = node.get(part)
            continue  # a tag
        if isinstance(node, (list, tuple)) and isinstance(part, int):
            out.append(part)
            node = node[part] if 0 <= part < len(node) else None
            continue
        if node is None and not isinstance(part, str):
            out.append(part)
            continue
        if node is None and last and not out:
            out.append(part)
        # anything else on a scalar is a type tag such as 'float' or 'function-after[...]'
    return tuple(out)


def _submodels(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(_submodels(arg))
    return found


def _keys_at(root, loc: Loc) -> list[str]:
    """Field names valid at ``loc`` inside ``root`` (a model or a type such as ``list[Model]``)."""
    candidates = _submodels(root)
    for part in loc:
        if isinstance(part, int):
            continue
        nxt: list[type[BaseModel]] = []
        for m in candidates:
            if part in m.model_fields:
                nxt.extend(_submodels(m.model_fields[part].annotation))
        candidates = nxt
    keys: list[str] = []
    for m in candidates:
        keys.extend(k for k in m.model_fields if k not in keys)
    return keys


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_FRIENDLY = {
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "dict_type": "expected a mapping of keys to values",
    "model_type": "expected a mapping of keys to values",
    "model_attributes_type": "expected a mapping of keys to values",
}


def error_items(err: ValidationError, raw: Any, root=None) -> list[tuple[Loc, str]]:
    """Cleaned ``(location, message)`` pairs of a pydantic error, one per problem."""
    items: list[tuple[Loc, str]] = []
    for e in err.errors(include_url=False):
        loc = _real_loc(tuple(e["loc"]), raw)
        kind = e["type"]
        msg = e["msg"]
        if kind == "wattsched_fields":
            for sub, m in e["ctx"]["problems"]:
                items.append(((*loc, *sub), m))
            continue
        if kind == "missing":
            msg = "required key is missing"
        elif kind in _FRIENDLY:
            msg = _FRIENDLY[kind]
            if isinstance(e.get("input"), (str, int, float, bool)):
                msg += f", got {_short(e['input'])}"
        elif kind == "extra_forbidden":
            valid = _keys_at(root, loc[:-1]) if root is not None else []
            close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
            msg = "unknown key"
            if close:
                msg += f"; did you mean {close[0]!r}?"
            if valid:
                msg += f" (valid keys: {', '.join(valid)})"
        else:
            for prefix in ("Value error, ", "Assertion failed, "):
                if msg.startswith(prefix):
                    msg = msg[len(prefix):]
            if kind not in ("value_error", "assertion_error") and "input" in e:
                value = e["input"]
                if isinstance(value, (str, int, float, bool)) or value is None:
                    msg += f", got {_short(value)}"
        items.append((loc, msg))
    return items
