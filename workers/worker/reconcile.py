"""The reconciler: re-sends turns that stayed unsettled too long (a message lost by the broker).

It runs inside every worker on a timer (one sweep at a time across workers, by a Redis lock),
and on demand as `memsync reconcile`. Re-sending is safe: every write is idempotent. Entries
are handled one by one: one it cannot handle is skipped and counted, never stops the sweep, and
one that can never be sent (not a turn at all) moves to the dead-letter store. It sends through
the Celery app its caller hands it (the worker's own, or the CLI's): the app imports this
module for its bootstep, never the reverse.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import redis
from celery import Celery

from memsync import keys
from memsync.inflight import SENT_AT_HEADER
from memsync.message import publish_ingest
from memsync.settings import INGEST_QUEUE, SYNC_QUEUE
from pipeline.errors import PoisonPayload
from workers.state.deadletter import DeadLetterStore, unreadable_letters
from workers.state.inflight import InFlight
from workers.state.ledger import Ledger, TurnStatus
from workers.worker import runtime
from workers.worker.periodic import PeriodicStep

log = logging.getLogger("memsync.reconcile")

STAGE = "reconcile"


@dataclass
class SweepReport:
    """What one sweep did with each due in-flight turn (by its `keys.turn_ref`)."""

    resent: list[str] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)
    # Not handled this time (left for a later sweep), including the dead-lettered ones.
    skipped: list[str] = field(default_factory=list)
    dead_lettered: list[str] = field(default_factory=list)  # not a turn: moved to dead letters
    # Possibly still queued behind a backlog: not re-sent, looked at again next sweep.
    waiting: list[str] = field(default_factory=list)


def sweep(
    inflight: InFlight,
    ledger: Ledger,
    send: Callable[[list[dict[str, Any]]], None],
    older_than: float,
    deadletters: DeadLetterStore,
) -> SweepReport:
    """Settle what the ledger shows finished; send the rest again as ingest tasks; move what
    is not a turn to `deadletters`."""
    report = SweepReport()
    due = inflight.due_raw(older_than)
    backlog = queue_heads(inflight.client) if due else {}
    for ref, raw, since in due:
        try:
            _handle(
                ref,
                raw,
                since,
                backlog,
                inflight=inflight,
                ledger=ledger,
                send=send,
                deadletters=deadletters,
                report=report,
            )
        except Exception as exc:  # one entry, whatever its fault, must not stop the others
            report.skipped.append(ref)
            log.warning("reconcile skipped in-flight turn %r: %s: %s", ref, type(exc).__name__, exc)
            # Pushed back, so entries that keep failing do not hide the ones behind them.
            with contextlib.suppress(Exception):
                inflight.touch([ref])
    counts = {
        "reconcile.resent": len(report.resent),
        "reconcile.settled": len(report.settled),
        "reconcile.skipped": len(report.skipped),
        "reconcile.dead_lettered": len(report.dead_lettered),
        "reconcile.waiting": len(report.waiting),
    }
    try:
        ledger.count({name: n for name, n in counts.items() if n})
    except Exception as exc:  # counters are for operators; the sweep's work is done
        log.warning("reconcile counters not recorded: %s", exc)
    return report


def _handle(
    ref: str,
    raw: bytes,
    since: float,
    backlog: dict[str, float | None],
    *,
    inflight: InFlight,
    ledger: Ledger,
    send: Callable[[list[dict[str, Any]]], None],
    deadletters: DeadLetterStore,
    report: SweepReport,
) -> None:
    """Settle, re-send or dead-letter one due entry; raises whatever stops it (the caller
    counts the entry as skipped)."""
    payload, problem = _read(raw)
    if problem is not None:
        _dead_letter(ref, raw, problem, deadletters)
        inflight.untrack([ref])  # only once it is safely in the dead-letter store
        report.dead_lettered.append(ref)
        report.skipped.append(ref)
        log.warning(
            "in-flight entry %r is not a turn (%s): moved to the dead letters", ref, problem
        )
        return
    tenant, event_id = payload.get("tenant", "default"), payload["event_id"]
    (status,) = ledger.statuses([(tenant, event_id)])
    if status.finished:
        inflight.untrack([ref])
        report.settled.append(ref)
    elif _maybe_queued(status, since, backlog):
        report.waiting.append(ref)
    else:
        send([payload])
        inflight.touch([ref])
        report.resent.append(ref)


def queue_heads(client: redis.Redis) -> dict[str, float | None]:
    """When the next message of each memsync queue was published: None for an empty queue,
    -inf when it cannot be told (no header: it could be anything, so assume the oldest)."""
    heads: dict[str, float | None] = {}
    for queue in (INGEST_QUEUE, SYNC_QUEUE):
        raw = cast(bytes | None, client.lindex(queue, -1))
        if raw is None:
            heads[queue] = None
            continue
        try:
            heads[queue] = float(json.loads(raw)["headers"][SENT_AT_HEADER])
        except (ValueError, KeyError, TypeError):
            heads[queue] = float("-inf")
    return heads


def _maybe_queued(status: TurnStatus, since: float, backlog: dict[str, float | None]) -> bool:
    """Whether the turn's outstanding message may still wait in a queue (queues are FIFO: a
    message published before the queue's next one has already left it)."""
    if status.state == "pending":
        head, sent = backlog.get(INGEST_QUEUE), since
    elif status.state == "accepted":
        head, sent = backlog.get(SYNC_QUEUE), status.accepted_at or since
    else:
        return False
    return head is not None and head <= sent


