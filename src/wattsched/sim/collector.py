"""Keeping a trace's jobs out of the cyclic garbage collector's passes while a simulation runs.

A trace's jobs (hundreds of thousands of objects, each with its own dict) hold no
reference cycles and live as long as the run. With the collector on, every
pass walks them again for nothing: one every few hundred new objects while
they are read, fewer but larger ones while the engine runs (1.7 s of a
RICC-2010-2 ``simulate``). :func:`read_whole` reads them with the collector
paused and then freezes them (:func:`gc.freeze`); :func:`frozen` freezes what
is alive before a run and unfreezes everything after it, so that nothing stays
out of the collector's reach once the run is over (acyclic objects are freed
by reference counting all along, frozen or not).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator

__all__ = ["frozen", "imports_paused", "paused", "read_whole"]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No collection in the block; the collector is on again after it if it was on before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def imports_paused() -> Iterator[None]:
    """No collection while the block imports modules, then what is alive frozen.

    Imports make objects by the hundred thousand (classes, functions, pydantic
    schemas) and no garbage; the collector's passes over them cost a command
    like ``simulate`` tens of milliseconds. Frozen after the block, they are
    not walked during the run either (:func:`gc.freeze`: acyclic objects are
    still freed by reference counting). A run unfreezes them with the rest when its
    :func:`frozen` block ends (``run_simulation`` opens one first thing).
    """
    with paused():
        yield
        gc.freeze()


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """What is alive now, and what :func:`read_whole` reads in the block, frozen until the block ends."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def read_whole(jobs: Iterable) -> list:
    """Every job of ``jobs`` in a list, read without the collector's passes, then frozen.

    Call it inside :func:`frozen`, which unfreezes them. A list is returned as it is.
    """
    if isinstance(jobs, list):
        return jobs
    with paused():
        jobs = list(jobs)
        gc.freeze()  # before the collector is on again: its first pass would walk every job once more
    return jobs
