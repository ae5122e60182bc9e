"""Recall through the reader's vector cache on a real Neo4j: the same answers as Neo4j's own
cosine, a message embedded after the cache was filled found at once, another agent's memory
never proposed, and a forgotten speaker's words gone at once although their vectors were
cached (the cache proposes keys; Neo4j checks the scope on the nodes as they are now)."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from memsync.settings import Settings
from pipeline.embedder import Embedder
from pipeline.graph.cypher import vectors as vector_cypher
from pipeline.graph.forgetting import Forgetter
from pipeline.graph.search import recall
from pipeline.graph.store import GraphStore
from pipeline.graph.vectorcache import VectorCache
from pipeline.summarize import ExtractiveSummarizer
from pipeline.validate import validate_event
from schemas.event import SCHEMA_VERSION
from schemas.keys import participant_key
from schemas.recall import RecallItem, RecallQuery
from tests.integration.writing import embed_all, write_open

pytestmark = pytest.mark.integration

PEOPLE = {
    "u-ana": {"id": "u-ana", "kind": "human", "display_name": "Ana", "handle": "ana"},
    "u-raj": {"id": "u-raj", "kind": "human", "display_name": "Raj", "handle": "raj"},
    "u-eve": {"id": "u-eve", "kind": "human", "display_name": "Eve", "handle": "eve"},
}
OURS = {"id": "a-ours", "kind": "agent", "display_name": "Ours", "handle": "ours"}
THEIRS = {"id": "a-theirs", "kind": "agent", "display_name": "Theirs", "handle": "theirs"}
TRIP = (
    ("u-ana", "are we still on for the hike on Saturday?"),
    ("u-raj", "yes, meet at the trailhead at eight"),
    ("u-ana", "I'll bring sandwiches and water for everyone"),
    ("u-raj", "great, my knee is better so I can do the long loop"),
)

CAT = "I have a pet cat, Priya minds it"
PET = "who looks after the pet?"


def _turn(tenant: str, channel: str, n: int, sender: str, text: str, agent: dict[str, Any]) -> Any:
    return validate_event(
        {
            "schema_version": SCHEMA_VERSION,
            "event_id": f"ev-{channel}-{n}",
            "tenant": tenant,
            "channel": {"id": channel, "kind": "group", "title": channel},
            "participants": [*PEOPLE.values(), agent],
            "messages": [
                {
                    "id": f"{channel}-m{n}",
                    "role": "user",
                    "sender_id": sender,
                    "content": text,
                    "created_at": f"2026-12-02T10:{n:02d}:00Z",
                }
            ],
        }
    )


def _ask(
    graph: GraphStore, embedder: Embedder, tenant: str, text: str, limit: int = 5
) -> list[RecallItem]:
    query = RecallQuery(
        tenant=tenant,
        agent_id="a-ours",
        query=text,
        mode="vector",
        limit=limit,
        include_neighbours=limit > 1,
    )
    return recall(graph, query, embedder=embedder, dm_policy="never")


def _evidence(items: list[RecallItem]) -> set[str]:
    return {message for item in items for message in item.evidence}


def test_cached_recall_answers_as_neo4j_does_and_keeps_up(
    graph: GraphStore, embedder: Embedder, settings: Settings
) -> None:
    tenant = f"vc{uuid.uuid4().hex[:12]}"
    write_open(graph, [_turn(tenant, "ch-hike", n, *line, OURS) for n, line in enumerate(TRIP)])
    # The same words in a channel only the other agent heard.
    write_open(graph, [_turn(tenant, "ch-other", 0, "u-eve", CAT, THEIRS)])
    embed_all(graph, embedder)
    cached = dataclasses.replace(
        graph, vectors=VectorCache(64 << 20), index_status={}, scope_sizes={}
    )
    questions = ("what food is Ana bringing?", "is Raj injured?", "when do we meet?")
    # The first recall answers from Neo4j while the agent's vectors load in the background.
    first = _ask(cached, embedder, tenant, questions[0])
    assert [i.key for i in first] == [i.key for i in _ask(graph, embedder, tenant, questions[0])]
    assert cached.vectors.wait_for_loads(60)
    assert cached.vectors.nbytes > 0
    # The margin check's count agrees with the whole read it stands in for.
    scope = {"tenant": tenant, "agent_key": participant_key(tenant, "a-ours"), "from_ms": 0}
    with graph.session(write=False) as session:
        for group, (whole, _) in vector_cypher.READS.items():
            (counted,) = list(session.run(vector_cypher.COUNTS[group], scope))
            read = len(list(session.run(whole, scope)))
            assert counted["stamped"] == read, group
            assert read > 0 or group == "memory"  # every message here is embedded
            # Nothing stamped since: still one row, with Neo4j's clock.
            (none,) = list(session.run(vector_cypher.COUNTS[group], {**scope, "from_ms": 2**62}))
            assert none["stamped"] == 0 and none["now"] > 0
    for text in questions:
        plain, fast = _ask(graph, embedder, tenant, text), _ask(cached, embedder, tenant, text)
        assert [i.key for i in fast] == [i.key for i in plain], text
        # The cache holds vectors in int8: a cosine moves by about 0.002 at most, which the
        # fused scores carry, normalised, a little further.
        assert [i.score for i in fast] == pytest.approx([i.score for i in plain], rel=1e-2)
        # The same windows around them too, not only the same leads.
        assert [(i.evidence, i.text) for i in fast] == [(i.evidence, i.text) for i in plain]

    # Said and embedded after the cache was filled: the best match by meaning at once (the
    # cached reader's vector hits are only ever what its cache proposed).
    write_open(graph, [_turn(tenant, "ch-hike", 9, "u-eve", CAT, OURS)])
    embed_all(graph, embedder)
    best = _ask(cached, embedder, tenant, PET, limit=1)
    assert [i.evidence for i in best] == [["ch-hike-m9"]]
    assert "ch-other-m0" not in _evidence(_ask(cached, embedder, tenant, PET))  # not ours

    # Forgetting Eve deletes her message; its cached vector must not bring it back.
    Forgetter(graph, ExtractiveSummarizer(settings.summary_max_tokens)).participant(tenant, "u-eve")
    after = _ask(cached, embedder, tenant, PET, limit=1)
    assert after and "ch-hike-m9" not in _evidence(after)
