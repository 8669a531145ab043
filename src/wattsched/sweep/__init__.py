"""Experiment campaigns: ``wattsched sweep SWEEP.yaml``.

A sweep file (:class:`~wattsched.sweep.spec.SweepConfig`) holds a base
simulation config and axes (traces or workload slices, platforms, policies
with parameter grids, predictors, caps, energy budgets, demand-response
events, response-model factors, seeds). Their product, with ``zip`` groups
and ``exclude`` rules, gives the runs (:mod:`wattsched.sweep.expand`). Each
run is one independent Dask task (:mod:`wattsched.sweep.execute`) whose
result row is appended to a SQLite store as it finishes
(:mod:`wattsched.sweep.store`), keyed by a content hash of the resolved run,
so a rerun does only what is missing. :mod:`wattsched.sweep.report` writes the
aggregated tables and an HTML page.

Dask and dask-jobqueue are the ``sweep`` extra; everything but the execution
(validation, ``--dry-run``, slicing, reports) works without them.
"""

from __future__ import annotations

from wattsched.errors import MissingDependencyError

INSTALL_HINT = "pip install 'wattsched[sweep]'  (installs dask[distributed] and dask-jobqueue)"


def require_dask():
    """Import ``distributed``; without the ``sweep`` extra raise an error saying what to install."""
    try:
        import dask  # noqa: F401
        import distributed
    except ImportError as exc:
        raise MissingDependencyError(
            f"wattsched sweep runs on Dask, which is not installed ({exc.name or exc}): {INSTALL_HINT}"
        ) from None
    return distributed
