"""The compiled simulation core: which modules are compiled, and whether the compiled ones are used.

The modules in :data:`COMPILED` are built by Cython in pure-Python mode when
wattsched is installed (``setup.py``): the extension module is the ``.py``
source compiled, with the same behaviour. Python imports an extension module
before a ``.py`` of the same name, so a compiled module would shadow its
source after an edit (an editable install). The install writes the SHA-256 of
each compiled source into ``_native.json``; :func:`install_guard` (run when
the package is imported) loads the ``.py`` source instead of the extension for
every module whose source changed since the build, and for every module when
``WATTSCHED_PURE_PYTHON`` is set. :func:`status` says which is in use
(``wattsched version --verbose``).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path

# The hot path of a simulation, compiled at install time (read by setup.py: keep it one literal tuple).
COMPILED = (
    "wattsched.sim.engine",
    "wattsched.policies.easy",
    "wattsched.policies.easy_pc",
    "wattsched.predictors.history",
    "wattsched.model.guard",
    "wattsched.model.job",
    "wattsched.model.plan",
    "wattsched.model.snapshot",
    "wattsched.model.queue_index",
    "wattsched.model.end_table",
    "wattsched.model.constraints",
    "wattsched.model.forecast",
    "wattsched.model.platform",
    "wattsched.model.response",
    "wattsched.sim.checks",
    "wattsched.workload.swf",
)

PACKAGE_DIR = Path(__file__).resolve().parent
MANIFEST = PACKAGE_DIR / "_native.json"
ENV_PURE = "WATTSCHED_PURE_PYTHON"

_source_only: frozenset[str] = frozenset()
_reasons: dict[str, str] = {}


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Finds the listed modules as their ``.py`` source, ahead of a compiled extension of the same name."""

    def __init__(self, names: frozenset[str]):
        self.names = names

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        source = PACKAGE_DIR.parent.joinpath(*fullname.split(".")).with_suffix(".py")
        if not source.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def _extension_path(name: str) -> Path | None:
    base = PACKAGE_DIR.parent.joinpath(*name.split("."))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = base.with_name(base.name + suffix)
        if candidate.is_file():
            return candidate
    return None


def install_guard() -> None:
    """Use the ``.py`` source of every compiled module that is out of date or disabled (see the module doc)."""
    global _source_only
    pure = bool(os.environ.get(ENV_PURE))
    try:
        built = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        built = {}
    stale = set()
    for name in COMPILED:
        if _extension_path(name) is None:
            _reasons[name] = "not compiled"
            continue
        if pure:
            _reasons[name] = f"source ({ENV_PURE} is set)"
            stale.add(name)
            continue
        source = PACKAGE_DIR.parent.joinpath(*name.split(".")).with_suffix(".py")
        try:
            digest = hashlib.sha256(source.read_bytes()).hexdigest()
        except OSError:
            digest = None  # an installed wheel may ship the extension alone: it is then the module
        if digest is not None and built.get(name) != digest:
            _reasons[name] = "source (changed since it was compiled: reinstall to compile it again)"
            stale.add(name)
            continue
        _reasons[name] = "compiled"
    if stale:
        _source_only = frozenset(stale)
        sys.meta_path.insert(0, _SourceFirst(_source_only))


def status() -> dict[str, str]:
    """How each module of :data:`COMPILED` is loaded: ``compiled``, or ``source (why)``/``not compiled``."""
    return dict(_reasons)


def compiled_in_use() -> bool:
    """Whether the whole simulation core runs compiled."""
    return bool(_reasons) and all(v == "compiled" for v in _reasons.values())
