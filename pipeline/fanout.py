"""Stage 4: one sync job per agent participant that passed trust, speaker or not."""

from __future__ import annotations

from collections.abc import Sequence

from schemas.records import SyncJob, TrustedTurn


def fan_out(turns: Sequence[TrustedTurn]) -> list[SyncJob]:
    """A job for every trusted (turn, agent) pair, in turn order."""
    jobs: list[SyncJob] = []
    for trusted in turns:
        turn = trusted.turn
        agents = {agent.key: agent for agent in turn.agents}
        for decision in trusted.decisions:
            if not decision.trusted:
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


def group_by_agent(jobs: Sequence[SyncJob]) -> dict[str, list[SyncJob]]:
    """Jobs grouped per agent key, so each agent's share of a batch travels and commits together."""
    groups: dict[str, list[SyncJob]] = {}
    for job in jobs:
        groups.setdefault(job.agent.key, []).append(job)
    return groups
