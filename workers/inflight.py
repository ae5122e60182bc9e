"""Turns handed to the broker but not yet settled, kept so a lost message can be sent again.

Kombu's Redis transport pops a message (BRPOP) before it records it as unacknowledged; a broker
restart between the two loses it. The producer therefore records each turn here before
publishing, the tasks remove it once the turn is settled (every trusted agent's memory written,
or the turn rejected or dead-lettered), and the reconciler re-sends what stays too long.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import redis

PAYLOADS_KEY = "memsync:inflight"
SINCE_KEY = "memsync:inflight:since"


def turn_id(tenant: str, event_id: str) -> str:
    return f"{tenant}/{event_id}"


def untrack_in(pipe: Any, turn_ids: Sequence[str]) -> None:
    """Queue the removal of settled turns on a pipeline the caller executes."""
    if turn_ids:
        pipe.hdel(PAYLOADS_KEY, *turn_ids)
        pipe.zrem(SINCE_KEY, *turn_ids)


class InFlight:
    """A hash of turn payloads and a sorted set of when each was last (re)sent."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def track(self, payloads: Sequence[Mapping[str, Any]]) -> None:
        now = time.time()
        pipe = self.client.pipeline(transaction=True)
        for payload in payloads:
            tid = turn_id(str(payload.get("tenant", "default")), str(payload["event_id"]))
            pipe.hset(PAYLOADS_KEY, tid, json.dumps(payload, separators=(",", ":")))
            pipe.zadd(SINCE_KEY, {tid: now})
        pipe.execute()

    def untrack(self, turn_ids: Iterable[str]) -> None:
        ids = list(turn_ids)
        if ids:
            pipe = self.client.pipeline(transaction=True)
            untrack_in(pipe, ids)
            pipe.execute()

    def due(self, older_than: float, limit: int = 500) -> list[tuple[str, dict[str, Any]]]:
        """Turns sent more than `older_than` seconds ago and still unsettled, oldest first."""
        cutoff = time.time() - older_than
        raw_ids = cast(
            list[bytes], self.client.zrangebyscore(SINCE_KEY, "-inf", cutoff, start=0, num=limit)
        )
        ids = [i.decode() for i in raw_ids]
        if not ids:
            return []
        payloads = cast(list[bytes | None], self.client.hmget(PAYLOADS_KEY, ids))
        found = [(tid, json.loads(p)) for tid, p in zip(ids, payloads, strict=True) if p]
        missing = [tid for tid, p in zip(ids, payloads, strict=True) if not p]
        if missing:
            self.client.zrem(SINCE_KEY, *missing)
        return found

    def touch(self, turn_ids: Iterable[str]) -> None:
        ids = list(turn_ids)
        if ids:
            self.client.zadd(SINCE_KEY, dict.fromkeys(ids, time.time()))

    def count(self) -> int:
        return int(self.client.zcard(SINCE_KEY))
