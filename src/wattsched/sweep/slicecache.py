"""The prepared slices a sweep's workers share in ``OUT/.slices/``, signed so that no other file is loaded.

A prepared slice holds Python objects (the jobs and a primed history predictor), stored with pickle, and
unpickling runs code: a file put into the directory by anyone else (or changed after it was written) must
never be loaded. Each sweep directory has its own key: 32 random bytes in ``OUT/.slices/key``, created with
mode 0600 by the process that starts the sweep; workers (the same user, on shared storage) read it, and
refuse it unless it is a regular file of theirs that nobody else may read or write. Each slice file is
``MAGIC``, an HMAC-SHA256 of the magic and payload under that key, then the payload; a file whose tag does
not match (changed, cut short, from another sweep or written by hand) is refused before anything is
unpickled, with an error naming it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import secrets
import stat
from pathlib import Path
from typing import Any

from wattsched.errors import WattschedError

MAGIC = b"wattsched-slice-v1\n"
KEY_NAME = "key"
KEY_BYTES = 32
_TAG_BYTES = hashlib.sha256().digest_size
_KEYS: dict[str, bytes] = {}  # by cache directory, once per process


class SliceCacheError(WattschedError):
    """A slice cache file or key that is refused; the message names the file and what is wrong."""


def ensure_key(cache_dir: str | os.PathLike) -> bytes:
    """Create the cache directory (0700) and its key (0600) unless they exist; return the key."""
    directory = Path(cache_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / KEY_NAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return read_key(cache_dir)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(KEY_BYTES))
    _KEYS.pop(str(directory), None)
    return read_key(cache_dir)


def read_key(cache_dir: str | os.PathLike) -> bytes:
    """The sweep's key, checked on the open file: a regular file of this user, 0600 or stricter, 32 bytes."""
    path = Path(cache_dir) / KEY_NAME
    key = _KEYS.get(str(Path(cache_dir)))
    if key is not None:
        return key
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise SliceCacheError(f"{path}: no such file: the sweep's slice key is created when the sweep starts; "
                              "run the sweep again") from None
    except OSError as exc:
        raise SliceCacheError(f"{path}: cannot be opened ({exc.strerror}): the slice key must be a regular "
                              "file, not a link") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise SliceCacheError(f"{path}: not a regular file: refused as the sweep's slice key")
        if st.st_uid != os.geteuid():
            raise SliceCacheError(f"{path}: owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}): "
                                  "refused as the sweep's slice key")
        if st.st_mode & 0o077:
            raise SliceCacheError(f"{path}: mode {stat.S_IMODE(st.st_mode):04o} lets others read or write it: "
                                  "refused as the sweep's slice key (it must be 0600)")
        key = fh.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise SliceCacheError(f"{path}: {len(key)} bytes, not the {KEY_BYTES} of a slice key: refused")
    _KEYS[str(Path(cache_dir))] = key
    return key


def _tag(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, MAGIC + payload, hashlib.sha256).digest()


def write_slice(path: Path, prepared: Any, key: bytes) -> None:
    """Write ``prepared`` to ``path`` signed (through a temporary file of this process, then renamed)."""
    payload = pickle.dumps(prepared, protocol=pickle.HIGHEST_PROTOCOL)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(MAGIC + _tag(key, payload) + payload)
    os.replace(tmp, path)


def read_slice(path: Path, key: bytes) -> Any:
    """The prepared slice in ``path``, after its tag is checked; refused with :class:`SliceCacheError`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise SliceCacheError(f"{path}: cannot be opened ({exc.strerror}): a cached slice must be a regular "
                              "file") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise SliceCacheError(f"{path}: not a regular file: refused as a cached slice")
        data = fh.read()
    head = len(MAGIC) + _TAG_BYTES
    if not data.startswith(MAGIC) or len(data) < head:
        raise SliceCacheError(f"{path}: not a slice this sweep wrote (no wattsched slice header): refused, "
                              "nothing in it was loaded; delete it to cut the slice again")
    payload = data[head:]
    if not hmac.compare_digest(data[len(MAGIC):head], _tag(key, payload)):
        raise SliceCacheError(f"{path}: its signature does not match this sweep's key (changed after it was "
                              "written, or written for another sweep): refused, nothing in it was loaded; "
                              "delete it to cut the slice again")
    return pickle.loads(payload)
