"""What policies and predictors share: a registry of short names with lazy imports, typed parameters, tags.

Built-in plugins map to ``module:attribute`` strings imported on first use, so
a plugin whose optional dependency is missing keeps its name and explains
itself. Third-party plugins register under an entry point group, looked at
only for names that are not built in.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError

from wattsched.errors import ConfigError, WattschedError
from wattsched.validation import error_items


class NoParams(BaseModel):
    """A plugin without parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Parametrized:
    """Stores validated, typed parameters; gives ``get_params`` and ``repr``.

    Constructors only store parameters (no I/O, no work), so a sweep can
    rebuild a plugin anywhere from ``get_params()``.
    """

    name: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, params: BaseModel | dict | None = None, **kwargs: Any):
        if params is None or isinstance(params, dict):
            params = self.Params(**{**(params or {}), **kwargs})
        elif kwargs:
            params = params.model_copy(update=kwargs)
        self.params = params

    def get_params(self) -> dict[str, Any]:
        return self.params.model_dump()

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


T = TypeVar("T")


@runtime_checkable
class _Tagged(Protocol):
    """Anything with a ``tags()`` method (a policy or a predictor that declares its capabilities)."""

    def tags(self) -> Any: ...


def declared_tags(plugin: Any, kind: type[T], error: type[WattschedError], what: str) -> T:
    """The tags ``plugin`` declares through ``tags()``, checked to be a ``kind``; without ``tags()``, ``kind()``.

    The one place that looks at whether a plugin declares anything: callers
    read capabilities from the frozen tags object it returns, never from
    the plugin's other attributes (scikit-learn's ``get_tags``).
    """
    if not isinstance(plugin, _Tagged):
        return kind()
    tags = plugin.tags()
    if not isinstance(tags, kind):
        raise error(f"{what} {type(plugin).__qualname__}.tags() returned {type(tags).__qualname__}, "
                    f"not {kind.__qualname__}; return dataclasses.replace(super().tags(), ...) from the base class")
    return tags


class Registry:
    """Short names to plugin classes.

    Parameters
    ----------
    kind
        ``"policy"`` or ``"predictor"``, for messages.
    builtin
        Name to ``"module:attribute"``.
    group
        Entry point group of third-party plugins.
    unavailable
        Exception raised for a known plugin that cannot be imported.
    hint
        Appended to that exception's message (e.g. which extra to install).
    """

    def __init__(self, kind: str, builtin: dict[str, str], group: str, unavailable: type[WattschedError],
                 hint: str = ""):
        self.kind = kind
        self.builtin = builtin
        self.group = group
        self.unavailable = unavailable
        self.hint = hint

    def available(self) -> list[str]:
        names = list(self.builtin)
        for ep in entry_points(group=self.group):
            if ep.name not in names:
                names.append(ep.name)
        return names

    def load(self, name: str) -> type:
        target = self.builtin.get(name)
        if target is None:
            for ep in entry_points(group=self.group):
                if ep.name == name:
                    try:
                        return ep.load()
                    except ImportError as exc:
                        raise self.unavailable(f"{self.kind} {name!r} cannot be loaded: {exc}") from exc
            raise self._unknown(name)
        module, _, attr = target.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            missing = getattr(exc, "name", None) or str(exc)
            raise self.unavailable(
                f"{self.kind} {name!r} needs {missing}, which is not installed{self.hint} ({exc})"
            ) from exc

    def _unknown(self, name: str) -> WattschedError:
        from wattsched.errors import PolicyError, PredictorError

        cls = PolicyError if self.kind == "policy" else PredictorError
        return cls(f"unknown {self.kind} {name!r}; available: {', '.join(self.available())}")

    def make(self, name: str, params: dict[str, Any] | None = None, *,
             source: str | Callable[[tuple], str] = "params", name_source: str | None = None):
        """Build plugin ``name`` with ``params`` validated.

        ``source`` says where the parameters came from: a prefix (errors then
        name the key as ``{source}.{key}``) or a function of the key path
        returning the ``FILE:LINE: KEY`` (or ``--option: KEY``) prefix of an
        error line, such as :func:`wattsched.config.key_locator` gives.
        ``name_source``, if given, is the ``FILE:LINE: KEY`` prefix of the
        plugin's name, put before an unknown-name or missing-dependency error.
        """
        try:
            cls = self.load(name)
        except WattschedError as exc:
            if name_source is None:
                raise
            raise type(exc)(f"{name_source}: {exc}") from exc.__cause__
        params = dict(params or {})
        try:
            return cls(params)
        except ValidationError as exc:
            where = source if callable(source) else (lambda loc: ".".join([source, *map(str, loc)]))
            lines = [f"{where(loc)}: {msg} ({self.kind} {name!r})"
                     for loc, msg in error_items(exc, params, cls.Params)]
            error = ConfigError("\n".join(lines))
            error.problems = lines
            raise error from None
