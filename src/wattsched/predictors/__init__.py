"""Predictor registry: short names, lazy imports, entry point group ``wattsched.predictors``."""

from __future__ import annotations

from typing import Any

from wattsched.errors import PredictorError
from wattsched.plugins import Registry
from wattsched.predictors.base import BasePredictor, CompletedJob, Predictor

_BUILTIN: dict[str, str] = {
    "naive": "wattsched.predictors.naive:NaivePredictor",
    "history": "wattsched.predictors.history:HistoryPredictor",
    "learned": "wattsched.predictors.learned:LearnedPredictor",
    "per-user-tree": "wattsched.predictors.tree:PerUserTreePredictor",
    "oracle": "wattsched.predictors.oracle:OraclePredictor",
}

ENTRY_POINT_GROUP = "wattsched.predictors"


class UnavailablePredictor(PredictorError):
    """A known predictor whose module cannot be imported (an optional dependency is missing)."""


REGISTRY = Registry("predictor", _BUILTIN, ENTRY_POINT_GROUP, UnavailablePredictor,
                    hint=" (pip install 'wattsched[ml]')")


def available() -> list[str]:
    return REGISTRY.available()


def predictor_class(name: str) -> type[Predictor]:
    return REGISTRY.load(name)


def make_predictor(name: str, params: dict[str, Any] | None = None, *, source="predictor_params",
                   name_source: str | None = None):
    return REGISTRY.make(name, params, source=source, name_source=name_source)


__all__ = ["BasePredictor", "CompletedJob", "Predictor", "UnavailablePredictor", "available", "make_predictor",
           "predictor_class"]
