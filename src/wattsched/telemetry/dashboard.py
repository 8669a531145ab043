"""The PromQL of a Grafana dashboard, made runnable against Prometheus (to test ``deploy/grafana``).

Grafana expands its own variables before it sends a query; here ``$__rate_interval``
becomes ``1m``, ``$__interval`` ``15s``, ``$__range`` ``1h``, and the dashboard's
template variables (``$node``, ``${node}``, ``${node:regex}``, ``[[node]]``)
``.*``, which fits their use in ``=~`` matchers (interval and constant
variables take their current or first value).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

BUILTINS = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
    "__range_s": "3600",
    "__interval_ms": "15000",
}


def iter_panels(dashboard: dict) -> Iterator[dict]:
    """Every panel that is not a row, inside collapsed rows too, in dashboard order."""

    def walk(panels):
        for panel in panels or ():
            if panel.get("type") == "row":
                yield from walk(panel.get("panels"))
            else:
                yield panel
                yield from walk(panel.get("panels"))  # library or nested panels, if any

    yield from walk(dashboard.get("panels"))


def expand(expr: str, variables: dict[str, str]) -> str:
    """Replace Grafana variables in ``expr`` (``$x``, ``${x}``, ``${x:fmt}``, ``[[x]]``).

    >>> expand('rate(x{node=~"$node"}[$__rate_interval])', {"node": ".*", **BUILTINS})
    'rate(x{node=~".*"}[1m])'
    """

    def sub(m: re.Match) -> str:
        name = m.group("a") or m.group("b") or m.group("c")
        return variables.get(name, m.group(0))

    return re.sub(r"\$\{(?P<a>\w+)(?::[^}]*)?\}|\[\[(?P<b>\w+)(?::[^\]]*)?\]\]|\$(?P<c>\w+)", sub, expr)


def panel_queries(path: str | Path) -> list[tuple[str, str]]:
    """``(panel title, expr)`` for every non-empty Prometheus target of the dashboard at ``path``."""
    dashboard = json.loads(Path(path).read_text())
    variables = dict(BUILTINS)
    for var in (dashboard.get("templating") or {}).get("list", ()):
        kind = var.get("type")
        if kind == "datasource":
            continue
        if kind in ("interval", "constant"):  # used as a duration or a literal, not in a regex matcher
            current = (var.get("current") or {}).get("value") or str(var.get("query") or "").split(",")[0].strip()
            variables.setdefault(var["name"], current or "1m")
        else:
            variables.setdefault(var["name"], ".*")
    out = []
    for panel in iter_panels(dashboard):
        for target in panel.get("targets") or ():
            expr = (target.get("expr") or "").strip()
            if expr:
                out.append((panel.get("title", ""), expand(expr, variables)))
    return out
