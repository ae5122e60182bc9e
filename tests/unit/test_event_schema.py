"""The turn event contract: what parses, what is normalised, and errors that name the field."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from pipeline.errors import InvalidEvent, PermanentError, PoisonPayload
from pipeline.validate import MAX_EVENT_BYTES, validate_event, validate_events
from schemas.event import (
    EARLIEST_TIME,
    MAX_ARGUMENT_DEPTH,
    MAX_CONTENT_CHARS,
    MAX_FUTURE_SKEW,
    ToolCall,
    TurnEvent,
)

Raw = dict[str, Any]


def raw_event() -> Raw:
    """The example from DESIGN.md, "Turn event, version 1"."""
    return {
        "schema_version": 1,
        "event_id": "evt-7f3a",
        "tenant": "acme",
        "channel": {"id": "ch-42", "kind": "group", "title": "Trip planning"},
        "participants": [
            {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"},
            {"id": "u-sarah", "kind": "human", "display_name": "Sarah", "handle": "sarah"},
            {"id": "u-anon-9", "kind": "human", "anonymous": True},
            {
                "id": "a-travel",
                "kind": "agent",
                "display_name": "Travel Agent",
                "handle": "travel",
                "owner_id": "u-devon",
                "lens": "travel",
            },
        ],
        "messages": [
            {
                "id": "m-1",
                "role": "human",
                "sender_id": "u-devon",
                "content": "I prefer window seats",
                "created_at": "2026-11-29T10:00:00Z",
            },
            {
                "id": "m-2",
                "role": "ai",
                "sender_id": "a-travel",
                "content": "",
                "tool_calls": [{"name": "search_flights", "arguments": "{}"}],
                "created_at": "2026-11-29T10:00:01Z",
            },
            {
                "id": "m-3",
                "role": "tool",
                "sender_id": "a-travel",
                "content": '{"flights": []}',
                "tool_call_id": "c-1",
                "created_at": "2026-11-29T10:00:02Z",
            },
            {
                "id": "m-4",
                "role": "ai",
                "sender_id": "a-travel",
                "content": "Noted, Devon: window seat.",
                "created_at": "2026-11-29T10:00:03Z",
            },
        ],
        "occurred_at": "2026-11-29T10:00:03Z",
    }


def changed(edit: Callable[[Raw], object]) -> Raw:
    raw = copy.deepcopy(raw_event())
    edit(raw)
    return raw


def rejected(raw: Any) -> InvalidEvent:
    with pytest.raises(InvalidEvent) as caught:
        validate_event(raw)
    return caught.value


def test_design_example_parses() -> None:
    event = validate_event(raw_event())
    assert event.event_id == "evt-7f3a"
    assert event.tenant == "acme"
    assert [p.id for p in event.agents] == ["a-travel"]
    assert [m.role for m in event.messages] == ["human", "ai", "tool", "ai"]
    assert event.messages[1].tool_calls == [ToolCall(name="search_flights", arguments="{}")]
    assert event.occurred_at == datetime(2026, 11, 29, 10, 0, 3, tzinfo=UTC)


def test_json_text_and_bytes_parse_like_a_mapping() -> None:
    text = json.dumps(raw_event())
    assert validate_event(text) == validate_event(raw_event())
    assert validate_event(text.encode()) == validate_event(raw_event())


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r["messages"][2].update(sender_id="u-ghost"), "messages.2.sender_id"),
        (lambda r: r["messages"][1].update(role="robot"), "messages.1.role"),
        (lambda r: r["messages"][0].update(role=7), "messages.0.role"),
        (lambda r: r.update(schema_version=2), "schema_version"),
        (lambda r: r.pop("event_id"), "event_id"),
        (lambda r: r.update(event_id="  "), "event_id"),
        (lambda r: r["messages"][3].pop("id"), "messages.3.id"),
        (lambda r: r["participants"][1].pop("id"), "participants.1.id"),
        (lambda r: r["messages"][0].pop("created_at"), "messages.0.created_at"),
        (lambda r: r["channel"].update(kind="broadcast"), "channel.kind"),
        (lambda r: r["participants"][0].update(kind="bot"), "participants.0.kind"),
        (lambda r: r["messages"][1].update(id="m-1"), "messages.1.id"),
        (
            lambda r: r["participants"].append({"id": "u-devon", "kind": "human"}),
            "participants.4.id",
        ),
        (lambda r: r["participants"][1].update(owner_id="u-devon"), "participants.1.owner_id"),
        (lambda r: r.update(messages=[]), "messages"),
        (lambda r: r.update(tenant="acme corp"), "tenant"),
        (lambda r: r.update(tenant=""), "tenant"),
        (lambda r: r.update(tenant="a/b"), "tenant"),
        (lambda r: r.update(tenant="x" * 65), "tenant"),
    ],
)
def test_errors_name_the_field(edit: Callable[[Raw], object], field: str) -> None:
    error = rejected(changed(edit))
    assert error.field == field
    assert error.reason
    assert isinstance(error, PermanentError)
    assert field in str(error)


def test_sender_error_says_who_and_keeps_the_event_identity() -> None:
    error = rejected(changed(lambda r: r["messages"][2].update(sender_id="u-ghost")))
    assert "u-ghost" in error.reason
    assert error.event_id == "evt-7f3a"
    assert error.tenant == "acme"


def test_missing_event_id_has_no_event_id_on_the_error() -> None:
    error = rejected(changed(lambda r: r.pop("event_id")))
    assert error.event_id is None


def test_content_size_limit() -> None:
    at_limit = changed(lambda r: r["messages"][0].update(content="x" * MAX_CONTENT_CHARS))
    assert len(validate_event(at_limit).messages[0].content) == MAX_CONTENT_CHARS
    error = rejected(
        changed(lambda r: r["messages"][0].update(content="x" * (MAX_CONTENT_CHARS + 1)))
    )
    assert error.field == "messages.0.content"


@pytest.mark.parametrize("text", ["{not json", "", '{"schema_version": 1,'])
def test_invalid_json_string(text: str) -> None:
    error = rejected(text)
    assert error.field == "<event>"
    assert "JSON" in error.reason


@pytest.mark.parametrize("value", ["[1, 2]", 42, None, ["a"]])
def test_non_object_is_rejected(value: Any) -> None:
    assert rejected(value).field == "<event>"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("user", "human"),
        ("assistant", "ai"),
        ("function", "tool"),
        ("developer", "system"),
        ("  Assistant ", "ai"),
        ("HUMAN", "human"),
    ],
)
def test_role_aliases_normalise(given: str, expected: str) -> None:
    event = validate_event(changed(lambda r: r["messages"][0].update(role=given)))
    assert event.messages[0].role == expected


def test_openai_and_flat_tool_calls_parse_the_same() -> None:
    openai_shape = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_user_details", "arguments": '{"user_id": "u1"}'},
    }
    flat_shape = {"id": "call_1", "name": "get_user_details", "arguments": '{"user_id": "u1"}'}
    expected = ToolCall(id="call_1", name="get_user_details", arguments='{"user_id": "u1"}')
    for shape in (openai_shape, flat_shape):
        raw = raw_event()
        raw["messages"][1]["tool_calls"] = [shape]
        assert validate_event(raw).messages[1].tool_calls == [expected]


def test_tool_call_arguments_as_object_become_json_text() -> None:
    call = {"name": "f", "arguments": {"b": 1, "a": [2]}}
    parsed = validate_event(changed(lambda r: r["messages"][1].update(tool_calls=[call])))
    arguments = parsed.messages[1].tool_calls[0].arguments
    assert json.loads(arguments) == {"a": [2], "b": 1}
    assert ToolCall.model_validate({"name": "g"}).arguments == ""


def test_null_content_and_null_tool_calls_are_empty() -> None:
    raw = changed(lambda r: r["messages"][1].update(content=None, tool_calls=None))
    message = validate_event(raw).messages[1]
    assert message.content == ""
    assert message.tool_calls == []


def test_naive_created_at_is_utc_and_offsets_are_converted() -> None:
    def times(r: Raw) -> None:
        r["messages"][0]["created_at"] = "2026-11-29T10:00:00"
        r["messages"][1]["created_at"] = "2026-11-29T12:00:01+02:00"

    event = validate_event(changed(times))
    assert event.messages[0].created_at == datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
    assert event.messages[0].created_at.utcoffset() is not None
    assert event.messages[1].created_at == datetime(2026, 11, 29, 10, 0, 1, tzinfo=UTC)
    assert event.messages[1].created_at.tzinfo == UTC


def test_occurred_at_defaults_to_last_message_time() -> None:
    event = validate_event(changed(lambda r: r.pop("occurred_at")))
    assert event.occurred_at == event.messages[-1].created_at
    assert event.occurred_at == datetime(2026, 11, 29, 10, 0, 3, tzinfo=UTC)


def test_explicit_occurred_at_is_kept_in_utc() -> None:
    event = validate_event(changed(lambda r: r.update(occurred_at="2026-11-29T11:00:00+01:00")))
    assert event.occurred_at == datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)


def test_tenant_defaults_to_default() -> None:
    event = validate_event(changed(lambda r: r.pop("tenant")))
    assert event.tenant == "default"


def test_participant_handle_loses_at_and_blank_names_are_none() -> None:
    def names(r: Raw) -> None:
        r["participants"][0]["handle"] = " @devon "
        r["participants"][1]["display_name"] = "   "

    event = validate_event(changed(names))
    assert event.participants[0].handle == "devon"
    assert event.participants[1].display_name is None


def test_unknown_keys_are_ignored() -> None:
    raw = changed(lambda r: r.update(extra={"anything": 1}))
    raw["messages"][0]["metadata"] = {"x": 1}
    assert validate_event(raw) == validate_event(raw_event())


def test_turn_event_passes_through() -> None:
    event = TurnEvent.model_validate(raw_event())
    assert validate_event(event) is event


def test_validate_events_splits_good_from_bad_without_raising() -> None:
    good_a = raw_event()
    bad_sender = changed(lambda r: r["messages"][0].update(sender_id="nobody"))
    good_b = changed(lambda r: r.update(event_id="evt-2"))
    bad_version = changed(lambda r: r.update(event_id="evt-3", schema_version=2))
    events, errors = validate_events([good_a, bad_sender, "{oops", good_b, bad_version, 5])
    assert [e.event_id for e in events] == ["evt-7f3a", "evt-2"]
    assert [e.field for e in errors] == [
        "messages.0.sender_id",
        "<event>",
        "schema_version",
        "<event>",
    ]
    assert errors[2].event_id == "evt-3"


def test_validate_events_needs_a_list() -> None:
    with pytest.raises(PoisonPayload):
        validate_events({"event_id": "x"})  # type: ignore[arg-type]
    assert validate_events([]) == ([], [])


# --- hostile input (issue 7) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("created_at", "reason"),
    [
        ("9999-12-31T23:00:00-05:00", "no UTC equivalent"),
        ("0001-01-01T00:00:00+05:00", "no UTC equivalent"),
        ("1969-12-31T23:59:59Z", "before"),
        ("2200-01-01T00:00:00Z", "ahead of now"),
        (-1, "before"),
    ],
)
def test_times_outside_the_window_name_the_field(created_at: Any, reason: str) -> None:
    error = rejected(changed(lambda r: r["messages"][2].update(created_at=created_at)))
    assert error.field == "messages.2.created_at"
    assert reason in error.reason


def test_window_edges() -> None:
    soon = (datetime.now(UTC) + MAX_FUTURE_SKEW - timedelta(minutes=5)).isoformat()
    late = (datetime.now(UTC) + MAX_FUTURE_SKEW + timedelta(minutes=5)).isoformat()
    first = validate_event(changed(lambda r: r["messages"][0].update(created_at=EARLIEST_TIME)))
    assert first.messages[0].created_at == EARLIEST_TIME
    assert validate_event(changed(lambda r: r.update(occurred_at=soon))).occurred_at
    assert rejected(changed(lambda r: r.update(occurred_at=late))).field == "occurred_at"
    python_overflow = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))
    assert rejected(changed(lambda r: r.update(occurred_at=python_overflow))).field == (
        "occurred_at"
    )


def call_with(arguments: Any, openai: bool = False) -> Raw:
    call: Raw = {"name": "f", "arguments": arguments}
    if openai:
        call = {"id": "c", "type": "function", "function": call}
    return changed(lambda r: r["messages"][1].update(tool_calls=[call]))


def deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("openai", [False, True])
@pytest.mark.parametrize(
    "arguments",
    [
        {1, 2},
        b"{}",
        (1, 2),
        ["a"],
        5,
        {"a": {1}},
        {"a": b"x"},
        {1: "x"},
        {"a": float("nan")},
        {"a": float("inf")},
        {"a": 2**53 + 1},
        {"a": "\ud800"},
        {"a": deep(MAX_ARGUMENT_DEPTH)},
        {"a": deep(100_000)},
        {"a": "x" * MAX_CONTENT_CHARS},
    ],
)
def test_bad_arguments_name_the_arguments_field(arguments: Any, openai: bool) -> None:
    assert rejected(call_with(arguments, openai)).field == "messages.1.tool_calls.0.arguments"


def test_good_arguments_are_compact_sorted_json() -> None:
    arguments = {"b": [1, 2.5, None, True], "a": {"c": "d"}, "n": -(2**53)}
    event = validate_event(call_with(arguments))
    text = event.messages[1].tool_calls[0].arguments
    assert text == '{"a":{"c":"d"},"b":[1,2.5,null,true],"n":-9007199254740992}'
    assert validate_event(call_with({"a": deep(MAX_ARGUMENT_DEPTH - 1)}))
    assert validate_event(call_with("{not json, but a string}"))
    assert validate_event(call_with(None)).messages[1].tool_calls[0].arguments == ""


def test_content_parts_join_their_text() -> None:
    parts = [
        {"type": "text", "text": "I prefer"},
        {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
        {"type": "text", "text": "window seats"},
    ]
    event = validate_event(changed(lambda r: r["messages"][0].update(content=parts)))
    assert event.messages[0].content == "I prefer\nwindow seats"
    only_image = [{"type": "image_url", "image_url": {"url": "u"}}]
    event = validate_event(changed(lambda r: r["messages"][0].update(content=only_image)))
    assert event.messages[0].content == ""


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ([{"type": "text", "text": "a"}, "b"], "messages.0.content.1"),
        ([{"type": "text"}], "messages.0.content.0"),
        ([{"type": "text", "text": 5}], "messages.0.content.0"),
        ([{"text": "a"}], "messages.0.content.0"),
        (
            [{"type": "text", "text": "a"}, {"type": "text", "text": "\udfff"}],
            "messages.0.content.1",
        ),
        ({"type": "text", "text": "a"}, "messages.0.content"),
        (42, "messages.0.content"),
        ([{"type": "text", "text": "x" * MAX_CONTENT_CHARS}] * 2, "messages.0.content"),
    ],
)
def test_bad_content_names_the_part(content: Any, field: str) -> None:
    assert rejected(changed(lambda r: r["messages"][0].update(content=content))).field == field


def test_size_limit_counts_utf8_bytes_of_text() -> None:
    padding = "\u00e9" * (MAX_EVENT_BYTES // 2)  # 2 bytes each: over the limit in bytes only
    text = json.dumps({**raw_event(), "extra": padding}, ensure_ascii=False)
    assert len(text) < MAX_EVENT_BYTES
    error = rejected(text)
    assert error.field == "<event>"
    assert "bytes" in error.reason


def test_size_limit_applies_to_dicts() -> None:
    raw = changed(lambda r: r.update(extra="\u00e9" * (MAX_EVENT_BYTES // 2)))
    error = rejected(raw)
    assert error.field == "<event>"
    assert "bytes" in error.reason
    assert error.event_id == "evt-7f3a"


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r.update(extra={1, 2}), "extra"),
        (lambda r: r["messages"][0].update(metadata=b"x"), "messages.0.metadata"),
        (lambda r: r.update(extra=deep(100_000)), "extra.0.0.0.0.0.0.0"),
        (lambda r: r.update(extra={(1, 2): "tuple key"}), "extra"),
        (lambda r: r.update(schema_version=10**5000), "schema_version"),
    ],
)
def test_unserialisable_dicts_are_refused_by_field(
    edit: Callable[[Raw], object], field: str
) -> None:
    assert rejected(changed(edit)).field == field


def test_circular_dict_is_refused() -> None:
    raw = raw_event()
    raw["extra"] = raw
    assert rejected(raw).field.startswith("extra")


@pytest.mark.parametrize(
    "raw",
    ["[" * 100_000, '{"a":' * 50_000, b"\xff\xfe\x00", object(), {1, 2}, b"", 3.5],
)
def test_garbage_is_refused_as_the_whole_event(raw: Any) -> None:
    assert rejected(raw).field == "<event>"


def test_handle_is_stable_when_validated_twice() -> None:
    event = validate_event(changed(lambda r: r["participants"][0].update(handle=" @ devon ")))
    assert event.participants[0].handle == "devon"
    assert validate_event(json.dumps(event.model_dump(mode="json"))) == event
