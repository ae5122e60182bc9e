"""The producer sets aside events the broker refuses for their content, and spools on trouble.

The broker is replaced by a publish function that refuses any batch holding a "big" event, the way
Redis refuses a command too large for its memory (OutOfMemoryError, a ResponseError).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis
from kombu.exceptions import EncodeError

from memsync.encoded import EncodedTurn
from memsync.producer import Producer, refused_for_content
from memsync.settings import Settings
from pipeline.errors import BrokerUnavailable
from workers.state.inflight import InFlight

OOM = redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")


def turn(n: int, content: str = "hello") -> dict[str, Any]:
    return {
        "schema_version": 1,
        "event_id": f"e-{n}",
        "tenant": "t",
        "channel": {"id": "c", "kind": "dm"},
        "participants": [{"id": "u", "kind": "human"}, {"id": "a", "kind": "agent"}],
        "messages": [
            {
                "id": f"m-{n}",
                "role": "human",
                "sender_id": "u",
                "content": content,
                "created_at": "2026-11-29T10:00:00Z",
            }
        ],
    }


class Broker:
    """Stands in for `Producer._publish`: records batches, refuses those holding a big event."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.away = False
        self.full = False

    def publish(self, batch: list[EncodedTurn]) -> None:
        if self.away:
            raise BrokerUnavailable("Redis unavailable: ConnectionError")
        if self.full or any(len(e.text) > 1000 for e in batch):
            raise OOM
        self.batches.append([e.event_id for e in batch])

    @property
    def published(self) -> list[str]:
        return [eid for batch in self.batches for eid in batch]

    def takes_writes(self) -> bool:
        return not self.full and not self.away


@pytest.fixture()
def made(tmp_path: Path) -> Iterator[tuple[Producer, Broker]]:
    settings = Settings(spool_dir=tmp_path / "spool", producer_batch=8, broker_url="redis://x")
    producer = Producer(settings)
    broker = Broker()
    tracker = InFlight(fakeredis.FakeRedis())
    producer._publish = broker.publish  # type: ignore[method-assign]
    producer._broker_takes_writes = broker.takes_writes  # type: ignore[method-assign]
    producer._inflight = lambda: tracker  # type: ignore[method-assign]
    yield producer, broker
    producer.close(timeout=5)


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_refusal_is_told_apart_from_trouble() -> None:
    assert refused_for_content(OOM)
    assert refused_for_content(redis.exceptions.ResponseError("ERR string exceeds maximum"))
    assert refused_for_content(EncodeError("cannot encode"))
    assert not refused_for_content(redis.exceptions.ConnectionError("gone"))
    assert not refused_for_content(redis.exceptions.TimeoutError("slow"))
    assert not refused_for_content(BrokerUnavailable("away"))
    assert not refused_for_content(OSError("reset"))
    assert not refused_for_content(redis.exceptions.ReadOnlyError("replica"))


def test_a_refused_event_is_set_aside_and_the_rest_published(
    made: tuple[Producer, Broker],
) -> None:
    producer, broker = made
    for n in range(8):
        producer.emit(turn(n, "x" * 5000 if n == 5 else "hello"))
    assert producer.flush(10)
    assert broker.published == [f"e-{n}" for n in range(8) if n != 5]
    refused = producer.spool.refused()
    assert [r.payload["event_id"] for r in refused] == ["e-5"]
    assert refused[0].payload["messages"][0]["content"] == "x" * 5000  # kept with its content
    assert "OutOfMemoryError" in refused[0].reason
    assert producer.spool_status().refused == 1 and producer.spool_status().events == 0
    assert producer.counters["refused"] == 1


def test_a_refused_event_does_not_block_later_events(made: tuple[Producer, Broker]) -> None:
    producer, broker = made
    producer.emit(turn(0, "x" * 5000))
    assert producer.flush(10)
    for n in range(1, 4):
        producer.emit(turn(n))
    assert producer.flush(10)
    assert broker.published == ["e-1", "e-2", "e-3"]
    assert len(producer.spool) == 0


def test_a_full_broker_is_waited_for_not_blamed_on_the_events(
    made: tuple[Producer, Broker],
) -> None:
    producer, broker = made
    broker.full = True
    for n in range(3):
        producer.emit(turn(n))
    assert producer.flush(10)
    assert producer.spool.refused() == []
    assert len(producer.spool) == 3  # spooled, as for an outage
    broker.full = False
    wait_for(lambda: len(broker.published) == 3)
    assert broker.published == ["e-0", "e-1", "e-2"]


def test_spooled_batches_with_a_culprit_drain_around_it(made: tuple[Producer, Broker]) -> None:
    producer, broker = made
    broker.away = True
    for n in range(6):
        producer.emit(turn(n, "x" * 5000 if n == 1 else "hello"))
    assert producer.flush(10)
    assert len(producer.spool) == 6
    broker.away = False
    wait_for(lambda: len(producer.spool) == 0)
    assert broker.published == ["e-0", "e-2", "e-3", "e-4", "e-5"]
    assert [r.payload["event_id"] for r in producer.spool.refused()] == ["e-1"]


def test_only_the_unsent_rest_of_a_batch_is_spooled_when_the_broker_goes(
    made: tuple[Producer, Broker],
) -> None:
    producer, broker = made
    calls = {"n": 0}
    original = broker.publish

    def flaky(batch: list[EncodedTurn]) -> None:
        calls["n"] += 1
        if calls["n"] > 2:  # the whole batch, then its first half; then the broker goes
            raise BrokerUnavailable("gone")
        original(batch)

    producer._publish = flaky  # type: ignore[method-assign]
    for n in range(4):
        producer.emit(turn(n, "x" * 5000 if n == 3 else "hello"))
    assert producer.flush(10)
    assert broker.published == ["e-0", "e-1"]
    assert len(producer.spool) == 2  # e-2 and e-3; nothing published is spooled again


def test_emit_still_returns_at_once_with_the_event_id(made: tuple[Producer, Broker]) -> None:
    producer, _ = made
    assert producer.emit(turn(7)) == "e-7"


def test_a_small_event_refused_in_the_wake_of_a_big_one_is_published_not_set_aside(
    made: tuple[Producer, Broker],
) -> None:
    # Right after refusing a large command Redis may still count its bytes against maxmemory:
    # every write is refused until that is freed, which a successful probe shows.
    producer, broker = made
    publish = broker.publish
    wake = [False]

    def in_the_wake(batch: list[EncodedTurn]) -> None:
        if wake[0]:
            raise OOM
        try:
            publish(batch)
        except redis.exceptions.OutOfMemoryError:
            wake[0] = True
            raise

    def probe() -> bool:
        wake[0] = False
        return broker.takes_writes()

    producer._publish = in_the_wake  # type: ignore[method-assign]
    producer._broker_takes_writes = probe  # type: ignore[method-assign]
    for n in range(4):
        producer.emit(turn(n, "x" * 5000 if n == 3 else "hello"))
    assert producer.flush(10)
    assert [r.payload["event_id"] for r in producer.spool.refused()] == ["e-3"]
    assert broker.published == ["e-0", "e-1", "e-2"]
