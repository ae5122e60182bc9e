"""Stage 4: one sync job per agent participant that passed trust, speaker or not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schemas.records import SyncJob, TrustedTurn


def fan_out(
    turns: Sequence[TrustedTurn], idle: Mapping[tuple[str, str], frozenset[str]] | None = None
) -> list[SyncJob]:
    """A job for every trusted (turn, agent) pair, in turn order, but for idle agents.

    `idle` maps (tenant, event id) to the agents left out for idleness (pipeline/activity.py).
    """
    jobs: list[SyncJob] = []
    for trusted in turns:
        turn = trusted.turn
        agents = {agent.key: agent for agent in turn.agents}
        skipped = (idle or {}).get((turn.tenant, turn.event_id), frozenset())
        for decision in trusted.decisions:
            if not decision.trusted or decision.agent_key in skipped:
                continue
            jobs.append(
                SyncJob(
                    tenant=turn.tenant,
                    event_id=turn.event_id,
                    agent=agents[decision.agent_key],
                    channel=turn.channel,
                    participants=turn.participants,
                    messages=turn.messages,
                )
            )
    return jobs
