"""Fuzzing with hypothesis: any input gives a result or a WattschedError, within bounded time and memory.

Profiles (``HYPOTHESIS_PROFILE``): ``ci`` (the default, the whole set in well under a minute), ``thorough``
(ten times the examples, for a local hunt). Each example has a deadline, so a slow path fails as such.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=2000, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("thorough", max_examples=600, deadline=2000,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

MEMORY_LIMIT = 4 * 2**30
"""Address-space limit of the fuzzing process: a reader that tries to hold a blown-up input fails with
MemoryError (a failed test) instead of taking the shared machine down."""


@pytest.fixture(scope="module", autouse=True)
def bounded_memory():
    """The limit holds while a fuzz module runs and is lifted after it (other tests keep the machine's)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = MEMORY_LIMIT if hard == resource.RLIM_INFINITY else min(MEMORY_LIMIT, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(scope="session")
def munge_socket():
    """A private munged for signing the agent's commands (as tests/unit/test_agent_server.py starts one)."""
    if not shutil.which("munged") or not shutil.which("munge"):
        pytest.skip("munge is not installed (apt-get install munge)")
    if os.geteuid() != 0:
        pytest.skip("needs root to start munged")
    base = Path(tempfile.mkdtemp(prefix="wattsched-fuzz-munge-"))
    for sub, mode in (("sock", 0o755), ("key", 0o700)):
        (base / sub).mkdir()
        os.chmod(base / sub, mode)
    (base / "key" / "munge.key").write_bytes(os.urandom(1024))
    os.chmod(base / "key" / "munge.key", 0o400)
    sock = base / "sock" / "munge.socket"
    result = subprocess.run(
        ["munged", "--force", f"--socket={sock}", f"--key-file={base / 'key' / 'munge.key'}",
         f"--pid-file={base / 'munged.pid'}", f"--log-file={base / 'munged.log'}",
         f"--seed-file={base / 'key' / 'munged.seed'}"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    for _ in range(100):
        if sock.exists():
            break
        time.sleep(0.02)
    try:
        yield sock
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((base / "munged.pid").read_text()), signal.SIGTERM)
        shutil.rmtree(base, ignore_errors=True)
