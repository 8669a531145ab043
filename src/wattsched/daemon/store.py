"""The daemon's state store: SQLite in WAL mode, with a versioned schema.

Tables:

``holds``
    Jobs the daemon holds (by the lua gate or itself), with the reason it last gave.
``starts``
    Jobs the daemon released onto chosen nodes and has not yet seen start.
``intents``
    Write-ahead log of actions: a row is written (``outcome = 'pending'``) before
    an action reaches Slurm and completed after, so a daemon killed in between
    knows on restart which actions may have been applied and checks them against
    Slurm instead of applying them again.
``audit``
    Every decision: time, action, target, reason, dry-run, outcome. An action
    is audited with outcome ``pending`` together with its intent, before it
    reaches Slurm or the node, and the row is completed with the outcome after.
``node_desired``
    Node caps and frequency ceilings wattsched wants (one row per node and
    kind), with the value the node reported after the last successful write
    and, for a setting that came with a job's start, the job and the value to
    go back to when the job is gone.
``history``
    Completed jobs with their measured or estimated per-node power, fed to the predictor.
``shadow_cycles``, ``shadow_jobs``, ``shadow_nodesets``
    Shadow mode's record of what each cycle observed (:mod:`wattsched.daemon.shadow`), created by the
    daemon when it first runs with ``shadow: true``.
``kv``
    Policy state (``policy_state``: policy name, parameters, state) and small
    daemon facts (JSON values).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wattsched.daemon.files import UnsafeDirError, ensure_dir, restrict_file
from wattsched.errors import StateError, damage_of, damaged_database, sqlite_damage

SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS holds (
    job_id INTEGER PRIMARY KEY, since REAL NOT NULL, source TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS starts (
    job_id INTEGER PRIMARY KEY, nodes TEXT NOT NULL, released_at REAL NOT NULL, cycles INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS intents (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
    args TEXT NOT NULL DEFAULT '{}', outcome TEXT NOT NULL DEFAULT 'pending', audit_id INTEGER);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, cycle INTEGER NOT NULL, action TEXT NOT NULL,
    target TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', dry_run INTEGER NOT NULL, outcome TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_time ON audit(time);
CREATE TABLE IF NOT EXISTS history (
    job_id INTEGER NOT NULL, start_s REAL NOT NULL, user TEXT NOT NULL, partition TEXT NOT NULL,
    nodes INTEGER NOT NULL, walltime_s REAL NOT NULL, submit_s REAL NOT NULL, end_s REAL NOT NULL,
    mean_w REAL NOT NULL, max_w REAL NOT NULL, std_w REAL NOT NULL, source TEXT NOT NULL,
    PRIMARY KEY (job_id, start_s));
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS node_desired (
    node TEXT NOT NULL, kind TEXT NOT NULL, value REAL, state TEXT NOT NULL DEFAULT 'pending', applied REAL,
    since REAL NOT NULL, job_id INTEGER, base REAL, PRIMARY KEY (node, kind));
"""


