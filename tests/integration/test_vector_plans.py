"""Vector search plans on a real Neo4j: recall held to a channel of a large agent takes the
channel's best by cosine before checking what the agent observed, and falls back to scanning
the agent's own when too few of those pass, so a late joiner still finds what it saw, and
nothing it did not see ever appears. Memory is written in-process through the real stages and
writer, then embedded with the default embedder."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.embedder import Embedder, WordLlamaEmbedder
from pipeline.extract import RulesExtractor
from pipeline.graph import meaning
from pipeline.graph.embeddings import EMBEDDED_LABELS, embed_pending
from pipeline.graph.search import recall
from pipeline.graph.store import GraphStore
from pipeline.graph.writer import write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.event import SCHEMA_VERSION
from schemas.recall import RecallQuery
from tests.integration.writing import searchable

pytestmark = pytest.mark.integration

CHANNEL = {"id": "ch-hotel", "kind": "group", "title": "Hotel"}
DEVON = {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"}
EARLY = {"id": "a-early", "kind": "agent", "display_name": "Early", "handle": "early"}
LATE = {"id": "a-late", "kind": "agent", "display_name": "Late", "handle": "late"}
# More than the first pass reads (depth 30 x 2), all seen by the early agent only.
BEFORE = 80
AFTER = ("The weather is sunny today", "We had pancakes for breakfast", "Trains run late")


def turn(tenant: str, n: int, text: str, agents: list[dict[str, Any]]) -> dict[str, Any]:
    minute, second = divmod(n, 60)
    return {
        "schema_version": SCHEMA_VERSION,
        "event_id": f"ev-{n}",
        "tenant": tenant,
        "channel": CHANNEL,
        "participants": [DEVON, *agents],
        "messages": [
            {
                "id": f"m-{n}",
                "role": "user",
                "sender_id": "u-devon",
                "content": text,
                "created_at": f"2026-11-29T10:{minute:02d}:{second:02d}Z",
            }
        ],
    }


@pytest.fixture(scope="module")
def tenant(graph: GraphStore, embedder: Embedder) -> Iterator[str]:
    name = f"v{uuid.uuid4().hex[:12]}"
    raw = [
        turn(name, n, f"Please forward the hotel invoice number {n} to accounts", [EARLY])
        for n in range(BEFORE)
    ]
    raw += [turn(name, BEFORE + i, text, [EARLY, LATE]) for i, text in enumerate(AFTER)]
    jobs = ingest_turns([validate_event(r) for r in raw], {}, DirectoryTrustPolicy("open", {})).jobs
    for start in range(0, len(jobs), 20):
        batch = jobs[start : start + 20]
        write_sync_jobs(graph, batch, memorize(batch, RulesExtractor(), BUILTIN_LENSES))
    for label in EMBEDDED_LABELS:
        while embed_pending(graph, embedder, label, 256)[1]:
            pass
    searchable(graph)
    yield name


def seen(graph: GraphStore, embedder: Embedder, tenant: str, agent: str) -> set[str]:
    query = RecallQuery(
        tenant=tenant,
        agent_id=agent,
        channel_id=CHANNEL["id"],
        query="hotel invoice",
        mode="vector",
        include_neighbours=False,
    )
    items = recall(graph, query, embedder=embedder, dm_policy="never")
    return {m for item in items for m in item.evidence}


def test_a_late_joiner_of_a_large_agents_channel_finds_what_it_saw(
    graph: GraphStore, embedder: Embedder, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both agents count as too large to scan whole, so the channel plans are the ones used.
    monkeypatch.setattr(meaning, "EXACT_VECTOR_MAX", 2)
    graph.scope_sizes.clear()
    late = seen(graph, embedder, tenant, LATE["id"])
    # The channel's 60 best by cosine are all hotel messages the late agent never saw: only
    # the fallback over its own episodes finds the three it did.
    assert late == {f"m-{BEFORE + i}" for i in range(len(AFTER))}
    early = seen(graph, embedder, tenant, EARLY["id"])
    assert len(early) == 10 and all(int(m.split("-")[1]) < BEFORE for m in early)


def test_an_embedder_of_another_size_leaves_keyword_recall_standing(
    graph: GraphStore, embedder: Embedder, tenant: str
) -> None:
    """After MEMSYNC_EMBEDDER changed and before `memsync graph reembed`: the query vector
    has another size than the stored ones, on the exact and on the index plan alike."""
    other = WordLlamaEmbedder()
    assert other.dimensions != embedder.dimensions
    for exact_max in (meaning.EXACT_VECTOR_MAX, 2):
        graph.scope_sizes.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(meaning, "EXACT_VECTOR_MAX", exact_max)
            ask = RecallQuery(
                tenant=tenant, agent_id=EARLY["id"], query="hotel invoice", mode="hybrid"
            )
            hybrid = recall(graph, ask, embedder=other, dm_policy="never")
            keyword = recall(
                graph, ask.model_copy(update={"mode": "keyword"}), embedder=other, dm_policy="never"
            )
        assert hybrid and [i.key for i in hybrid] == [i.key for i in keyword]
