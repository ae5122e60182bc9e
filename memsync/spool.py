"""The producer's durable local spool: event batches the broker could not take wait on disk.

SQLite (WAL, synchronous=FULL) so a spooled batch survives a crash, and several threads and
processes can share one directory; rows are published oldest first and deleted only afterwards.
Events the broker refused for what they are (too large, unencodable) are set aside in a second
table with the reason, so they never hold up the events behind them. Turns are stored as the
JSON text emit() encoded (memsync/encoded.py) and read back as text: never encoded again. Turns
are private: the directory is its owner's only (0700), and so are the database files (0600).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsync.encoded import EncodedTurn
from pipeline.errors import SpoolFull

FILENAME = "spool.sqlite3"
DIR_MODE = 0o700
# SQLite gives the -wal and -shm files the database file's permissions.
FILE_MODE = 0o600
# A drainer holds the write lock while it publishes; other writers wait this long for it.
BUSY_TIMEOUT_SECONDS = 5.0

# AUTOINCREMENT: ids never go back, so id order is append order even after deletes. The totals
# row, kept by triggers in the same transaction, spares a full scan on every append's bound check.
# event_id and tenant repeat the payload's, so a drain need not decode it; they are NULL in rows
# an older version appended.
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        size INTEGER NOT NULL,
        appended_at REAL NOT NULL,
        payload TEXT NOT NULL,
        event_id TEXT,
        tenant TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS totals (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        events INTEGER NOT NULL,
        bytes INTEGER NOT NULL
    )""",
    "INSERT OR IGNORE INTO totals (one, events, bytes) VALUES (1, 0, 0)",
    """CREATE TRIGGER IF NOT EXISTS events_added AFTER INSERT ON events BEGIN
        UPDATE totals SET events = events + 1, bytes = bytes + NEW.size WHERE one = 1;
    END""",
    """CREATE TRIGGER IF NOT EXISTS events_removed AFTER DELETE ON events BEGIN
        UPDATE totals SET events = events - 1, bytes = bytes - OLD.size WHERE one = 1;
    END""",
    """CREATE TABLE IF NOT EXISTS refused (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        refused_at REAL NOT NULL,
        reason TEXT NOT NULL,
        payload TEXT NOT NULL
    )""",
)
# Columns added to `events` since its first version, for files an older version created.
_ADDED_COLUMNS = (("event_id", "TEXT"), ("tenant", "TEXT"))
# Connections a forked child inherited: never used nor closed there (closing could checkpoint or
# unlock on the parent's behalf); kept referenced so garbage collection does not close them.
_inherited: list[sqlite3.Connection] = []


@dataclass(frozen=True)
class SpoolStatus:
    """A snapshot of the spool's size against its bounds."""

    events: int
    bytes: int
    oldest_at: float | None
    max_events: int
    max_bytes: int
    path: Path
    refused: int = 0


@dataclass(frozen=True)
class Refused:
    """An event the broker refused for what it is, set aside with the reason."""

    id: int
    refused_at: float
    reason: str
    payload: dict[str, Any]


