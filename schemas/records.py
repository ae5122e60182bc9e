"""Domain records passed between stages: what was kept, who said it, who may remember it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
    # It also called a tool: a promise it makes ("I'll search for flights") is kept by the call
    # it carries, not owed afterwards.
    acted: bool = False
    # The tools its speaker called with it, or in messages of no text since their last kept one
    # in the turn: what the speaker has just done, which may keep an earlier promise.
    calls: list[str] = []


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


class TurnJobs(_Record):
    """Every agent's sync job of one turn, the turn's shared part written once: the sync task's
    payload item. At three agents a job list carried, encoded, decoded and validated each turn's
    participants and messages three times."""

    tenant: str
    event_id: str
    channel: ChannelRef
    participants: list[Speaker]
    messages: list[AttributedMessage]
    agents: list[Speaker] = Field(min_length=1)

    def jobs(self) -> list[SyncJob]:
        # The parts are validated already; the jobs share them rather than validate copies.
        return [
            SyncJob.model_construct(
                tenant=self.tenant,
                event_id=self.event_id,
                agent=agent,
                channel=self.channel,
                participants=self.participants,
                messages=self.messages,
            )
            for agent in self.agents
        ]


def group_jobs(jobs: Sequence[SyncJob]) -> list[TurnJobs]:
    """Jobs folded into one TurnJobs per run of jobs of the same turn (fan-out keeps a turn's
    jobs together); jobs that differ in anything but their agent stay apart."""
    runs: list[list[SyncJob]] = []
    for job in jobs:
        first = runs[-1][0] if runs else None
        if first is not None and _same_turn(first, job):
            runs[-1].append(job)
        else:
            runs.append([job])
    return [
        TurnJobs(
            tenant=run[0].tenant,
            event_id=run[0].event_id,
            channel=run[0].channel,
            participants=run[0].participants,
            messages=run[0].messages,
            agents=[job.agent for job in run],
        )
        for run in runs
    ]


def _same_turn(a: SyncJob, b: SyncJob) -> bool:
    return (
        (a.tenant, a.event_id) == (b.tenant, b.event_id)
        and a.channel == b.channel
        and a.participants == b.participants
        and a.messages == b.messages
    )


def job_items(raw: Any) -> list[Any]:
    """A sync payload item as the one-agent job items it stands for: a TurnJobs item split by
    agent (so a refused one is dead-lettered, counted and replayed per agent, as jobs always
    were); anything else as it is."""
    agents = raw.get("agents") if isinstance(raw, dict) else None
    if not isinstance(agents, list) or not agents:
        return [raw]
    shared = {key: value for key, value in raw.items() if key != "agents"}
    return [{**shared, "agent": agent} for agent in agents]
