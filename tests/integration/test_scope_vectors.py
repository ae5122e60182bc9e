"""Scopes hold on the paths that search by meaning too (Neo4j's cosine and the reader's vector
cache), on a real Neo4j: another channel's thread memory, a DM fact, a fact learnt in a group
someone here never joined, and another tenant never come back, though each matches best. And
hybrid recall finds by keyword what has no vector of the query's model yet."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.embedder import Embedder
from pipeline.graph.embeddings import oldest_waiting
from pipeline.graph.search import recall
from pipeline.graph.store import GraphStore
from pipeline.graph.vectorcache import VectorCache
from pipeline.validate import validate_event
from schemas.event import SCHEMA_VERSION
from schemas.recall import RecallItem, RecallQuery
from tests.integration.writing import embed_all, write_open

pytestmark = pytest.mark.integration

DEVON = {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"}
SARAH = {"id": "u-sarah", "kind": "human", "display_name": "Sarah", "handle": "sarah"}
TRAVEL = {"id": "a-travel", "kind": "agent", "display_name": "Travel Agent", "handle": "travel"}
CHANNELS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "ch-a": ("group", [DEVON, SARAH, TRAVEL]),
    "ch-b": ("group", [DEVON, TRAVEL]),
    "dm-sarah": ("dm", [SARAH, TRAVEL]),
    "ch-pub": ("public", [DEVON, TRAVEL]),
}
LINES = (
    ("ch-a", "u-sarah", "Which hotel did we pick for Lisbon?"),
    ("ch-a", "u-devon", "The one by the river, two nights"),
    ("ch-b", "u-devon", "The seat on the night train was broken"),
    ("ch-b", "u-devon", "I am allergic to shellfish"),
    ("dm-sarah", "u-sarah", "I am allergic to peanuts"),
    ("ch-pub", "u-devon", "Hello from the open lounge"),
)
SHELLFISH = "Devon (@devon)'s allergy is shellfish"
PEANUTS = "Sarah (@sarah)'s allergy is peanuts"


def events(tenant: str) -> list[Any]:
    out = []
    for n, (channel, sender, text) in enumerate(LINES):
        kind, people = CHANNELS[channel]
        out.append(
            validate_event(
                {
                    "schema_version": SCHEMA_VERSION,
                    "event_id": f"ev-{n}",
                    "tenant": tenant,
                    "channel": {"id": channel, "kind": kind},
                    "participants": people,
                    "messages": [
                        {
                            "id": f"m{n}",
                            "role": "user",
                            "sender_id": sender,
                            "content": text,
                            "created_at": f"2026-12-02T10:{n:02d}:00Z",
                        }
                    ],
                }
            )
        )
    return out


def ask(
    graph: GraphStore, embedder: Embedder, tenant: str, text: str, **fields: Any
) -> list[RecallItem]:
    query = RecallQuery.model_validate(
        {"tenant": tenant, "agent_id": "a-travel", "query": text, "limit": 5, **fields}
    )
    return recall(graph, query, embedder=embedder, dm_policy="never")


def of(tenant: str, key: str) -> bool:
    """Whether a node key is the tenant's (a memory key holds the agent's key, ':' escaped)."""
    return key.startswith((f"{tenant}:", f"{tenant}%3A"))


def shown(items: list[RecallItem]) -> set[str]:
    return {m for i in items for m in i.evidence} | {i.text for i in items}


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_meaning_keeps_to_the_scope(graph: GraphStore, embedder: Embedder, mode: str) -> None:
    ours, theirs = (f"sv{uuid.uuid4().hex[:12]}" for _ in range(2))
    for tenant in (ours, theirs):
        write_open(graph, events(tenant))
    embed_all(graph, embedder)
    cached = dataclasses.replace(
        graph, vectors=VectorCache(64 << 20), index_status={}, scope_sizes={}
    )
    ask(cached, embedder, ours, "warm the cache", mode=mode)
    assert cached.vectors.wait_for_loads(60)
    for reader in (graph, cached):
        # The agent's own view finds each of them: what is missing below is kept out by scope.
        everywhere = shown(ask(reader, embedder, ours, "was the train seat broken?", mode=mode))
        assert "m2" in everywhere
        assert SHELLFISH in shown(ask(reader, embedder, ours, "shellfish allergy", mode=mode))
        assert PEANUTS in shown(ask(reader, embedder, ours, "peanut allergy", mode=mode))

        in_a = shown(
            ask(reader, embedder, ours, "was the train seat broken?", mode=mode, channel_id="ch-a")
        )
        assert "m2" not in in_a and "m3" not in in_a  # ch-b's thread memory
        for text, fact in (("shellfish allergy", SHELLFISH), ("peanut allergy", PEANUTS)):
            # Sarah never heard ch-b; the DM stays in the DM.
            assert fact not in shown(
                ask(reader, embedder, ours, text, mode=mode, channel_id="ch-a")
            )
        assert SHELLFISH in shown(
            ask(reader, embedder, ours, "shellfish allergy", mode=mode, channel_id="ch-b")
        )
        # Devon, the lounge's only other member, heard it, but a public channel's readers are
        # not all known.
        assert SHELLFISH not in shown(
            ask(reader, embedder, ours, "shellfish allergy", mode=mode, channel_id="ch-pub")
        )
        # Another tenant with the same ids and words is never proposed.
        other = ask(reader, embedder, theirs, "peanut allergy", mode=mode)
        assert other and all(of(theirs, i.key) for i in other), other
        mine = ask(reader, embedder, ours, "peanut allergy", mode=mode)
        assert all(of(ours, i.key) for i in mine), mine


@dataclasses.dataclass(frozen=True)
class Unembedded:
    """The suite's embedder under another model name: no stored vector is of its model, as if
    the embed workers had not caught up with anything yet."""

    inner: Embedder

    @property
    def model(self) -> str:
        return f"{self.inner.model}+not-yet"

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner.embed(texts)


def test_recall_finds_by_keyword_before_vectors_catch_up(
    graph: GraphStore, embedder: Embedder
) -> None:
    tenant = f"sv{uuid.uuid4().hex[:12]}"
    write_open(graph, events(tenant))
    # Its messages wait for vectors now, so the embedding lag has a start.
    waiting = oldest_waiting(graph)
    assert waiting is not None and waiting <= datetime.now(UTC)
    behind = Unembedded(embedder)
    found = shown(ask(graph, behind, tenant, "shellfish allergy", mode="hybrid"))
    assert SHELLFISH in found and "m3" in found
    assert found == shown(ask(graph, behind, tenant, "shellfish allergy", mode="keyword"))
