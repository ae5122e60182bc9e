"""The read side: what an agent remembers, and the names the resolve stage looks up."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.graph import cypher
from pipeline.graph.cypher.search import NO_AUDIENCE
from pipeline.graph.retrieval import quoted_changes
from pipeline.graph.store import GraphStore, native
from schemas.keys import channel_key, participant_key
from schemas.recall import Change
from schemas.records import KnownParticipant, LabelKey


class RecalledEpisode(BaseModel):
    """One remembered message, as an agent gets it back."""

    model_config = ConfigDict(frozen=True)

    key: str
    id: str
    role: str
    content: str
    speaker_label: str
    # The label is for reading; the id is who said it (labels can look alike, ids cannot).
    speaker_id: str | None
    created_at: datetime
    channel_id: str
    channel_title: str | None
    synced_at: datetime | None


class AgentSummary(BaseModel):
    """An agent the graph knows, and how many episodes it remembers."""

    model_config = ConfigDict(frozen=True)

    key: str
    id: str
    label: str | None
    observed: int


def lookup_participants(graph: GraphStore, keys: Iterable[str]) -> dict[str, KnownParticipant]:
    """Names already known for these participant keys (missing keys are simply absent)."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    with graph.session(write=False) as session:
        records = list(session.run(cypher.LOOKUP_PARTICIPANTS, keys=wanted))
    return {
        r["key"]: KnownParticipant(id=r["id"], display_name=r["display_name"], handle=r["handle"])
        for r in records
    }


def label_owners(graph: GraphStore, tenant_labels: Iterable[LabelKey]) -> dict[LabelKey, str]:
    """The participant key already carrying each (tenant, label); free labels are absent."""
    wanted = sorted(set(tenant_labels))
    if not wanted:
        return {}
    rows = [{"tenant": tenant, "label": label} for tenant, label in wanted]
    with graph.session(write=False) as session:
        records = list(session.run(cypher.LABEL_OWNERS, rows=rows))
    return {(r["tenant"], r["label"]): r["key"] for r in records}


def recall(
    graph: GraphStore,
    tenant: str,
    agent_id: str,
    channel_id: str | None = None,
    limit: int = 50,
) -> list[RecalledEpisode]:
    """The agent's most recent remembered episodes, oldest first, optionally for one channel."""
    params: dict[str, Any] = {
        "agent_key": participant_key(tenant, agent_id),
        "channel_key": channel_key(tenant, channel_id) if channel_id else None,
        "limit": limit,
    }
    with graph.session(write=False) as session:
        records = list(session.run(cypher.RECALL_EPISODES, params))
    return [RecalledEpisode.model_validate(native(dict(r))) for r in records]


def list_agents(graph: GraphStore, tenant: str) -> list[AgentSummary]:
    with graph.session(write=False) as session:
        records = list(session.run(cypher.LIST_AGENTS, tenant=tenant))
    return [AgentSummary.model_validate(dict(r)) for r in records]


class EpisodeView(BaseModel):
    """One episode with who said it, where, and which agents remember it."""

    model_config = ConfigDict(frozen=True)

    id: str
    role: str
    content: str
    speaker_label: str
    speaker_id: str | None
    speakers: list[str]
    channels: list[str]
    observers: list[str]


def tenant_counts(graph: GraphStore, tenant: str) -> dict[str, int]:
    """Node and relationship counts for one tenant, for operators and tests."""
    with graph.session(write=False) as session:
        record = session.run(cypher.TENANT_COUNTS, tenant=tenant).single(strict=True)
    return {k: int(v) for k, v in dict(record).items()}


def tenant_episodes(graph: GraphStore, tenant: str) -> list[EpisodeView]:
    """Every episode of a tenant with its speakers, channels and observers (ids, sorted)."""
    with graph.session(write=False) as session:
        records = list(session.run(cypher.TENANT_EPISODES, tenant=tenant))
    return [
        EpisodeView.model_validate(
            {**dict(r), **{k: sorted(r[k]) for k in ("speakers", "channels", "observers")}}
        )
        for r in records
    ]


def tenant_observed(graph: GraphStore, tenant: str) -> list[tuple[str, str]]:
    """Every OBSERVED edge of a tenant as (agent key, episode key), duplicates included."""
    with graph.session(write=False) as session:
        records = list(session.run(cypher.TENANT_OBSERVED, tenant=tenant))
    return [(r["agent_key"], r["episode_key"]) for r in records]


class FactView(BaseModel):
    """A fact an agent knows, with its provenance and, if replaced, what replaced it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    key: str
    subject_key: str
    kind: str
    predicate: str
    value: str
    text: str
    source: str
    stated_by: str
    stated_at: datetime
    last_confirmed: datetime
    confidence: float
    expires_at: datetime | None = None
    superseded_at: datetime | None = None
    superseded_by: str | None = None


class CommitmentView(BaseModel):
    """An obligation an agent tracks: who owes what to whom, by when, and whether it is done."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    key: str
    text: str
    value: str
    status: str
    owed_by_key: str
    owed_to_key: str | None = None
    due: datetime | None = None
    opened_at: datetime
    closed_at: datetime | None = None
    # What an open commitment quotes that was replaced since ("track the 2000 EUR budget",
    # then "my budget is 2500 EUR"), wherever that was said.
    changed: list[Change] = []


def agent_facts(
    graph: GraphStore, tenant: str, agent_id: str, *, include_superseded: bool = False
) -> list[FactView]:
    """The agent's current facts (and the superseded ones too, when asked)."""
    params = {"agent_key": participant_key(tenant, agent_id), "all": include_superseded}
    with graph.session(write=False) as session:
        records = list(session.run(cypher.AGENT_FACTS, params))
    return [
        FactView.model_validate({**native(r["fact"]), "superseded_by": r["superseded_by"]})
        for r in records
    ]


def agent_commitments(graph: GraphStore, tenant: str, agent_id: str) -> list[CommitmentView]:
    """Every commitment the agent tracks, oldest first, each with the quoted values replaced
    since it was made (no audience applies: this is what is stored, not what a channel hears)."""
    params = {"agent_key": participant_key(tenant, agent_id), "tenant": tenant, **NO_AUDIENCE}
    with graph.session(write=False) as session:
        records = list(session.run(cypher.AGENT_COMMITMENTS, params))
    views = []
    for r in records:
        row = native(r["commitment"])
        changed = quoted_changes({"text": row.get("text"), "changed": r["changed"]})
        views.append(CommitmentView.model_validate({**row, "changed": changed}))
    return views
