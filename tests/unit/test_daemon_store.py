"""The daemon's state store: real SQLite files in tmp_path."""

from __future__ import annotations

import re
import sqlite3

import pytest

from wattsched.daemon.store import SCHEMA_VERSION, AuditEntry, Store, StoreError

TABLES = {"meta", "holds", "starts", "intents", "audit", "history", "kv"}


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "state" / "state.db")
    yield s
    s.close()


def history_row(job_id: int, start_s: float, end_s: float, mean_w: float = 250.0) -> tuple:
    return (job_id, start_s, "alice", "batch", 2, 3600.0, start_s - 10.0, end_s, mean_w, mean_w + 20.0, 5.0, "slurm")


# --------------------------------------------------------------------------- opening


def test_new_store_creates_its_directory_schema_and_version(tmp_path):
    path = tmp_path / "deep" / "dir" / "state.db"
    Store(path).close()
    db = sqlite3.connect(path)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    finally:
        db.close()
    assert tables >= TABLES
    assert version == (str(SCHEMA_VERSION),)


def test_store_is_in_wal_mode(store):
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # WAL is a property of the file: a second, independent connection sees it too
    other = sqlite3.connect(store.path)
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        other.close()


def test_reopening_keeps_data_and_does_not_duplicate_the_version(tmp_path):
    path = tmp_path / "state.db"
    s = Store(path)
    s.add_hold(5, "lua", "queued", now=100.0)
    s.put("cycle", 7)
    s.close()
    s = Store(path)
    try:
        assert s.holds() == {5: ("lua", "queued")}
        assert s.get("cycle") == 7
        assert s.db.execute("SELECT count(*) FROM meta WHERE key='schema_version'").fetchone() == (1,)
    finally:
        s.close()


def test_a_second_store_on_the_same_file_sees_committed_writes(tmp_path):
    """`wattsched status` and `audit` open the file while the daemon has it open."""
    path = tmp_path / "state.db"
    writer, reader = Store(path), Store(path)
    try:
        writer.audit([AuditEntry(1.0, 1, "start", "3", "on n1", False, "applied")])
        writer.add_start(3, ["n1"], 1.0)
        assert [e.target for e in reader.audit_since(0)] == ["3"]
        assert reader.starts() == {3: (("n1",), 1.0, 0)}
    finally:
        writer.close()
        reader.close()


def test_newer_schema_version_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "state.db"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    newer = rf"^{re.escape(str(path))}: schema version {SCHEMA_VERSION + 1} is newer than this wattsched's"
    with pytest.raises(StoreError, match=newer + r".*upgrade wattsched or move the file away"):
        Store(path)


def test_a_file_that_is_not_a_database_is_a_store_error_naming_it(tmp_path):
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not sqlite, just some text long enough to have a header" * 4)
    with pytest.raises(StoreError, match=rf"^{re.escape(str(path))}: cannot open the state store"):
        Store(path)


# --------------------------------------------------------------------------- holds and starts


def test_holds_round_trip_keep_the_first_source_and_update_the_reason(store):
    assert store.holds() == {}
    store.add_hold(10, "lua", "held at submission", now=100.0)
    store.add_hold(11, "daemon", "held on arrival", now=101.0)
    store.add_hold(10, "daemon", "waiting for power", now=200.0)  # seen again: only the reason changes
    assert store.holds() == {10: ("lua", "waiting for power"), 11: ("daemon", "held on arrival")}
    assert store.db.execute("SELECT since FROM holds WHERE job_id=10").fetchone() == (100.0,)
    store.set_reasons({11: "cap reached", 99: "not held: ignored"})
    assert store.holds() == {10: ("lua", "waiting for power"), 11: ("daemon", "cap reached")}
    store.drop_holds([10, 12])
    assert store.holds() == {11: ("daemon", "cap reached")}


def test_starts_round_trip_with_cycle_counts(store):
    store.add_start(7, ["node0001", "node0002"], 50.0)
    store.add_start(8, [], 51.0)
    assert store.starts() == {7: (("node0001", "node0002"), 50.0, 0), 8: ((), 51.0, 0)}
    store.bump_starts([7])
    store.bump_starts([7, 8])
    assert {j: s[2] for j, s in store.starts().items()} == {7: 2, 8: 1}
    store.add_start(7, ["node0003"], 60.0)  # released again: replaced, count reset
    assert store.starts()[7] == (("node0003",), 60.0, 0)
    store.drop_starts([8])
    assert set(store.starts()) == {7}


# --------------------------------------------------------------------------- intents


