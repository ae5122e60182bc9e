"""Stage 1: keep the messages that carry meaning; tool traffic and system text never do."""

from __future__ import annotations

from collections.abc import Sequence

from schemas.event import Message, TurnEvent
from schemas.records import DroppedMessage, DropReason, FilteredTurn


def filter_turns(events: Sequence[TurnEvent]) -> list[FilteredTurn]:
    """Split every event's messages into kept ones and dropped ones with a reason."""
    turns: list[FilteredTurn] = []
    for event in events:
        kept: list[Message] = []
        dropped: list[DroppedMessage] = []
        for message in event.messages:
            reason = drop_reason(message)
            if reason is None:
                kept.append(message)
            else:
                dropped.append(
                    DroppedMessage(
                        message_id=message.id,
                        role=message.role,
                        sender_id=message.sender_id,
                        reason=reason,
                    )
                )
        turns.append(FilteredTurn(event=event, kept=kept, dropped=dropped))
    return turns


def drop_reason(message: Message) -> DropReason | None:
    """Why a message must not become memory, or None when it should be kept."""
    if message.role == "tool":
        return "tool_message"
    if message.role == "system":
        return "system_message"
    if message.injected_context:
        # Memory handed back to an agent as context must not be learnt again as new speech.
        return "injected_context"
    if not message.content.strip():
        return "tool_call_only" if message.tool_calls else "empty_text"
    return None
