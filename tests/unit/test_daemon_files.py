"""Trusted directories and atomic writes (wattsched.daemon.files), and the modes of the state store, on real files."""

from __future__ import annotations

import os
import stat

import pytest

from wattsched.daemon.files import UnsafeDirError, check_dir, ensure_dir, write_atomic
from wattsched.daemon.store import Store, StoreError

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask():
    """Run the test under a permissive umask, as a daemon started by hand might."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_write_atomic_replaces_the_file_with_the_mode_asked(tmp_path, umask):
    target = tmp_path / "heartbeat"
    target.write_text("old\n")
    os.umask(0o077)
    write_atomic(target, "123\n", 0o644)
    assert target.read_text() == "123\n" and mode(target) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heartbeat"]  # no temporary file left


def test_write_atomic_never_writes_through_a_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    target = tmp_path / "heartbeat"
    target.symlink_to(victim)
    (tmp_path / "heartbeat.tmp").symlink_to(victim)
    write_atomic(target, "1\n", 0o644)
    assert victim.read_text() == "precious\n"
    assert not target.is_symlink() and target.read_text() == "1\n"
    assert (tmp_path / "heartbeat.tmp").is_symlink()  # left alone


def test_write_atomic_leaves_nothing_behind_when_the_rename_fails(tmp_path):
    target = tmp_path / "heartbeat"
    target.mkdir()  # a directory cannot be replaced by a file
    with pytest.raises(OSError):
        write_atomic(target, "1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heartbeat"]


@pytest.mark.parametrize("bits, who", [(0o777, "group and others"), (0o757, "others"), (0o775, "group")])
def test_a_directory_writable_by_group_or_others_is_refused(tmp_path, bits, who):
    d = tmp_path / "state"
    d.mkdir()
    d.chmod(bits)
    with pytest.raises(UnsafeDirError, match=rf"{d}: the state directory .* has mode {bits:04o}, writable by {who}; "
                                             rf"run: chmod go-w {d}"):
        check_dir(d, what="state directory")
    with pytest.raises(UnsafeDirError, match="writable by"):
        write_atomic(d / "heartbeat", "1\n")
    assert not (d / "heartbeat").exists()


@as_root
def test_a_directory_owned_by_another_user_is_refused(tmp_path):
    d = tmp_path / "state"
    d.mkdir(mode=0o755)
    os.chown(d, NOBODY, -1)
    with pytest.raises(UnsafeDirError, match=rf"{d}: the heartbeat directory is owned by \S+ \(uid {NOBODY}\), not "
                                             rf"by root .* chown root: {d}"):
        check_dir(d, what="heartbeat directory")
    with pytest.raises(UnsafeDirError, match=f"uid {NOBODY}"):
        Store(d / "state.db")
    assert not (d / "state.db").exists()


def test_a_parent_others_can_write_is_refused_unless_sticky(tmp_path):
    parent = tmp_path / "shared"
    parent.mkdir()
    d = parent / "state"
    d.mkdir(mode=0o700)
    parent.chmod(0o777)
    with pytest.raises(UnsafeDirError, match=rf"{d}: the directory is inside {parent}, .* mode 0777"):
        check_dir(d)
    parent.chmod(0o1777)  # like /tmp: others cannot rename or remove what is not theirs
    check_dir(d)


def test_a_symlinked_directory_is_judged_by_what_it_points_to(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    real.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UnsafeDirError, match="mode 0777"):
        check_dir(link)


def test_ensure_dir_creates_with_the_mode_asked_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        d = ensure_dir(tmp_path / "a" / "state", 0o711)
    finally:
        os.umask(old)
    assert mode(d) == 0o711


def test_state_store_and_its_wal_files_are_private(tmp_path, umask):
    path = tmp_path / "state" / "state.db"
    store = Store(path)
    store.put("cycle", 1)  # a write: the WAL exists now
    files = [p for p in (path, path.with_name("state.db-wal"), path.with_name("state.db-shm")) if p.exists()]
    assert len(files) == 3
    assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
    assert mode(path.parent) == 0o711  # others may reach a heartbeat kept here, not list it
    store.close()


def test_an_existing_world_readable_store_is_made_private(tmp_path, umask):
    path = tmp_path / "state.db"
    Store(path).close()
    for p in tmp_path.iterdir():
        p.chmod(0o644)
    store = Store(path)
    store.put("cycle", 2)
    assert {p.name: mode(p) for p in tmp_path.iterdir()} == {p.name: 0o600 for p in tmp_path.iterdir()}
    store.close()


def test_opening_the_store_keeps_another_connection_from_deleting_its_wal(tmp_path):
    # closing any descriptor of the database drops the process's POSIX locks, SQLite's too:
    # a reader closing its connection would then checkpoint and delete the WAL under the daemon
    import subprocess
    import sys

    path = tmp_path / "state.db"
    store = Store(path)
    store.put("cycle", 1)

    # another process (`wattsched status`, a test reading the audit) opens and closes the store
    def read() -> str:
        return subprocess.run([sys.executable, "-c", f"import sqlite3; c = sqlite3.connect({str(path)!r}); "
                               "print(c.execute(\"SELECT value FROM kv WHERE key='cycle'\").fetchone()[0]); c.close()"],
                              check=True, capture_output=True, text=True).stdout.strip()

    for n in range(2, 5):
        read()
        store.put("cycle", n)
    assert read() == "4"  # what the daemon wrote after the readers left is still there
    assert path.with_name("state.db-wal").exists()
    store.close()
    assert Store(path).get("cycle") == 4


def test_a_symlinked_state_db_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("")
    (tmp_path / "state.db").symlink_to(victim)
    with pytest.raises(StoreError, match=r"state.db: not a regular file \(a symlink\?\)"):
        Store(tmp_path / "state.db")
