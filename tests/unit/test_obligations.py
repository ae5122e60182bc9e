"""tau-bench's chats as a platform emits them (bench/obligations.py), read by stages 1-5 on the
vendored slice: a promise made before the customer's yes is met by the call that carries it."""

from __future__ import annotations

import json
from typing import Any

from bench.obligations import AGENT, chat_events
from bench.taucustomer import TAU_FILE
from pipeline.extract import RulesExtractor
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import ChannelTrustPolicy
from schemas.memory import CALLED, MemoryItem
from tests.datasets import TESTS_DATA_DIR


def obligations(task_id: int) -> list[MemoryItem]:
    trajectories: list[dict[str, Any]] = json.loads((TESTS_DATA_DIR / TAU_FILE).read_text())
    [(number, chat)] = [(n, t) for n, t in enumerate(trajectories) if t["task_id"] == task_id]
    events = chat_events(number, chat)
    # Each turn opens with the customer, and tool traffic travels inside it.
    assert all(e.messages[0].role == "human" for e in events)
    assert any(m.role == "tool" for e in events for m in e.messages)
    jobs = ingest_turns(events, {}, ChannelTrustPolicy()).jobs
    items = [item for _, item in memorize(jobs, RulesExtractor(), BUILTIN_LENSES)]
    return [i for i in items if i.kind in ("commitment", "closure")]


def test_a_cancellation_promised_before_the_yes_is_met_by_the_cancel_call() -> None:
    found = obligations(30)
    promises = [i for i in found if i.kind == "commitment"]
    assert [p.value for p in promises] == ["proceed with the cancellation"] * 2
    for promise in promises:
        assert promise.owed_by_key is not None
        assert promise.owed_by_key.endswith(f":{AGENT['id']}")
        kept = [
            i
            for i in found
            if i.predicate == CALLED
            and "cancel" in i.value.split()
            and i.stated_at > promise.stated_at
            and i.speaker_key == promise.owed_by_key
        ]
        assert kept, promise
