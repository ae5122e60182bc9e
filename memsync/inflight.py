"""Turns handed to the broker but not yet settled, kept so a lost message can be sent again.

Kombu's Redis transport pops a message (BRPOP) before it records it as unacknowledged; a broker
restart between the two loses it. The producer therefore records each turn here before
publishing, the tasks remove it once the turn is settled (every trusted agent's memory written,
or the turn rejected or dead-lettered), and the reconciler re-sends what stays too long.
Members of both keys are `keys.turn_ref(tenant, event_id)`.

This module holds the part the producer needs (recording and forgetting, the sent-at header);
the worker side's reads (due, touch, count) extend it in workers/state/inflight.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import redis

from memsync import keys
from memsync.encoded import EncodedTurn, encoded

# Every memsync task message carries the time it was published, so the reconciler can tell a
# turn still queued behind a backlog from one the broker lost.
SENT_AT_HEADER = "memsync_sent_at"
# When the producer published the turns a sync task carries (ingest passes its own sent_at on):
# the start of the emit-to-written lag.
EMITTED_AT_HEADER = "memsync_emitted_at"


def sent_now() -> dict[str, str]:
    """Headers for a task message published now (text: header values travel as strings)."""
    return {SENT_AT_HEADER: f"{time.time():.6f}"}


def untrack_in(pipe: Any, turn_refs: Sequence[str]) -> None:
    """Queue the removal of settled turns on a pipeline the caller executes."""
    if turn_refs:
        pipe.hdel(keys.INFLIGHT_PAYLOADS, *turn_refs)
        pipe.zrem(keys.INFLIGHT_SINCE, *turn_refs)


class InFlight:
    """A hash of turn payloads and a sorted set of when each was last (re)sent.

    Redis errors pass through as redis-py raises them; workers/state/inflight.py turns connection
    trouble into the retryable BrokerUnavailable for the worker side.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def track(self, turns: Sequence[EncodedTurn | Mapping[str, Any]]) -> None:
        """Record turns as sent now, before their message is published (an encoded turn's text
        is stored as it is)."""
        if not turns:
            return
        now = time.time()
        payloads = {
            keys.turn_ref(turn.tenant, turn.event_id): turn.text for turn in map(encoded, turns)
        }
        # Two commands for the whole batch, not two a turn: the publisher thread packs every
        # command in Python while it holds the interpreter, and emit() callers wait for it.
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(keys.INFLIGHT_PAYLOADS, mapping=payloads)  # type: ignore[arg-type]
        pipe.zadd(keys.INFLIGHT_SINCE, dict.fromkeys(payloads, now))
        pipe.execute()

    def untrack(self, turn_refs: Iterable[str]) -> None:
        """Forget turns that are settled (or were never sent)."""
        refs = list(turn_refs)
        if refs:
            pipe = self.client.pipeline(transaction=True)
            untrack_in(pipe, refs)
            pipe.execute()
