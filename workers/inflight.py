"""Turns handed to the broker but not yet settled, kept so a lost message can be sent again.

Kombu's Redis transport pops a message (BRPOP) before it records it as unacknowledged; a broker
restart between the two loses it. The producer therefore records each turn here before
publishing, the tasks remove it once the turn is settled (every trusted agent's memory written,
or the turn rejected or dead-lettered), and the reconciler re-sends what stays too long.
Members of both keys are `keys.turn_ref(tenant, event_id)`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import redis

from workers import keys
from workers.redisfaults import redis_errors

# Kept for callers that imported the hash's name from here before workers/keys.py existed.
PAYLOADS_KEY = keys.INFLIGHT_PAYLOADS


def untrack_in(pipe: Any, turn_refs: Sequence[str]) -> None:
    """Queue the removal of settled turns on a pipeline the caller executes."""
    if turn_refs:
        pipe.hdel(keys.INFLIGHT_PAYLOADS, *turn_refs)
        pipe.zrem(keys.INFLIGHT_SINCE, *turn_refs)


# Every memsync task message carries the time it was published, so the reconciler can tell a
# turn still queued behind a backlog from one the broker lost.
SENT_AT_HEADER = "memsync_sent_at"


def sent_now() -> dict[str, str]:
    """Headers for a task message published now (text: header values travel as strings)."""
    return {SENT_AT_HEADER: f"{time.time():.6f}"}


class InFlight:
    """A hash of turn payloads and a sorted set of when each was last (re)sent."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    @redis_errors
    def track(self, payloads: Sequence[Mapping[str, Any]]) -> None:
        now = time.time()
        pipe = self.client.pipeline(transaction=True)
        for payload in payloads:
            ref = keys.turn_ref(str(payload.get("tenant", "default")), str(payload["event_id"]))
            pipe.hset(keys.INFLIGHT_PAYLOADS, ref, json.dumps(payload, separators=(",", ":")))
            pipe.zadd(keys.INFLIGHT_SINCE, {ref: now})
        pipe.execute()

    @redis_errors
    def untrack(self, turn_refs: Iterable[str]) -> None:
        refs = list(turn_refs)
        if refs:
            pipe = self.client.pipeline(transaction=True)
            untrack_in(pipe, refs)
            pipe.execute()

    @redis_errors
    def due_raw(self, older_than: float, limit: int = 500) -> list[tuple[str, bytes, float]]:
        """Turns sent more than `older_than` seconds ago and still unsettled, oldest first, as
        (ref, payload as stored, when last sent), so one unreadable entry cannot hide others."""
        cutoff = time.time() - older_than
        scored = cast(
            list[tuple[bytes, float]],
            self.client.zrangebyscore(
                keys.INFLIGHT_SINCE, "-inf", cutoff, start=0, num=limit, withscores=True
            ),
        )
        if not scored:
            return []
        raw_refs = [ref for ref, _ in scored]
        payloads = cast(list[bytes | None], self.client.hmget(keys.INFLIGHT_PAYLOADS, raw_refs))
        found = [
            (ref.decode(errors="backslashreplace"), p, float(since))
            for (ref, since), p in zip(scored, payloads, strict=True)
            if p is not None
        ]
        missing = [raw for raw, p in zip(raw_refs, payloads, strict=True) if p is None]
        if missing:
            self.client.zrem(keys.INFLIGHT_SINCE, *missing)
        return found

    def due(self, older_than: float, limit: int = 500) -> list[tuple[str, dict[str, Any]]]:
        """Like `due_raw`, decoded; entries that are not a JSON object are left out."""
        result: list[tuple[str, dict[str, Any]]] = []
        for ref, raw, _ in self.due_raw(older_than, limit):
            try:
                payload = json.loads(raw)
            except ValueError:
                continue
            if isinstance(payload, dict):
                result.append((ref, payload))
        return result

    @redis_errors
    def touch(self, turn_refs: Iterable[str]) -> None:
        refs = list(turn_refs)
        if refs:
            self.client.zadd(keys.INFLIGHT_SINCE, dict.fromkeys(refs, time.time()))

    @redis_errors
    def count(self) -> int:
        return int(self.client.zcard(keys.INFLIGHT_SINCE))
