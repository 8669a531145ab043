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
import threading
from collections.abc import Iterable, Iterator

__all__ = ["frozen", "imports_paused", "paused", "read_whole", "sparse"]


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


SPARSE_THRESHOLD = 50_000
"""Net new objects between two collections of the youngest generation while a run goes on (Python's default: 700)."""


@contextlib.contextmanager
def sparse(threshold: int = SPARSE_THRESHOLD) -> Iterator[None]:
    """Collections of the youngest generation at most once per ``threshold`` net new objects in the block.

    An event of a run makes objects (plans, jobs, views) that mostly end by
    reference counting, but are young when a collection comes: at Python's
    default, one every 700 objects, each walked again (KTH-SP2 ``easy``: 39
    collections, about 2 % of the engine's time). Less often, the collector
    still finds any cycle a policy makes, with at most ``threshold`` objects
    waiting for it. The thresholds in force before the block are restored after it.
    """
    global _sparse_depth, _sparse_saved
    with _sparse_lock:  # runs in threads: the first in sets the thresholds, the last out restores them
        if _sparse_depth == 0:
            _sparse_saved = gc.get_threshold()
            gc.set_threshold(max(_sparse_saved[0], threshold), *_sparse_saved[1:])
        _sparse_depth += 1
    try:
        yield
    finally:
        with _sparse_lock:
            _sparse_depth -= 1
            if _sparse_depth == 0:
                gc.set_threshold(*_sparse_saved)


_sparse_lock = threading.Lock()
_sparse_depth = 0
_sparse_saved: tuple[int, ...] = ()


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
