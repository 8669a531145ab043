"""The results store of a sweep: one SQLite file, one row per finished run, appended as runs finish.

Why SQLite rather than a Parquet dataset: rows arrive one at a time, in any
order, from a process that may be killed at any moment. A SQLite insert is a
transaction: after a SIGKILL the file holds every run that finished and none
half-written, with no compaction of thousands of one-row Parquet files and no
schema to agree on up front (runs of one sweep can report different extra
metrics). The connection is in autocommit mode, so a row is committed by the
statement that writes it: a Ctrl-C cannot fall between the two and leave a run
counted as saved that the file then loses. :meth:`Store.table` flattens the rows into columns, and
``wattsched sweep report`` exports them as CSV and Parquet.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from pathlib import Path
from typing import Any

from wattsched.errors import RunDirError, damage_of, damaged_database, sqlite_damage

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    finished_unix_s REAL NOT NULL,
    axes TEXT NOT NULL,
    row TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if hasattr(v, "item"):  # numpy scalars
        return _clean(v.item())
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


class Store:
    """``DIR/results.sqlite``: finished runs by key.

    A failed run is stored with ``status = 'failed'`` and its error, and is
    retried by the next invocation (a failure may be transient: a lost node).
    """

    def __init__(self, directory: str | Path, *, read_only: bool = False):
        self.dir = Path(directory)
        self.path = self.dir / "results.sqlite"
        try:
            if read_only:  # ``sweep report``: the file must be a results store; nothing is written into it
                if not self.path.is_file():
                    raise RunDirError(f"{self.path}: no results store here; run `wattsched sweep SWEEP.yaml` first")
                self._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=60,
                                           isolation_level=None)
                damage = sqlite_damage(self._db)
                if damage is not None:
                    raise RunDirError(damaged_database(self.path, damage))
            else:
                self.dir.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)  # autocommit
            tables = {n for (n,) in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            if damage_of(exc) is not None:
                raise RunDirError(damaged_database(self.path, exc)) from None
            raise RunDirError(f"{self.path}: not a sweep results store ({exc})") from None
        if not {"runs", "meta"} <= tables:
            # a new store only where there is none (or the empty file sqlite3.connect just created, or a run
            # killed before its first commit left): never a schema written into someone else's file
            if read_only or tables:
                what = f"tables {', '.join(sorted(tables))}" if tables else "an empty file"
                self._db.close()
                raise RunDirError(f"{self.path}: not a sweep results store ({what}); move it away, or give the "
                                  "directory a sweep wrote")
            self._db.executescript(SCHEMA)

    def _json(self, text: Any, where: str) -> Any:
        try:
            return json.loads(text)
        except (TypeError, ValueError) as exc:
            raise RunDirError(f"{self.path}: {where}: not JSON ({exc}); the file was changed outside "
                              "wattsched") from None

    def close(self) -> None:
        self._db.close()

    def finished_keys(self) -> set[str]:
        """Keys of runs that finished successfully (a rerun skips them)."""
        return {k for (k,) in self._db.execute("SELECT key FROM runs WHERE status = 'ok'")}

    def add(self, key: str, axes: dict, row: dict) -> None:
        """Record one finished run (replacing an earlier failure of the same key)."""
        self._db.execute(
            "INSERT OR REPLACE INTO runs (key, status, finished_unix_s, axes, row) VALUES (?, ?, ?, ?, ?)",
            (key, row.get("status", "ok"), time.time(), json.dumps(_clean(axes)), json.dumps(_clean(row))),
        )

    def set_meta(self, name: str, value: Any) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, json.dumps(value)))

    def meta(self, name: str, default: Any = None) -> Any:
        r = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return default if r is None else self._json(r[0], f"meta {name!r}")

    def rows(self, keys: set[str] | None = None) -> list[dict]:
        """Every stored row (axis columns first), restricted to ``keys`` if given."""
        out = []
        for key, status, axes, row in self._db.execute("SELECT key, status, axes, row FROM runs ORDER BY rowid"):
            if keys is not None and key not in keys:
                continue
            axes, row = self._json(axes, f"runs row {key!r}: axes"), self._json(row, f"runs row {key!r}: row")
            if not isinstance(axes, dict) or not isinstance(row, dict):
                raise RunDirError(f"{self.path}: runs row {key!r}: axes and row must be JSON objects")
            r = {"key": key, **axes}
            for k, v in row.items():
                if k not in r:
                    r[k] = v
            r["status"] = status
            out.append(r)
        return out

    def __len__(self) -> int:
        return self._db.execute("SELECT count(*) FROM runs").fetchone()[0]
