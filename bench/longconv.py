"""The long-conversation recall set (bench/data/long_conversations.jsonl, written blind).

Each line is one conversation between the same two people over twelve sittings days or weeks
apart, about 200 messages, with questions an assistant would later ask its memory about them;
each question's evidence is every message that states its answer. It stands in for the
issue's target ("long conversations kept out of the repository"): two speakers, so the
speaker label narrows little, and the same topics come back in several sittings.

Loaded as one group channel per conversation, the two people as humans and one agent
observing; each sitting is one turn event, its messages a minute apart from the sitting's
start. Pure: no I/O beyond reading the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.shared import json_lines
from schemas.event import SCHEMA_VERSION
from tests.datasets import RawEvent, slug

LONG_CONVERSATIONS = Path(__file__).resolve().parent / "data" / "long_conversations.jsonl"
LONG_AGENT = "a-memory"


@dataclass(frozen=True)
class LongQuestion:
    """One question about one conversation, with the message ids that answer it."""

    conversation: str
    question: str
    kind: str
    gold: frozenset[str]


def message_id(conversation: str, sitting: int, index: int) -> str:
    return f"{conversation}-s{sitting}-m{index}"


def _at(start: str, index: int) -> str:
    moment = datetime.fromisoformat(start.replace("Z", "+00:00")) + timedelta(minutes=index)
    return moment.isoformat().replace("+00:00", "Z")


def conversation_events(tenant: str, line: dict[str, Any]) -> list[RawEvent]:
    """A conversation's sittings as turn events of one group channel, oldest first."""
    conversation = str(line["id"])
    people = [
        {"id": f"h-{slug(name)}", "kind": "human", "display_name": name, "handle": slug(name)}
        for name in line["speakers"]
    ]
    people.append({"id": LONG_AGENT, "kind": "agent", "display_name": "Memory", "handle": "memory"})
    events: list[RawEvent] = []
    for sitting, session in enumerate(line["sessions"]):
        messages = [
            {
                "id": message_id(conversation, sitting, index),
                "role": "human",
                "sender_id": f"h-{slug(message['speaker'])}",
                "content": message["text"],
                "created_at": _at(session["at"], index),
            }
            for index, message in enumerate(session["messages"])
        ]
        events.append(
            {
                "schema_version": SCHEMA_VERSION,
                "event_id": f"{tenant}-{conversation}-s{sitting}",
                "tenant": tenant,
                "channel": {"id": conversation, "kind": "group", "title": conversation},
                "participants": people,
                "messages": messages,
            }
        )
    return events


def questions(line: dict[str, Any]) -> list[LongQuestion]:
    """A conversation's questions; evidence pairs are (sitting, message) indices."""
    conversation = str(line["id"])
    return [
        LongQuestion(
            conversation,
            q["question"],
            q.get("kind", ""),
            frozenset(message_id(conversation, s, m) for s, m in q["evidence"]),
        )
        for q in line["questions"]
        if q["evidence"]
    ]


def read_lines(path: Path = LONG_CONVERSATIONS) -> list[dict[str, Any]]:
    """The file's conversations (its header line skipped)."""
    return json_lines(path)
