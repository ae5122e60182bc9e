"""The idle window's Redis side on fakeredis: times only rise, and idle skips are audited."""

from __future__ import annotations

import fakeredis

from memsync import keys
from pipeline.ingest import TurnAccount
from schemas.records import TrustDecision
from workers.state.activity import ActivityLog
from workers.state.ledger import Ledger


def test_recorded_times_only_rise_and_read_back_per_pair() -> None:
    log = ActivityLog(fakeredis.FakeRedis(), window_seconds=600)
    log.record({("c:1", "a:x"): 100.0, ("c:1", "a:y"): 50.0, ("c:2", "a:x"): 7.0})
    log.record({("c:1", "a:x"): 90.0, ("c:1", "a:y"): 60.0})  # a replayed, older batch
    found = log.last_spoke({("c:1", "a:x"), ("c:1", "a:y"), ("c:2", "a:x"), ("c:2", "a:z")})
    assert found == {("c:1", "a:x"): 100.0, ("c:1", "a:y"): 60.0, ("c:2", "a:x"): 7.0}
    assert log.last_spoke(set()) == {}
    assert log.client.ttl(keys.channel_activity("c:1")) > 0


def test_idle_agents_are_not_expected_and_are_audited() -> None:
    ledger = Ledger(fakeredis.FakeRedis())
    decisions = [
        TrustDecision(agent_key=agent, trusted=True, reason="trusted")
        for agent in ("t:a-busy", "t:a-idle")
    ]
    account = TurnAccount(
        tenant="t", event_id="e-1", kept=1, dropped=[], decisions=decisions, idle=["t:a-idle"]
    )
    ledger.accept([account])
    status = ledger.statuses([("t", "e-1")])[0]
    assert status.expected == 1 and not status.finished
    audit = [e for e in ledger.audit() if e["kind"] == "idle"]
    assert audit == [
        {"tenant": "t", "event_id": "e-1", "kind": "idle", "subject": "t:a-idle",
         "reason": "idle_window"}
    ]  # fmt: skip

    # Every agent idle: nothing will be written, so the turn is settled at once.
    quiet = account.model_copy(update={"event_id": "e-2", "idle": ["t:a-busy", "t:a-idle"]})
    ledger.accept([quiet])
    assert ledger.statuses([("t", "e-2")])[0].finished
