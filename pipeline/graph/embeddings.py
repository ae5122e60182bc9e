"""The embedding backlog in the graph: what waits for a vector, storing vectors, checking indexes.

Vectors are computed by the caller between `pending` and `store`, outside any transaction: a
transaction function may be run again by the driver and must never wait on a model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import neo4j

from pipeline.embedder import Embedder, labelled
from pipeline.errors import ConfigurationError
from pipeline.graph.cypher import embed as embed_cypher
from pipeline.graph.model import VECTOR_INDEXES
from pipeline.graph.store import GraphStore, instant

EMBEDDED_LABELS = embed_cypher.EMBEDDED_LABELS


@dataclass(frozen=True)
class PendingNode:
    """A node waiting for a vector: its key, the stored text and speaker label as read (the
    store compares both, so a node changed meanwhile is not marked done), and what to embed."""

    key: str
    text: str
    speaker_label: str | None

    @property
    def embed_text(self) -> str:
        return labelled(self.speaker_label, self.text)


def pending(graph: GraphStore, label: str, limit: int) -> list[PendingNode]:
    """Up to `limit` nodes of `label` marked embed_pending."""
    with graph.session(write=False) as session:
        records = list(session.run(embed_cypher.PENDING[label], limit=limit))
    return [
        PendingNode(key=r["key"], text=r["text"] or "", speaker_label=r["speaker_label"])
        for r in records
    ]


def store(
    graph: GraphStore,
    label: str,
    nodes: Sequence[PendingNode],
    vectors: Sequence[Sequence[float]],
    model: str,
) -> int:
    """Write one batch of vectors in one transaction; returns how many nodes were marked done."""
    if len(nodes) != len(vectors):
        raise ValueError(f"{len(nodes)} nodes but {len(vectors)} vectors")
    if not nodes:
        return 0
    rows = [
        {
            "key": n.key,
            "text": n.text,
            "speaker_label": n.speaker_label,
            "embedding": [float(x) for x in v],
        }
        for n, v in zip(nodes, vectors, strict=True)
    ]
    statement = embed_cypher.STORE[label]

    def write(tx: neo4j.ManagedTransaction) -> int:
        return int(tx.run(statement, rows=rows, model=model).single(strict=True)["stored"])

    with graph.session() as session:
        return session.execute_write(write)


Claim = Callable[[Sequence[str], int], Sequence[str]]


T = TypeVar("T")


def claimed(
    read: Callable[[int], list[T]],
    key: Callable[[T], str],
    limit: int,
    claim: Claim | None,
    page: int,
) -> list[T]:
    """Up to `limit` of the backlog as `read(most)` returns it; with `claim`, a page of `page`
    is read and only what this drain claimed of it is kept (other drains take the rest)."""
    if claim is None:
        return read(limit)
    found = read(max(page, limit))
    taken = set(claim([key(n) for n in found], limit)) if found else set()
    return [n for n in found if key(n) in taken]


def embed_pending(
    graph: GraphStore,
    embedder: Embedder,
    label: str,
    limit: int,
    claim: Claim | None = None,
    *,
    page: int = 0,
) -> tuple[int, int]:
    """Embed and store one batch of `label`'s backlog; returns (nodes taken, nodes stored).

    With `claim` (keys, most -> the keys this caller may take, in order), nodes another drain
    holds are left to it: `page` nodes are read (enough for every drain's batch and this one's)
    and up to `limit` of them claimed."""
    nodes = claimed(lambda most: pending(graph, label, most), lambda n: n.key, limit, claim, page)
    if not nodes:
        return 0, 0
    vectors = embedder.embed([n.embed_text for n in nodes])
    return len(nodes), store(graph, label, nodes, vectors, embedder.model)


def backlog(graph: GraphStore) -> dict[str, int]:
    """How many nodes of each embedded label wait for a vector."""
    counts: dict[str, int] = {}
    with graph.session(write=False) as session:
        for label in EMBEDDED_LABELS:
            record = session.run(embed_cypher.BACKLOG[label]).single(strict=True)
            counts[label] = int(record["pending"])
    return counts


def oldest_waiting(graph: GraphStore) -> datetime | None:
    """When the episode waiting longest for a vector was written: how far embedding lags."""
    with graph.session(write=False) as session:
        record = session.run(embed_cypher.OLDEST_WAITING).single(strict=True)
    oldest: int | None = record["oldest"]
    return instant(oldest)


def pending_for_episodes(graph: GraphStore, episode_keys: Sequence[str]) -> int:
    """How many of these episodes, and of the facts and commitments citing them, wait."""
    if not episode_keys:
        return 0
    with graph.session(write=False) as session:
        record = session.run(
            embed_cypher.PENDING_FOR_EPISODES, keys=sorted(set(episode_keys))
        ).single(strict=True)
    return int(record["pending"])


def vector_index_statements(dimensions: int) -> list[str]:
    """The statements `memsync graph init` runs for an embedder of this many dimensions."""
    return embed_cypher.vector_index_statements(dimensions)


def vector_index_dimensions(graph: GraphStore) -> dict[str, Any]:
    """Each existing vector index's name -> its configured dimension count."""
    with graph.session(write=False) as session:
        return {r["name"]: r["dimensions"] for r in session.run(embed_cypher.SHOW_VECTOR_INDEXES)}