class Spool:
    """A bounded, crash-safe FIFO of encoded turns in `directory / "spool.sqlite3"`.

    One connection per object, guarded by a lock; processes sharing the directory coordinate
    through SQLite's own locking. `publish` callbacks must not call back into the same Spool.
    """

    def __init__(
        self, directory: Path, *, max_events: int = 100_000, max_bytes: int = 512 * 1024 * 1024
    ) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError("max_events and max_bytes must be at least 1")
        self.max_events = max_events
        self.max_bytes = max_bytes
        directory.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        if directory.stat().st_uid == os.getuid():
            # Also when it existed (an older version made it); a directory someone else owns
            # was chosen deliberately and is left as it is.
            directory.chmod(DIR_MODE)
        self._path = directory / FILENAME
        _private_files(self._path)
        self._lock = threading.Lock()
        _spools.add(self)
        with self._lock:
            self._conn = self._open()
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=FULL")
            except BaseException:
                self._conn.close()
                raise
        try:
            with self._write() as conn:
                for statement in _SCHEMA:
                    conn.execute(statement)
                _add_columns(conn)
        except BaseException:
            self.close()
            raise

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions; every write opens BEGIN IMMEDIATE itself.
        return sqlite3.connect(
            self._path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )

    def reopen_after_fork(self) -> None:
        """In a forked child: a new lock and connection; the parent's are left untouched."""
        self._lock = threading.Lock()
        _inherited.append(self._conn)
        with self._lock:
            self._conn = self._open()
            self._conn.execute("PRAGMA synchronous=FULL")

    @property
    def path(self) -> Path:
        """The SQLite file holding the spool."""
        return self._path

    def append(self, turns: Sequence[EncodedTurn]) -> None:
        """Store a batch, in order, in one transaction; durable once this returns.

        Raises SpoolFull, storing nothing, if the batch would pass max_events or max_bytes.
        """
        if not turns:
            return
        now = time.time()
        rows = [(_utf8_size(t.text), now, t.text, t.event_id, t.tenant) for t in turns]
        with self._write() as conn:
            events, size = self._totals()
            self._check_room(events, size, len(rows), sum(row[0] for row in rows))
            conn.executemany(
                "INSERT INTO events (size, appended_at, payload, event_id, tenant)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    def __len__(self) -> int:
        """Events currently spooled (by every process sharing the directory)."""
        with self._lock:
            return self._totals()[0]

    def refuse(self, refusals: Sequence[tuple[EncodedTurn, str]]) -> None:
        """Set aside events the broker refused, each with its reason, in one transaction."""
        rows = _refused_rows(refusals)
        if rows:
            with self._write() as conn:
                conn.executemany(
                    "INSERT INTO refused (refused_at, reason, payload) VALUES (?, ?, ?)", rows
                )

    def refused(self, limit: int | None = None) -> list[Refused]:
        """Events set aside as refused, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, refused_at, reason, payload FROM refused ORDER BY id LIMIT ?",
                (-1 if limit is None else limit,),
            ).fetchall()
        return [Refused(int(i), float(at), str(why), json.loads(p)) for i, at, why, p in rows]

    def status(self) -> SpoolStatus:
        """Size, age of the oldest event and bounds, read in one consistent snapshot."""
        with self._lock:
            row = self._conn.execute(
                "SELECT events, bytes, (SELECT appended_at FROM events ORDER BY id LIMIT 1),"
                " (SELECT count(*) FROM refused) FROM totals WHERE one = 1"
            ).fetchone()
        return SpoolStatus(
            events=int(row[0]),
            bytes=int(row[1]),
            oldest_at=None if row[2] is None else float(row[2]),
            max_events=self.max_events,
            max_bytes=self.max_bytes,
            path=self._path,
            refused=int(row[3]),
        )

    def drain(
        self,
        publish: Callable[[list[EncodedTurn]], Sequence[tuple[EncodedTurn, str]] | None],
        *,
        batch: int = 50,
        limit: int | None = None,
    ) -> int:
        """Publish spooled events oldest first, `batch` at a time, deleting each chunk afterwards.

        Each chunk is read, published and deleted inside one BEGIN IMMEDIATE transaction, so a
        concurrent drainer waits instead of publishing the same rows. If `publish` raises, the
        exception propagates and that chunk and all later ones stay, in order. Delivery is
        at-least-once: if the process dies (or the delete fails) after `publish` returned, the
        chunk is published again by a later drain. `publish` may return events of the chunk the
        broker refused, with reasons: they move to the refused table in the same transaction.
        Returns the number of events taken off the spool (published or refused).
        """
        if batch < 1:
            raise ValueError("batch must be at least 1")
        published = 0
        while limit is None or published < limit:
            size = batch if limit is None else min(batch, limit - published)
            with self._write() as conn:
                rows = conn.execute(
                    "SELECT id, payload, event_id, tenant FROM events ORDER BY id LIMIT ?", (size,)
                ).fetchall()
                if rows:
                    turns = [_stored_turn(text, eid, tenant) for _, text, eid, tenant in rows]
                    refusals = _refused_rows(publish(turns) or ())
                    if refusals:
                        conn.executemany(
                            "INSERT INTO refused (refused_at, reason, payload) VALUES (?, ?, ?)",
                            refusals,
                        )
                    # The write lock is held since the SELECT, so no other row lies in this range.
                    conn.execute(
                        "DELETE FROM events WHERE id BETWEEN ? AND ?", (rows[0][0], rows[-1][0])
                    )
            if not rows:
                break
            published += len(rows)
        return published

    def close(self) -> None:
        """Close the connection; everything appended is already on disk."""
        with self._lock:
            self._conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        # BEGIN IMMEDIATE takes SQLite's write lock up front: other writers wait (busy timeout)
        # rather than read the same rows and fail or duplicate later.
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:  # SQLite may already have rolled back (I/O error)
                    self._conn.execute("ROLLBACK")
                raise

    def _totals(self) -> tuple[int, int]:
        events, size = self._conn.execute(
            "SELECT events, bytes FROM totals WHERE one = 1"
        ).fetchone()
        return int(events), int(size)

    def _check_room(self, events: int, size: int, add_events: int, add_bytes: int) -> None:
        if events + add_events > self.max_events or size + add_bytes > self.max_bytes:
            raise SpoolFull(
                f"producer spool is full: {events} events / {size} bytes spooled, a batch of "
                f"{add_events} events / {add_bytes} bytes would pass the bound of "
                f"{self.max_events} events (MEMSYNC_SPOOL_MAX_EVENTS) / {self.max_bytes} bytes "
                f"(MEMSYNC_SPOOL_MAX_BYTES)"
            )


def _refused_rows(refusals: Sequence[tuple[EncodedTurn, str]]) -> list[tuple[float, str, str]]:
    now = time.time()
    return [(now, reason, turn.text) for turn, reason in refusals]


def _utf8_size(text: str) -> int:
    # isascii() reads a flag of the string: only non-ASCII text is encoded to be measured.
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _stored_turn(text: str, event_id: str | None, tenant: str | None) -> EncodedTurn:
    """A spooled row as the turn it holds; only a row an older version appended is decoded."""
    if event_id is None or tenant is None:
        payload = json.loads(text)
        return EncodedTurn(str(payload["event_id"]), str(payload.get("tenant", "default")), text)
    return EncodedTurn(event_id, tenant, text)


def _add_columns(conn: sqlite3.Connection) -> None:
    """Bring an `events` table an older version created up to date (inside the schema's write
    transaction, so processes opening the file at once add each column once)."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
    for name, kind in _ADDED_COLUMNS:
        if name not in present:
            conn.execute(f"ALTER TABLE events ADD COLUMN {name} {kind}")


def _private_files(database: Path) -> None:
    """Create the database file owner-only before SQLite opens it, and tighten older files."""
    os.close(os.open(database, os.O_RDWR | os.O_CREAT, FILE_MODE))
    for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
        with suppress(FileNotFoundError):
            path.chmod(FILE_MODE)


# Every SQLite call a spool makes runs under its lock. Holding all of them across fork() means no
# thread is inside SQLite at that moment: a mutex SQLite held in another thread would otherwise
# stay locked for ever in the child, and the child's first SQLite call would hang.
_spools: weakref.WeakSet[Spool] = weakref.WeakSet()
_held_across_fork: list[threading.Lock] = []


def _hold_for_fork() -> None:
    locks = sorted((spool._lock for spool in list(_spools)), key=id)
    for lock in locks:
        lock.acquire()
    _held_across_fork[:] = locks


def _release_after_fork() -> None:
    for lock in _held_across_fork:
        lock.release()
    _held_across_fork.clear()


os.register_at_fork(
    before=_hold_for_fork, after_in_parent=_release_after_fork, after_in_child=_release_after_fork
)