class StoreError(StateError):
    """The state store cannot be opened or has an unknown schema."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    time: float
    cycle: int
    action: str
    target: str
    reason: str
    dry_run: bool
    outcome: str


@dataclass(frozen=True, slots=True)
class Intent:
    id: int
    time: float
    action: str
    target: str
    args: dict
    audit_id: int | None = None


@dataclass(frozen=True, slots=True)
class Desired:
    """A node setting wattsched wants: ``kind`` is ``cap`` or ``freq``; ``value`` ``None`` means uncapped/nominal.

    ``state`` is ``pending`` until a write succeeded, then ``applied`` with the
    value the node reported in ``applied``. ``job_id`` and ``base``: the setting
    came with that job's start; ``base`` is the value to go back to once the job
    no longer runs on the node.
    """

    node: str
    kind: str
    value: float | None
    state: str
    applied: float | None
    since: float
    job_id: int | None = None
    base: float | None = None


class Store:
    """The state store at ``path`` (created with its directory if missing).

    With ``read_only`` (``status``, ``audit``) the file must already be a state
    store: it is opened read-only, never created, initialised or migrated, and
    an empty or foreign file is refused.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False):
        self.path = Path(path)
        self._holds: tuple[int, dict[int, tuple[str, str]]] | None = None  # data_version, rows
        if read_only:
            self._open_read_only()
            return
        # 0711: others may reach the heartbeat the lua gate reads (when it lives here) but not list
        ensure_dir(self.path.parent, 0o711, what="state directory")
        # the store holds job and user history: the database and its WAL files are the daemon's only
        # (SQLite creates -wal and -shm with the mode of the database; the umask covers a new database)
        old_umask = os.umask(0o077)
        try:
            for suffix in ("", "-wal", "-shm"):
                restrict_file(f"{self.path}{suffix}", 0o600)
            self.db = sqlite3.connect(str(self.path), isolation_level=None, timeout=10.0)
            self.db.text_factory = self._text
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            for suffix in ("", "-wal", "-shm"):  # without opening them: see restrict_file
                restrict_file(f"{self.path}{suffix}", 0o600)
            damage = sqlite_damage(self.db)
        except UnicodeDecodeError as exc:  # SQLite's own message quoting a damaged schema
            damage = f"its schema is not UTF-8 text ({exc.reason})"
        except (OSError, sqlite3.Error, UnsafeDirError) as exc:
            damage = damage_of(exc)
            if damage is None:
                raise StoreError(f"{self.path}: cannot open the state store: {exc}") from exc
        finally:
            os.umask(old_umask)
        if damage is not None:  # refused at open, not a traceback in every cycle
            raise StoreError(damaged_database(self.path, damage)) from None
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif self._check_version(row[0]) < SCHEMA_VERSION:  # version 1 lacked the audit link of intents
            self.db.execute("ALTER TABLE intents ADD COLUMN audit_id INTEGER")
            self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def _text(self, raw: bytes) -> str:
        """A text value of the store; text that is not UTF-8 (the store writes only UTF-8) means a damaged file."""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StoreError(damaged_database(self.path, f"a text value is not UTF-8 ({exc.reason} at byte "
                                                         f"{exc.start})")) from None

    def _check_version(self, value) -> int:
        try:
            version = int(value)
        except (TypeError, ValueError):
            raise StoreError(f"{self.path}: meta.schema_version: {str(value)[:40]!r} is not a schema version; "
                             "the file is damaged or not a wattsched state store") from None
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: schema version {version} is newer than this wattsched's ({SCHEMA_VERSION}); "
                "upgrade wattsched or move the file away"
            )
        return version

    def _open_read_only(self) -> None:
        if not self.path.is_file():
            raise StoreError(f"{self.path}: no state store")
        try:
            self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None,
                                      timeout=10.0)
            self.db.text_factory = self._text
            row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except UnicodeDecodeError as exc:  # SQLite's own message quoting a damaged schema
            raise StoreError(damaged_database(self.path, f"its schema is not UTF-8 text ({exc.reason})")) from None
        except sqlite3.Error as exc:
            if damage_of(exc) is not None:
                raise StoreError(damaged_database(self.path, exc)) from None
            raise StoreError(f"{self.path}: not a wattsched state store ({exc}); has the daemon run with this "
                             "state_dir?") from None
        damage = sqlite_damage(self.db)
        if damage is not None:
            raise StoreError(damaged_database(self.path, damage)) from None
        if row is None:
            raise StoreError(f"{self.path}: meta.schema_version: missing; the file is not a wattsched state store")
        self._check_version(row[0])

    def close(self) -> None:
        self.db.close()

    def _json(self, text, where: str):
        try:
            return json.loads(text)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{self.path}: {where}: not JSON ({exc}); the file was changed outside wattsched") \
                from None

    # ------------------------------------------------------------------ holds

    def holds(self) -> dict[int, tuple[str, str]]:
        """Job id to (source, reason) of every hold the daemon owns.

        The table is read again only when another connection committed to the
        file since (SQLite's ``PRAGMA data_version``); this store's own writes
        are applied to the copy it keeps. With 100,000 held jobs a read costs a
        tenth of a second, and a cycle asks several times.
        """
        version = self.db.execute("PRAGMA data_version").fetchone()[0]
        cached = self._holds
        if cached is None or cached[0] != version:
            rows = {r[0]: (r[1], r[2]) for r in self.db.execute("SELECT job_id, source, reason FROM holds")}
            self._holds = cached = (version, rows)
        return dict(cached[1])

    def _held_rows(self) -> dict[int, tuple[str, str]] | None:
        """The kept copy of the holds table, to apply a write of this store to (``None``: none kept)."""
        return None if self._holds is None else self._holds[1]

    def add_hold(self, job_id: int, source: str, reason: str = "", now: float | None = None) -> None:
        try:
            self.db.execute(
                "INSERT INTO holds VALUES (?, ?, ?, ?) ON CONFLICT(job_id) DO UPDATE SET reason=excluded.reason",
                (job_id, now or time.time(), source, reason),
            )
        except BaseException:
            self._holds = None
            raise
        rows = self._held_rows()
        if rows is not None:
            rows[job_id] = (rows[job_id][0] if job_id in rows else source, reason)

    def set_reasons(self, reasons: dict[int, str]) -> None:
        try:
            with self.db:
                self.db.execute("BEGIN")
                self.db.executemany("UPDATE holds SET reason=? WHERE job_id=?",
                                    [(r, j) for j, r in reasons.items()])
        except BaseException:
            self._holds = None
            raise
        rows = self._held_rows()
        if rows is not None:
            for job_id, reason in reasons.items():
                if job_id in rows:
                    rows[job_id] = (rows[job_id][0], reason)

    def drop_holds(self, job_ids: Iterable[int]) -> None:
        ids = list(job_ids)
        try:
            self.db.executemany("DELETE FROM holds WHERE job_id=?", [(j,) for j in ids])
        except BaseException:
            self._holds = None
            raise
        rows = self._held_rows()
        if rows is not None:
            for job_id in ids:
                rows.pop(job_id, None)

    # ------------------------------------------------------------------ starts awaiting confirmation

    def starts(self) -> dict[int, tuple[tuple[str, ...], float, int]]:
        return {
            r[0]: (tuple(r[1].split(",")) if r[1] else (), r[2], r[3])
            for r in self.db.execute("SELECT job_id, nodes, released_at, cycles FROM starts")
        }

    def add_start(self, job_id: int, nodes: Iterable[str], now: float) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO starts VALUES (?, ?, ?, 0)", (job_id, ",".join(nodes), now)
        )

    def bump_starts(self, job_ids: Iterable[int]) -> None:
        self.db.executemany("UPDATE starts SET cycles = cycles + 1 WHERE job_id=?", [(j,) for j in job_ids])

    def drop_starts(self, job_ids: Iterable[int]) -> None:
        self.db.executemany("DELETE FROM starts WHERE job_id=?", [(j,) for j in job_ids])

    # ------------------------------------------------------------------ intents (write-ahead)

    def begin(self, action: str, target: str, args: dict | None = None, now: float | None = None) -> int:
        cur = self.db.execute(
            "INSERT INTO intents (time, action, target, args) VALUES (?, ?, ?, ?)",
            (now or time.time(), action, target, json.dumps(args or {})),
        )
        return int(cur.lastrowid)

    def begin_audited(self, entry: AuditEntry, args: dict | None = None) -> int:
        """Write an intent and its audit row (outcome ``pending``) in one transaction; returns the intent id."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            cur = self.db.execute(
                "INSERT INTO audit (time, cycle, action, target, reason, dry_run, outcome) VALUES (?,?,?,?,?,?,?)",
                (entry.time, entry.cycle, entry.action, entry.target, entry.reason, int(entry.dry_run), "pending"),
            )
            audit_id = int(cur.lastrowid)
            cur = self.db.execute(
                "INSERT INTO intents (time, action, target, args, audit_id) VALUES (?, ?, ?, ?, ?)",
                (entry.time, entry.action, entry.target, json.dumps(args or {}), audit_id),
            )
            return int(cur.lastrowid)

    def finish(self, intent_id: int, outcome: str, reason: str | None = None) -> None:
        """Complete an intent and its audit row (if it has one) with ``outcome``; ``reason`` replaces the row's."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("UPDATE intents SET outcome=? WHERE id=?", (outcome, intent_id))
            row = self.db.execute("SELECT audit_id FROM intents WHERE id=?", (intent_id,)).fetchone()
            if row is not None and row[0] is not None:
                if reason is None:
                    self.db.execute("UPDATE audit SET outcome=? WHERE id=?", (outcome, row[0]))
                else:
                    self.db.execute("UPDATE audit SET outcome=?, reason=? WHERE id=?", (outcome, reason[:2000],
                                                                                       row[0]))

    def open_intents(self) -> list[Intent]:
        return [
            Intent(r[0], r[1], r[2], r[3], self._json(r[4], f"intents row {r[0]}: args"), r[5])
            for r in self.db.execute(
                "SELECT id, time, action, target, args, audit_id FROM intents WHERE outcome='pending' ORDER BY id"
            )
        ]

    def prune_intents(self, older_than_s: float) -> None:
        self.db.execute("DELETE FROM intents WHERE outcome != 'pending' AND time < ?", (older_than_s,))

    # ------------------------------------------------------------------ audit

    def audit(self, entries: Iterable[AuditEntry]) -> None:
        rows = [(e.time, e.cycle, e.action, e.target, e.reason, int(e.dry_run), e.outcome) for e in entries]
        if not rows:
            return
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT INTO audit (time, cycle, action, target, reason, dry_run, outcome) VALUES (?,?,?,?,?,?,?)",
                rows,
            )

    def audit_since(self, since: float, limit: int | None = None) -> list[AuditEntry]:
        sql = "SELECT time, cycle, action, target, reason, dry_run, outcome FROM audit WHERE time >= ? ORDER BY id"
        args: tuple = (since,)
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        return [AuditEntry(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6]) for r in self.db.execute(sql, args)]

    # ------------------------------------------------------------------ history and key-value state

    def add_history(self, rows: Iterable[tuple]) -> int:
        """Insert completed jobs ``(job_id, start_s, user, partition, nodes, walltime_s, submit_s, end_s,
        mean_w, max_w, std_w, source)``; already known ones are ignored. Returns how many were new."""
        before = self.db.total_changes
        self.db.executemany("INSERT OR IGNORE INTO history VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", list(rows))
        return self.db.total_changes - before

    def history(self) -> list[tuple]:
        return list(self.db.execute("SELECT * FROM history ORDER BY end_s"))

    # ------------------------------------------------------------------ desired node settings

    def desired(self) -> dict[tuple[str, str], Desired]:
        """Every node setting wattsched wants, by ``(node, kind)``."""
        return {
            (r[0], r[1]): Desired(*r)
            for r in self.db.execute(
                "SELECT node, kind, value, state, applied, since, job_id, base FROM node_desired ORDER BY node, kind"
            )
        }

    def want(self, node: str, kind: str, value: float | None, now: float, *, job_id: int | None = None,
             base: float | None = None) -> None:
        """Record that ``node``'s ``kind`` should be ``value`` (pending until :meth:`applied`)."""
        self.db.execute(
            "INSERT OR REPLACE INTO node_desired (node, kind, value, state, applied, since, job_id, base) "
            "VALUES (?, ?, ?, 'pending', NULL, ?, ?, ?)",
            (node, kind, value, now, job_id, base),
        )

    def applied(self, node: str, kind: str, reported: float | None) -> None:
        """The node confirmed its ``kind`` setting; ``reported`` is what it holds now."""
        self.db.execute("UPDATE node_desired SET state='applied', applied=? WHERE node=? AND kind=?",
                        (reported, node, kind))

    def forget_desired(self, node: str, kind: str) -> None:
        self.db.execute("DELETE FROM node_desired WHERE node=? AND kind=?", (node, kind))

    # ------------------------------------------------------------------ key-value state

    def get(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return default if row is None else self._json(row[0], f"kv {key!r}")

    def put(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, json.dumps(value)))
