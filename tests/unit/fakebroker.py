"""kombu's Redis channel, with memsync's transport, on a private in-memory fakeredis server, so
the transport's real QoS and restore code runs without a Redis process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import fakeredis
import redis
from kombu import Connection

from workers.worker import heartbeat, transport


@contextmanager
def fake_channel() -> Iterator[Any]:
    """A channel of memsync's transport on a fresh fakeredis server; the worker identity the
    test may have set is dropped afterwards."""
    server = fakeredis.FakeServer()

    class FakeChannel(transport.Channel):
        def _get_pool(self, asynchronous: bool = False) -> redis.ConnectionPool:
            return redis.ConnectionPool(
                connection_class=fakeredis.FakeRedisConnection, server=server
            )

    class FakeTransport(transport.Transport):
        Channel = FakeChannel

    connection = Connection("redis://127.0.0.1:1/0", transport=FakeTransport)
    try:
        yield connection.channel()
    finally:
        heartbeat.deactivate()
        connection.release()
