"""The producer's durable spool: order, chunking, failure, restart, bounds, concurrent use, and
encoded turns stored and read back as the very text given."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from memsync.encoded import EncodedTurn, encode_payload
from memsync.spool import Spool
from pipeline.errors import RetryableError, SpoolFull

ROOT = Path(__file__).resolve().parents[2]


def events(start: int, stop: int) -> list[EncodedTurn]:
    return [
        encode_payload({"event_id": f"e-{i}", "n": i, "text": "héllo"}) for i in range(start, stop)
    ]


def ids(turns: list[EncodedTurn]) -> list[int]:
    return [int(json.loads(t.text)["n"]) for t in turns]


def size(turns: list[EncodedTurn]) -> int:
    return sum(len(t.text.encode("utf-8")) for t in turns)


class Recorder:
    """A publish function that records each chunk, optionally failing on one call."""

    def __init__(self, fail_on_call: int | None = None, sleep: float = 0.0) -> None:
        self.chunks: list[list[EncodedTurn]] = []
        self.calls = 0
        self.fail_on_call = fail_on_call
        self.sleep = sleep

    def __call__(self, chunk: list[EncodedTurn]) -> None:
        self.calls += 1
        if self.sleep:
            time.sleep(self.sleep)
        if self.calls == self.fail_on_call:
            raise ConnectionError("broker away")
        self.chunks.append(chunk)

    @property
    def published(self) -> list[int]:
        return [n for chunk in self.chunks for n in ids(chunk)]


@pytest.fixture
def spool(tmp_path: Path) -> Iterator[Spool]:
    s = Spool(tmp_path / "a" / "b")
    yield s
    s.close()


def test_creates_directory_and_sqlite_file_in_wal_mode(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "nested" / "spool")
    try:
        assert spool.path == tmp_path / "nested" / "spool" / "spool.sqlite3"
        assert spool.path.is_file()
        assert len(spool) == 0
    finally:
        spool.close()
    # A sqlite3 connection's own context manager commits but never closes (ResourceWarning).
    with closing(sqlite3.connect(spool.path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_append_then_drain_keeps_order_across_appends(spool: Spool) -> None:
    spool.append(events(0, 3))
    spool.append(events(3, 4))
    spool.append([])
    spool.append(events(4, 10))
    assert len(spool) == 10
    publish = Recorder()
    assert spool.drain(publish) == 10
    assert publish.published == list(range(10))
    assert publish.chunks[0][0] == events(0, 1)[0]
    assert len(spool) == 0
    assert spool.drain(publish) == 0
    assert publish.calls == 1


def test_drain_publishes_in_chunks_of_batch(spool: Spool) -> None:
    spool.append(events(0, 23))
    publish = Recorder()
    assert spool.drain(publish, batch=5) == 23
    assert [len(c) for c in publish.chunks] == [5, 5, 5, 5, 3]
    assert publish.published == list(range(23))


def test_drain_limit_caps_events_and_leaves_the_rest_in_order(spool: Spool) -> None:
    spool.append(events(0, 12))
    publish = Recorder()
    assert spool.drain(publish, batch=5, limit=7) == 7
    assert [len(c) for c in publish.chunks] == [5, 2]
    assert len(spool) == 5
    assert spool.drain(publish, limit=0) == 0
    assert spool.drain(publish, batch=100) == 5
    assert publish.published == list(range(12))


def test_failed_publish_keeps_that_chunk_and_later_ones_in_order(spool: Spool) -> None:
    spool.append(events(0, 4))
    spool.append(events(4, 10))
    failing = Recorder(fail_on_call=2)
    with pytest.raises(ConnectionError, match="broker away"):
        spool.drain(failing, batch=3)
    assert failing.published == [0, 1, 2]
    assert len(spool) == 7
    assert spool.status().bytes == size(events(3, 10))
    later = Recorder()
    assert spool.drain(later, batch=3) == 7
    assert later.published == list(range(3, 10))
    assert len(spool) == 0


def test_spool_is_usable_after_a_failed_drain(spool: Spool) -> None:
    spool.append(events(0, 2))
    with pytest.raises(ConnectionError):
        spool.drain(Recorder(fail_on_call=1))
    spool.append(events(2, 4))
    publish = Recorder()
    assert spool.drain(publish) == 4
    assert publish.published == [0, 1, 2, 3]


def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    first = Spool(tmp_path)
    first.append(events(0, 5))
    first.drain(Recorder(), batch=2, limit=2)
    first.append(events(5, 8))
    first.close()

    second = Spool(tmp_path)
    try:
        assert len(second) == 6
        second.append(events(8, 9))
        publish = Recorder()
        assert second.drain(publish) == 7
        assert publish.published == list(range(2, 9))
    finally:
        second.close()


def test_spool_full_on_max_events_stores_nothing_of_the_batch(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_events=5)
    try:
        spool.append(events(0, 3))
        with pytest.raises(SpoolFull, match="MEMSYNC_SPOOL_MAX_EVENTS") as caught:
            spool.append(events(3, 6))
        assert isinstance(caught.value, RetryableError)
        assert "3 events" in str(caught.value)
        assert "5 events" in str(caught.value)
        assert len(spool) == 3
        spool.append(events(3, 5))
        publish = Recorder()
        assert spool.drain(publish) == 5
        assert publish.published == list(range(5))
    finally:
        spool.close()


def test_spool_full_on_max_bytes_stores_nothing_of_the_batch(tmp_path: Path) -> None:
    one = size(events(0, 1))
    spool = Spool(tmp_path, max_bytes=one * 2 + 1)
    try:
        spool.append(events(0, 1))
        with pytest.raises(SpoolFull, match="MEMSYNC_SPOOL_MAX_BYTES") as caught:
            spool.append(events(1, 3))
        assert f"{one} bytes" in str(caught.value)
        assert f"{one * 2 + 1} bytes" in str(caught.value)
        assert spool.status().events == 1
        assert spool.status().bytes == one
        spool.append(events(1, 2))
        assert len(spool) == 2
    finally:
        spool.close()


def test_a_row_holds_the_text_as_given_and_drains_back_unchanged(spool: Spool) -> None:
    # Raw UTF-8 and a key order json.dumps would not pick: stored and handed back verbatim.
    text = '{"tenant":"t","event_id":"e-9","text":"héllo 🦉 \\u00e9"}'
    turn = EncodedTurn("e-9", "t", text)
    spool.append([turn])
    with closing(sqlite3.connect(spool.path)) as conn:
        row = conn.execute("SELECT payload, size, event_id, tenant FROM events").fetchone()
    assert row == (text, len(text.encode("utf-8")), "e-9", "t")
    assert spool.status().bytes == len(text.encode("utf-8"))
    publish = Recorder()
    spool.drain(publish)
    assert publish.chunks == [[turn]]


def test_odd_strings_round_trip(spool: Spool) -> None:
    payload = {"event_id": "e-0", "n": 0, "text": "lone \ud800 surrogate, emoji 🦉, nul \x00 end"}
    spool.append([encode_payload(payload)])
    publish = Recorder()
    spool.drain(publish)
    assert [json.loads(t.text) for t in publish.chunks[0]] == [payload]


def test_rows_an_older_version_spooled_drain_with_their_identity(tmp_path: Path) -> None:
    # The first schema: no event_id or tenant columns. Opening upgrades it, keeping the rows.
    with closing(sqlite3.connect(tmp_path / "spool.sqlite3")) as conn:
        conn.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, size INTEGER NOT NULL,"
            " appended_at REAL NOT NULL, payload TEXT NOT NULL)"
        )
        conn.execute(
            "INSERT INTO events (size, appended_at, payload) VALUES (?, ?, ?)",
            (30, time.time(), '{"event_id":"old-1","tenant":"acme","n":-1}'),
        )
        conn.commit()
    spool = Spool(tmp_path)
    try:
        spool.append(events(0, 1))
        publish = Recorder()
        assert spool.drain(publish) == 2
        assert publish.chunks == [
            [
                EncodedTurn("old-1", "acme", '{"event_id":"old-1","tenant":"acme","n":-1}'),
                *events(0, 1),
            ]
        ]
    finally:
        spool.close()
    Spool(tmp_path).close()  # opening an upgraded file again changes nothing


def test_status_reports_events_bytes_and_oldest(spool: Spool) -> None:
    empty = spool.status()
    assert (empty.events, empty.bytes, empty.oldest_at) == (0, 0, None)
    assert (empty.max_events, empty.max_bytes) == (100_000, 512 * 1024 * 1024)
    assert empty.path == spool.path

    before = time.time()
    spool.append(events(0, 2))
    after = time.time()
    time.sleep(0.01)
    spool.append(events(2, 3))
    status = spool.status()
    sizes = [size([e]) for e in events(0, 3)]
    assert status.events == 3
    assert status.bytes == sum(sizes)
    assert status.oldest_at is not None
    assert before <= status.oldest_at <= after

    spool.drain(Recorder(), batch=2, limit=2)
    status = spool.status()
    assert (status.events, status.bytes) == (1, sizes[2])
    assert status.oldest_at is not None
    assert status.oldest_at > after


def test_two_drainers_on_one_directory_publish_each_event_once(tmp_path: Path) -> None:
    total = 120
    first, second = Spool(tmp_path), Spool(tmp_path)
    try:
        first.append(events(0, total))
        recorders = [Recorder(sleep=0.003), Recorder(sleep=0.003)]
        counts: list[int] = []
        errors: list[BaseException] = []
        start = threading.Barrier(2)

        def run(spool: Spool, publish: Recorder) -> None:
            try:
                start.wait()
                counts.append(spool.drain(publish, batch=4))
            except BaseException as exc:
                errors.append(exc)

        threads = [
            threading.Thread(target=run, args=(s, r))
            for s, r in zip((first, second), recorders, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert errors == []
        assert sum(counts) == total
        every = recorders[0].published + recorders[1].published
        assert sorted(every) == list(range(total))
        for recorder in recorders:
            assert recorder.published == sorted(recorder.published)
        assert len(first) == 0
        assert len(second) == 0
    finally:
        first.close()
        second.close()


def test_events_appended_by_another_process_are_seen(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from memsync.encoded import encode_payload\n"
        "from memsync.spool import Spool\n"
        "s = Spool(Path(sys.argv[1]))\n"
        "n = int(sys.argv[2])\n"
        "s.append([encode_payload({'event_id': f'e-{i}', 'n': i}) for i in range(n)])\n"
        "s.close()\n"
    )
    parent = Spool(tmp_path)
    try:
        parent.append([encode_payload({"event_id": "e--1", "n": -1})])
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path), "4"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert len(parent) == 5
        publish = Recorder()
        assert parent.drain(publish) == 5
        assert publish.published == [-1, 0, 1, 2, 3]
    finally:
        parent.close()


def test_invalid_bounds_and_batch_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Spool(tmp_path, max_events=0)
    spool = Spool(tmp_path)
    try:
        with pytest.raises(ValueError):
            spool.drain(Recorder(), batch=0)
    finally:
        spool.close()


def test_refused_events_are_kept_with_their_reason_and_counted(spool: Spool) -> None:
    spool.refuse([(encode_payload({"event_id": "big", "n": 1}), "OutOfMemoryError: too big")])
    refused = spool.refused()
    assert [(r.payload, r.reason) for r in refused] == [
        ({"event_id": "big", "n": 1}, "OutOfMemoryError: too big")
    ]
    assert refused[0].refused_at > 0
    status = spool.status()
    assert status.refused == 1 and status.events == 0


def test_drain_moves_refused_events_aside_and_goes_on(spool: Spool) -> None:
    spool.append(events(0, 6))
    published: list[int] = []

    def publish(chunk: list[EncodedTurn]) -> list[tuple[EncodedTurn, str]]:
        published.extend(n for n in ids(chunk) if n != 2)
        return [(t, "refused") for t in chunk if t.event_id == "e-2"]

    assert spool.drain(publish, batch=4) == 6
    assert published == [0, 1, 3, 4, 5]
    assert len(spool) == 0
    assert [r.payload["n"] for r in spool.refused()] == [2]


def test_spool_directory_and_files_are_owner_only(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    s = Spool(directory)
    try:
        s.append(events(0, 3))
        assert directory.stat().st_mode & 0o777 == 0o700
        files = sorted(p.name for p in directory.iterdir())
        assert files == ["spool.sqlite3", "spool.sqlite3-shm", "spool.sqlite3-wal"]
        for path in directory.iterdir():
            assert path.stat().st_mode & 0o777 == 0o600, path
    finally:
        s.close()


def test_existing_loose_permissions_are_tightened(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    Spool(directory).close()
    directory.chmod(0o755)
    (directory / "spool.sqlite3").chmod(0o644)
    s = Spool(directory)
    s.close()
    assert directory.stat().st_mode & 0o777 == 0o700
    assert (directory / "spool.sqlite3").stat().st_mode & 0o777 == 0o600


def test_reopen_after_fork_uses_a_new_connection_and_keeps_the_data(spool: Spool) -> None:
    spool.append(events(0, 2))
    before = spool._conn
    spool.reopen_after_fork()
    assert spool._conn is not before
    spool.append(events(2, 3))
    assert len(spool) == 3
    before.close()  # in a real child it is never closed; here the test owns it
