"""Bookkeeping in Redis: per-turn progress (for `emit --wait`), counters, and an audit trail."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from memsync import keys
from memsync.inflight import untrack_in
from pipeline.errors import BrokerUnavailable
from pipeline.ingest import TurnAccount
from schemas.records import SyncJob
from workers.state.inflight import InFlight
from workers.state.redisfaults import redis_errors

log = logging.getLogger("memsync.ledger")

AUDIT_MAXLEN = 20_000
TURN_TTL_SECONDS = 7 * 24 * 3600
WAIT_POLL_SECONDS = 0.2
WAIT_RETRY_MAX_SECONDS = 2.0


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
    untrusted: int = 0  # agent participants left out: their trust rule refused the turn
    accepted_at: float | None = None  # when ingest recorded it (its syncs were sent after)

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


# The replies _read_status queues on a pipeline, in the order _status reads them.
STATUS_REPLIES = 3


def _read_status(pipe: Any, tenant: str, event_id: str) -> None:
    """Queue the reads of one turn's status: its record, its synced and its dead agents."""
    pipe.hgetall(keys.turn(tenant, event_id))
    pipe.scard(keys.turn_synced(tenant, event_id))
    pipe.scard(keys.turn_dead(tenant, event_id))


def _status(tenant: str, event_id: str, replies: Sequence[Any]) -> TurnStatus:
    """One turn's status from the STATUS_REPLIES replies _read_status queued."""
    raw, synced, dead = replies
    fields = {k.decode(): v.decode() for k, v in cast(dict[bytes, bytes], raw).items()}
    return TurnStatus(
        tenant=tenant,
        event_id=event_id,
        state=fields.get("state", "pending"),
        expected=int(fields.get("expected", 0)),
        synced=int(synced),
        dead=int(dead),
        reason=fields.get("reason"),
        untrusted=int(fields.get("untrusted", 0)),
        accepted_at=float(fields["accepted_at"]) if "accepted_at" in fields else None,
    )


