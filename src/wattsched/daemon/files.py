"""Files the daemon writes, usually as root: trusted directories, atomic writes that follow no symlink.

The daemon writes its state store and the heartbeat into directories other
users must not control: a directory owned by someone else, or writable by group
or others, would let them plant a symlink (root then overwrites the file it
points to) or swap the files the lua gate and the daemon trust. Such a
directory is refused with an error naming it and its owner.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import stat
from pathlib import Path

from wattsched.errors import StateError


class UnsafeDirError(StateError):
    """A state or heartbeat directory (or one above it) that another user could change."""


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _trusted_uids() -> set[int]:
    return {0, os.geteuid()}


def check_dir_stat(path: Path, st: os.stat_result, *, what: str = "directory") -> None:
    """Refuse a directory not owned by root or the daemon's user, or writable by group or others.

    >>> import os
    >>> check_dir_stat(Path("/"), os.stat("/"))
    """
    trusted = _trusted_uids()
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirError(f"{path}: the {what} is not a directory")
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid not in trusted:
        raise UnsafeDirError(
            f"{path}: the {what} is owned by {_owner(st.st_uid)}, not by root or the daemon's user "
            f"({_owner(os.geteuid())}); another user could plant files or symlinks the daemon then writes "
            f"through. Give it to root: chown root: {path} && chmod go-w {path}"
        )
    if mode & 0o022:
        raise UnsafeDirError(
            f"{path}: the {what} (owned by {_owner(st.st_uid)}) has mode {mode:04o}, writable by "
            f"{'group and others' if mode & 0o022 == 0o022 else 'group' if mode & 0o020 else 'others'}; "
            f"run: chmod go-w {path}"
        )


def check_dir(path: str | Path, *, what: str = "directory") -> None:
    """Check ``path`` (:func:`check_dir_stat`) and every directory above it.

    An ancestor may be writable by others only with the sticky bit (``/tmp``):
    then nobody else can rename or remove what is inside.
    """
    path = Path(os.path.abspath(path))
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UnsafeDirError(f"{path}: cannot check the {what}: {exc.strerror}") from None
    check_dir_stat(path, st, what=what)
    for parent in Path(os.path.realpath(path)).parents:
        pst = os.stat(parent)
        mode = stat.S_IMODE(pst.st_mode)
        if pst.st_uid not in _trusted_uids() or (mode & 0o022 and not mode & stat.S_ISVTX):
            raise UnsafeDirError(
                f"{path}: the {what} is inside {parent}, owned by {_owner(pst.st_uid)} with mode {mode:04o}: "
                "another user could replace it; use a directory whose parents only root can change"
            )


def ensure_dir(path: str | Path, mode: int, *, what: str = "directory") -> Path:
    """Create ``path`` with ``mode`` (whatever the umask) if it is missing, then :func:`check_dir` it."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=mode)
            os.chmod(path, mode)
        except FileExistsError:
            pass
    check_dir(path, what=what)
    return path


def write_atomic(path: str | Path, data: str, mode: int = 0o600, *, what: str = "directory") -> None:
    """Replace ``path`` with ``data``: a fresh temporary file beside it, then a rename.

    The temporary file has a unique name and is created with ``O_EXCL |
    O_NOFOLLOW``, so a file or symlink planted under any name is never written
    through; the rename replaces a symlink at ``path`` itself, not what it
    points to. The directory is opened once and checked (:func:`check_dir_stat`)
    on that handle, so it cannot be swapped between the check and the write.
    ``mode`` is set explicitly, whatever the umask.
    """
    path = Path(path)
    directory = path.parent
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        check_dir_stat(directory, os.fstat(dfd), what=what)
        tmp = f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        try:
            try:
                os.fchmod(fd, mode)
                view = memoryview(data.encode())
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)


def restrict_file(path: str | Path, mode: int = 0o600) -> None:
    """Set ``mode`` on an existing regular file; a missing file is left missing, a symlink is refused.

    No file descriptor is opened: closing any descriptor of an SQLite database
    drops every POSIX lock the process holds on it, SQLite's included (another
    connection could then checkpoint and delete the WAL under the daemon). The
    file is named in a directory :func:`check_dir` accepted, so nobody else can
    swap it between the ``lstat`` and the ``chmod``.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeDirError(f"{path}: not a regular file (a symlink?); move it away")
    if stat.S_IMODE(st.st_mode) != mode:
        os.chmod(path, mode)
