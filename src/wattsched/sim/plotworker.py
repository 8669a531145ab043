"""Draw a run's plots in a separate process, started before the simulation so that its imports overlap it.

``wattsched simulate`` starts ``python -m wattsched.sim.plotworker`` first thing,
before it reads its config. The worker imports matplotlib and the plotting code (a fair part of a
short run's time) while the engine runs on the other core, then reads requests
on its standard input (pickled, their arrays sent apart from the pickle): first, optionally, the run's workload as
columns, which it writes as ``workload.csv.gz`` while the engine still runs
(under a temporary name, renamed when complete); then the columns the plots
need (and, if asked, the whole tables, which it writes as CSV and Parquet
files). It draws the PNG files into the run's staging directory and exits with
status 0, or prints the error and exits with status 1. With two cores or more,
a forked child draws two of the plots while the worker draws the third and
writes the tables.

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
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

JOB_COLUMNS = ("submit_s", "start_s", "end_s", "wait_s", "runtime_s", "work_s")
"""The per-job columns the plots use (the rest is not sent)."""


WAIT_TIMEOUT_S = 600.0
"""How long :meth:`PlotWorker.wait` waits for the worker (drawing the plots of a large trace takes seconds)."""


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
                # one OpenBLAS thread: the worker makes no matrix products, and more spin at import
                env={**os.environ, "MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1"},
            )
        except OSError:
            return None
        return cls(proc)

    def send_workload(self, columns: dict[str, list], path: Path) -> None:
        """Have the worker write the job table ``path`` (``workload.csv.gz``) from ``columns`` (sent by a thread).

        Call it before :meth:`send`. The file appears whole or not at all: after
        :meth:`wait`, a missing file means the worker could not write it.
        """
        self._post({"workload": columns, "path": str(path)}, last=False)

    def send(self, result: Any, out_dir: Path, bsld_threshold_s: float, bsld_definition: str = "standard", *,
             tables: bool = False) -> None:
        """Hand the worker what it draws; written by a thread, so the caller goes on with its summary.

        With ``tables``, the worker also writes the run's tables
        (:data:`~wattsched.sim.report.TABLE_FILES`, each whole or not at all:
        after :meth:`wait`, a missing file means it could not).
        """
        info = {k: result.info.get(k) for k in ("trace", "policy")}
        info["nodes"] = len(result.platform)
        columns = JOB_COLUMNS if not tables else tuple(result.jobs)
        request = {
            "out_dir": str(out_dir),
            "bsld_threshold_s": float(bsld_threshold_s),
            "bsld_definition": bsld_definition,
            "jobs": {c: result.jobs[c] for c in columns if c in result.jobs},
            "timeline": dict(result.timeline),
            "info": info,
            "tables": tables,
        }

        self._post(request, last=True)

    def _post(self, message: dict, *, last: bool) -> None:
        """Send ``message`` to the worker, after the messages before it; close its input if ``last``.

        Pickled here, written by a thread: a full pipe then blocks that thread
        only, without the GIL. The arrays go out of band (:func:`_frame`): the
        thread writes them from their own memory, with no pickled copy made.
        """
        parts = _frame(message)
        before = self._sender

        def write() -> None:
            if before is not None:
                before.join()
            if self._send_error is not None:
                return
            try:
                _write_all(self.proc.stdin.fileno(), parts)
                if last:
                    self.proc.stdin.close()
            except (OSError, ValueError) as exc:  # the worker is gone: wait() says why
                self._send_error = exc

        self._sender = threading.Thread(target=write, name="wattsched-plot-request", daemon=True)
        self._sender.start()

    def wait(self, timeout_s: float = WAIT_TIMEOUT_S) -> str | None:
        """Wait for the plots; ``None`` once they are drawn, else what went wrong (the worker's last words).

        A worker still running after ``timeout_s`` is killed (the caller then
        draws the plots itself): a run never hangs on its plots.
        """
        deadline = time.monotonic() + timeout_s
        if self._sender is not None:
            self._sender.join(timeout_s)
        err = _read_to_end(self.proc.stderr, deadline)
        try:
            # its standard error ends when it exits; Popen.wait(timeout) alone polls, up to 50 ms late
            self.proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            self.close()
            return f"the plot worker did not finish within {timeout_s:g} s and was stopped"
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


def _frame(message: dict) -> list:
    """``message`` as the parts of one frame: a header, the pickle (protocol 5), then each out-of-band buffer.

    The header gives the pickle's length, the number of buffers and each one's
    length (little-endian 64-bit integers). The buffers are views of the
    arrays' own memory (a run's tables and timeline: megabytes), so nothing is
    copied before the pipe; :func:`_read_frame` reads them back.
    """
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    views = [b.raw() for b in buffers]
    head = struct.pack(f"<2Q{len(views)}Q", len(data), len(views), *(v.nbytes for v in views))
    return [head, data, *views]


def _write_all(fd: int, parts: list) -> None:
    """Write ``parts`` to ``fd`` with one ``writev`` call (more if the kernel takes less): the GIL is released for
    the whole frame, where a write per part would wait for it between parts while the caller computes."""
    views = [memoryview(p).cast("B") for p in parts]
    while views:
        n = os.writev(fd, views)
        while views and n >= views[0].nbytes:
            n -= views[0].nbytes
            views.pop(0)
        if views and n:
            views[0] = views[0][n:]


def _read_frame(stream) -> Any:
    """The message of the next frame of ``stream`` (see :func:`_frame`); ``EOFError`` when it ends first."""
    size, count = struct.unpack("<2Q", _read_exact(stream, 16))
    sizes = struct.unpack(f"<{count}Q", _read_exact(stream, 8 * count))
    data = _read_exact(stream, size)
    return pickle.loads(data, buffers=[_read_exact(stream, n) for n in sizes])


def _read_exact(stream, size: int) -> bytearray:
    """``size`` bytes of ``stream``, read into one buffer; ``EOFError`` if it ends before."""
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = stream.readinto(view[got:])
        if not n:
            raise EOFError(f"the stream ended {size - got} bytes before the end of a frame")
        got += n
    return buf


def _read_to_end(stream, deadline: float) -> bytes | None:
    """All of ``stream`` (a pipe) until its end, or ``None`` if it has not ended by ``deadline`` (monotonic)."""
    import selectors

    chunks = []
    fd = stream.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


@contextlib.contextmanager
def _without_3d():
    """Keep matplotlib from importing its 3D axes while the plotting code is imported (the plots are 2D).

    ``matplotlib.projections`` imports ``mpl_toolkits.mplot3d`` when it is
    imported, a twentieth of the worker's imports; blocked, it warns and goes
    on without the 3D projection (the warning is silenced here). Afterwards
    ``mplot3d`` imports as usual again.
    """
    import warnings

    blocked = "matplotlib.projections" not in sys.modules and "mpl_toolkits.mplot3d" not in sys.modules
    if blocked:
        sys.modules["mpl_toolkits.mplot3d"] = None  # an import of it raises ImportError
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Unable to import Axes3D")
            yield
    finally:
        if blocked and sys.modules.get("mpl_toolkits.mplot3d", 0) is None:
            del sys.modules["mpl_toolkits.mplot3d"]


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
    from wattsched.sim.collector import imports_paused

    with imports_paused(), _without_3d():  # a tenth less time than with the collector walking what the imports make
        from wattsched.sim.plots import prepare_figures, warm_up  # the slow import, done while the parent simulates
        from wattsched.sim.report import PLOTS, LoadedRun, write_plots

        warm_up()
        prepare_figures()
        # for the tables, also imported while the parent simulates
        import pyarrow.csv
        import pyarrow.parquet  # noqa: F401
    try:
        request = _read_frame(sys.stdin.buffer)
        if "workload" in request:
            _write_workload(request["workload"], Path(request["path"]))
            request = _read_frame(sys.stdin.buffer)
    except EOFError:  # the parent ended without a request (the run failed): nothing to draw
        return 0
    run = LoadedRun(request["jobs"], request["timeline"], request["info"])
    out = Path(request["out_dir"])
    args = (run, out, request["bsld_threshold_s"], request["bsld_definition"])

    # two processes for the two cores: a forked child draws two of the plots (it only draws: matplotlib starts
    # no thread) while this process draws the third, then writes the tables (pyarrow, whose thread pools a fork
    # does not carry over, writes here). More processes, or table threads beside a plot, contend for the cores
    # and for this process's GIL, and all finish later.
    child = _draw_beside(lambda: write_plots(*args, only=list(BESIDE)))
    write_plots(*args, only=[p for p in PLOTS if child is None or p not in BESIDE])
    if request.get("tables"):
        _write_tables(run, out)
    if child is not None and not _succeeded(child):
        write_plots(*args, only=list(BESIDE))  # drawn here, so that its error, if any, is this process's own
    return 0


def _write_tables(run, out: Path) -> None:
    """The run's tables; on failure, say why and go on (the parent writes those missing then)."""
    from wattsched.sim.report import write_tables

    try:
        write_tables(run, out)
    except Exception as exc:
        print(f"warning: tables not written: {type(exc).__name__}: {exc}", file=sys.stderr)