class Ledger:
    """Small, idempotent Redis records kept beside the queues."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    @redis_errors
    def accept(self, accounts: Sequence[TurnAccount]) -> None:
        """Record how many agent syncs each turn expects, and why anything was left out.

        A turn no agent may remember is settled here and then (no sync will ever come for it).
        """
        pipe = self.client.pipeline(transaction=False)
        settled = [keys.turn_ref(a.tenant, a.event_id) for a in accounts if not a.expected]
        untrack_in(pipe, settled)
        for account in accounts:
            key = keys.turn(account.tenant, account.event_id)
            expected = account.expected
            untrusted = sum(1 for d in account.decisions if not d.trusted)
            pipe.hset(
                key,
                mapping={
                    "state": "accepted",
                    "expected": expected,
                    "untrusted": untrusted,
                    "idle": len(account.idle),
                    "accepted_at": time.time(),
                },
            )
            pipe.expire(key, TURN_TTL_SECONDS)
            for dropped in account.dropped:
                self._audit(pipe, account, "dropped", dropped.message_id, dropped.reason)
            for decision in account.decisions:
                if not decision.trusted:
                    self._audit(pipe, account, "untrusted", decision.agent_key, decision.reason)
            for agent_key in account.idle:
                self._audit(pipe, account, "idle", agent_key, "idle_window")
        pipe.execute()

    @redis_errors
    def reject(self, tenant: str, event_id: str, reason: str, state: str = "rejected") -> None:
        """An event that will not be ingested: invalid (rejected) or out of retries."""
        key = keys.turn(tenant, event_id)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(key, mapping={"state": state, "expected": 0, "reason": reason})
        pipe.expire(key, TURN_TTL_SECONDS)
        pipe.xadd(
            keys.AUDIT,
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
        pipe.hincrby(keys.STATS, f"events.{state}", 1)
        untrack_in(pipe, [keys.turn_ref(tenant, event_id)])
        pipe.execute()

    @redis_errors
    def mark_synced(self, jobs: Sequence[SyncJob]) -> None:
        """One agent's memory of each turn is written; turns now complete are settled."""
        # A turn's agents in one command each: a batch holds every agent of its turns, and each
        # command costs the client its packing and its reply's parsing.
        agents: dict[tuple[str, str], list[str]] = {}
        for job in jobs:
            agents.setdefault((job.tenant, job.event_id), []).append(job.agent.key)
        # Each turn's state is read back in the same round trip, after its marks (a pipeline
        # runs in order), to settle the turns now finished.
        pipe = self.client.pipeline(transaction=False)
        for (tenant, event_id), keys_of_agents in agents.items():
            synced = keys.turn_synced(tenant, event_id)
            pipe.sadd(synced, *keys_of_agents)
            pipe.srem(keys.turn_dead(tenant, event_id), *keys_of_agents)
            pipe.expire(synced, TURN_TTL_SECONDS)
            _read_status(pipe, tenant, event_id)
        replies = pipe.execute()
        step = 3 + STATUS_REPLIES  # a turn's three marks, then its status reads
        done = [
            keys.turn_ref(tenant, event_id)
            for index, (tenant, event_id) in enumerate(agents)
            if _status(tenant, event_id, replies[step * index + 3 : step * (index + 1)]).finished
        ]
        InFlight(self.client).untrack(done)

    @redis_errors
    def mark_dead(self, tenant: str, event_id: str, agent_key: str) -> None:
        """One agent's sync of a turn went to the dead-letter store."""
        key = keys.turn_dead(tenant, event_id)
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(key, agent_key)
        pipe.expire(key, TURN_TTL_SECONDS)
        pipe.execute()
        self.settle([(tenant, event_id)])

    @redis_errors
    def refuse(self, refusals: Sequence[tuple[str, str, str, str]]) -> None:
        """Audit and count parts of turns the writer refused: (tenant, event_id, subject, reason).

        E.g. a message id reused with another sender or text (`message_id_reuse`), or an event
        naming a different owner than the recorded one (`owner_mismatch`).
        """
        if not refusals:
            return
        pipe = self.client.pipeline(transaction=False)
        for tenant, event_id, subject, reason in refusals:
            pipe.xadd(
                keys.AUDIT,
                {
                    "tenant": tenant,
                    "event_id": event_id,
                    "kind": "refused",
                    "subject": subject,
                    "reason": reason,
                },
                maxlen=AUDIT_MAXLEN,
                approximate=True,
            )
            pipe.hincrby(keys.STATS, f"refused.{reason}", 1)
        pipe.execute()

    @redis_errors
    def count(self, counts: Mapping[str, int]) -> None:
        """Add to the named counters (`memsync stats`)."""
        if not counts:
            return
        pipe = self.client.pipeline(transaction=False)
        for name, value in counts.items():
            pipe.hincrby(keys.STATS, name, value)
        pipe.execute()

    @redis_errors
    def statuses(self, turns: Sequence[tuple[str, str]]) -> list[TurnStatus]:
        """Status of each (tenant, event_id), in the order asked."""
        pipe = self.client.pipeline(transaction=False)
        for tenant, event_id in turns:
            _read_status(pipe, tenant, event_id)
        replies = pipe.execute()
        return [
            _status(tenant, event_id, replies[STATUS_REPLIES * i : STATUS_REPLIES * (i + 1)])
            for i, (tenant, event_id) in enumerate(turns)
        ]

    @redis_errors
    def settle(self, turns: Iterable[tuple[str, str]]) -> None:
        """Forget the in-flight copies of finished turns (see workers/state/inflight.py)."""
        wanted = list(dict.fromkeys(turns))
        if wanted:
            done = [
                keys.turn_ref(s.tenant, s.event_id) for s in self.statuses(wanted) if s.finished
            ]
            InFlight(self.client).untrack(done)

    def wait(
        self,
        turns: Sequence[tuple[str, str]],
        *,
        timeout: float,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[TurnStatus]:
        """Poll until every turn is synced for every trusted agent (or rejected), or timeout.

        A Redis blip (restart, AOF replay, timeout) is waited out until the deadline; only if
        Redis never answered by then is BrokerUnavailable raised. Otherwise the statuses last
        read are returned, finished or not.
        """
        deadline = time.monotonic() + timeout
        statuses: list[TurnStatus] | None = None
        backoff = WAIT_POLL_SECONDS
        while True:
            try:
                statuses = self.statuses(turns)
            except BrokerUnavailable as exc:
                if time.monotonic() > deadline:
                    if statuses is None:
                        raise
                    return statuses
                log.info("waiting for Redis: %s", exc)
                time.sleep(min(backoff, max(0.0, deadline - time.monotonic()) + 0.01))
                backoff = min(backoff * 2, WAIT_RETRY_MAX_SECONDS)
                continue
            backoff = WAIT_POLL_SECONDS
            finished = sum(1 for s in statuses if s.finished)
            if on_progress is not None:
                on_progress(finished)
            if finished == len(turns) or time.monotonic() > deadline:
                return statuses
            time.sleep(WAIT_POLL_SECONDS)

    @redis_errors
    def stats(self) -> dict[str, int]:
        """Every counter, by name."""
        raw = cast(dict[bytes, bytes], self.client.hgetall(keys.STATS))
        return {k.decode(): int(v) for k, v in sorted(raw.items())}

    @redis_errors
    def audit(self, limit: int = 1000) -> list[dict[str, str]]:
        """The newest audit entries, oldest first."""
        entries = cast(
            list[tuple[bytes, dict[bytes, bytes]]],
            self.client.xrevrange(keys.AUDIT, count=limit),
        )
        return [
            {k.decode(): v.decode() for k, v in fields.items()} for _, fields in reversed(entries)
        ]

    @staticmethod
    def _audit(pipe: Any, account: TurnAccount, kind: str, subject: str, reason: str) -> None:
        pipe.xadd(
            keys.AUDIT,
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
