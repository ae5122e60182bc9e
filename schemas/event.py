"""The wire contract: TurnEvent version 1, one conversation turn as a platform emits it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
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

SCHEMA_VERSION = 1

# Limits keep one event well under a broker message's comfortable size.
MAX_CONTENT_CHARS = 32_000
MAX_MESSAGES = 500
MAX_PARTICIPANTS = 200
MAX_TOOL_CALLS = 64

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
        value = value.lstrip("@")
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
        arguments = data.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            data = {**data, "arguments": json.dumps(arguments, sort_keys=True)}
        return data


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
    def _null_content(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _null_tool_calls(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)


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
        return None if value is None else as_utc(value)

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
