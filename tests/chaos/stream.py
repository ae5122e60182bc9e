"""The chaos run's deterministic turn stream: turn i is the same for a seed, in every process.

Ten group channels of two humans and three agents (agents shared between channels, as on a
real platform), two messages a turn, and on every fourth turn the reply is a tool call only,
which the filter stage must drop.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

CHANNELS = 10
AGENT_POOL = 5
AGENTS_PER_CHANNEL = 3
TOOL_CALL_EVERY = 4
# Fixed, so a stream's event times never depend on when it ran.
EPOCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

_SAYINGS = (
    "I prefer window seats",
    "My name is {name} and I live in Lisbon",
    "Can you remind me to call the dentist on Friday?",
    "I'm allergic to peanuts",
    "Let's move the standup to 10am",
    "I work at the harbour office",
    "Please book the usual table for four",
    "I don't like spicy food",
)
_REPLIES = (
    "Noted, {name}.",
    "Done: I'll keep that in mind.",
    "Sure, I will remind you.",
    "Thanks, {name}, updated.",
)


def tenant_for(seed: int) -> str:
    return f"chaos{seed}"


def event_id(index: int) -> str:
    return f"chaos-{index:07d}"


def _agent(number: int) -> dict[str, Any]:
    return {
        "id": f"a-{number}",
        "kind": "agent",
        "display_name": f"Agent {number}",
        "handle": f"agent{number}",
    }


def turn(seed: int, index: int) -> dict[str, Any]:
    """Turn `index` of the stream for `seed` (a pure function of both)."""
    rng = random.Random(f"{seed}:{index}")
    channel = index % CHANNELS
    humans = [
        {
            "id": f"u-{channel}-{h}",
            "kind": "human",
            "display_name": f"Person {channel}.{h}",
            "handle": f"p{channel}x{h}",
        }
        for h in range(2)
    ]
    agents = [_agent((channel + k) % AGENT_POOL) for k in range(AGENTS_PER_CHANNEL)]
    speaker = rng.choice(humans)
    replier = rng.choice(agents)
    at = EPOCH + timedelta(seconds=index)
    saying = rng.choice(_SAYINGS).format(name=speaker["display_name"])
    reply: dict[str, Any] = {
        "id": f"m-{index}-1",
        "role": "ai",
        "sender_id": replier["id"],
        "created_at": (at + timedelta(milliseconds=500)).isoformat(),
    }
    if index % TOOL_CALL_EVERY == TOOL_CALL_EVERY - 1:
        reply["content"] = ""
        reply["tool_calls"] = [
            {"id": f"c-{index}", "name": "lookup_calendar", "arguments": '{"day": "friday"}'}
        ]
    else:
        reply["content"] = rng.choice(_REPLIES).format(name=speaker["display_name"])
    return {
        "schema_version": 1,
        "event_id": event_id(index),
        "tenant": tenant_for(seed),
        "channel": {"id": f"ch-{channel}", "kind": "group", "title": f"Channel {channel}"},
        "participants": [*humans, *agents],
        "messages": [
            {
                "id": f"m-{index}-0",
                "role": "human",
                "sender_id": speaker["id"],
                "content": f"{saying} (turn {index})",
                "created_at": at.isoformat(),
            },
            reply,
        ],
    }


def turns(seed: int, count: int) -> list[dict[str, Any]]:
    return [turn(seed, i) for i in range(count)]
