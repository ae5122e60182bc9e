"""The dead-letter store: work that failed for good, kept in Redis with its reason until replayed.

Entries live in a hash (id -> JSON) with a sorted set by last failure time. An entry's id is
derived from its idempotency key (tenant, event, agent, stage), so the same work failing again
updates one entry instead of piling up copies.
"""

from __future__ import annotations

import hashlib
import json
import time
import traceback as tb
from collections.abc import Iterable, Sequence
from typing import Any, cast

import redis
from pydantic import BaseModel, ConfigDict

from pipeline.errors import DeadLetterUnavailable
from schemas.keys import compose_key

ENTRIES_KEY = "memsync:dlq:entries"
INDEX_KEY = "memsync:dlq:index"
STATS_KEY = "memsync:stats"
UNREADABLE_TASK = "<unreadable>"


class DeadLetter(BaseModel):
    """One failed unit of work: the payload exactly as sent, and everything needed to judge it."""

    model_config = ConfigDict(frozen=True)

    id: str
    task: str
    queue: str
    payload: Any
    idempotency_key: str
    stage: str
    tenant: str | None = None
    event_id: str | None = None
    agent_id: str | None = None
    schema_version: int | None = None
    error_type: str
    error: str
    traceback: str = ""
    permanent: bool
    attempts: int = 1
    first_failed_at: float
    last_failed_at: float
    worker: str = ""

    @property
    def replayable(self) -> bool:
        return self.task != UNREADABLE_TASK


def letter_id(idempotency_key: str) -> str:
    return hashlib.sha256(idempotency_key.encode()).hexdigest()[:20]


def _digest(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode(errors="backslashreplace")).hexdigest()[:16]


def identify(stage: str, item: Any) -> dict[str, Any]:
    """Idempotency key and identity fields of one payload item (an event or a sync job)."""
    fields: dict[str, Any] = {"stage": stage}
    if isinstance(item, dict):
        tenant = item.get("tenant", "default")
        event_id = item.get("event_id")
        agent = item.get("agent")
        agent_id = agent.get("id") if isinstance(agent, dict) else None
        version = item.get("schema_version")
        if isinstance(tenant, str) and isinstance(event_id, str):
            fields.update(tenant=tenant, event_id=event_id)
            if isinstance(agent_id, str):
                fields["agent_id"] = agent_id
            if isinstance(version, int) and not isinstance(version, bool):
                fields["schema_version"] = version
            parts = [tenant, event_id, *([agent_id] if isinstance(agent_id, str) else []), stage]
            fields["idempotency_key"] = compose_key(*parts)
            return fields
    fields["idempotency_key"] = compose_key("unidentified", _digest(item), stage)
    return fields


def letters_for(
    *,
    task: str,
    queue: str,
    stage: str,
    payload: Any,
    error: BaseException,
    permanent: bool,
    attempts: int,
    worker: str,
    split: bool = True,
) -> list[DeadLetter]:
    """Dead letters for a failed payload: one per item of a list (each replays on its own)."""
    items = payload if split and isinstance(payload, list) and payload else [payload]
    now = time.time()
    trace = "".join(tb.format_exception(type(error), error, error.__traceback__))
    letters = []
    for item in items:
        ident = identify(stage, item)
        letters.append(
            DeadLetter(
                id=letter_id(ident["idempotency_key"]),
                task=task,
                queue=queue,
                payload=[item] if items is payload else item,
                error_type=type(error).__name__,
                error=str(error),
                traceback=trace[-20_000:],
                permanent=permanent,
                attempts=attempts,
                first_failed_at=now,
                last_failed_at=now,
                worker=worker,
                **ident,
            )
        )
    return letters


class DeadLetterStore:
    """Durable (Redis with AOF) store of dead letters; every write is all-or-nothing."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def put(self, letters: Sequence[DeadLetter]) -> None:
        """Store letters, merging with earlier failures of the same work (attempts add up)."""
        if not letters:
            return
        try:
            previous = self._get_many([letter.id for letter in letters])
            pipe = self.client.pipeline(transaction=True)
            for letter in letters:
                merged = letter
                before = previous.get(letter.id)
                if before is not None:
                    merged = letter.model_copy(
                        update={
                            "attempts": before.attempts + letter.attempts,
                            "first_failed_at": before.first_failed_at,
                        }
                    )
                pipe.hset(ENTRIES_KEY, merged.id, merged.model_dump_json())
                pipe.zadd(INDEX_KEY, {merged.id: merged.last_failed_at})
            pipe.hincrby(STATS_KEY, "dlq.letters_written", len(letters))
            pipe.execute()
        except redis.RedisError as exc:
            raise DeadLetterUnavailable(f"dead-letter store unavailable: {exc}") from exc

    def get(self, entry_id: str) -> DeadLetter | None:
        return self._get_many([entry_id]).get(entry_id)

    def entries(self, limit: int | None = None) -> list[DeadLetter]:
        """Entries, oldest last failure first."""
        end = -1 if limit is None else limit - 1
        ids = [i.decode() for i in cast(list[bytes], self.client.zrange(INDEX_KEY, 0, end))]
        found = self._get_many(ids)
        return [found[i] for i in ids if i in found]

    def ids_older_than(self, seconds: float) -> list[str]:
        cutoff = time.time() - seconds
        raw = cast(list[bytes], self.client.zrangebyscore(INDEX_KEY, "-inf", cutoff))
        return [i.decode() for i in raw]

    def remove(self, ids: Iterable[str]) -> int:
        """Delete entries (replayed successfully, or purged); returns how many existed."""
        wanted = list(ids)
        if not wanted:
            return 0
        pipe = self.client.pipeline(transaction=True)
        pipe.hdel(ENTRIES_KEY, *wanted)
        pipe.zrem(INDEX_KEY, *wanted)
        removed, _ = pipe.execute()
        return int(removed)

    def resolve(self, stage: str, items: Sequence[Any]) -> int:
        """Work that succeeded is no longer dead: remove any entries for these items."""
        return self.remove(letter_id(identify(stage, item)["idempotency_key"]) for item in items)

    def count(self) -> int:
        return int(self.client.zcard(INDEX_KEY))

    def _get_many(self, ids: Sequence[str]) -> dict[str, DeadLetter]:
        if not ids:
            return {}
        raw = cast(list[bytes | None], self.client.hmget(ENTRIES_KEY, list(ids)))
        return {
            entry_id: DeadLetter.model_validate_json(value)
            for entry_id, value in zip(ids, raw, strict=True)
            if value is not None
        }
