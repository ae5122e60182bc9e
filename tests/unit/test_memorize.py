"""Stage 5a on turns that went through stages 1-4: what an agent learns from a turn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pipeline.extract import RulesExtractor
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import ChannelTrustPolicy
from schemas.event import TurnEvent
from schemas.memory import MemoryItem

T0 = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)  # a Thursday
SEARCH = [{"id": "c-1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]


Said = tuple[str, str, dict[str, Any]]


def learnt(*said: Said) -> list[MemoryItem]:
    """What the travel agent learns from one DM turn of (sender, text, extra fields)."""
    event = TurnEvent.model_validate(
        {
            "schema_version": 1,
            "event_id": "e-1",
            "tenant": "acme",
            "channel": {"id": "dm-1", "kind": "dm"},
            "participants": [
                {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"},
                {"id": "a-travel", "kind": "agent", "display_name": "Travel", "handle": "travel"},
            ],
            "messages": [
                {
                    "id": f"m-{i}",
                    "role": "human" if sender.startswith("u-") else "ai",
                    "sender_id": sender,
                    "content": text,
                    "created_at": (T0 + timedelta(seconds=i)).isoformat(),
                    **extra,
                }
                for i, (sender, text, extra) in enumerate(said)
            ],
        }
    )
    jobs = ingest_turns([event], {}, ChannelTrustPolicy()).jobs
    return [item for _, item in memorize(jobs, RulesExtractor(), BUILTIN_LENSES)]


def promises(items: list[MemoryItem]) -> list[str]:
    return sorted(item.value for item in items if item.kind == "commitment")


def test_a_promise_made_in_the_message_that_calls_the_tool_is_not_owed_afterwards() -> None:
    asked: Said = ("u-devon", "Can you find me a flight to Lisbon on the 12th?", {})
    promise = "I'll search for available flights for you."
    narrated: Said = ("a-travel", promise, {"tool_calls": SEARCH})
    assert promises(learnt(asked, narrated)) == []
    # Said without the call, the same words are a promise still to keep.
    unacted: Said = ("a-travel", promise, {})
    assert promises(learnt(asked, unacted)) == ["search for available flights"]


def test_a_dated_promise_beside_a_tool_call_is_still_owed() -> None:
    text = "I'll search for flights now. I'll email you the receipt by Friday."
    items = learnt(("a-travel", text, {"tool_calls": SEARCH}))
    assert promises(items) == ["email you the receipt"]
    assert all(item.due is not None for item in items if item.kind == "commitment")


def test_a_message_that_calls_a_tool_still_teaches_everything_else() -> None:
    text = "Devon prefers aisle seats. I'll check the fares for you."
    items = learnt(("a-travel", text, {"tool_calls": SEARCH}))
    assert promises(items) == []
    assert [item.kind for item in items] == ["preference"]
