"""The sweep's Ctrl-C handling in the calling process: SIGINT becomes KeyboardInterrupt, and is put back after."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from wattsched.sweep.interrupt import PRELOAD, quiet_interrupt


def test_ctrl_c_inside_the_block_is_a_keyboard_interrupt_and_everything_is_restored():
    before_handler = signal.getsignal(signal.SIGINT)
    before_mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with pytest.raises(KeyboardInterrupt), quiet_interrupt():
        import dask

        assert PRELOAD in dask.config.get("distributed.worker.preload")
        # a thread started here, and a process it starts, begin with SIGINT blocked
        seen = []
        t = threading.Thread(target=lambda: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
        t.start()
        t.join()
        assert signal.SIGINT in seen[0]
        child = subprocess.run([sys.executable, "-c", "import signal; "
                                "print(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))"],
                               capture_output=True, text=True, check=True)
        assert child.stdout.strip() == "True"
        os.kill(os.getpid(), signal.SIGINT)  # as a terminal's Ctrl-C: to the process, whichever thread takes it
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # a wait that wakes now and then, as Dask's do
            time.sleep(0.05)
        pytest.fail("no KeyboardInterrupt")
    assert signal.getsignal(signal.SIGINT) is before_handler
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before_mask
    assert not any(t.name == "wattsched sweep Ctrl-C" for t in threading.enumerate())
    import dask

    assert PRELOAD not in (dask.config.get("distributed.worker.preload", []) or [])


def _interrupt_at(code, n: int):
    """A trace function that raises KeyboardInterrupt at the ``n``-th line event of ``code`` (a Ctrl-C there)."""
    seen = 0

    def local(frame, event, arg):
        nonlocal seen
        if event == "line":
            seen += 1
            if seen == n:
                raise KeyboardInterrupt
        return local

    def trace(frame, event, arg):
        return local if frame.f_code is code else None

    return trace


def _committed(path) -> tuple[set, dict]:
    db = sqlite3.connect(path)
    try:
        return ({k for (k,) in db.execute("SELECT key FROM runs WHERE status = 'ok'")},
                dict(db.execute("SELECT name, value FROM meta")))
    finally:
        db.close()


@pytest.mark.parametrize("method", ["add", "set_meta"])
def test_a_ctrl_c_anywhere_in_a_store_write_leaves_what_the_sweep_reports_saved_on_disk(tmp_path, method):
    """The interrupted sweep counts saved runs on its own connection: that count must be what the file holds.

    A Ctrl-C is injected before each line of the write in turn; whatever the
    point, the writer's own view and a fresh reader's view after the writer is
    gone agree (a row written but not yet committed would be counted, then lost).
    """
    from wattsched.sweep.store import Store

    code = getattr(Store, method).__code__
    n_lines = 0
    for n in range(1, 12):
        out = tmp_path / f"at-{n}"
        store = Store(out)
        store.add("first", {"cap": 1}, {"status": "ok"})
        args = (("second", {"cap": 2}, {"status": "ok"}) if method == "add" else ("sweep", {"keys": ["x"]}))
        sys.settrace(_interrupt_at(code, n))
        try:
            getattr(store, method)(*args)
            interrupted = False
        except KeyboardInterrupt:
            interrupted = True
        finally:
            sys.settrace(None)
        sweep_meta = store.meta("sweep")
        seen = (store.finished_keys(), {"sweep": sweep_meta} if sweep_meta else {})
        store.close()  # as when the process exits: an open transaction is rolled back
        keys, meta = _committed(out / "results.sqlite")
        assert keys == seen[0], f"interrupted before line {n} of Store.{method}"
        assert {k: json.loads(v) for k, v in meta.items()} == seen[1], f"interrupted before line {n}"
        if not interrupted:
            n_lines = n - 1
            break
    assert n_lines >= 1, "the write has no line to interrupt at"
