"""The dead-letter store: work that failed for good, kept in Redis with its reason until replayed.

Entries live in a hash (id -> JSON) with a sorted set by last failure time (keys in
memsync/keys.py). An entry's id is derived from its idempotency key (tenant, event, agent,
stage), so the same work failing again updates one entry instead of piling up copies.

The store is bounded: at most `max_entries` entries (the oldest last failures are evicted,
counted and logged as critical), optionally none older than `ttl_seconds`, and payloads up to
`payload_max_bytes` (a larger one is kept as truncated text with the whole one's size and
SHA-256, and cannot be replayed). `purge` also asks Redis to rewrite its append-only file, so
purged payloads leave the disk too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import time
import traceback as tb
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis
from pydantic import BaseModel, ConfigDict

from memsync import keys
from pipeline.errors import DeadLetterUnavailable
from schemas.keys import compose_key
from workers.state.redisfaults import redis_errors

log = logging.getLogger("memsync.deadletter")

UNREADABLE_TASK = "<unreadable>"
DEFAULT_MAX_ENTRIES = 100_000
# Above the largest valid event (pipeline/validate.py MAX_EVENT_BYTES, 2 MB) with room for the
# list around it and a sync job's labels, so every valid event stays whole and replayable.
DEFAULT_PAYLOAD_MAX_BYTES = 2_200_000


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
    # Size and SHA-256 of the whole payload as JSON (or as text, for a text payload), UTF-8.
    payload_bytes: int | None = None
    payload_sha256: str | None = None
    truncated: bool = False  # payload holds only the first payload_bytes-bound bytes, as text

    @property
    def unreplayable_reason(self) -> str | None:
        """Why replaying this entry cannot work, or None when it can be replayed."""
        if self.truncated:
            return (
                f"payload of {self.payload_bytes} bytes was stored truncated "
                f"(sha256 {self.payload_sha256}); it cannot be replayed: purge it"
            )
        if self.task == UNREADABLE_TASK:
            return "unreadable bytes cannot be replayed; purge it"
        return None

    @property
    def replayable(self) -> bool:
        return self.unreplayable_reason is None


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


@dataclass(frozen=True)
class PurgeResult:
    """What `purge` removed, and whether Redis began rewriting its append-only file."""

    removed: int
    aof_rewrite_started: bool
    aof_note: str  # one line for the operator: started, not needed, or what to do instead


def unreadable_letters(
    queue: str, stage: str, raw: bytes, error: BaseException
) -> list[DeadLetter]:
    """The dead letter for bytes no task can take (kept as text, never replayable)."""
    return letters_for(
        task=UNREADABLE_TASK,
        queue=queue,
        stage=stage,
        payload=raw.decode("utf-8", errors="backslashreplace"),
        error=error,
        permanent=True,
        attempts=1,
        worker=socket.gethostname(),
        split=False,
    )


class DeadLetterStore:
    """Durable (Redis with AOF) store of dead letters; every write is all-or-nothing."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        ttl_seconds: float | None = None,
        payload_max_bytes: int = DEFAULT_PAYLOAD_MAX_BYTES,
    ) -> None:
        self.client = client
        self.max_entries = max_entries
        self.ttl_seconds = ttl_seconds
        self.payload_max_bytes = payload_max_bytes

    def put(self, letters: Sequence[DeadLetter]) -> None:
        """Store letters, merging with earlier failures of the same work (attempts add up).

        Expired entries are dropped and, past `max_entries`, the oldest are evicted.
        """
        if not letters:
            return
        bounded = [self._bounded(letter) for letter in letters]
        try:
            self.client.transaction(
                lambda pipe: self._write(pipe, bounded, time.time()),
                keys.DLQ_ENTRIES,
                keys.DLQ_INDEX,
            )
            evicted: list[str] = []
            self.client.transaction(lambda pipe: self._evict(pipe, evicted), keys.DLQ_INDEX)
        except redis.RedisError as exc:
            raise DeadLetterUnavailable(f"dead-letter store unavailable: {exc}") from exc
        if evicted:
            log.critical(
                "dead-letter store over MEMSYNC_DLQ_MAX_ENTRIES=%d: evicted the %d oldest "
                "entries, lost for good: %s",
                self.max_entries,
                len(evicted),
                evicted[:10],
            )

    @redis_errors
    def get(self, entry_id: str) -> DeadLetter | None:
        """One live entry (None if unknown or expired)."""
        letter = self._get_many([entry_id]).get(entry_id)
        if letter is None or letter.last_failed_at < self._cutoff():
            return None
        return letter

    @redis_errors
    def entries(self, limit: int | None = None) -> list[DeadLetter]:
        """Live entries, oldest last failure first."""
        if limit is None:
            found = self.client.zrangebyscore(keys.DLQ_INDEX, self._cutoff(), "+inf")
        else:
            found = self.client.zrangebyscore(
                keys.DLQ_INDEX, self._cutoff(), "+inf", start=0, num=limit
            )
        raw = cast(list[bytes], found)
        ids = [i.decode() for i in raw]
        letters = self._get_many(ids)
        return [letters[i] for i in ids if i in letters]

    @redis_errors
    def ids_older_than(self, seconds: float) -> list[str]:
        cutoff = time.time() - seconds
        raw = cast(list[bytes], self.client.zrangebyscore(keys.DLQ_INDEX, "-inf", cutoff))
        return [i.decode() for i in raw]

    @redis_errors
    def remove(self, ids: Iterable[str]) -> int:
        """Delete entries (replayed successfully, or purged); returns how many existed."""
        wanted = list(ids)
        if not wanted:
            return 0
        pipe = self.client.pipeline(transaction=True)
        pipe.hdel(keys.DLQ_ENTRIES, *wanted)
        pipe.zrem(keys.DLQ_INDEX, *wanted)
        removed, _ = pipe.execute()
        return int(removed)

    def purge(self, ids: Iterable[str]) -> PurgeResult:
        """Delete entries for good, from memory and (by an AOF rewrite) from Redis's disk.

        Deleting only appends the deletion to the append-only file, which still holds the
        payloads; BGREWRITEAOF writes a new one without them.
        """
        removed = self.remove(ids)
        if removed == 0:
            return PurgeResult(0, False, "nothing removed, so no AOF rewrite is needed")
        started, note = self._rewrite_aof()
        return PurgeResult(removed, started, note)

    def resolve(self, stage: str, items: Sequence[Any]) -> int:
        """Work that succeeded is no longer dead: remove any entries for these items."""
        return self.remove(letter_id(identify(stage, item)["idempotency_key"]) for item in items)

    @redis_errors
    def count(self) -> int:
        """Live entries."""
        return int(self.client.zcount(keys.DLQ_INDEX, self._cutoff(), "+inf"))

    def _cutoff(self) -> float:
        """Entries whose last failure is older than this are expired ("-inf": no TTL)."""
        return float("-inf") if self.ttl_seconds is None else time.time() - self.ttl_seconds

    def _bounded(self, letter: DeadLetter) -> DeadLetter:
        """The letter with its payload's size and hash, truncated to the bound if larger."""
        payload = letter.payload
        text = (
            payload
            if isinstance(payload, str)
            else json.dumps(payload, separators=(",", ":"), default=str)
        )
        whole = text.encode("utf-8", errors="backslashreplace")
        update: dict[str, Any] = {
            "payload_bytes": len(whole),
            "payload_sha256": hashlib.sha256(whole).hexdigest(),
        }
        if len(whole) > self.payload_max_bytes:
            # A cut inside a multi-byte character drops that character rather than fail.
            head = whole[: self.payload_max_bytes].decode("utf-8", errors="ignore")
            update.update(payload=head, truncated=True)
        return letter.model_copy(update=update)

    def _write(self, pipe: Any, letters: Sequence[DeadLetter], now: float) -> None:
        """One WATCHed transaction: drop expired entries, merge and write the letters."""
        expired: list[bytes] = []
        if self.ttl_seconds is not None:
            cutoff = now - self.ttl_seconds
            expired = pipe.zrangebyscore(keys.DLQ_INDEX, "-inf", f"({cutoff}")
        gone = {e.decode() for e in expired}
        ids = list(dict.fromkeys(letter.id for letter in letters))
        raw = pipe.hmget(keys.DLQ_ENTRIES, ids)
        previous = {
            entry_id: DeadLetter.model_validate_json(value)
            for entry_id, value in zip(ids, raw, strict=True)
            if value is not None and entry_id not in gone
        }
        pipe.multi()
        if expired:
            pipe.hdel(keys.DLQ_ENTRIES, *expired)
            pipe.zrem(keys.DLQ_INDEX, *expired)
            pipe.hincrby(keys.STATS, "dlq.expired", len(expired))
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
            previous[letter.id] = merged  # the same work twice in one batch adds up too
            pipe.hset(keys.DLQ_ENTRIES, merged.id, merged.model_dump_json())
            pipe.zadd(keys.DLQ_INDEX, {merged.id: merged.last_failed_at})
        pipe.hincrby(keys.STATS, "dlq.letters_written", len(letters))

    def _evict(self, pipe: Any, evicted: list[str]) -> None:
        """One WATCHed transaction: past the cap, remove the oldest last failures (into
        `evicted`; a retried transaction starts it afresh)."""
        evicted.clear()
        over = int(pipe.zcard(keys.DLQ_INDEX)) - self.max_entries
        if over <= 0:
            return
        oldest = cast(list[bytes], pipe.zrange(keys.DLQ_INDEX, 0, over - 1))
        pipe.multi()
        pipe.hdel(keys.DLQ_ENTRIES, *oldest)
        pipe.zrem(keys.DLQ_INDEX, *oldest)
        pipe.hincrby(keys.STATS, "dlq.evicted", len(oldest))
        evicted.extend(entry_id.decode() for entry_id in oldest)

    def _rewrite_aof(self) -> tuple[bool, str]:
        """Start BGREWRITEAOF when AOF is on; say why not, and what to do, otherwise.

        The entries are already deleted when this runs, so no Redis error here fails the purge.
        """
        advice = "ask the Redis operator to run BGREWRITEAOF so they leave the append-only file"
        try:
            config = cast(dict[Any, Any], self.client.config_get("appendonly"))
        except redis.ResponseError as exc:
            return False, f"CONFIG GET is not permitted ({exc}), AOF state unknown: {advice}"
        except redis.RedisError as exc:
            return False, f"could not check AOF ({type(exc).__name__}: {exc}): {advice}"
        value = config.get("appendonly", config.get(b"appendonly", b"no"))
        text = value.decode() if isinstance(value, bytes) else str(value)
        if text.lower() != "yes":
            return False, "AOF is off: no append-only file holds the purged payloads"
        try:
            self.client.bgrewriteaof()
        except redis.RedisError as exc:
            return False, f"AOF rewrite not started ({exc}): {advice}, or purge again later"
        return True, "AOF rewrite started (BGREWRITEAOF): purged payloads leave the disk with it"

    def _get_many(self, ids: Sequence[str]) -> dict[str, DeadLetter]:
        if not ids:
            return {}
        raw = cast(list[bytes | None], self.client.hmget(keys.DLQ_ENTRIES, list(ids)))
        return {
            entry_id: DeadLetter.model_validate_json(value)
            for entry_id, value in zip(ids, raw, strict=True)
            if value is not None
        }
