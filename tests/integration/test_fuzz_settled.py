"""Every fuzzed event that passes validation is processed by a real worker: none dead-lettered."""

from __future__ import annotations

import json

import pytest
import redis

from memsync.producer import Producer
from memsync.settings import Settings
from tests.fuzzing import accepted_sample
from tests.integration.report import report_fault
from workers.local import services
from workers.state.deadletter import DeadLetterStore
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

SAMPLE = 300


@pytest.mark.timeout(600)
def test_accepted_fuzzed_events_all_settle(
    worker: services.Service,
    producer: Producer,
    ledger: Ledger,
    settings: Settings,
    tenant: str,
) -> None:
    events, tally = accepted_sample(SAMPLE, seed=7)
    turns: list[tuple[str, str]] = []
    for index, event in enumerate(events):
        raw = event.model_dump(mode="json")
        raw.update(event_id=f"fz-{index}", tenant=tenant)
        # The producer validates again on emit: what the fuzz accepted must stay accepted.
        producer.emit(json.dumps(raw))
        turns.append((tenant, f"fz-{index}"))
    assert producer.flush(timeout=60)
    statuses = ledger.wait(turns, timeout=420)
    settled = [s for s in statuses if s.finished]
    synced = sum(s.synced for s in statuses)
    client = redis.Redis.from_url(settings.broker_url)
    letters = [x for x in DeadLetterStore(client).entries() if x.tenant == tenant]
    client.close()
    report_fault(
        "fuzz",
        f"{tally.examples} examples, {tally.refused} refused, {tally.accepted} accepted, "
        f"{len(settled)} settled ({synced} agent syncs written)",
    )
    assert len(settled) == len(turns), [s for s in statuses if not s.finished][:5]
    assert [s for s in statuses if not s.complete or s.dead] == []
    assert [(x.event_id, x.stage, x.error_type) for x in letters] == []
    # Most of the sample reaches an agent's sync (owners' DMs are trusted even in strict mode).
    assert sum(1 for s in statuses if s.expected) > SAMPLE // 3
