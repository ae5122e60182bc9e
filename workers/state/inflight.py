"""The worker side of the in-flight record (memsync/inflight.py): the reconciler's reads.

Every method raises Redis connection trouble as the retryable BrokerUnavailable, so a task that
touches the record retries rather than fails.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from memsync import inflight as platform_inflight
from memsync import keys
from memsync.encoded import EncodedTurn
from workers.state.redisfaults import redis_errors

# Kept for callers that imported the hash's name from here before the key layouts had a module.
PAYLOADS_KEY = keys.INFLIGHT_PAYLOADS


class InFlight(platform_inflight.InFlight):
    """The producer's in-flight record, with the reads the reconciler and the CLI need."""

    @redis_errors
    def track(self, turns: Sequence[EncodedTurn | Mapping[str, Any]]) -> None:
        super().track(turns)

    @redis_errors
    def untrack(self, turn_refs: Iterable[str]) -> None:
        super().untrack(turn_refs)

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
