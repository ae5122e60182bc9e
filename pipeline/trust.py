"""Stage 3: decide, per agent participant, whether a turn may become its long-term memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from schemas.event import TurnEvent
from schemas.keys import participant_key
from schemas.records import ResolvedTurn, Speaker, TrustDecision, TrustedTurn, TrustEntry

TrustMode = Literal["strict", "open"]


class TrustPolicy(Protocol):
    """The swappable trust rule: one decision per (turn, agent)."""

    def decide(self, turn: ResolvedTurn, agent: Speaker) -> TrustDecision: ...


class ChannelTrustPolicy:
    """Public channels and anonymous humans make a conversation untrusted for every agent."""

    def __init__(self, mode: TrustMode = "strict") -> None:
        self.mode = mode

    def decide(self, turn: ResolvedTurn, agent: Speaker) -> TrustDecision:
        if turn.channel.kind == "public":
            return TrustDecision(agent_key=agent.key, trusted=False, reason="public_channel")
        if any(p.anonymous and p.kind == "human" for p in turn.participants):
            return TrustDecision(agent_key=agent.key, trusted=False, reason="anonymous_participant")
        if not turn.messages:
            return TrustDecision(agent_key=agent.key, trusted=False, reason="no_messages")
        return TrustDecision(agent_key=agent.key, trusted=True, reason="trusted")


class DirectoryTrustPolicy:
    """The channel rules, then the recorded owner, then, in strict mode, the trust directory.

    Strict: a turn is trusted for agent A only if every human in it is A's owner, or is trusted
    by A, or by A's owner. Open: the channel rules alone (for single-user installs).
    `directory` maps participant keys (agents and owners) to whom they trust and, for agents,
    their recorded owner. The recorded owner wins: an event's `owner_id` counts only while none
    is recorded, and an event naming another owner is untrusted (`owner_mismatch`), so a
    stranger cannot claim someone else's agent by saying so.
    """

    def __init__(self, mode: TrustMode, directory: Mapping[str, TrustEntry]) -> None:
        self.mode = mode
        self.directory = directory
        self.channel_rules = ChannelTrustPolicy(mode)

    def decide(self, turn: ResolvedTurn, agent: Speaker) -> TrustDecision:
        decision = self.channel_rules.decide(turn, agent)
        if not decision.trusted:
            return decision
        entry = self.directory.get(agent.key)
        recorded = entry.owner if entry else None
        claimed = participant_key(turn.tenant, agent.owner_id) if agent.owner_id else None
        if recorded is not None and claimed is not None and claimed != recorded:
            return TrustDecision(agent_key=agent.key, trusted=False, reason="owner_mismatch")
        if self.mode == "open":
            return decision
        owner = recorded or claimed
        trusted = set(entry.trusted) if entry else set()
        if owner is not None:
            trusted.add(owner)
            owner_entry = self.directory.get(owner)
            if owner_entry is not None:
                trusted |= owner_entry.trusted
        humans = {p.key for p in turn.participants if p.kind == "human"}
        if humans <= trusted:
            return decision
        return TrustDecision(agent_key=agent.key, trusted=False, reason="untrusted_participant")


def trusters(events: Sequence[TurnEvent]) -> set[str]:
    """Participant keys whose grants the strict check may consult: agents and their owners."""
    keys: set[str] = set()
    for event in events:
        for agent in event.agents:
            keys.add(participant_key(event.tenant, agent.id))
            if agent.owner_id:
                keys.add(participant_key(event.tenant, agent.owner_id))
    return keys


def check_trust(turns: Sequence[ResolvedTurn], policy: TrustPolicy) -> list[TrustedTurn]:
    """Attach one trust decision per agent participant to every turn."""
    return [
        TrustedTurn(turn=turn, decisions=[policy.decide(turn, agent) for agent in turn.agents])
        for turn in turns
    ]
