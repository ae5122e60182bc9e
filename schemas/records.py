"""Domain records passed between stages: what was kept, who said it, who may remember it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from schemas.event import Channel, ChannelKind, Message, ParticipantKind, Role, TurnEvent
from schemas.keys import compose_key

DropReason = Literal[
    "tool_message", "tool_call_only", "system_message", "empty_text", "injected_context"
]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DroppedMessage(_Record):
    """A message the filter stage kept out of memory, and why."""

    message_id: str
    role: Role
    sender_id: str
    reason: DropReason


class FilteredTurn(_Record):
    """A turn after the filter stage: the messages that carry meaning, and what was dropped."""

    event: TurnEvent
    kept: list[Message]
    dropped: list[DroppedMessage]


# (tenant, label): identity labels are unique per tenant, so this names who carries one.
LabelKey = tuple[str, str]


class KnownParticipant(_Record):
    """A participant's names as the graph already knows them."""

    id: str
    display_name: str | None = None
    handle: str | None = None


class Speaker(_Record):
    """A participant with a resolved identity label, `Display Name (@handle)`."""

    key: str
    id: str
    kind: ParticipantKind
    display_name: str
    handle: str
    label: str
    anonymous: bool = False
    owner_id: str | None = None
    lens: str | None = None
    # True when no name was known and the id stands in: the graph keeps any better name it has.
    provisional: bool = False


class ChannelRef(_Record):
    """A channel with its tenant-qualified key."""

    key: str
    id: str
    kind: ChannelKind
    title: str | None = None

    @classmethod
    def of(cls, key: str, channel: Channel) -> ChannelRef:
        return cls(key=key, id=channel.id, kind=channel.kind, title=channel.title)


class AttributedMessage(_Record):
    """A kept message with its speaker's label: the future Episode."""

    key: str
    id: str
    role: Role
    speaker_key: str
    speaker_label: str
    content: str
    created_at: datetime


class ResolvedTurn(_Record):
    """A turn whose every speaker has an identity label."""

    event_id: str
    tenant: str
    channel: ChannelRef
    participants: list[Speaker]
    messages: list[AttributedMessage]
    dropped: list[DroppedMessage]
    occurred_at: datetime

    @property
    def agents(self) -> list[Speaker]:
        return [p for p in self.participants if p.kind == "agent"]


TrustReason = Literal[
    "trusted",
    "public_channel",
    "anonymous_participant",
    "no_messages",
    "untrusted_participant",
    # The event names another owner for the agent than the one recorded: never trusted.
    "owner_mismatch",
]


class TrustEntry(_Record):
    """What the trust check needs about one truster: whom it trusts, and its owner if an agent."""

    key: str
    trusted: frozenset[str]
    owner: str | None = None


class TrustDecision(_Record):
    """Whether one agent may keep this turn as long-term memory, and why."""

    agent_key: str
    trusted: bool
    reason: TrustReason


class TrustedTurn(_Record):
    """A resolved turn with one trust decision per agent participant."""

    turn: ResolvedTurn
    decisions: list[TrustDecision]


class SyncJob(_Record):
    """One agent's share of one turn: what it should remember, written in one transaction."""

    tenant: str
    event_id: str
    agent: Speaker
    channel: ChannelRef
    participants: list[Speaker]
    messages: list[AttributedMessage]

    @property
    def idempotency_key(self) -> str:
        return compose_key(self.tenant, self.event_id, self.agent.id, "sync")
