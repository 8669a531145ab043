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

import importlib.machinery
import os
import sys

# The hot path of a simulation, compiled at install time (read by setup.py: keep it one literal tuple).
COMPILED = (
    "wattsched.sim.events",
    "wattsched.sim.engine",
    "wattsched.sim.intake",
    "wattsched.sim.recorder",
    "wattsched.sim.controls",
    "wattsched.sim.rows",
    "wattsched.model.ledger",
    "wattsched.policies.easy",
    "wattsched.policies.easy_pc",
    "wattsched.policies.power",
    "wattsched.policies.scan",
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
    "wattsched.workload.records",
    "wattsched.workload.augment",
)

CIMPORTS = {
    "wattsched.model.ledger": ("wattsched.model.job",),
    "wattsched.model.queue_index": ("wattsched.model.job",),
    "wattsched.model.guard": ("wattsched.model.job", "wattsched.model.plan", "wattsched.model.snapshot"),
    "wattsched.policies.easy": ("wattsched.model.job", "wattsched.model.plan", "wattsched.model.snapshot"),
    "wattsched.sim.recorder": ("wattsched.model.job", "wattsched.sim.rows", "wattsched.model.ledger"),
    "wattsched.sim.intake": ("wattsched.model.job", "wattsched.model.ledger", "wattsched.workload.records"),
    "wattsched.sim.engine": ("wattsched.model.job", "wattsched.model.plan", "wattsched.sim.rows",
                             "wattsched.model.ledger", "wattsched.sim.recorder", "wattsched.workload.records",
                             "wattsched.sim.intake", "wattsched.sim.events", "wattsched.model.queue_index",
                             "wattsched.model.snapshot"),
}
"""Compiled modules that use another one's C type (their ``.pxd`` cimports it, or a ``.pxd`` they cimport
does): a module whose dependency is loaded from its source is loaded from its source too (the compiled one
would refuse the Python class). Each module comes after those it uses."""

# os.path, not pathlib: this runs at every `import wattsched`, before anything else is imported
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(PACKAGE_DIR, "_native.json")
ENV_PURE = "WATTSCHED_PURE_PYTHON"

_source_only: frozenset[str] = frozenset()
_reasons: dict[str, str] = {}


def _module_base(name: str) -> str:
    return os.path.join(os.path.dirname(PACKAGE_DIR), *name.split("."))


class _SourceFirst:
    """A meta path finder: the listed modules as their ``.py`` source, ahead of a compiled extension."""

    def __init__(self, names: frozenset[str]):
        self.names = names

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        source = _module_base(fullname) + ".py"
        if not os.path.isfile(source):
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(fullname, source)


def _extension_path(name: str) -> str | None:
    base = _module_base(name)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.isfile(base + suffix):
            return base + suffix
    return None


def install_guard() -> None:
    """Use the ``.py`` source of every compiled module that is out of date or disabled (see the module doc)."""
    global _source_only
    pure = bool(os.environ.get(ENV_PURE))
    built = None
    sha256 = None
    stale = set()
    for name in COMPILED:
        if _extension_path(name) is None:
            _reasons[name] = "not compiled"
            continue
        if pure:
            _reasons[name] = f"source ({ENV_PURE} is set)"
            stale.add(name)
            continue
        if built is None:
            built, sha256 = _manifest(), _sha256()
        try:
            with open(_module_base(name) + ".py", "rb") as fh:
                digest = sha256(fh.read()).hexdigest()
        except OSError:
            digest = None  # an installed wheel may ship the extension alone: it is then the module
        if digest is not None and built.get(name) != digest:
            _reasons[name] = "source (changed since it was compiled: reinstall to compile it again)"
            stale.add(name)
            continue
        _reasons[name] = "compiled"
    for name, needs in CIMPORTS.items():
        gone = [dep for dep in needs if _reasons.get(dep) != "compiled"]
        if _reasons.get(name) == "compiled" and gone:
            _reasons[name] = f"source (it uses {gone[0]}, which is not loaded compiled)"
            stale.add(name)
    if stale:
        _source_only = frozenset(stale)
        sys.meta_path.insert(0, _SourceFirst(_source_only))


def _sha256():
    """SHA-256 from Python's built-in module if it has one: hashlib loads OpenSSL, 3 ms of every start."""
    for module in ("_sha2", "_sha256"):  # 3.12's name, 3.11's
        try:
            return __import__(module).sha256
        except (ImportError, AttributeError):
            pass
    import hashlib

    return hashlib.sha256


def _manifest() -> dict:
    import json

    try:
        with open(MANIFEST) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def status() -> dict[str, str]:
    """How each module of :data:`COMPILED` is loaded: ``compiled``, or ``source (why)``/``not compiled``."""
    return dict(_reasons)


def compiled_in_use() -> bool:
    """Whether the whole simulation core runs compiled."""
    return bool(_reasons) and all(v == "compiled" for v in _reasons.values())