def _write_workload(columns: dict[str, list], path: Path) -> None:
    """Write the job table under a temporary name, renamed when complete; on failure, say why and go on."""
    from wattsched.sim.report import write_whole
    from wattsched.workload.tables import write_job_columns

    try:
        write_whole(path, lambda partial: write_job_columns(columns, partial))
    except Exception as exc:  # the parent writes it then, and reports its own error if it has one
        print(f"warning: {path.name} not written: {type(exc).__name__}: {exc}", file=sys.stderr)


BESIDE = ("utilization.png", "power.png")
"""The plots a forked child draws while the worker draws the other and writes the tables.

The two shares take about as long: on KTH-SP2 the child's two plots (utilization
and power) about 165 ms, the worker's (waits and slowdown, whose log axes have
the most ticks) and its tables about 170 ms. With the parent idle, waiting for
them, the two processes keep two cores busy. Drawing waits and slowdown beside
utilization instead left the child 185 ms against the worker's 140 ms, and the
whole command 6 % slower (16 pairs in alternation, 0.964 s against 0.912 s)."""


def _draw_beside(draw) -> int | None:
    """Run ``draw`` in a forked child, so that two cores draw; the child's pid, or ``None`` (draw it here)."""
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return None
    try:
        pid = os.fork()  # the child only draws: matplotlib takes no lock that pyarrow's threads here may hold
    except OSError:
        return None
    if pid:
        return pid
    code = 1
    try:
        _die_with_parent()
        draw()
        code = 0
    except BaseException as exc:  # the worker draws the plot again and reports its error
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        sys.stderr.flush()
        os._exit(code)


def _succeeded(pid: int) -> bool:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _exit(code: int) -> None:
    """Exit without the interpreter's finalisation (tens of milliseconds with matplotlib loaded, for nothing:
    every file is closed by then), so that the parent, which waits for this process, goes on sooner."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # the parent reports it
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    _exit(code)
