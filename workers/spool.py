"""The producer's durable local spool: event batches the broker could not take wait on disk.

SQLite (WAL, synchronous=FULL) so a spooled batch survives a crash, and several threads and
processes can share one directory; rows are published oldest first and deleted only afterwards.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import SpoolFull

FILENAME = "spool.sqlite3"
# A drainer holds the write lock while it publishes; other writers wait this long for it.
BUSY_TIMEOUT_SECONDS = 5.0

# AUTOINCREMENT: ids never go back, so id order is append order even after deletes. The totals
# row, kept by triggers in the same transaction, spares a full scan on every append's bound check.
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        size INTEGER NOT NULL,
        appended_at REAL NOT NULL,
        payload TEXT NOT NULL
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
)


@dataclass(frozen=True)
class SpoolStatus:
    """A snapshot of the spool's size against its bounds."""

    events: int
    bytes: int
    oldest_at: float | None
    max_events: int
    max_bytes: int
    path: Path


class Spool:
    """A bounded, crash-safe FIFO of JSON event payloads in `directory / "spool.sqlite3"`.

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
        directory.mkdir(parents=True, exist_ok=True)
        self._path = directory / FILENAME
        self._lock = threading.Lock()
        # isolation_level=None: no implicit transactions; every write opens BEGIN IMMEDIATE itself.
        self._conn = sqlite3.connect(
            self._path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            with self._write() as conn:
                for statement in _SCHEMA:
                    conn.execute(statement)
        except BaseException:
            self._conn.close()
            raise

    @property
    def path(self) -> Path:
        """The SQLite file holding the spool."""
        return self._path

    def append(self, payloads: Sequence[Mapping[str, Any]]) -> None:
        """Store a batch, in order, in one transaction; durable once this returns.

        Raises SpoolFull, storing nothing, if the batch would pass max_events or max_bytes.
        """
        # Serialise first so an unserialisable payload fails before anything is stored.
        # ensure_ascii keeps lone surrogates representable, so any str payload round-trips.
        texts = [json.dumps(dict(p), separators=(",", ":"), ensure_ascii=True) for p in payloads]
        if not texts:
            return
        sizes = [len(text.encode("utf-8")) for text in texts]
        now = time.time()
        with self._write() as conn:
            events, size = self._totals()
            self._check_room(events, size, len(texts), sum(sizes))
            conn.executemany(
                "INSERT INTO events (size, appended_at, payload) VALUES (?, ?, ?)",
                [(n, now, text) for n, text in zip(sizes, texts, strict=True)],
            )

    def __len__(self) -> int:
        """Events currently spooled (by every process sharing the directory)."""
        with self._lock:
            return self._totals()[0]

    def status(self) -> SpoolStatus:
        """Size, age of the oldest event and bounds, read in one consistent snapshot."""
        with self._lock:
            row = self._conn.execute(
                "SELECT events, bytes, (SELECT appended_at FROM events ORDER BY id LIMIT 1)"
                " FROM totals WHERE one = 1"
            ).fetchone()
        return SpoolStatus(
            events=int(row[0]),
            bytes=int(row[1]),
            oldest_at=None if row[2] is None else float(row[2]),
            max_events=self.max_events,
            max_bytes=self.max_bytes,
            path=self._path,
        )

    def drain(
        self,
        publish: Callable[[list[dict[str, Any]]], None],
        *,
        batch: int = 50,
        limit: int | None = None,
    ) -> int:
        """Publish spooled events oldest first, `batch` at a time, deleting each chunk afterwards.

        Each chunk is read, published and deleted inside one BEGIN IMMEDIATE transaction, so a
        concurrent drainer waits instead of publishing the same rows. If `publish` raises, the
        exception propagates and that chunk and all later ones stay, in order. Delivery is
        at-least-once: if the process dies (or the delete fails) after `publish` returned, the
        chunk is published again by a later drain. Returns the number of events published.
        """
        if batch < 1:
            raise ValueError("batch must be at least 1")
        published = 0
        while limit is None or published < limit:
            size = batch if limit is None else min(batch, limit - published)
            with self._write() as conn:
                rows = conn.execute(
                    "SELECT id, payload FROM events ORDER BY id LIMIT ?", (size,)
                ).fetchall()
                if rows:
                    publish([json.loads(payload) for _, payload in rows])
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
