"""The wire contract: TurnEvent version 1, one conversation turn as a platform emits it."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

SCHEMA_VERSION = 1

# Limits keep one event well under a broker message's comfortable size.
MAX_CONTENT_CHARS = 32_000
MAX_MESSAGES = 500
MAX_PARTICIPANTS = 200
MAX_TOOL_CALLS = 64

# Nothing a platform stores predates Unix time; history imports still reach back decades.
EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=UTC)
# Clocks skew, but a message dated far ahead would win fact supersession forever.
MAX_FUTURE_SKEW = timedelta(hours=24)

# Tool-call arguments given as an object: nesting deeper than this is not a real tool call.
MAX_ARGUMENT_DEPTH = 20
# Integers beyond 2**53 lose precision in the JavaScript and JSON readers downstream.
MAX_JSON_INT = 2**53

# The key under which a validator names a spot below its own field (read by pipeline.validate).
SUBPATH = "subpath"

Identifier = Annotated[str, StringConstraints(min_length=1, max_length=256, strip_whitespace=True)]
Tenant = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
ShortText = Annotated[str, StringConstraints(max_length=200, strip_whitespace=True)]

ChannelKind = Literal["dm", "group", "public"]
ParticipantKind = Literal["human", "agent"]
Role = Literal["human", "ai", "tool", "system"]

ROLE_ALIASES: dict[str, Role] = {
    "human": "human",
    "user": "human",
    "ai": "ai",
    "assistant": "ai",
    "tool": "tool",
    "function": "tool",
    "system": "system",
    "developer": "system",
}


class _Model(BaseModel):
    # Unknown keys are ignored so platforms can send richer payloads without breaking ingest.
    model_config = ConfigDict(extra="ignore", frozen=True, str_max_length=MAX_CONTENT_CHARS)


class Channel(_Model):
    """Where the turn happened."""

    id: Identifier
    kind: ChannelKind
    title: ShortText | None = None


class Participant(_Model):
    """A human or an agent present in the channel for this turn."""

    id: Identifier
    kind: ParticipantKind
    display_name: ShortText | None = None
    handle: ShortText | None = None
    anonymous: bool = False
    owner_id: Identifier | None = None
    lens: ShortText | None = None

    @field_validator("handle")
    @classmethod
    def _strip_at(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # Stripped again after the "@" so that validating twice gives the same handle.
        value = value.lstrip("@").strip()
        return value or None

    @field_validator("display_name")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None


class ToolCall(_Model):
    """A tool call, normalised from the OpenAI shape or the flat shape."""

    id: str | None = None
    name: ShortText
    arguments: str = ""

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        function = data.get("function")
        if isinstance(function, dict):
            data = {"id": data.get("id"), **function}
        return data

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments_text(cls, value: Any) -> Any:
        """A JSON string passes as is; a JSON object becomes compact, sorted JSON text."""
        if value is None or isinstance(value, str):
            return "" if value is None else value
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON string or a JSON object, got {type(value).__name__}")
        problem = json_value_problem(value, MAX_ARGUMENT_DEPTH)
        if problem is not None:
            raise ValueError(problem)
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
        if len(text) > MAX_CONTENT_CHARS:
            raise ValueError(
                f"arguments are {len(text)} characters as JSON; the limit is {MAX_CONTENT_CHARS}"
            )
        return text


class Message(_Model):
    """One message of the turn."""

    id: Identifier
    role: Role
    sender_id: Identifier
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list, max_length=MAX_TOOL_CALLS)
    tool_call_id: str | None = None
    created_at: datetime
    injected_context: bool = False

    @field_validator("role", mode="before")
    @classmethod
    def _normalise_role(cls, value: Any) -> Any:
        if isinstance(value, str):
            normalised = ROLE_ALIASES.get(value.strip().lower())
            if normalised is None:
                allowed = ", ".join(sorted(ROLE_ALIASES))
                raise ValueError(f"unknown role {value!r}; expected one of {allowed}")
            return normalised
        return value

    @field_validator("content", mode="before")
    @classmethod
    def _content_text(cls, value: Any) -> Any:
        """Null is empty; OpenAI multi-part content keeps its text parts, one per line."""
        if value is None:
            return ""
        if isinstance(value, list):
            return "\n".join(_text_parts(value))
        return value

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _null_tool_calls(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return within_window(value)


class TurnEvent(_Model):
    """One conversation turn: who is in the channel and what was said."""

    schema_version: StrictInt
    event_id: Identifier
    tenant: Tenant = "default"
    channel: Channel
    participants: list[Participant] = Field(min_length=1, max_length=MAX_PARTICIPANTS)
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    occurred_at: datetime | None = None

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != SCHEMA_VERSION:
            raise ValueError(
                f"unsupported schema_version {value}; this build reads {SCHEMA_VERSION}"
            )
        return value

    @field_validator("occurred_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else within_window(value)

    @model_validator(mode="after")
    def _consistent(self) -> TurnEvent:
        seen: set[str] = set()
        for index, participant in enumerate(self.participants):
            if participant.id in seen:
                raise ValueError(
                    f"participants.{index}.id: duplicate participant {participant.id!r}"
                )
            seen.add(participant.id)
        message_ids: set[str] = set()
        for index, message in enumerate(self.messages):
            if message.sender_id not in seen:
                raise ValueError(
                    f"messages.{index}.sender_id: sender {message.sender_id!r} is not a participant"
                )
            if message.id in message_ids:
                raise ValueError(f"messages.{index}.id: duplicate message id {message.id!r}")
            message_ids.add(message.id)
        for index, participant in enumerate(self.participants):
            if participant.owner_id is not None and participant.kind != "agent":
                raise ValueError(f"participants.{index}.owner_id: only agents have an owner")
        if self.occurred_at is None:
            latest = max(message.created_at for message in self.messages)
            object.__setattr__(self, "occurred_at", latest)
        return self

    @property
    def agents(self) -> list[Participant]:
        return [p for p in self.participants if p.kind == "agent"]


def as_utc(value: datetime) -> datetime:
    """Read a naive time as UTC and express every time in UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def within_window(value: datetime, now: datetime | None = None) -> datetime:
    """The time in UTC, or ValueError when it lies outside [EARLIEST_TIME, now + skew]."""
    try:
        utc = as_utc(value)
    except OverflowError:
        # Year 9999 at a negative offset (or year 1 at a positive one) has no UTC equivalent.
        raise ValueError(f"time {value.isoformat()} has no UTC equivalent") from None
    latest = (now or datetime.now(UTC)) + MAX_FUTURE_SKEW
    if utc < EARLIEST_TIME:
        raise ValueError(f"time {utc.isoformat()} is before {EARLIEST_TIME.isoformat()}")
    if utc > latest:
        raise ValueError(f"time {utc.isoformat()} is more than {MAX_FUTURE_SKEW} ahead of now")
    return utc


