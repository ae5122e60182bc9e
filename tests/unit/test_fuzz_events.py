"""Fuzzing the contract: hostile input is refused by field; everything accepted is processable."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.english.due import DUE_LATEST, resolve_due
from pipeline.extract import RulesExtractor
from pipeline.graph.memoryrows import plan_memory
from pipeline.graph.writer import plan_batch
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from schemas.memory import MemoryItem
from tests.fuzzing import FUZZ_REPORT, FuzzTally, fuzz_input
from workers.cli.emitting import read_events

EXAMPLES = 5_000
TALLY = FuzzTally()


def process(event: TurnEvent) -> None:
    """Every pure stage a worker runs on an accepted event, plus its trip over the wire."""
    outcome = ingest_turns([event], {}, DirectoryTrustPolicy("open", {}))
    memories = memorize(outcome.jobs, RulesExtractor(), BUILTIN_LENSES)
    plan_batch(outcome.jobs)
    plan_memory(memories)
    wire = json.dumps(event.model_dump(mode="json"))
    # The worker validates again what the producer sent: it must read the same event.
    assert validate_event(wire) == event


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None)
@given(st.randoms(use_true_random=False))
def fuzz_one(rng: random.Random) -> None:
    event = TALLY.validate(fuzz_input(rng))
    if event is not None:
        process(event)


def test_only_invalid_event_escapes_and_accepted_events_process() -> None:
    """Only InvalidEvent leaves validate_event, naming a field, never by the catch-all; every
    accepted event goes through ingest, memorize and both planners and over the wire."""
    fuzz_one()
    FUZZ_REPORT.append(f"unit fuzz: {TALLY.line()}")
    assert TALLY.examples >= EXAMPLES
    assert TALLY.accepted > EXAMPLES // 10, TALLY.line()
    assert TALLY.refused > EXAMPLES // 10, TALLY.line()
    assert not TALLY.unclassified, TALLY.unclassified[:5]


def test_deeply_nested_line_is_one_error_line(tmp_path: Path) -> None:
    """`memsync emit` reports a deeply nested line as a line, not a traceback."""
    path = tmp_path / "events.jsonl"
    path.write_text("[" * 100_000 + "\n" + '{"a":' * 50_000 + "\n")
    events, errors = read_events(path)
    assert events == []
    assert len(errors) == 2
    assert all("<event>" in line and "nested" in line for line in errors)


def item_at(stated_at: datetime, kind: str = "preference") -> MemoryItem:
    return MemoryItem.model_validate(
        {
            "kind": kind,
            "subject_key": "t:u",
            "speaker_key": "t:u",
            "evidence_key": "t:e",
            "source": "self_stated",
            "predicate": "likes",
            "value": "tea",
            "text": "likes tea",
            "confidence": 0.8,
            "stated_at": stated_at,
        }
    )


def test_ttl_never_overflows() -> None:
    """A fact stated at the calendar's end expires at its end instead of raising."""
    late = datetime(9999, 6, 1, tzinfo=UTC)
    rows = plan_memory([("t:a", item_at(late))])
    assert rows.facts[0]["props"]["expires_at"] == datetime.max.replace(tzinfo=UTC)
    usual = datetime(2026, 11, 26, tzinfo=UTC)
    rows = plan_memory([("t:a", item_at(usual, "fact"))])
    assert rows.facts[0]["props"]["expires_at"] == usual + timedelta(days=730)


def test_due_dates_outside_the_window_are_dropped() -> None:
    base = datetime(2026, 11, 26, 10, tzinfo=UTC)
    assert resolve_due("friday", base) == datetime(2026, 11, 27, tzinfo=UTC)
    assert resolve_due("december 9999", base) is None
    assert resolve_due("in 9000 years", base) is None
    assert resolve_due("1969-12-31", base) is None
    assert resolve_due("2199-12-31", base) == datetime(2199, 12, 31, tzinfo=UTC)
    assert resolve_due("2200-01-01", base) is None
    assert datetime(2200, 1, 1, tzinfo=UTC) == DUE_LATEST
    # Near the calendar's end the arithmetic itself overflows: no due date, no exception.
    assert resolve_due("friday", datetime(9999, 12, 31, tzinfo=UTC)) is None


def test_commitment_by_december_9999_keeps_the_commitment_without_a_due_date() -> None:
    raw = {
        "schema_version": 1,
        "event_id": "e",
        "channel": {"id": "c", "kind": "dm"},
        "participants": [
            {"id": "u", "kind": "human", "display_name": "U"},
            {"id": "a", "kind": "agent", "owner_id": "u"},
        ],
        "messages": [
            {
                "id": "m",
                "role": "user",
                "sender_id": "u",
                "content": "I will book the hotel by December 9999",
                "created_at": "2026-11-26T10:00:00Z",
            }
        ],
    }
    outcome = ingest_turns([validate_event(raw)], {}, DirectoryTrustPolicy("open", {}))
    memories = memorize(outcome.jobs, RulesExtractor(), BUILTIN_LENSES)
    commitments = [item for _, item in memories if item.kind == "commitment"]
    assert len(commitments) == 1
    assert commitments[0].due is None
    assert plan_memory(memories).commitments[0]["props"]["due"] is None
