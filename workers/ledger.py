"""Bookkeeping in Redis: per-turn progress (for `emit --wait`), counters, and an audit trail."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar, cast

import redis

from pipeline.errors import BrokerUnavailable
from pipeline.ingest import TurnAccount
from schemas.records import SyncJob
from workers.inflight import InFlight, turn_id, untrack_in

STATS_KEY = "memsync:stats"
AUDIT_STREAM = "memsync:audit"
AUDIT_MAXLEN = 20_000
TURN_TTL_SECONDS = 7 * 24 * 3600

P = ParamSpec("P")
T = TypeVar("T")


def _turn_key(tenant: str, event_id: str) -> str:
    return f"memsync:turn:{tenant}/{event_id}"


@dataclass(frozen=True)
class TurnStatus:
    """Where one event stands: waiting for ingest, rejected, or N of M agent syncs written."""

    tenant: str
    event_id: str
    state: str  # pending | accepted | rejected (invalid) | dead_lettered (ingest gave up)
    expected: int
    synced: int
    dead: int = 0
    reason: str | None = None

    @property
    def finished(self) -> bool:
        """Nothing more will happen without an operator: written, or in the dead-letter store."""
        if self.state in {"rejected", "dead_lettered"}:
            return True
        return self.state == "accepted" and self.synced + self.dead >= self.expected

    @property
    def complete(self) -> bool:
        """Every trusted agent's memory of the turn is in the graph."""
        return self.state == "accepted" and self.synced >= self.expected


