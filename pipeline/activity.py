"""Stage 4a: agents idle in a channel past a window are not synced (cost control, off by default).

An agent is active in a channel while its latest message there is at most `window_seconds`
older than the turn being fanned out. An agent that speaks in a turn is active for it; one never
seen speaking in the channel is idle. Times are the messages' own, never the clock, so a replayed
batch is skipped (or not) exactly as the first time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from schemas.event import TurnEvent
from schemas.keys import channel_key, participant_key
from schemas.records import ResolvedTurn

# (channel key, agent key) -> epoch seconds of the agent's latest message in the channel.
LastSpoke = dict[tuple[str, str], float]
TurnRef = tuple[str, str]  # (tenant, event id)


class Activity(BaseModel):
    """What the idle check needs: when each agent last spoke in each channel, and the window."""

    model_config = ConfigDict(frozen=True)

    window_seconds: float
    last_spoke: Mapping[tuple[str, str], float]


class IdleCheck(BaseModel):
    """Agents to leave out per turn, and the latest message times the batch adds."""

    model_config = ConfigDict(frozen=True)

    idle: dict[TurnRef, frozenset[str]]
    spoke: LastSpoke


def activity_pairs(events: Sequence[TurnEvent]) -> set[tuple[str, str]]:
    """The (channel, agent) pairs whose latest message time the idle check reads."""
    return {
        (channel_key(e.tenant, e.channel.id), participant_key(e.tenant, agent.id))
        for e in events
        for agent in e.agents
    }


def find_idle(turns: Sequence[ResolvedTurn], activity: Activity) -> IdleCheck:
    """Which agents of each turn are idle, reading the turns in time order."""
    latest: LastSpoke = dict(activity.last_spoke)
    spoke: LastSpoke = {}
    idle: dict[TurnRef, frozenset[str]] = {}
    for turn in sorted(turns, key=lambda t: t.occurred_at):
        agent_keys = {a.key for a in turn.agents}
        for message in turn.messages:
            if message.speaker_key in agent_keys:
                pair = (turn.channel.key, message.speaker_key)
                at = message.created_at.timestamp()
                if at > latest.get(pair, float("-inf")):
                    latest[pair] = spoke[pair] = at
        now = turn.occurred_at.timestamp()
        idle[(turn.tenant, turn.event_id)] = frozenset(
            key
            for key in agent_keys
            if now - latest.get((turn.channel.key, key), float("-inf")) > activity.window_seconds
        )
    return IdleCheck(idle=idle, spoke=spoke)
