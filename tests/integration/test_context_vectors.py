"""Episode vectors in conversation on a real Neo4j: each message's vector is its own plus the
pairs it forms with its neighbours, a later message extends the earlier one exactly once, a
neighbour an observer never heard lends nothing, and forgetting a speaker (or the retention
sweep deleting a message) takes their words out of the vectors beside theirs. Memory is written
in-process through the real stages and writer and embedded with the default embedder (the
session's embed worker may embed some first: it computes the same sums)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from memsync.settings import Settings
from pipeline.embedder import Embedder
from pipeline.graph.contextvectors import pair_text
from pipeline.graph.cypher import retention as retention_cypher
from pipeline.graph.embeddings import PendingNode
from pipeline.graph.forgetting import Forgetter
from pipeline.graph.store import GraphStore
from pipeline.summarize import ExtractiveSummarizer
from pipeline.validate import validate_event
from schemas.event import SCHEMA_VERSION
from schemas.keys import episode_key
from tests.integration.writing import embed_all, write_open

pytestmark = pytest.mark.integration

CHANNEL = {"id": "ch-trip", "kind": "group", "title": "Trip"}
SAM = {"id": "u-sam", "kind": "human", "display_name": "Sam", "handle": "sam"}
DEVON = {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"}
EARLY = {"id": "a-early", "kind": "agent", "display_name": "Early", "handle": "early"}
LATE = {"id": "a-late", "kind": "agent", "display_name": "Late", "handle": "late"}
LINES = (
    (SAM, "why are you packing a suitcase?"),
    (DEVON, "Because I'm flying to London on Friday"),
    (SAM, "who is looking after the cat then?"),
)


def _turn(tenant: str, n: int, agents: Sequence[dict[str, Any]]) -> dict[str, Any]:
    speaker, text = LINES[n]
    return {
        "schema_version": SCHEMA_VERSION,
        "event_id": f"ev-{n}",
        "tenant": tenant,
        "channel": CHANNEL,
        "participants": [SAM, DEVON, *agents],
        "messages": [
            {
                "id": f"m-{n}",
                "role": "user",
                "sender_id": speaker["id"],
                "content": text,
                "created_at": f"2026-12-02T10:00:0{n}Z",
            }
        ],
    }


def _write(graph: GraphStore, turns: list[dict[str, Any]]) -> None:
    write_open(graph, [validate_event(t) for t in turns])


def _stored(graph: GraphStore, tenant: str, n: int) -> dict[str, Any]:
    with graph.session(write=False) as session:
        record = session.run(
            "MATCH (e:Episode {key: $key}) RETURN e.embedding AS vector, "
            "e.embedded_next AS next, e.embed_pending AS pending",
            key=episode_key(tenant, CHANNEL["id"], f"m-{n}"),
        ).single(strict=True)
    return dict(record)


def _line(n: int) -> PendingNode:
    speaker, text = LINES[n]
    label = f"{speaker['display_name']} (@{speaker['handle']})"
    return PendingNode(key=f"m-{n}", text=text, speaker_label=label)


def _text(n: int) -> str:
    return _line(n).embed_text


def _pair(first: int, second: int) -> str:
    return pair_text(_line(first), _line(second))


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def _expected(embedder: Embedder, texts: list[str]) -> list[float]:
    return [sum(column) for column in zip(*embedder.embed(texts), strict=True)]


def test_vectors_hold_their_neighbours_and_a_late_joiner_gets_none_it_missed(
    graph: GraphStore, embedder: Embedder, settings: Settings
) -> None:
    tenant = f"cv{uuid.uuid4().hex[:12]}"
    _write(graph, [_turn(tenant, 0, [EARLY]), _turn(tenant, 1, [EARLY])])
    embed_all(graph, embedder)
    first, second = _stored(graph, tenant, 0), _stored(graph, tenant, 1)
    pair01 = _pair(0, 1)
    assert _cosine(first["vector"], _expected(embedder, [_text(0), pair01])) > 0.9999
    assert _cosine(second["vector"], _expected(embedder, [_text(1), pair01])) > 0.9999
    assert first["next"] == episode_key(tenant, CHANNEL["id"], "m-1")
    assert second["next"] is None

    # The answer reads closer to its question than it does alone.
    question = embedder.embed(["why is Devon packing?"])[0]
    alone = embedder.embed([_text(1)])[0]
    assert _cosine(question, second["vector"]) > _cosine(question, alone)

    # A third message, heard by a late joiner too: the second message's vector takes the new
    # pair (everyone who may find it heard the third), the third's takes nothing from the
    # second (the late joiner never heard it).
    _write(graph, [_turn(tenant, 2, [EARLY, LATE])])
    embed_all(graph, embedder)
    second, third = _stored(graph, tenant, 1), _stored(graph, tenant, 2)
    pair12 = _pair(1, 2)
    assert _cosine(second["vector"], _expected(embedder, [_text(1), pair01, pair12])) > 0.9999
    assert second["next"] == episode_key(tenant, CHANNEL["id"], "m-2")
    assert _cosine(third["vector"], embedder.embed([_text(2)])[0]) > 0.9999

    # Once only: embedding again (or the session's embed worker) changes nothing.
    embed_all(graph, embedder)
    assert _stored(graph, tenant, 1)["vector"] == second["vector"]

    # Forgetting Devon takes Devon's words out of the vectors beside theirs: the first
    # message is embedded again with the third as its next (the early agent heard both).
    Forgetter(graph, ExtractiveSummarizer(settings.summary_max_tokens)).participant(
        tenant, "u-devon"
    )
    requeued = _stored(graph, tenant, 0)
    assert requeued["pending"] is True or requeued["next"] == third_key(tenant)
    embed_all(graph, embedder)
    first = _stored(graph, tenant, 0)
    pair02 = _pair(0, 2)
    assert _cosine(first["vector"], _expected(embedder, [_text(0), pair02])) > 0.9999
    assert first["next"] == third_key(tenant)
    assert _cosine(_stored(graph, tenant, 2)["vector"], embedder.embed([_text(2)])[0]) > 0.9999


def third_key(tenant: str) -> str:
    return episode_key(tenant, CHANNEL["id"], "m-2")


def test_an_episode_that_gains_an_observer_is_embedded_again_without_what_it_missed(
    graph: GraphStore, embedder: Embedder
) -> None:
    tenant = f"cv{uuid.uuid4().hex[:12]}"
    _write(graph, [_turn(tenant, 0, [EARLY]), _turn(tenant, 1, [EARLY])])
    embed_all(graph, embedder)
    pair01 = _pair(0, 1)
    both = _expected(embedder, [_text(1), pair01])
    assert _cosine(_stored(graph, tenant, 1)["vector"], both) > 0.9999
    first = _stored(graph, tenant, 0)["vector"]

    # The second turn synced again for a late joiner (who never heard the first message).
    _write(graph, [_turn(tenant, 1, [EARLY, LATE])])
    waiting = _stored(graph, tenant, 1)
    if waiting["pending"]:  # (the session's embed worker may have embedded it already)
        assert waiting["vector"] is None  # keyword only until embedded again
    embed_all(graph, embedder)
    second = _stored(graph, tenant, 1)
    assert _cosine(second["vector"], embedder.embed([_text(1)])[0]) > 0.9999
    # The first message's vector may keep the pair: its only observer heard both.
    assert _stored(graph, tenant, 0)["vector"] == first


def test_the_retention_sweep_re_embeds_the_messages_beside_what_it_deletes(
    graph: GraphStore,
) -> None:
    tenant = f"cv{uuid.uuid4().hex[:12]}"
    channel = f"{tenant}:channel:old"
    with graph.session() as session:
        # Three old messages nobody observes any more (droppable), the middle one to go.
        session.run(
            "UNWIND range(0, 2) AS i "
            "CREATE (:Episode {key: $channel + ':' + i, tenant: $tenant, channel_key: $channel, "
            "content: 'line ' + i, created_at: datetime('2020-01-01T00:00:0' + i + 'Z'), "
            "embedded_with: 'm', embedding: [1.0, 0.0], embedded_next: 'x'})",
            channel=channel,
            tenant=tenant,
        ).consume()
        deleted = session.run(
            retention_cypher.DELETE_EPISODES, keys=[f"{channel}:1"], cutoff=datetime.now(UTC)
        ).single(strict=True)["deleted"]
        left = {
            r["key"]: (r["pending"], r["vector"], r["next"])
            for r in session.run(
                "MATCH (e:Episode {channel_key: $channel}) RETURN e.key AS key, "
                "e.embed_pending AS pending, e.embedding AS vector, e.embedded_next AS next",
                channel=channel,
            )
        }
    assert deleted == 1
    assert left == {f"{channel}:0": (True, None, None), f"{channel}:2": (True, None, None)}