def json_value_problem(value: Any, max_depth: int) -> str | None:
    """Why a decoded value is not plain JSON (e.g. "b.0: a set is not JSON"), or None if it is."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        path, item, depth = stack.pop()
        where = f"{path}: " if path else ""
        if depth > max_depth:
            return f"{where}nested deeper than {max_depth} levels"
        if item is None or isinstance(item, bool | str):
            if isinstance(item, str) and not _encodable(item):
                return f"{where}text is not valid Unicode"
        elif isinstance(item, int):
            if abs(item) > MAX_JSON_INT:
                return f"{where}integer beyond ±2**53"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{where}{item} is not a JSON number"
        elif isinstance(item, list):
            prefix = f"{path}." if path else ""
            stack.extend((f"{prefix}{i}", child, depth + 1) for i, child in enumerate(item))
        elif isinstance(item, dict):
            prefix = f"{path}." if path else ""
            for key, child in item.items():
                if not isinstance(key, str):
                    return f"{where}keys must be text, got {type(key).__name__}"
                if not _encodable(key):
                    return f"{where}a key is not valid Unicode"
                # Keys are the caller's text: keep the path readable in an error line.
                stack.append((f"{prefix}{key[:40]}", child, depth + 1))
        else:
            return f"{where}a {type(item).__name__} is not a JSON value"
    return None


def _encodable(text: str) -> bool:
    # Lone surrogates survive json.loads but no UTF-8 writer (Redis, Neo4j) accepts them.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text_parts(parts: list[Any]) -> list[str]:
    """The text of OpenAI-style content parts; non-text parts (images, audio) carry no memory."""
    texts: list[str] = []
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            raise _part_error(index, f"a content part is an object, got {type(part).__name__}")
        kind = part.get("type")
        if not isinstance(kind, str) or not kind:
            raise _part_error(index, "a content part needs a text 'type'")
        if kind != "text":
            continue
        text = part.get("text")
        if not isinstance(text, str):
            raise _part_error(index, "a text part needs a string 'text'")
        if not _encodable(text):
            raise _part_error(index, "text is not valid Unicode")
        texts.append(text)
    return texts


def _part_error(index: int, reason: str) -> PydanticCustomError:
    return PydanticCustomError("content_part", "{reason}", {"reason": reason, SUBPATH: str(index)})
