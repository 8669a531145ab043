"""Draw a run's plots in a separate process, started before the simulation so that its imports overlap it.

``wattsched simulate`` starts ``python -m wattsched.sim.plotworker`` when a run
begins. The worker imports matplotlib and the plotting code (a fair part of a
short run's time) while the engine runs on the other core, then waits for one
request on its standard input: the columns the plots need, pickled. It draws
the PNG files into the run's staging directory and exits with status 0, or
prints the error and exits with status 1.

A fresh interpreter, not a forked one: a forked child that a signal reaches can
return into the caller's code. The worker dies with its parent: the end of its
standard input (the parent closed it or exited) ends it, and on Linux the
kernel sends it SIGTERM when the parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

JOB_COLUMNS = ("submit_s", "start_s", "end_s", "wait_s", "runtime_s", "work_s")
"""The per-job columns the plots use (the rest is not sent)."""


class PlotWorker:
    """The parent's handle on a plot worker process.

    Use :meth:`start`, then :meth:`send` once the result is known, then
    :meth:`wait`; :meth:`close` (always, in a ``finally``) ends a worker that is
    still running.
    """

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self._sender: threading.Thread | None = None
        self._send_error: BaseException | None = None

    @classmethod
    def start(cls) -> PlotWorker | None:
        """Start a worker, or return ``None`` when no process can be started (the caller draws then)."""
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "wattsched.sim.plotworker", str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                env={**os.environ, "MPLBACKEND": "Agg"},
            )
        except OSError:
            return None
        return cls(proc)

    def send(self, result: Any, out_dir: Path, bsld_threshold_s: float, bsld_definition: str = "standard") -> None:
        """Hand the worker what it draws; written by a thread, so the caller goes on writing its tables."""
        info = {k: result.info.get(k) for k in ("trace", "policy")}
        info["nodes"] = len(result.platform)
        request = {
            "out_dir": str(out_dir),
            "bsld_threshold_s": float(bsld_threshold_s),
            "bsld_definition": bsld_definition,
            "jobs": {c: result.jobs[c] for c in JOB_COLUMNS if c in result.jobs},
            "timeline": dict(result.timeline),
            "info": info,
        }

        def write() -> None:
            try:
                pickle.dump(request, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self.proc.stdin.close()
            except (OSError, ValueError) as exc:  # the worker is gone: wait() says why
                self._send_error = exc

        self._sender = threading.Thread(target=write, name="wattsched-plot-request", daemon=True)
        self._sender.start()

    def wait(self) -> str | None:
        """Wait for the plots; ``None`` once they are drawn, else what went wrong (the worker's last words)."""
        if self._sender is not None:
            self._sender.join()
        err = self.proc.stderr.read()  # to its end: the worker has exited or closed it
        self.proc.wait()
        if self.proc.returncode == 0:
            return None
        text = (err or b"").decode("utf-8", "replace").strip()
        lines = text.splitlines()
        why = lines[-1] if lines else (f"killed by signal {-self.proc.returncode}" if self.proc.returncode < 0
                                       else f"exit status {self.proc.returncode}")
        return f"the plot worker failed: {why}"

    def close(self) -> None:
        """End the worker if it still runs (the run failed or was interrupted)."""
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def _die_with_parent() -> None:
    """Ask Linux for SIGTERM when the parent dies (a no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which ends this process
    _die_with_parent()
    if argv and os.getppid() != int(argv[0]):  # the parent died before the line above took effect
        return 0
    import wattsched.sim.plots  # noqa: F401  (the slow import, done while the parent simulates)
    from wattsched.sim.report import LoadedRun, write_plots

    try:
        request = pickle.load(sys.stdin.buffer)
    except EOFError:  # the parent ended without a request (the run failed): nothing to draw
        return 0
    run = LoadedRun(request["jobs"], request["timeline"], request["info"])
    write_plots(run, Path(request["out_dir"]), request["bsld_threshold_s"], request["bsld_definition"])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # the parent reports it
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
