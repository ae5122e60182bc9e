"""The only code with side effects on memory: writes a list of sync jobs in one transaction."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import neo4j
from pydantic import BaseModel, ConfigDict

from pipeline.graph import cypher
from pipeline.graph.erasure import batch_subjects, erased_participants, without_erased
from pipeline.graph.memoryrows import MemoryRows, plan_memory
from pipeline.graph.store import GraphStore
from pipeline.memorize import AgentMemory
from schemas.keys import participant_key, scope_token
from schemas.records import ChannelRef, ResolvedTurn, SyncJob

Rows = list[dict[str, Any]]


# (event id, agent key, episode key): one agent's sighting of a message the writer refused.
Refusal = tuple[str, str, str]


class SyncBatch(BaseModel):
    """Parameter rows for one transaction, deduplicated and sorted by key to keep deadlocks rare.

    After `write_sync_jobs`, `observed` holds the OBSERVED rows actually written, `conflicts`
    the sightings refused because their message id was already taken by another sender or text
    (the first write of a message wins), and `owner_conflicts` the (event id, agent key) of jobs
    refused because their event named another owner than the one recorded.
    """

    model_config = ConfigDict(frozen=True)

    participants: Rows
    agents: list[str]
    owners: Rows
    channels: Rows
    episodes: Rows
    observed: Rows
    # (participant, channel) of everyone listed in a turn: the channel's audience.
    members: Rows = []
    # One row per job: its event, agent, claimed owner key and the episodes it would observe.
    jobs: Rows = []
    conflicts: list[Refusal] = []
    owner_conflicts: list[tuple[str, str]] = []
    # When the batch was planned: every OBSERVED edge it writes carries it.
    synced_at: datetime = datetime.fromtimestamp(0, UTC)


def epoch_us(at: datetime) -> int:
    """Microseconds since 1970 UTC: a time as the writer sends it in bulk rows, since the
    driver packs each datetime in pure Python at about 50 us (the statement rebuilds it)."""
    delta = at - datetime.fromtimestamp(0, UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def fingerprint(speaker_key: str, content: str) -> str:
    """What makes a message the same message: who said it and what it says."""
    # Keys are percent-quoted, so they never contain NUL: the split point is unambiguous.
    return hashlib.sha256(f"{speaker_key}\0{content}".encode()).hexdigest()


def plan_batch(jobs: Sequence[SyncJob], synced_at: datetime | None = None) -> SyncBatch:
    """Turn sync jobs into the rows the writer's statements UNWIND.

    Within the batch the first sighting of a message id wins, like the first write in the graph:
    a later job giving the same (channel, message id) another sender or text observes nothing
    of it and is listed in `conflicts`. The first owner claimed for an agent is the one written.
    """
    now = synced_at or datetime.now(UTC)
    participants: dict[str, dict[str, Any]] = {}
    channels: dict[str, dict[str, Any]] = {}
    members: set[tuple[str, str]] = set()
    episodes: dict[str, dict[str, Any]] = {}
    observed: dict[tuple[str, str], dict[str, Any]] = {}
    agents: set[str] = set()
    owners: dict[str, dict[str, Any]] = {}
    job_rows: Rows = []
    conflicts: set[Refusal] = set()
    for job in jobs:
        agents.add(job.agent.key)
        ids = {p.key: p.id for p in job.participants}
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
                if p.owner_id is not None and p.key not in owners:
                    owners[p.key] = {
                        "agent_key": p.key,
                        "owner_key": participant_key(job.tenant, p.owner_id),
                        "owner_id": p.owner_id,
                        "tenant": job.tenant,
                    }
        channels[job.channel.key] = _channel_row(job.tenant, job.channel)
        members.update((p.key, job.channel.key) for p in job.participants)
        seen: list[str] = []
        terms = [scope_token("channel", job.channel.key), scope_token("agent", job.agent.key)]
        for m in job.messages:
            mark = fingerprint(m.speaker_key, m.content)
            first = episodes.setdefault(
                m.key,
                {
                    "key": m.key,
                    "tenant": job.tenant,
                    "id": m.id,
                    "role": m.role,
                    "content": m.content,
                    "speaker_label": m.speaker_label,
                    "speaker_key": m.speaker_key,
                    "speaker_id": ids.get(m.speaker_key),
                    "fingerprint": mark,
                    "channel_key": job.channel.key,
                    "created_us": epoch_us(m.created_at),
                },
            )
            if first["fingerprint"] != mark:
                conflicts.add((job.event_id, job.agent.key, m.key))
                continue
            seen.append(m.key)
            observed[(job.agent.key, m.key)] = {
                "agent_key": job.agent.key,
                "episode_key": m.key,
                "scope": [*terms, scope_token("speaker", m.speaker_key)],
                "event_id": job.event_id,
            }
        job_rows.append(
            {
                "event_id": job.event_id,
                "agent_key": job.agent.key,
                "owner_key": (
                    participant_key(job.tenant, job.agent.owner_id) if job.agent.owner_id else None
                ),
                "episodes": seen,
            }
        )
    return SyncBatch(
        participants=[participants[k] for k in sorted(participants)],
        agents=sorted(agents),
        owners=[owners[k] for k in sorted(owners)],
        channels=[channels[k] for k in sorted(channels)],
        members=[{"participant_key": who, "channel_key": where} for who, where in sorted(members)],
        episodes=[episodes[k] for k in sorted(episodes)],
        observed=[observed[k] for k in sorted(observed)],
        jobs=job_rows,
        conflicts=sorted(conflicts),
        synced_at=now,
    )


Pair = tuple[str, str]


def _channel_row(tenant: str, channel: ChannelRef) -> dict[str, Any]:
    return {
        "key": channel.key,
        "tenant": tenant,
        "id": channel.id,
        "kind": channel.kind,
        "title": channel.title,
    }


def settle(
    batch: SyncBatch, taken: set[str], recorded: dict[str, str]
) -> tuple[SyncBatch, set[Pair]]:
    """The batch as it may be written, and the (agent, episode) pairs memory may cite.

    `taken`: episode keys the graph already holds with another sender or text; `recorded`: the
    owner of each claimed agent. A job naming another owner observes nothing (unless a job of the
    same agent without that claim saw the same message), and nothing is learnt from a refused
    sighting. Pure: it runs inside the transaction function, which the driver may call again.
    """
    conflicts = set(batch.conflicts)
    owner_conflicts: set[tuple[str, str]] = set()
    allowed: set[Pair] = set()
    for job in batch.jobs:
        agent, owner = job["agent_key"], job["owner_key"]
        mismatched = owner is not None and recorded.get(agent, owner) != owner
        if mismatched:
            owner_conflicts.add((job["event_id"], agent))
        for key in job["episodes"]:
            if key in taken:
                conflicts.add((job["event_id"], agent, key))
            elif not mismatched:
                allowed.add((agent, key))
    observed = [r for r in batch.observed if (r["agent_key"], r["episode_key"]) in allowed]
    # Memory cannot tell which of two versions of a message it was read from: none is kept.
    allowed -= {(agent, key) for _, agent, key in batch.conflicts}
    settled = batch.model_copy(
        update={
            "observed": observed,
            "conflicts": sorted(conflicts),
            "owner_conflicts": sorted(owner_conflicts),
        }
    )
    return settled, allowed


def observation_rows(observed: Rows, fresh: set[str]) -> Rows:
    """MERGE_OBSERVED's rows: one per episode, with its observers and its scope terms in the
    order the observers (sorted by key) add them."""
    by_episode: dict[str, dict[str, Any]] = {}
    for row in sorted(observed, key=lambda r: (r["episode_key"], r["agent_key"])):
        key = row["episode_key"]
        entry = by_episode.setdefault(
            key, {"episode_key": key, "fresh": key in fresh, "observers": [], "terms": []}
        )
        entry["observers"].append({k: row[k] for k in ("agent_key", "event_id")})
        entry["terms"].extend(t for t in row["scope"] if t not in entry["terms"])
    rows = [by_episode[k] for k in sorted(by_episode)]
    for entry in rows:
        entry["scope"] = " ".join(entry["terms"])
    return rows


def keep_memory(memory: MemoryRows, allowed: set[Pair]) -> MemoryRows:
    """Memory rows without those citing an episode their agent may not keep."""

    def cited(row: dict[str, Any]) -> bool:
        props = row.get("props", {})
        evidence = row.get("evidence_key") or props.get("evidence_key")
        return evidence is None or (props.get("agent_key"), evidence) in allowed

    return memory.model_copy(
        update={
            "facts": [r for r in memory.facts if cited(r)],
            "commitments": [r for r in memory.commitments if cited(r)],
            "closures": [r for r in memory.closures if cited(r)],
        }
    )


def write_sync_jobs(
    graph: GraphStore, jobs: Sequence[SyncJob], memories: Sequence[AgentMemory] = ()
) -> SyncBatch:
    """Write the jobs' episodes and what their agents learnt in one transaction; safe to rerun.

    The result's `observed` is what was written; `conflicts` and `owner_conflicts` what was
    refused (see SyncBatch).
    """
    batch = plan_batch(jobs)
    if not batch.participants:
        return batch
    memory = plan_memory(memories)
    with graph.session() as session:
        written: SyncBatch = session.execute_write(_write_batch, batch, memory)
    return written


def _write_batch(tx: neo4j.ManagedTransaction, batch: SyncBatch, memory: MemoryRows) -> SyncBatch:
    # The driver may call this again after a transient failure: it only MERGEs (and recomputes
    # supersession from what is stored), so that is safe.
    # Forgotten participants first (pipeline/graph/erasure.py): read in this transaction, so a
    # tombstone committed before it began is always seen and nothing of theirs is written.
    erased = erased_participants(tx, batch_subjects(batch, memory))
    batch, memory = without_erased(batch, memory, erased)
    tx.run(cypher.MERGE_PARTICIPANTS, rows=batch.participants).consume()
    tx.run(cypher.MARK_AGENTS, keys=batch.agents).consume()
    recorded = {
        r["agent_key"]: r["owner_key"] for r in tx.run(cypher.MERGE_OWNERS, rows=batch.owners)
    }
    tx.run(cypher.MERGE_CHANNELS, rows=batch.channels).consume()
    tx.run(cypher.MERGE_MEMBERS, rows=batch.members).consume()
    returned = [(r["key"], r["fresh"]) for r in tx.run(cypher.MERGE_EPISODES, rows=batch.episodes)]
    taken = {key for key, fresh in returned if not fresh}
    fresh = {key for key, is_fresh in returned if is_fresh}
    batch, allowed = settle(batch, taken, recorded)
    tx.run(
        cypher.MERGE_OBSERVED,
        rows=observation_rows(batch.observed, fresh),
        synced_at=batch.synced_at,
    ).consume()
    memory = keep_memory(memory, allowed)
    channels = [row["key"] for row in batch.channels]
    if memory.facts:
        tx.run(cypher.MERGE_FACTS, rows=memory.facts, channels=channels).consume()
        tx.run(cypher.RESTACK_FACTS, slots=memory.slots).consume()
    if memory.commitments:
        tx.run(cypher.MERGE_COMMITMENTS, rows=memory.commitments, channels=channels).consume()
    if memory.closures:
        tx.run(cypher.MERGE_CLOSURES, rows=memory.closures).consume()
    if memory.obligations:
        touched = [r["key"] for r in tx.run(cypher.RESOLVE_CLOSURES, pairs=memory.obligations)]
        tx.run(cypher.RESTATUS_COMMITMENTS, keys=sorted(touched)).consume()
    return batch


def verify_fact(graph: GraphStore, key: str) -> bool:
    """Mark a fact verified (confirmed through the API, never from message text); True if found."""
    with graph.session() as session:
        found = session.execute_write(
            lambda tx: tx.run(cypher.VERIFY_FACT, key=key).single(strict=True)["verified"]
        )
    return bool(found)


def plan_audience(turns: Sequence[ResolvedTurn]) -> SyncBatch:
    """Rows recording who was listed in turns no agent remembers: bare participants and
    channels, and their membership, so the audience rule knows everyone who was there."""
    participants: dict[str, dict[str, Any]] = {}
    channels: dict[str, dict[str, Any]] = {}
    members: set[tuple[str, str]] = set()
    for turn in turns:
        channels[turn.channel.key] = _channel_row(turn.tenant, turn.channel)
        for p in turn.participants:
            participants[p.key] = {"key": p.key, "tenant": turn.tenant, "id": p.id, "kind": p.kind}
            members.add((p.key, turn.channel.key))
    return SyncBatch(
        participants=[participants[k] for k in sorted(participants)],
        agents=sorted(k for k, row in participants.items() if row["kind"] == "agent"),
        owners=[],
        channels=[channels[k] for k in sorted(channels)],
        members=[{"participant_key": who, "channel_key": where} for who, where in sorted(members)],
        episodes=[],
        observed=[],
    )


def write_audience(graph: GraphStore, turns: Sequence[ResolvedTurn]) -> None:
    """Record who was listed in turns no agent remembers, in one transaction. Safe to rerun; a
    forgotten participant is not brought back."""
    batch = plan_audience(turns)
    if batch.members:
        with graph.session() as session:
            session.execute_write(_write_audience, batch)


def _write_audience(tx: neo4j.ManagedTransaction, batch: SyncBatch) -> None:
    erased = erased_participants(tx, [row["key"] for row in batch.participants])
    batch, _ = without_erased(batch, plan_memory([]), erased)
    tx.run(cypher.MERGE_LISTED, rows=batch.participants).consume()
    tx.run(cypher.MARK_AGENTS, keys=batch.agents).consume()
    tx.run(cypher.MERGE_LISTED_CHANNELS, rows=batch.channels).consume()
    tx.run(cypher.MERGE_MEMBERS, rows=batch.members).consume()
