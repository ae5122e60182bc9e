"""What the broker holds right now: queue depths, unsettled turns and the oldest one's age, and
the dead letters stored. Read by the worker's /metrics and by the memory inspector alike."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

import redis

from memsync import keys
from memsync.settings import EMBED_QUEUE, FOLD_QUEUE, INGEST_QUEUE, SYNC_QUEUE
from workers.state.deadletter import DeadLetterStore

QUEUES: Final = (INGEST_QUEUE, SYNC_QUEUE, EMBED_QUEUE, FOLD_QUEUE)


@dataclass(frozen=True)
class Backlog:
    """One reading of the broker (one pipeline round trip, plus the dead-letter count)."""

    queues: dict[str, int]
    unsettled: int
    oldest_unsettled_seconds: float  # 0 when nothing waits
    dead_letters: int


def read_backlog(client: redis.Redis, deadletters: DeadLetterStore) -> Backlog:
    """Read the backlog; Redis errors propagate (callers decide how to show an outage)."""
    pipe = client.pipeline(transaction=False)
    for name in QUEUES:
        pipe.llen(name)
    pipe.zcard(keys.INFLIGHT_SINCE)
    pipe.zrange(keys.INFLIGHT_SINCE, 0, 0, withscores=True)
    *lengths, unsettled, oldest = pipe.execute()
    stored = deadletters.count()
    age = time.time() - float(oldest[0][1]) if oldest else 0.0
    return Backlog(
        queues={name: int(length) for name, length in zip(QUEUES, lengths, strict=True)},
        unsettled=int(unsettled),
        oldest_unsettled_seconds=max(0.0, age),
        dead_letters=stored,
    )
