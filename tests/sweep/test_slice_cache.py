"""The prepared slices a sweep's workers share are signed with the sweep's key: nothing else is unpickled.

Issue 33, point 12: ``OUT/.slices/*.pkl`` were unpickled from the sweep directory, so whoever could write a
file there ran code in every worker.
"""

import os
import pickle
import stat
import subprocess

import pytest
from helpers_sweep import WATTSCHED

from wattsched.sweep import slicecache
from wattsched.sweep.execute import run_one
from wattsched.sweep.expand import expand
from wattsched.sweep.slicecache import MAGIC, SliceCacheError
from wattsched.sweep.spec import load_sweep

ONE_SLICE = """\
kind: sweep
base: {procs: 100}
axes:
  slices: {trace: "{trace}", count: 1, length_h: 6, warmup_h: 2, seed: 7}
  caps: ["50%"]
cluster: {workers: 1}
"""


class Planted:
    """A pickle that, loaded, would create the file ``path``: what a foreign slice file could do."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def forget():
    """As in a worker that starts: no slice in memory, no key read yet."""
    from wattsched.sweep import execute

    execute._PREPARED.clear()
    slicecache._KEYS.clear()


@pytest.fixture(autouse=True)
def fresh_process_state():
    forget()


@pytest.fixture
def spec(write_sweep):
    return expand(load_sweep(write_sweep(ONE_SLICE)))[0].spec


def slice_file(cache):
    (path,) = cache.glob("slice-*.pkl")
    return path


def test_a_sweep_writes_its_key_0600_and_signed_slices(write_sweep, tmp_path):
    proc = subprocess.run([*WATTSCHED, "sweep", str(write_sweep(ONE_SLICE)), "--out", str(tmp_path / "o"), "-q",
                           "--workers", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    cache = tmp_path / "o" / ".slices"
    key = cache / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert stat.S_IMODE(cache.stat().st_mode) & 0o077 == 0
    assert slice_file(cache).read_bytes().startswith(MAGIC)


def test_a_signed_slice_is_read_back(spec, tmp_path):
    cache = tmp_path / "cache"
    first = run_one(spec, str(cache))
    written = slice_file(cache).stat().st_mtime_ns
    forget()
    again = run_one(spec, str(cache))  # read from the file in a fresh process's state
    assert slice_file(cache).stat().st_mtime_ns == written  # read back, not cut and written again
    first.pop("sim_wall_s"), again.pop("sim_wall_s")  # a timing: the one figure two runs may not share
    assert again == first


@pytest.mark.parametrize("how", ["tampered", "foreign pickle", "other sweep"])
def test_a_tampered_or_foreign_slice_file_is_refused_and_nothing_in_it_runs(spec, tmp_path, how):
    cache = tmp_path / "cache"
    run_one(spec, str(cache))
    path = slice_file(cache)
    ran = tmp_path / "code-ran"
    if how == "tampered":
        data = bytearray(path.read_bytes())
        data[-10] ^= 0xFF
        path.write_bytes(bytes(data))
        message = "its signature does not match this sweep's key"
    elif how == "foreign pickle":
        path.write_bytes(pickle.dumps(Planted(ran)))
        message = "not a slice this sweep wrote"
    else:  # signed with another sweep's key
        other = tmp_path / "other"
        forget()
        run_one(spec, str(other))
        path.write_bytes(slice_file(other).read_bytes())
        message = "its signature does not match this sweep's key"
    forget()
    with pytest.raises(SliceCacheError, match=rf"^{path}: {message}.*refused, nothing in it was loaded"):
        run_one(spec, str(cache))
    assert not ran.exists()


def test_a_forged_signature_over_planted_code_is_refused(spec, tmp_path):
    cache = tmp_path / "cache"
    run_one(spec, str(cache))
    path = slice_file(cache)
    ran = tmp_path / "code-ran"
    payload = pickle.dumps(Planted(ran))
    path.write_bytes(MAGIC + b"\0" * 32 + payload)
    forget()
    with pytest.raises(SliceCacheError, match="its signature does not match"):
        run_one(spec, str(cache))
    assert not ran.exists()


@pytest.mark.parametrize("problem", ["mode", "link", "size"])
def test_a_key_others_could_read_or_swap_is_refused(tmp_path, problem):
    cache = tmp_path / "cache"
    slicecache.ensure_key(cache)
    key = cache / "key"
    slicecache._KEYS.clear()
    if problem == "mode":
        key.chmod(0o644)
        message = "mode 0644 lets others read or write it"
    elif problem == "link":
        target = tmp_path / "elsewhere"
        target.write_bytes(os.urandom(32))
        target.chmod(0o600)
        key.unlink()
        key.symlink_to(target)
        message = "cannot be opened"
    else:
        key.write_bytes(b"short")
        message = "5 bytes, not the 32 of a slice key"
    with pytest.raises(SliceCacheError, match=rf"^{key}: {message}"):
        slicecache.read_key(cache)
