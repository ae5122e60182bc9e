"""Fanout (pub/sub) reads on a real Redis: a message is delivered, and a read with nothing
behind it returns instead of blocking the worker's event loop for good (redis-py 8's blocking
pub/sub read has no timeout)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kombu import Connection, Exchange, Queue
from kombu.messaging import Producer as KombuProducer

from workers.worker import transport

pytestmark = pytest.mark.integration

FANOUT = Exchange("memsync-test-fanout", type="fanout")
QUEUE = Queue("memsync-test-fanout-q", FANOUT)


def receive_within(chan: Any, seconds: float) -> bool:
    """Whether one `_receive` (the poller's call for a readable pub/sub socket) returned."""
    done = threading.Event()

    def read() -> None:
        chan._receive()
        done.set()

    # A daemon thread: on the old code it would block for ever and must not hold pytest.
    threading.Thread(target=read, daemon=True).start()
    return done.wait(seconds)


@pytest.mark.timeout(60)
def test_a_fanout_message_arrives_and_an_empty_read_returns(redis_url: str) -> None:
    with Connection(redis_url, transport=transport.Transport) as conn:
        chan: Any = conn.channel()
        QUEUE(chan).declare()
        got: list[Any] = []
        chan.basic_consume(QUEUE.name, no_ack=True, callback=got.append, consumer_tag="t")
        poller: Any = conn.transport.cycle  # type: ignore[attr-defined]
        poller._register_LISTEN(chan)  # connects the pub/sub client and subscribes
        assert receive_within(chan, 10), "the subscription's confirmation was not read"

        KombuProducer(conn.channel()).publish({"hello": 1}, exchange=FANOUT, serializer="json")
        deadline = time.monotonic() + 10
        while not got:
            assert time.monotonic() < deadline, "the fanout message never arrived"
            assert receive_within(chan, 10)
        assert got[0].decode() == {"hello": 1}

        # Nothing is pending now: the read must come back, not wait for the next broadcast.
        assert receive_within(chan, 10), "a fanout read with nothing pending blocked"
