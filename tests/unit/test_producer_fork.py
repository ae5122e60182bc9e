"""A forked child gets a working producer of its own: empty buffer, new thread, new connections."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsync import producer as producer_module
from memsync.encoded import EncodedTurn
from memsync.producer import Producer
from memsync.settings import Settings
from memsync.spool import Spool
from tests.forking import fork, reap


def turn(n: int) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "event_id": f"e-{n}",
        "channel": {"id": "c", "kind": "dm"},
        "participants": [{"id": "u", "kind": "human"}],
        "messages": [
            {"id": f"m-{n}", "role": "human", "sender_id": "u", "content": "hi",
             "created_at": "2026-11-29T10:00:00Z"}
        ],
    }  # fmt: skip


class Gate:
    """A publish stand-in that holds every batch until released, appending event ids to a file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.open = threading.Event()

    def __call__(self, batch: list[EncodedTurn]) -> None:
        self.open.wait(30)
        with self.path.open("a") as out:
            for event in batch:
                out.write(json.dumps([os.getpid(), event.event_id]) + "\n")


@pytest.fixture()
def gated(tmp_path: Path) -> Iterator[tuple[Producer, Gate]]:
    settings = Settings(spool_dir=tmp_path / "spool", producer_batch=2, broker_url="redis://x")
    p = Producer(settings)
    gate = Gate(tmp_path / "published.jsonl")
    p._publish = gate  # type: ignore[method-assign]
    yield p, gate
    gate.open.set()
    p.close(timeout=5)


def test_child_starts_empty_with_its_own_thread_and_connections(
    gated: tuple[Producer, Gate],
) -> None:
    producer, gate = gated
    for n in range(5):
        producer.emit(turn(n))
    parent_conn, parent_thread = producer.spool._conn, producer._thread
    read, write = os.pipe()
    pid = fork()
    if pid == 0:  # the child: report what it sees, never return into pytest
        code = 1
        try:
            report = {
                "pending": producer.pending,
                "new_thread": producer._thread is not parent_thread and producer._thread.is_alive(),
                "new_conn": producer.spool._conn is not parent_conn,
                "emitted": producer.emit(turn(100)),
            }
            gate.open.set()
            report["flushed"] = producer.flush(10)
            report["default_lock_free"] = producer_module._default_lock.acquire(timeout=1)
            os.write(write, json.dumps(report).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    status = reap(pid, timeout=30)
    with os.fdopen(read) as pipe:
        report = json.loads(pipe.read() or "{}")
    assert status == 0
    assert report == {
        "pending": 0,
        "new_thread": True,
        "new_conn": True,
        "emitted": "e-100",
        "flushed": True,
        "default_lock_free": True,
    }
    gate.open.set()
    assert producer.flush(10)
    lines = [json.loads(line) for line in gate.path.read_text().splitlines()]
    by_parent = sorted(e for p, e in lines if p == os.getpid())
    by_child = [e for p, e in lines if p != os.getpid()]
    assert by_parent == sorted(f"e-{n}" for n in range(5))  # the parent lost nothing
    assert by_child == ["e-100"]  # the child sent only its own


def test_child_producer_spools_into_a_connection_of_its_own(tmp_path: Path) -> None:
    settings = Settings(spool_dir=tmp_path / "spool", broker_url="redis://x")
    producer = Producer(settings)

    def away(batch: list[EncodedTurn]) -> None:
        raise ConnectionError("broker away")

    producer._publish = away  # type: ignore[method-assign]
    pid = fork()
    if pid == 0:
        code = 1
        try:
            producer.emit(turn(1))
            code = 0 if producer.close(timeout=10) else 2
        finally:
            os._exit(code)
    assert reap(pid, timeout=30) == 0
    producer.close(timeout=5)
    spool = Spool(settings.spool_dir)
    try:
        assert len(spool) == 1
    finally:
        spool.close()


def test_forking_while_other_threads_use_sqlite_never_hangs_the_child(tmp_path: Path) -> None:
    """A mutex SQLite held in another thread at fork() would stay locked in the child for ever."""
    spools = [Spool(tmp_path / f"s{i}") for i in range(3)]
    stop = threading.Event()

    def hammer(spool: Spool) -> None:
        while not stop.is_set():
            spool.status()

    threads = [threading.Thread(target=hammer, args=(s,), daemon=True) for s in spools]
    for thread in threads:
        thread.start()
    hung = 0
    try:
        for _ in range(100):
            pid = fork()
            if pid == 0:
                code = 1
                try:
                    for spool in spools:
                        spool.reopen_after_fork()
                    Spool(tmp_path / "child").status()
                    code = 0
                finally:
                    os._exit(code)
            hung += reap(pid, timeout=10) != 0
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        for spool in spools:
            spool.close()
    assert hung == 0
