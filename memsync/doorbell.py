"""Doorbells: a token pushed beside each task message, so an idle worker wakes at once.

A worker pops by atomically moving a message into its own staging list (the reliable pop,
workers/worker/transport.py), and Redis can block such a move on one list only. Blocked on one of
its queues, a worker would notice a message on another only when its wait ran out. So each
publisher of a task message also pushes a token on that queue's doorbell list, in the same
transaction, and an idle worker blocks on the doorbells of every queue it consumes (BRPOP takes
many keys), then scans its queues. A doorbell holds at most DOORBELL_CAP tokens: a token left
over only costs one empty scan, and a message published without one (by a stock kombu client)
still waits no longer than the worker's wait. A message put back on its queue (kombu's restore,
the heartbeat sweep's) rings too.

Producer side: imports nothing of the workers.
"""

from __future__ import annotations

from typing import Any, Final

from kombu.transport import redis as kombu_redis

from memsync import keys
from memsync.settings import TASK_QUEUES

DOORBELL_CAP: Final = 16
RING: Final = "1"


def ring_commands(queue: str) -> list[tuple[str, tuple[Any, ...]]]:
    """The Redis commands that ring `queue`'s doorbell; none for a queue no worker pops by
    moving (e.g. `celery inspect` reply queues, which come and go)."""
    if queue not in TASK_QUEUES:
        return []
    key = keys.queue_doorbell(queue)
    return [("lpush", (key, RING)), ("ltrim", (key, 0, DOORBELL_CAP - 1))]


def ring(pipe: Any, queue: str) -> None:
    """Queue on `pipe` (a pipeline or MULTI) the ring of `queue`'s doorbell, if it has one: for
    a message put back on a queue (a restore) beside the push that puts it there."""
    for name, args in ring_commands(queue):
        getattr(pipe, name)(*args)


class _Commands:
    """Collects the commands kombu's `_put` would send (its publish-batch interface)."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, tuple[Any, ...]]] = []

    def add(self, name: str, *args: Any) -> None:
        self.commands.append((name, args))


class RingingChannel(kombu_redis.Channel):
    """kombu's Redis channel, but a task message and its doorbell's token go in one transaction
    (one round trip, as the bare push was)."""

    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        batch = kwargs.pop("_publish_batch", None)
        sink = batch if batch is not None else _Commands()
        # kombu adds the push (and any queue expiry) to a publish batch instead of sending it.
        super()._put(queue, message, _publish_batch=sink, **kwargs)  # type: ignore[call-arg]
        for name, args in ring_commands(queue):
            sink.add(name, *args)
        if batch is None:
            with self.conn_or_acquire() as client, client.pipeline() as pipe:
                for name, args in sink.commands:
                    getattr(pipe, name)(*args)
                pipe.execute()


class RingingTransport(kombu_redis.Transport):
    Channel = RingingChannel
