"""Stage 3: decide, per agent participant, whether a turn may become its long-term memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from schemas.records import ResolvedTurn, Speaker, TrustDecision, TrustedTurn

TrustMode = Literal["strict", "open"]


class TrustPolicy(Protocol):
    """The swappable trust rule: one decision per (turn, agent)."""

    def decide(self, turn: ResolvedTurn, agent: Speaker) -> TrustDecision: ...


class ChannelTrustPolicy:
    """Public channels and anonymous humans make a conversation untrusted for every agent.

    `strict` and `open` behave the same until a trust directory exists to tell them apart.
    """

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


def check_trust(turns: Sequence[ResolvedTurn], policy: TrustPolicy) -> list[TrustedTurn]:
    """Attach one trust decision per agent participant to every turn."""
    return [
        TrustedTurn(turn=turn, decisions=[policy.decide(turn, agent) for agent in turn.agents])
        for turn in turns
    ]
