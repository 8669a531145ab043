"""Ctrl-C during ``wattsched sweep``: one line and exit 130, no Dask tracebacks.

A terminal sends SIGINT to its whole foreground process group, so the local
cluster's worker processes receive the Ctrl-C too. A worker that takes it as
a ``KeyboardInterrupt`` dies on its own, prints the traceback of its process,
and makes the nanny in the client print another while it closes; during the
cluster's start, Dask's exit handler adds a third.

So while a sweep runs (:func:`quiet_interrupt`) the client's main thread
blocks SIGINT, and every thread it starts, and every process those threads
spawn (Dask's workers), inherits the blocked signal from its first
instruction on. One thread of the client waits for the signal and hands it to
the main thread as a ``KeyboardInterrupt`` (Dask's waits wake every tenth of
a second to see it). Each local worker loads this module as a Dask preload
(:func:`dask_setup`): there a SIGINT only silences the worker's shutdown
chatter, and the client stops the workers as it does at the end of a sweep.
Every finished run is in the store already (one SQLite transaction per run),
so a rerun of the same command resumes.
"""

from __future__ import annotations

import _thread
import contextlib
import logging
import signal
import threading

PRELOAD = __name__
"""The module name given to Dask's ``distributed.worker.preload`` for the local workers."""

_DASK_LOGGERS = ("distributed", "dask_jobqueue", "tornado", "asyncio")
_SIGINT = {signal.SIGINT}


def _silence_dask(*_args) -> None:
    """What remains of Dask's logging once the sweep is being stopped: nothing below CRITICAL."""
    for name in _DASK_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _can_mask() -> bool:
    return (hasattr(signal, "pthread_sigmask") and hasattr(signal, "sigwait")
            and threading.current_thread() is threading.main_thread())


def dask_setup(worker=None) -> None:
    """Dask preload hook, run in each local worker process: SIGINT silences the worker instead of killing it.

    The worker started with SIGINT blocked (see the module docstring); a Ctrl-C
    pressed while it started is delivered now, to the silencing handler.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, _silence_dask)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)


@contextlib.contextmanager
def quiet_interrupt():
    """While the block runs, Ctrl-C silences Dask's logging, then raises ``KeyboardInterrupt`` in the main thread.

    Local workers started inside the block load :data:`PRELOAD` and inherit a
    blocked SIGINT. A second Ctrl-C during the cluster's shutdown interrupts
    the shutdown itself.
    """
    import dask

    if threading.current_thread() is not threading.main_thread():  # signals are the main thread's
        yield
        return

    def on_sigint(signum, frame):
        _silence_dask()
        raise KeyboardInterrupt

    def wait_for_sigint() -> None:
        while True:
            signal.sigwait(_SIGINT)
            if stop.is_set():
                return
            _thread.interrupt_main(signal.SIGINT)  # runs on_sigint in the main thread

    mask = _can_mask()
    if mask:
        # multiprocessing starts its resource tracker at the first spawn, and unblocks SIGINT in the spawning
        # thread when it has: started now, it leaves the blocked signal to every worker spawned later
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    preloads = list(dask.config.get("distributed.worker.preload", []) or [])
    previous = signal.getsignal(signal.SIGINT)
    old_mask = None
    waiter = None
    stop = threading.Event()
    try:  # a Ctrl-C at any point from here on finds everything put back
        signal.signal(signal.SIGINT, on_sigint)
        if mask:
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
            waiter = threading.Thread(target=wait_for_sigint, name="wattsched sweep Ctrl-C", daemon=True)
            waiter.start()
        with dask.config.set({"distributed.worker.preload": [*preloads, PRELOAD]}):
            yield
    finally:
        try:
            if waiter is not None and waiter.ident is not None:
                stop.set()
                signal.pthread_kill(waiter.ident, signal.SIGINT)  # wakes it; it sees stop and returns
                waiter.join()
        finally:  # even when a last Ctrl-C lands in the join
            if old_mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            signal.signal(signal.SIGINT, previous)
