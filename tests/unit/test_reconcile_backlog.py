"""The reconciler re-sends only turns that cannot still be waiting in a queue (fakeredis)."""

from __future__ import annotations

import json
import time
from typing import Any

import fakeredis

from memsync.inflight import SENT_AT_HEADER
from memsync.settings import INGEST_QUEUE, SYNC_QUEUE
from pipeline.ingest import TurnAccount
from schemas.records import TrustDecision
from workers.state.deadletter import DeadLetterStore
from workers.state.inflight import InFlight
from workers.state.ledger import Ledger
from workers.worker.reconcile import sweep


def queued(client: fakeredis.FakeRedis, queue: str, sent_at: float | None) -> None:
    """A task message at the head (next to be consumed) of `queue`."""
    headers = {} if sent_at is None else {SENT_AT_HEADER: f"{sent_at:.6f}"}
    client.rpush(queue, json.dumps({"headers": headers, "properties": {"delivery_tag": "t"}}))


def run(client: fakeredis.FakeRedis, payload: dict[str, Any]) -> tuple[list[Any], Any]:
    sent: list[Any] = []
    report = sweep(InFlight(client), Ledger(client), sent.append, 0, DeadLetterStore(client))
    return sent, report


def tracked(client: fakeredis.FakeRedis, event_id: str) -> dict[str, Any]:
    payload = {"event_id": event_id, "tenant": "t"}
    InFlight(client).track([payload])
    return payload


def test_a_turn_behind_an_older_queued_message_waits() -> None:
    client = fakeredis.FakeRedis()
    queued(client, INGEST_QUEUE, time.time() - 60)
    payload = tracked(client, "e1")
    sent, report = run(client, payload)
    assert sent == []
    assert len(report.waiting) == 1


def test_a_turn_older_than_everything_queued_is_re_sent() -> None:
    client = fakeredis.FakeRedis()
    payload = tracked(client, "e1")
    queued(client, INGEST_QUEUE, time.time() + 1)
    sent, report = run(client, payload)
    assert sent == [[payload]]
    assert report.waiting == []


def test_an_empty_queue_means_the_message_was_lost() -> None:
    client = fakeredis.FakeRedis()
    payload = tracked(client, "e1")
    sent, _ = run(client, payload)
    assert sent == [[payload]]


def test_a_queued_message_without_a_send_time_is_assumed_old() -> None:
    client = fakeredis.FakeRedis()
    payload = tracked(client, "e1")
    queued(client, INGEST_QUEUE, None)
    sent, report = run(client, payload)
    assert sent == [] and len(report.waiting) == 1


def test_accepted_turns_are_judged_by_the_sync_queue_and_their_accept_time() -> None:
    client = fakeredis.FakeRedis()
    payload = tracked(client, "e1")
    account = TurnAccount(
        tenant="t",
        event_id="e1",
        kept=1,
        dropped=[],
        decisions=[TrustDecision(agent_key="t:a", trusted=True, reason="trusted")],
    )
    Ledger(client).accept([account])
    # Its sync was sent at accept time: a sync queue whose head is older may still hold it.
    queued(client, SYNC_QUEUE, time.time() - 60)
    queued(client, INGEST_QUEUE, time.time() + 60)  # the ingest queue is no reason to wait
    sent, report = run(client, payload)
    assert sent == [] and len(report.waiting) == 1
    client.delete(SYNC_QUEUE)
    sent, _ = run(client, payload)
    assert sent == [[payload]]