def _read(raw: bytes) -> tuple[dict[str, Any], str | None]:
    """The stored turn, or why it is not one an ingest task could take."""
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        return {}, f"not JSON ({exc})"
    if not isinstance(payload, dict):
        return {}, f"not a JSON object (a JSON {type(payload).__name__})"
    event_id = payload.get("event_id")
    if not isinstance(event_id, str) or not event_id:
        return {}, "no event_id string"
    if not isinstance(payload.get("tenant", "default"), str):
        return {}, "tenant is not a string"
    return payload, None


def _dead_letter(ref: str, raw: bytes, problem: str, store: DeadLetterStore) -> None:
    error = PoisonPayload(f"in-flight entry {ref!r}: {problem}")
    store.put(unreadable_letters(INGEST_QUEUE, STAGE, raw, error))


class ReconcileStep(PeriodicStep):
    """A worker bootstep: sweep for unsettled turns every MEMSYNC_RECONCILE_INTERVAL seconds."""

    thread_name = "memsync-reconcile"
    fallback_interval = 60.0

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.send: Callable[[list[dict[str, Any]]], None] | None = None

    def prepare(self, worker: Any) -> None:
        self.send = ingest_sender(worker.app)

    def interval(self) -> float:
        return float(runtime.settings().reconcile_interval)

    def tick(self, hostname: str) -> None:
        if self.send is None:
            return  # not started: nothing to send through
        settings = runtime.settings()
        client = runtime.redis_client()
        if not client.set(keys.RECONCILE_LOCK, hostname, nx=True, ex=settings.reconcile_interval):
            return
        report = sweep(
            InFlight(client),
            runtime.ledger(),
            self.send,
            settings.reconcile_after,
            runtime.deadletters(),
        )
        if report.resent:
            log.warning("re-sent %d unsettled turn(s): %s", len(report.resent), report.resent[:5])
        if report.skipped:
            log.warning(
                "skipped %d in-flight turn(s), %d moved to the dead letters: %s",
                len(report.skipped),
                len(report.dead_lettered),
                report.skipped[:5],
            )


def ingest_sender(app: Celery) -> Callable[[list[dict[str, Any]]], None]:
    """What `sweep` sends with: turns again as one ingest task, the producer's own message
    (memsync/message.py), through `app`'s producer pool, with Celery's publish retry policy."""

    def send(payload: list[dict[str, Any]]) -> None:
        with app.producer_or_acquire() as producer:
            publish_ingest(
                producer,
                payload,
                retry=bool(app.conf.task_publish_retry),
                retry_policy=app.conf.task_publish_retry_policy,
            )

    return send
