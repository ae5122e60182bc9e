"""The only code with side effects on memory: writes a list of sync jobs in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import neo4j
from pydantic import BaseModel, ConfigDict

from pipeline.graph import cypher
from pipeline.graph.memoryrows import MemoryRows, plan_memory
from pipeline.graph.store import GraphStore
from pipeline.memorize import AgentMemory
from schemas.keys import participant_key
from schemas.records import SyncJob

Rows = list[dict[str, Any]]


class SyncBatch(BaseModel):
    """Parameter rows for one transaction, deduplicated and sorted by key to keep deadlocks rare."""

    model_config = ConfigDict(frozen=True)

    participants: Rows
    agents: list[str]
    owners: Rows
    channels: Rows
    episodes: Rows
    observed: Rows


def plan_batch(jobs: Sequence[SyncJob], synced_at: datetime | None = None) -> SyncBatch:
    """Turn sync jobs into the rows the writer's statements UNWIND."""
    now = synced_at or datetime.now(UTC)
    participants: dict[str, dict[str, Any]] = {}
    channels: dict[str, dict[str, Any]] = {}
    episodes: dict[str, dict[str, Any]] = {}
    observed: dict[tuple[str, str], dict[str, Any]] = {}
    agents: set[str] = set()
    owners: dict[str, dict[str, Any]] = {}
    for job in jobs:
        agents.add(job.agent.key)
        for p in job.participants:
            row = {
                "key": p.key,
                "tenant": job.tenant,
                "id": p.id,
                "kind": p.kind,
                "display_name": p.display_name,
                "handle": p.handle,
                "label": p.label,
                "anonymous": p.anonymous,
                "provisional": p.provisional,
            }
            # A named sighting wins over a provisional one within the same batch.
            if p.key not in participants or not p.provisional:
                participants[p.key] = row
            if p.kind == "agent":
                agents.add(p.key)
                if p.owner_id is not None:
                    owners[p.key] = {
                        "agent_key": p.key,
                        "owner_key": participant_key(job.tenant, p.owner_id),
                        "owner_id": p.owner_id,
                        "tenant": job.tenant,
                    }
        channels[job.channel.key] = {
            "key": job.channel.key,
            "tenant": job.tenant,
            "id": job.channel.id,
            "kind": job.channel.kind,
            "title": job.channel.title,
        }
        for m in job.messages:
            episodes[m.key] = {
                "key": m.key,
                "tenant": job.tenant,
                "id": m.id,
                "role": m.role,
                "content": m.content,
                "speaker_label": m.speaker_label,
                "speaker_key": m.speaker_key,
                "channel_key": job.channel.key,
                "created_at": m.created_at,
            }
            observed[(job.agent.key, m.key)] = {
                "agent_key": job.agent.key,
                "episode_key": m.key,
                "synced_at": now,
                "event_id": job.event_id,
            }
    return SyncBatch(
        participants=[participants[k] for k in sorted(participants)],
        agents=sorted(agents),
        owners=[owners[k] for k in sorted(owners)],
        channels=[channels[k] for k in sorted(channels)],
        episodes=[episodes[k] for k in sorted(episodes)],
        observed=[observed[k] for k in sorted(observed)],
    )


def write_sync_jobs(
    graph: GraphStore, jobs: Sequence[SyncJob], memories: Sequence[AgentMemory] = ()
) -> SyncBatch:
    """Write the jobs' episodes and what their agents learnt in one transaction; safe to rerun."""
    batch = plan_batch(jobs)
    if not batch.participants:
        return batch
    memory = plan_memory(memories)
    with graph.session() as session:
        session.execute_write(_write_batch, batch, memory)
    return batch


def _write_batch(tx: neo4j.ManagedTransaction, batch: SyncBatch, memory: MemoryRows) -> None:
    # The driver may call this again after a transient failure: it only MERGEs (and recomputes
    # supersession from what is stored), so that is safe.
    tx.run(cypher.MERGE_PARTICIPANTS, rows=batch.participants).consume()
    tx.run(cypher.MARK_AGENTS, keys=batch.agents).consume()
    tx.run(cypher.MERGE_OWNERS, rows=batch.owners).consume()
    tx.run(cypher.MERGE_CHANNELS, rows=batch.channels).consume()
    tx.run(cypher.MERGE_EPISODES, rows=batch.episodes).consume()
    tx.run(cypher.MERGE_OBSERVED, rows=batch.observed).consume()
    if memory.facts:
        tx.run(cypher.MERGE_FACTS, rows=memory.facts).consume()
        tx.run(cypher.RESTACK_FACTS, slots=memory.slots).consume()
    if memory.commitments:
        tx.run(cypher.MERGE_COMMITMENTS, rows=memory.commitments).consume()
    if memory.closures:
        tx.run(cypher.CLOSE_COMMITMENTS, rows=memory.closures).consume()


def verify_fact(graph: GraphStore, key: str) -> bool:
    """Mark a fact verified (confirmed through the API, never from message text); True if found."""
    with graph.session() as session:
        found = session.execute_write(
            lambda tx: tx.run(cypher.VERIFY_FACT, key=key).single(strict=True)["verified"]
        )
    return bool(found)
