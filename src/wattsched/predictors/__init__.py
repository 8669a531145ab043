"""Predictor registry: short names, lazy imports, entry point group ``wattsched.predictors``."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from pydantic import ValidationError

from wattsched.errors import ConfigError, WattschedError
from wattsched.predictors.base import BasePredictor, CompletedJob, Predictor

_BUILTIN: dict[str, str] = {
    "naive": "wattsched.predictors.naive:NaivePredictor",
    "history": "wattsched.predictors.history:HistoryPredictor",
    "learned": "wattsched.predictors.learned:LearnedPredictor",
    "per-user-tree": "wattsched.predictors.tree:PerUserTreePredictor",
    "oracle": "wattsched.predictors.oracle:OraclePredictor",
}

ENTRY_POINT_GROUP = "wattsched.predictors"


class UnavailablePredictor(WattschedError):
    """A known predictor whose module cannot be imported (an optional dependency is missing)."""


def available() -> list[str]:
    names = list(_BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in names:
            names.append(ep.name)
    return names


def predictor_class(name: str) -> type[Predictor]:
    target = _BUILTIN.get(name)
    if target is None:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name == name:
                try:
                    return ep.load()
                except ImportError as exc:
                    raise UnavailablePredictor(f"predictor {name!r} cannot be loaded: {exc}") from exc
        raise WattschedError(f"unknown predictor {name!r}; available: {', '.join(available())}")
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise UnavailablePredictor(
            f"predictor {name!r} needs {missing}, which is not installed (pip install 'wattsched[ml]')"
        ) from exc


def make_predictor(name: str, params: dict[str, Any] | None = None, *, source: str = "predictor_params"):
    cls = predictor_class(name)
    try:
        return cls(dict(params or {}))
    except ValidationError as exc:
        lines = [f"{source}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ConfigError(f"invalid parameters for predictor {name!r}:\n  " + "\n  ".join(lines)) from None


__all__ = ["BasePredictor", "CompletedJob", "Predictor", "UnavailablePredictor", "available", "make_predictor",
           "predictor_class"]
