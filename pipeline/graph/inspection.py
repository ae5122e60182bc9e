"""Read-only views for the memory inspector: what one agent knows (facts with provenance and
supersession, commitments, summaries, channels) and a channel's timeline, as plain records."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.graph.cypher import inspect as cypher
from pipeline.graph.cypher.search import NO_AUDIENCE
from pipeline.graph.retrieval import quoted_changes
from pipeline.graph.store import GraphStore, native
from schemas.keys import channel_key, participant_key
from schemas.recall import Change

# Bounds on what one page reads: an inspector page is for looking, not for exporting.
MAX_ROWS = 500


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True)


class AgentRecord(_Record):
    id: str
    label: str | None
    tenant: str


class FactRecord(_Record):
    """A fact as the inspector shows it: provenance, expiry and, if replaced, by what."""

    key: str
    kind: str | None
    predicate: str | None
    value: str | None
    text: str
    source: str
    confidence: float | None
    stated_at: datetime | None
    last_confirmed: datetime | None
    expires_at: datetime | None
    superseded_at: datetime | None
    stated_by: str | None
    about: list[str]
    superseded_by_key: str | None
    superseded_by_text: str | None
    evidence: list[str]
    learnt_in: list[str]

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


class CommitmentRecord(_Record):
    key: str
    text: str
    status: str
    due: datetime | None
    opened_at: datetime | None
    closed_at: datetime | None
    source: str | None
    owed_by: str | None
    owed_to: str | None
    evidence: list[str]
    learnt_in: list[str]
    # What an open commitment quotes that was replaced since, wherever that was said.
    changed: list[Change] = []


class SummaryRecord(_Record):
    channel_id: str
    channel_title: str | None
    text: str
    version: int
    covers_until: datetime | None


class ChannelRecord(_Record):
    id: str
    kind: str | None
    title: str | None
    episodes: int | None = None


class TimelineEntry(_Record):
    id: str
    role: str
    content: str
    speaker_label: str | None
    speaker_id: str | None
    created_at: datetime
    observers: list[str]


class AgentMemory(_Record):
    """Everything the agent page shows, read in one read session."""

    agent: AgentRecord
    facts: list[FactRecord]
    commitments: list[CommitmentRecord]
    summaries: list[SummaryRecord]
    channels: list[ChannelRecord]


def _rows(graph: GraphStore, query: str, **params: Any) -> list[dict[str, Any]]:
    with graph.session(write=False) as session:
        return [native(dict(record)) for record in session.run(query, params)]


def tenants(graph: GraphStore, limit: int = MAX_ROWS) -> list[str]:
    """Tenants with at least one agent, sorted."""
    return [str(r["tenant"]) for r in _rows(graph, cypher.INSPECT_TENANTS, limit=limit)]


def agent_memory(
    graph: GraphStore, tenant: str, agent_id: str, limit: int = MAX_ROWS
) -> AgentMemory | None:
    """What the agent knows, or None when the graph has no such agent."""
    agent_key = participant_key(tenant, agent_id)
    with graph.session(write=False) as session:

        def rows(query: str, **params: Any) -> list[dict[str, Any]]:
            params = {"agent_key": agent_key, "tenant": tenant, "limit": limit, **params}
            return [native(dict(record)) for record in session.run(query, params)]

        found = rows(cypher.INSPECT_AGENT)
        if not found:
            return None
        return AgentMemory(
            agent=AgentRecord.model_validate(found[0]),
            facts=[FactRecord.model_validate(r) for r in rows(cypher.INSPECT_FACTS)],
            commitments=[
                CommitmentRecord.model_validate({**r, "changed": quoted_changes(r)})
                for r in rows(cypher.INSPECT_COMMITMENTS, **NO_AUDIENCE)
            ],
            summaries=[SummaryRecord.model_validate(r) for r in rows(cypher.INSPECT_SUMMARIES)],
            channels=[ChannelRecord.model_validate(r) for r in rows(cypher.INSPECT_AGENT_CHANNELS)],
        )


def channel(graph: GraphStore, tenant: str, channel_id: str) -> ChannelRecord | None:
    found = _rows(graph, cypher.INSPECT_CHANNEL, channel_key=channel_key(tenant, channel_id))
    return ChannelRecord.model_validate(found[0]) if found else None


def timeline(
    graph: GraphStore,
    tenant: str,
    channel_id: str,
    agent_id: str | None = None,
    limit: int = MAX_ROWS,
) -> list[TimelineEntry]:
    """The channel's latest episodes, oldest first; with an agent, only those it observed."""
    params: dict[str, Any] = {"channel_key": channel_key(tenant, channel_id), "limit": limit}
    query = cypher.INSPECT_TIMELINE
    if agent_id is not None:
        params["agent_key"] = participant_key(tenant, agent_id)
        query = cypher.INSPECT_AGENT_TIMELINE
    return [TimelineEntry.model_validate(r) for r in _rows(graph, query, **params)]
