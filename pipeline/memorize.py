"""Stage 5a: what each sync job's agent learns from its turn, read through the agent's lens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipeline.english.actions import action_stems
from pipeline.extract import Extractor, memory_item
from pipeline.lens import Lens, apply_lens
from schemas.memory import CALLED, MemoryItem
from schemas.records import ResolvedTurn, SyncJob

AgentMemory = tuple[str, MemoryItem]


def memorize(
    jobs: Sequence[SyncJob], extractor: Extractor, lenses: Mapping[str, Lens]
) -> list[AgentMemory]:
    """(agent key, item) pairs for every job; an agent keeps only what its lens keeps.

    A turn is extracted once for all its agents outside a DM (see `perspective`), and each
    agent's lens filters that one reading: three agents in a channel cost one extraction.
    """
    memories: list[AgentMemory] = []
    readings: dict[tuple[str, str, str | None], list[MemoryItem]] = {}
    for job in jobs:
        if not job.messages:
            continue
        key = (job.tenant, job.event_id, perspective(job))
        items = readings.get(key)
        if items is None:
            turn = ResolvedTurn(
                event_id=job.event_id,
                tenant=job.tenant,
                channel=job.channel,
                participants=job.participants,
                messages=job.messages,
                dropped=[],
                occurred_at=max(m.created_at for m in job.messages),
            )
            said = drop_kept_promises(extractor.extract(turn, job.agent), turn)
            items = readings[key] = said + closures_by_calls(turn)
        kept = apply_lens(items, job.agent.lens, lenses)
        memories.extend((job.agent.key, item) for item in kept)
    return memories


def perspective(job: SyncJob) -> str | None:
    """Whose reading of the turn the job needs: its agent's in a DM, where "you" is the reader;
    elsewhere every agent reads the same items (subjects are named participants), so None."""
    return job.agent.key if job.channel.kind == "dm" else None


def drop_kept_promises(items: Sequence[MemoryItem], turn: ResolvedTurn) -> list[MemoryItem]:
    """The items without the undated promises of messages that also called a tool: an agent's
    "I'll search for available flights" beside the search call is done as it is said, and kept
    as an open commitment it would be owed forever. A dated one ("I'll email the receipt
    tomorrow") is a promise about later and stays."""
    acted = {m.key for m in turn.messages if m.acted}
    if not acted:
        return list(items)
    return [
        item
        for item in items
        if not (item.kind == "commitment" and item.due is None and item.evidence_key in acted)
    ]


def closures_by_calls(turn: ResolvedTurn) -> list[MemoryItem]:
    """A closure for each message whose speaker has just called a tool that acts: "Please
    confirm, and I'll proceed with the cancellation", a yes, then cancel_reservation keeps that
    promise. Its value is the act's word stems; the graph closes the speaker's promises in this
    channel that hold one of them as a word (pipeline/graph/cypher/write.py)."""
    speakers = {p.key: p for p in turn.participants}
    items: list[MemoryItem] = []
    for message in turn.messages:
        speaker = speakers.get(message.speaker_key)
        stems = sorted(set[str]().union(*(action_stems(name) for name in message.calls)))
        if speaker is None or not stems:
            continue
        items.append(
            memory_item(
                "closure",
                speaker=speaker,
                subject=speaker,
                message=message,
                predicate=CALLED,
                value=" ".join(stems),
                text=f"{speaker.label} called {', '.join(message.calls)}",
                topic=None,
            )
        )
    return items