def _redis_errors(fn: Callable[P, T]) -> Callable[P, T]:
    """Redis connection trouble surfaces as BrokerUnavailable (retryable)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise BrokerUnavailable(f"Redis unavailable: {exc}") from exc

    return wrapper


class Ledger:
    """Small, idempotent Redis records kept beside the queues."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    @_redis_errors
    def accept(self, accounts: Sequence[TurnAccount]) -> None:
        """Record how many agent syncs each turn expects, and why anything was left out.

        A turn no agent may remember is settled here and then (no sync will ever come for it).
        """
        pipe = self.client.pipeline(transaction=False)
        settled = [
            turn_id(a.tenant, a.event_id)
            for a in accounts
            if not any(d.trusted for d in a.decisions)
        ]
        untrack_in(pipe, settled)
        for account in accounts:
            key = _turn_key(account.tenant, account.event_id)
            expected = [d.agent_key for d in account.decisions if d.trusted]
            pipe.hset(key, mapping={"state": "accepted", "expected": len(expected)})
            pipe.expire(key, TURN_TTL_SECONDS)
            for dropped in account.dropped:
                self._audit(pipe, account, "dropped", dropped.message_id, dropped.reason)
            for decision in account.decisions:
                if not decision.trusted:
                    self._audit(pipe, account, "untrusted", decision.agent_key, decision.reason)
        pipe.execute()

    @_redis_errors
    def reject(self, tenant: str, event_id: str, reason: str, state: str = "rejected") -> None:
        """An event that will not be ingested: invalid (rejected) or out of retries."""
        key = _turn_key(tenant, event_id)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(key, mapping={"state": state, "expected": 0, "reason": reason})
        pipe.expire(key, TURN_TTL_SECONDS)
        pipe.xadd(
            AUDIT_STREAM,
            {
                "tenant": tenant,
                "event_id": event_id,
                "kind": "rejected",
                "subject": "",
                "reason": reason,
            },
            maxlen=AUDIT_MAXLEN,
            approximate=True,
        )
        pipe.hincrby(STATS_KEY, f"events.{state}", 1)
        untrack_in(pipe, [turn_id(tenant, event_id)])
        pipe.execute()

    @_redis_errors
    def mark_synced(self, jobs: Sequence[SyncJob]) -> None:
        """One agent's memory of each turn is written; turns now complete are settled."""
        pipe = self.client.pipeline(transaction=False)
        for job in jobs:
            key = _turn_key(job.tenant, job.event_id)
            pipe.sadd(key + ":synced", job.agent.key)
            pipe.srem(key + ":dead", job.agent.key)
            pipe.expire(key + ":synced", TURN_TTL_SECONDS)
        pipe.execute()
        self.settle([(job.tenant, job.event_id) for job in jobs])

    @_redis_errors
    def mark_dead(self, tenant: str, event_id: str, agent_key: str) -> None:
        """One agent's sync of a turn went to the dead-letter store."""
        key = _turn_key(tenant, event_id) + ":dead"
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(key, agent_key)
        pipe.expire(key, TURN_TTL_SECONDS)
        pipe.execute()
        self.settle([(tenant, event_id)])

    @_redis_errors
    def count(self, counts: Mapping[str, int]) -> None:
        if not counts:
            return
        pipe = self.client.pipeline(transaction=False)
        for name, value in counts.items():
            pipe.hincrby(STATS_KEY, name, value)
        pipe.execute()

    @_redis_errors
    def statuses(self, turns: Sequence[tuple[str, str]]) -> list[TurnStatus]:
        """Status of each (tenant, event_id), in the order asked."""
        pipe = self.client.pipeline(transaction=False)
        for tenant, event_id in turns:
            pipe.hgetall(_turn_key(tenant, event_id))
            pipe.scard(_turn_key(tenant, event_id) + ":synced")
            pipe.scard(_turn_key(tenant, event_id) + ":dead")
        replies = pipe.execute()
        result: list[TurnStatus] = []
        for index, (tenant, event_id) in enumerate(turns):
            raw: dict[bytes, bytes] = replies[3 * index]
            fields = {k.decode(): v.decode() for k, v in raw.items()}
            result.append(
                TurnStatus(
                    tenant=tenant,
                    event_id=event_id,
                    state=fields.get("state", "pending"),
                    expected=int(fields.get("expected", 0)),
                    synced=int(replies[3 * index + 1]),
                    dead=int(replies[3 * index + 2]),
                    reason=fields.get("reason"),
                )
            )
        return result

    def settle(self, turns: Iterable[tuple[str, str]]) -> None:
        """Forget the in-flight copies of turns that are finished (see workers/inflight.py)."""
        wanted = list(dict.fromkeys(turns))
        if wanted:
            done = [turn_id(s.tenant, s.event_id) for s in self.statuses(wanted) if s.finished]
            InFlight(self.client).untrack(done)

    def wait(
        self,
        turns: Sequence[tuple[str, str]],
        *,
        timeout: float,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[TurnStatus]:
        """Poll until every turn is synced for every trusted agent (or rejected), or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            statuses = self.statuses(turns)
            finished = sum(1 for s in statuses if s.finished)
            if on_progress is not None:
                on_progress(finished)
            if finished == len(turns) or time.monotonic() > deadline:
                return statuses
            time.sleep(0.2)

    def stats(self) -> dict[str, int]:
        raw = cast(dict[bytes, bytes], self.client.hgetall(STATS_KEY))
        return {k.decode(): int(v) for k, v in sorted(raw.items())}

    def audit(self, limit: int = 1000) -> list[dict[str, str]]:
        """The newest audit entries, oldest first."""
        entries = cast(
            list[tuple[bytes, dict[bytes, bytes]]],
            self.client.xrevrange(AUDIT_STREAM, count=limit),
        )
        return [
            {k.decode(): v.decode() for k, v in fields.items()} for _, fields in reversed(entries)
        ]

    @staticmethod
    def _audit(pipe: Any, account: TurnAccount, kind: str, subject: str, reason: str) -> None:
        pipe.xadd(
            AUDIT_STREAM,
            {
                "tenant": account.tenant,
                "event_id": account.event_id,
                "kind": kind,
                "subject": subject,
                "reason": reason,
            },
            maxlen=AUDIT_MAXLEN,
            approximate=True,
        )