def test_intents_round_trip_and_only_pending_ones_are_open(store):
    a = store.begin("start", "7", {"nodes": ["node0001", "node0002"]}, now=10.0)
    b = store.begin("hold", "8", None, now=11.0)
    c = store.begin("power_down", "node0003", now=12.0)
    assert a < b < c
    opened = store.open_intents()
    assert [(i.id, i.time, i.action, i.target, i.args) for i in opened] == [
        (a, 10.0, "start", "7", {"nodes": ["node0001", "node0002"]}),
        (b, 11.0, "hold", "8", {}),
        (c, 12.0, "power_down", "node0003", {}),
    ]
    store.finish(a, "applied")
    store.finish(c, "failed")
    assert [i.id for i in store.open_intents()] == [b]
    store.finish(b, "reconciled:not-applied")
    assert store.open_intents() == []


def test_prune_intents_drops_only_old_finished_ones(store):
    old_done = store.begin("start", "1", now=10.0)
    old_open = store.begin("start", "2", now=10.0)
    new_done = store.begin("start", "3", now=100.0)
    store.finish(old_done, "applied")
    store.finish(new_done, "applied")
    store.prune_intents(50.0)
    ids = {r[0] for r in store.db.execute("SELECT id FROM intents")}
    assert ids == {old_open, new_done}


# --------------------------------------------------------------------------- audit


def test_audit_since_filters_by_time_in_insertion_order_with_a_limit(store):
    entries = [
        AuditEntry(30.0, 3, "start", "3", "on n3", False, "applied"),
        AuditEntry(10.0, 1, "hold", "1", "held on arrival", True, "dry-run"),
        AuditEntry(20.0, 2, "started", "3", "n3", False, "confirmed"),
        AuditEntry(40.0, 4, "cancel", "4", "evicted", False, "failed"),
    ]
    store.audit(entries[:2])
    store.audit([])  # nothing to write: no-op
    store.audit(entries[2:])
    assert store.audit_since(0) == entries  # insertion (id) order, not time order
    assert store.audit_since(20.0) == [entries[0], entries[2], entries[3]]  # inclusive bound
    assert store.audit_since(0, limit=2) == entries[:2]
    assert store.audit_since(41.0) == []
    assert store.audit_since(0)[1].dry_run is True and store.audit_since(0)[0].dry_run is False


# --------------------------------------------------------------------------- history and kv


def test_add_history_ignores_duplicates_and_returns_new_row_count(store):
    assert store.add_history([history_row(1, 0.0, 100.0), history_row(2, 5.0, 50.0)]) == 2
    # job 1 again (same start): ignored; job 1 requeued (new start) and job 3: new
    assert store.add_history([history_row(1, 0.0, 100.0, 999.0), history_row(1, 200.0, 300.0),
                              history_row(3, 1.0, 20.0)]) == 2
    assert store.add_history([history_row(3, 1.0, 20.0)]) == 0
    assert store.add_history([]) == 0
    rows = store.history()
    assert [(r[0], r[1]) for r in rows] == [(3, 1.0), (2, 5.0), (1, 0.0), (1, 200.0)]  # by end time
    assert rows[2][8] == 250.0  # the duplicate did not overwrite the first row


def test_kv_round_trips_json_values(store):
    assert store.get("policy_state") is None
    assert store.get("cycle", 0) == 0
    store.put("policy_state", {"epoch": 3, "queue": [1, 2]})
    store.put("cycle", 12)
    store.put("cycle", 13)
    assert store.get("policy_state") == {"epoch": 3, "queue": [1, 2]}
    assert store.get("cycle") == 13


def test_holds_are_read_again_only_after_a_change_by_anyone(tmp_path):
    store = Store(tmp_path / "state.db")
    store.add_hold(1, "daemon", "over the cap", now=100.0)
    first = store.holds()
    first[99] = ("mine", "")  # the caller's copy
    assert store.holds() == {1: ("daemon", "over the cap")}
    store.set_reasons({1: "waiting"})
    assert store.holds() == {1: ("daemon", "waiting")}
    other = Store(tmp_path / "state.db")  # another process, e.g. `wattsched release-all`
    other.drop_holds([1])
    other.add_hold(2, "lua", "queued", now=101.0)
    assert store.holds() == {2: ("lua", "queued")}
    store.drop_holds(iter([2]))
    assert store.holds() == {} and other.holds() == {}
    store.add_hold(3, "lua", "queued")
    store.add_hold(3, "daemon", "over the cap")  # an existing hold keeps its source, as the table does
    store.set_reasons({3: "waiting", 4: "no such hold"})
    assert store.holds() == {3: ("lua", "waiting")} == Store(tmp_path / "state.db", read_only=True).holds()
    other.close()
    store.close()
