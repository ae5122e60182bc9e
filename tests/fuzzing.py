"""Hostile turn events for fuzzing: valid base events with random leaves made hostile.

Shared by the unit fuzz (driven by hypothesis through `st.randoms`) and the integration test
(driven by seeded `random.Random`), so both see the same kinds of input.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

from pipeline.errors import InvalidEvent
from pipeline.validate import UNCLASSIFIED, validate_event
from schemas.event import MAX_CONTENT_CHARS, TurnEvent

Raw = dict[str, Any]
Path = tuple[str | int, ...]

# Lines for the pytest terminal summary (printed by tests/conftest.py).
FUZZ_REPORT: list[str] = []


def _message(mid: str, sender: str, content: Any, minute: int, **extra: Any) -> Raw:
    return {
        "id": mid,
        "role": "human" if sender.startswith("u-") else "ai",
        "sender_id": sender,
        "content": content,
        "created_at": f"2026-11-26T10:{minute:02d}:00Z",
        **extra,
    }


def base_events() -> list[Raw]:
    """Valid events: the DESIGN.md group turn, an owner's DM (trusted even in strict mode), and a
    multi-part group turn; their texts carry commitments with due phrases, preferences and facts."""
    travel = {"id": "a-travel", "kind": "agent", "display_name": "Travel Agent", "handle": "travel"}
    group = {
        "schema_version": 1,
        "event_id": "evt-group",
        "tenant": "fuzz",
        "channel": {"id": "ch-42", "kind": "group", "title": "Trip planning"},
        "participants": [
            {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"},
            {"id": "u-sarah", "kind": "human", "display_name": "Sarah", "handle": "sarah"},
            {"id": "u-anon-9", "kind": "human", "anonymous": True},
            {**travel, "owner_id": "u-devon", "lens": "travel"},
        ],
        "messages": [
            _message("m-1", "u-devon", "I prefer window seats", 0),
            _message(
                "m-2",
                "a-travel",
                "",
                1,
                tool_calls=[{"name": "search_flights", "arguments": {"from": "BER", "n": 2}}],
            ),
            {**_message("m-3", "a-travel", '{"flights": []}', 2), "role": "tool"},
            _message("m-4", "a-travel", "Noted, Devon: window seat.", 3),
            _message("m-5", "u-sarah", "I'll send the itinerary by Friday", 4),
        ],
        "occurred_at": "2026-11-26T10:04:00Z",
    }
    dm = {
        "schema_version": 1,
        "event_id": "evt-dm",
        "tenant": "fuzz",
        "channel": {"id": "dm-devon", "kind": "dm"},
        "participants": [
            {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"},
            {**travel, "owner_id": "u-devon"},
        ],
        "messages": [
            _message("d-1", "u-devon", "I live in Berlin and I can't stand red-eyes", 10),
            _message("d-2", "a-travel", "I'll book the hotel by end of week", 11),
            _message("d-3", "u-devon", "I will pay you back in 3 days", 12),
            _message(
                "d-4",
                "a-travel",
                None,
                13,
                tool_calls=[
                    {
                        "id": "c-1",
                        "type": "function",
                        "function": {"name": "book", "arguments": '{"hotel": "Adlon"}'},
                    }
                ],
            ),
        ],
    }
    parts = {
        "schema_version": 1,
        "event_id": "evt-parts",
        "channel": {"id": "ch-7", "kind": "group"},
        "participants": [
            {"id": "u-kim", "kind": "human", "display_name": "Kim"},
            {"id": "a-helper", "kind": "agent", "handle": "@helper", "owner_id": "u-kim"},
        ],
        "messages": [
            _message(
                "p-1",
                "u-kim",
                [
                    {"type": "text", "text": "My favourite airline is Lufthansa"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                    {"type": "text", "text": "I'll send the receipts tomorrow"},
                ],
                20,
                role="user",
            ),
            _message("p-2", "a-helper", "Got it.", 21, role="assistant"),
        ],
    }
    return [group, dm, parts]


def _nested_list(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _nested_dict(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


def _now_plus(hours: float) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).isoformat()


# Times a platform might send, around every edge of the accepted window and the calendar.
TIMES: list[Callable[[], Any]] = [
    lambda: "9999-12-31T23:00:00-05:00",
    lambda: "9999-12-31T23:59:59.999999Z",
    lambda: "0001-01-01T00:00:00+05:00",
    lambda: "0001-01-01T00:00:00Z",
    lambda: "1969-12-31T23:59:59Z",
    lambda: "1970-01-01T00:00:00Z",
    lambda: "1970-01-01T00:00:00+00:01",
    lambda: "2199-12-31T23:59:59Z",
    lambda: "2200-01-01T00:00:00Z",
    lambda: "2026-02-30T10:00:00Z",
    lambda: "2026-11-26T10:00:00+23:59",
    lambda: "2026-11-26T10:00:00-23:59",
    lambda: "2026-11-26",
    lambda: "2026-11-26T10:00:00",
    lambda: "20261126T100000Z",
    lambda: "2000-02-29T12:00:00Z",
    lambda: "2026-11-26T10:00:00+14:00",
    lambda: "2026-11-26T23:59:59.999999-12:00",
    lambda: "1970-01-01T05:00:00+05:00",
    lambda: "not a time",
    lambda: _now_plus(23),
    lambda: _now_plus(25),
    lambda: _now_plus(-24 * 365 * 30),
    lambda: _now_plus(0),
    lambda: datetime(2026, 11, 26, 9, 59),
    lambda: datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),
    lambda: datetime(1, 1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
    lambda: datetime.max,
    lambda: datetime.min,
    lambda: date(2026, 11, 26),
    lambda: 1_764_150_000,
    lambda: 1_764_150_000_000,
    lambda: -1,
    lambda: 10**20,
    lambda: float("nan"),
    lambda: float("inf"),
    lambda: 1e308,
]

TEXTS: list[Callable[[], Any]] = [
    lambda: "",
    lambda: "   ",
    lambda: "\u200b",
    lambda: "a\u200bb\u200c\u200d\ufeff",
    lambda: "\ud800",
    lambda: "x\udfffy",
    lambda: "nul\x00byte",
    lambda: "\u202eevil\u202c",
    lambda: "e\u0301\u0301\u0301",
    lambda: "\U0001f600" * 50,
    lambda: "x" * MAX_CONTENT_CHARS,
    lambda: "x" * (MAX_CONTENT_CHARS + 1),
    lambda: "@",
    lambda: "@@x",
    lambda: " @ devon ",
    lambda: "user",
    lambda: "assistant",
    lambda: "%3A:colon",
    lambda: "I'll send the report by Friday",
    lambda: "I will book the hotel by December 9999",
    lambda: "I'll pay you back in 9000 years",
    lambda: "I'll finish it by 9999-12-31",
    lambda: "I'll finish it by 1969-12-31",
    lambda: "I'll send it by the 31st",
    lambda: "I will call you tomorrow morning",
    lambda: "I prefer aisle seats\u200b",
    lambda: "I live in \ud83d Berlin",
]

ARGUMENTS: list[Callable[[], Any]] = [
    lambda: {"a": {1, 2}},
    lambda: {"a": b"bytes"},
    lambda: {1: "int key"},
    lambda: {("t",): "tuple key"},
    lambda: {"a": float("nan")},
    lambda: {"a": float("inf")},
    lambda: {"a": 2**53},
    lambda: {"a": 2**53 + 1},
    lambda: {"a": -(2**60)},
    lambda: {"a": _nested_list(19)},
    lambda: {"a": _nested_list(25)},
    lambda: _nested_dict(3000),
    lambda: {"a": (1, 2)},
    lambda: {"a": "\ud800"},
    lambda: {"\udfff": 1},
    lambda: {"ok": [1, 2.5, None, True, {"b": "c"}], "z": -0.0},
    lambda: {"big": "x" * (MAX_CONTENT_CHARS + 10)},
    lambda: "{not json",
    lambda: "x" * (MAX_CONTENT_CHARS + 1),
    lambda: ["a", "list"],
    lambda: 5,
    lambda: None,
    lambda: {1, 2},
    lambda: b"{}",
]

CONTENT_PARTS: list[Callable[[], Any]] = [
    lambda: [{"type": "text", "text": "I'll send it by Friday"}, {"type": "image_url"}],
    lambda: [{"type": "input_audio", "input_audio": {"data": "AAAA"}}],
    lambda: [],
    lambda: [{"type": "text"}],
    lambda: [{"type": "text", "text": 5}],
    lambda: [{"type": 5, "text": "x"}],
    lambda: ["plain string part"],
    lambda: [{"type": "text", "text": "\ud800"}],
    lambda: [{"type": "text", "text": "x" * 20_000}, {"type": "text", "text": "y" * 20_000}],
    lambda: [{"type": "text", "text": "a"}, None],
    lambda: {"type": "text", "text": "a dict, not a list"},
    lambda: 42,
]

OTHERS: list[Callable[[], Any]] = [
    lambda: None,
    lambda: True,
    lambda: 0,
    lambda: -1,
    lambda: 2**53 + 1,
    lambda: 10**5000,
    lambda: float("nan"),
    lambda: float("-inf"),
    lambda: -0.0,
    set,
    lambda: {1, 2},
    lambda: frozenset({"a"}),
    lambda: b"bytes",
    lambda: bytearray(b"x"),
    lambda: (1, 2),
    lambda: [],
    lambda: {},
    lambda: _nested_list(25),
    lambda: _nested_list(3000),
    lambda: _nested_dict(600),
    object,
    lambda: 1 + 2j,
]

HOSTILE = TIMES + TEXTS + ARGUMENTS + CONTENT_PARTS + OTHERS

NEW_KEYS: list[Any] = ["extra", "metadata", "function", "type", "\u200bid", "\ud800", 1, None, (1,)]


def _paths(value: Any, path: Path = ()) -> Iterator[Path]:
    """Every spot below the root of a JSON-shaped value (bounded: deep hostile values are not
    walked into, so mutating twice stays cheap)."""
    if len(path) > 8:
        return
    children: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        children = [(k, v) for k, v in value.items() if isinstance(k, str | int)]
    elif isinstance(value, list):
        children = list(enumerate(value))
    for key, child in children:
        yield (*path, key)
        yield from _paths(child, (*path, key))


def _node(event: Raw, path: Path) -> Any:
    node: Any = event
    for key in path:
        node = node[key]
    return node


def _parent(event: Raw, path: Path) -> Any:
    return _node(event, path[:-1])


def _messages(event: Raw) -> list[Any]:
    messages = event.get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def _replace_leaf(rng: random.Random, event: Raw) -> None:
    paths = list(_paths(event))
    if paths:
        path = rng.choice(paths)
        _parent(event, path)[path[-1]] = rng.choice(HOSTILE)()


def _delete_key(rng: random.Random, event: Raw) -> None:
    paths = [p for p in _paths(event) if isinstance(_parent(event, p), dict)]
    if paths:
        path = rng.choice(paths)
        del _parent(event, path)[path[-1]]


def _add_key(rng: random.Random, event: Raw) -> None:
    dicts = [event] + [node for p in _paths(event) if isinstance(node := _node(event, p), dict)]
    rng.choice(dicts)[rng.choice(NEW_KEYS)] = rng.choice(HOSTILE)()


def _set_time(rng: random.Random, event: Raw) -> None:
    messages = _messages(event)
    if messages and rng.random() < 0.8:
        rng.choice(messages)["created_at"] = rng.choice(TIMES)()
    else:
        event["occurred_at"] = rng.choice(TIMES)()


def _set_content(rng: random.Random, event: Raw) -> None:
    messages = _messages(event)
    if messages:
        pool = rng.choice([TEXTS, CONTENT_PARTS])
        rng.choice(messages)["content"] = rng.choice(pool)()


def _set_arguments(rng: random.Random, event: Raw) -> None:
    messages = _messages(event)
    if messages:
        call: Raw = {"name": "tool", "arguments": rng.choice(ARGUMENTS)()}
        if rng.random() < 0.5:
            call = {"id": "c-9", "type": "function", "function": call}
        rng.choice(messages)["tool_calls"] = [call]


MUTATIONS: list[Callable[[random.Random, Raw], None]] = [
    _replace_leaf,
    _replace_leaf,
    _delete_key,
    _add_key,
    _set_time,
    _set_time,
    _set_content,
    _set_content,
    _set_arguments,
]

GARBAGE: list[Callable[[], Any]] = [
    lambda: "[" * 100_000,
    lambda: '{"a":' * 50_000,
    lambda: b"\xff\xfe\x00garbage",
    lambda: "\ud800",
    lambda: "x" * 2_000_001,
    lambda: "\u00e9" * 1_000_001,
    lambda: b"",
    lambda: None,
    lambda: 42,
    lambda: [{"schema_version": 1}],
    object,
    lambda: {1, 2},
]


def fuzz_input(rng: random.Random) -> Any:
    """One hostile input: a mutated base event, sometimes as JSON text or bytes, or garbage."""
    shape = rng.random()
    if shape < 0.03:
        return rng.choice(GARBAGE)()
    event = copy.deepcopy(rng.choice(base_events()))
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        rng.choice(MUTATIONS)(rng, event)
    if shape < 0.15:
        try:
            text = json.dumps(event)
        except (TypeError, ValueError, RecursionError):
            return event
        return text.encode() if shape < 0.08 and _encodable(text) else text
    return event


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


@dataclass
class FuzzTally:
    """How many inputs were tried, refused and accepted (for the terminal summary)."""

    examples: int = 0
    refused: int = 0
    accepted: int = 0
    fields: dict[str, int] = field(default_factory=dict)
    # Refusals that only validate_event's last-line catch-all caught (should stay at zero).
    unclassified: list[str] = field(default_factory=list)

    def validate(self, raw: Any) -> TurnEvent | None:
        """validate_event, counting the outcome; only InvalidEvent is caught."""
        self.examples += 1
        try:
            event = validate_event(raw)
        except InvalidEvent as error:
            self.refused += 1
            self.fields[error.field] = self.fields.get(error.field, 0) + 1
            if error.reason.startswith(UNCLASSIFIED) or not error.field:
                self.unclassified.append(str(error))
            return None
        self.accepted += 1
        return event

    def line(self) -> str:
        return f"{self.examples} examples, {self.refused} refused, {self.accepted} accepted"


def accepted_sample(count: int, seed: int = 0) -> tuple[list[TurnEvent], FuzzTally]:
    """The first `count` accepted events from seeded fuzz inputs, with the tally to get there."""
    tally = FuzzTally()
    events: list[TurnEvent] = []
    index = 0
    while len(events) < count:
        event = tally.validate(fuzz_input(random.Random(seed * 1_000_003 + index)))
        index += 1
        if event is not None:
            events.append(event)
    return events, tally
