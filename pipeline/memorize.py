"""Stage 5a: what each sync job's agent learns from its turn, read through the agent's lens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipeline.extract import Extractor
from pipeline.lens import Lens, apply_lens
from schemas.memory import MemoryItem
from schemas.records import ResolvedTurn, SyncJob

AgentMemory = tuple[str, MemoryItem]


def memorize(
    jobs: Sequence[SyncJob], extractor: Extractor, lenses: Mapping[str, Lens]
) -> list[AgentMemory]:
    """(agent key, item) pairs for every job; an agent keeps only what its lens keeps."""
    memories: list[AgentMemory] = []
    for job in jobs:
        if not job.messages:
            continue
        turn = ResolvedTurn(
            event_id=job.event_id,
            tenant=job.tenant,
            channel=job.channel,
            participants=job.participants,
            messages=job.messages,
            dropped=[],
            occurred_at=max(m.created_at for m in job.messages),
        )
        kept = apply_lens(extractor.extract(turn, job.agent), job.agent.lens, lenses)
        memories.extend((job.agent.key, item) for item in kept)
    return memories