def require_vector_indexes(graph: GraphStore, dimensions: int) -> None:
    """Refuse to embed into missing indexes or ones built for another dimension count (their
    vectors could never be compared with ours)."""
    found = vector_index_dimensions(graph)
    missing = [name for name in VECTOR_INDEXES.values() if name not in found]
    if missing:
        raise ConfigurationError(
            f"vector indexes missing: {', '.join(missing)}; run `memsync graph init`"
        )
    wrong = {
        name: found[name]
        for name in VECTOR_INDEXES.values()
        if found[name] is None or int(found[name]) != dimensions
    }
    if wrong:
        listed = ", ".join(f"{name} has {dims}" for name, dims in sorted(wrong.items()))
        raise ConfigurationError(
            f"vector indexes built for other dimensions than the embedder's {dimensions} "
            f"({listed}); run `memsync graph reembed` to move to this embedder, or set "
            "MEMSYNC_EMBEDDER to the model they were built with"
        )


@dataclass(frozen=True)
class Reembedding:
    """What `reembed` changed: indexes rebuilt for the new dimensions, nodes queued per label."""

    dropped: tuple[str, ...]
    requeued: dict[str, int]


def reembed(graph: GraphStore, embedder: Embedder, batch: int = 10_000) -> Reembedding:
    """Move the graph to another embedding model: vector indexes of other dimensions are dropped
    and made again at the embedder's, and every node embedded by another model loses its vector
    and waits for the embed workers (keyword recall still finds it meanwhile). Idempotent."""
    found = vector_index_dimensions(graph)
    dropped = tuple(
        sorted(
            name
            for name in VECTOR_INDEXES.values()
            if name in found and (found[name] is None or int(found[name]) != embedder.dimensions)
        )
    )
    with graph.session() as session:
        # Schema changes cannot share a transaction with each other in Neo4j.
        for name in dropped:
            session.run(embed_cypher.drop_vector_index(name)).consume()
        for statement in vector_index_statements(embedder.dimensions):
            session.run(statement).consume()
    model = embedder.model
    requeued: dict[str, int] = {}
    for label, statement in embed_cypher.REQUEUE.items():

        def write(tx: neo4j.ManagedTransaction, statement: str = statement) -> int:
            record = tx.run(statement, model=model, limit=batch).single(strict=True)
            return int(record["requeued"])

        total = 0
        with graph.session() as session:
            while moved := session.execute_write(write):
                total += moved
        requeued[label] = total
    return Reembedding(dropped, requeued)
