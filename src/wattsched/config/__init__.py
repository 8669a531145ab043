"""Configuration: typed models of every config file wattsched reads, and how they are read.

The package is layered, each module importing only earlier ones (and nothing above
:mod:`wattsched.model` but the leaves :mod:`wattsched.errors` and :mod:`wattsched.validation`):

- :mod:`~wattsched.config.base`: strict frozen models, YAML with line numbers, errors as
  ``FILE:LINE: KEY: message``, the precedence layers (command line > ``WATTSCHED_*`` > file > defaults);
- :mod:`~wattsched.config.caps`: cap schedules, energy budgets and demand-response events as written in files;
- :mod:`~wattsched.config.platform`: platform files (node groups, power and response models);
- :mod:`~wattsched.config.sim`: the simulation config (``sim.yaml``);
- :mod:`~wattsched.config.daemon`: the daemon config;
- :mod:`~wattsched.config.kinds`: the static table of config kinds ``check-config`` tells apart.

:mod:`~wattsched.config.reference` renders this package's sections of ``docs/config.md``; :mod:`wattsched.reference`,
above every layer, assembles the document (``make docs``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from wattsched.config import base as _base
from wattsched.config.base import (
    CLI_OPTIONS,
    ENV_PREFIX,
    MAX_YAML_VALUES,
    StrictModel,
    error_items,
    field_problems,
    format_validation_error,
    key_locator,
    load_yaml_model,
    locate,
    merge_overrides,
    option_name,
    read_yaml,
)
from wattsched.config.caps import (
    CapEntries,
    CapEntryConfig,
    CapValue,
    DemandResponseEventConfig,
    EnergyBudgetConfig,
    cap_schedule_from_entries,
    load_cap_schedule,
    parse_cap_value,
    read_cap_entries,
)
from wattsched.config.kinds import (
    CONFIG_KINDS,
    ConfigKind,
    detect_config_kind,
)
from wattsched.config.sim import (
    SimConfig,
)

__all__ = [
    "CLI_OPTIONS", "CONFIG_KINDS", "CapEntries", "CapEntryConfig", "CapValue", "ConfigKind",
    "DemandResponseEventConfig", "ENV_PREFIX", "EnergyBudgetConfig", "MAX_YAML_VALUES", "SimConfig", "StrictModel",
    "cap_schedule_from_entries", "detect_config_kind", "error_items", "field_problems", "format_validation_error",
    "key_locator", "load_cap_schedule", "load_config", "load_yaml_model", "locate", "merge_overrides",
    "option_name", "parse_cap_value", "read_cap_entries", "read_yaml",
]


def load_config(
    path: str | os.PathLike,
    model: type[BaseModel] = SimConfig,
    *,
    cli: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
):
    """Read and validate a config file; :func:`wattsched.config.base.load_config` with ``SimConfig`` by default."""
    return _base.load_config(path, model, cli=cli, env=env)
