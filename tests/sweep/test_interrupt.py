"""The sweep's Ctrl-C handling in the calling process: SIGINT becomes KeyboardInterrupt, and is put back after."""

import os
import signal
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
