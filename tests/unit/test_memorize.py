"""Stage 5a on turns that went through stages 1-4: what an agent learns from a turn."""

from __future__ import annotations

from typing import Any

from pipeline.extract import RulesExtractor
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import ChannelTrustPolicy
from schemas.memory import CALLED, MemoryItem
from tests.unit.test_stages import CALL, event, msg

CANCEL = [{"id": "c-2", "type": "function", "function": {"name": "cancel_booking"}}]


def learnt(*messages: dict[str, Any]) -> list[MemoryItem]:
    """What the travel agent learns from one DM turn of these messages."""
    jobs = ingest_turns([event(messages, kind="dm")], {}, ChannelTrustPolicy()).jobs
    return [item for _, item in memorize(jobs, RulesExtractor(), BUILTIN_LENSES)]


def promises(items: list[MemoryItem]) -> list[str]:
    return sorted(item.value for item in items if item.kind == "commitment")


def test_a_promise_made_in_the_message_that_calls_the_tool_is_not_owed_afterwards() -> None:
    asked = msg("m-1", "u-devon", "Can you find me a flight to Lisbon on the 12th?")
    promise = "I'll search for available flights for you."
    assert promises(learnt(asked, msg("m-2", "a-travel", promise, "ai", tool_calls=CALL))) == []
    # Said without the call, the same words are a promise still to keep.
    unacted = msg("m-2", "a-travel", promise, "ai")
    assert promises(learnt(asked, unacted)) == ["search for available flights"]


def test_a_dated_promise_beside_a_tool_call_is_still_owed() -> None:
    text = "I'll search for flights now. I'll email you the receipt by Friday."
    items = learnt(msg("m-1", "a-travel", text, "ai", tool_calls=CALL))
    assert promises(items) == ["email you the receipt"]
    assert all(item.due is not None for item in items if item.kind == "commitment")


def test_a_message_that_calls_a_tool_still_teaches_everything_else() -> None:
    text = "Devon prefers aisle seats. I'll check the fares for you."
    items = learnt(msg("m-1", "a-travel", text, "ai", tool_calls=CALL))
    assert promises(items) == []
    assert [item.kind for item in items if item.predicate != CALLED] == ["preference"]


def test_a_tool_called_after_the_go_ahead_closes_by_the_stems_of_its_act() -> None:
    items = learnt(
        msg("m-1", "a-travel", "Please confirm, and I'll proceed with the cancellation.", "ai"),
        msg("m-2", "u-devon", "Yes, please."),
        msg("m-3", "a-travel", "", "ai", tool_calls=CANCEL),
        msg("m-4", "a-travel", '{"ok": true}', "tool", tool_call_id="c-2"),
        msg("m-5", "a-travel", "All set: the 240 EUR go back to your card.", "ai"),
    )
    assert promises(items) == ["proceed with the cancellation"]
    [closure] = [item for item in items if item.predicate == CALLED]
    # Carried by the words the agent says next, the call itself having none.
    assert closure.kind == "closure" and closure.evidence_key.endswith(":m-5")
    assert closure.value == "cancel revok withdraw"
    assert closure.owed_by_key == closure.speaker_key and closure.speaker_key.endswith(":a-travel")
    assert closure.text == "Travel Agent (@travel) called cancel_booking"


def test_a_call_that_acts_on_nothing_promised_closes_nothing() -> None:
    think = [{"id": "c-3", "type": "function", "function": {"name": "think"}}]
    items = learnt(msg("m-1", "a-travel", "Let me see.", "ai", tool_calls=think))
    assert [item for item in items if item.predicate == CALLED] == []
