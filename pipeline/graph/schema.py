"""`memsync graph init`: constraints and indexes (idempotent), and the check workers run."""

from __future__ import annotations

from typing import Any

import neo4j

from pipeline.errors import ConfigurationError
from pipeline.graph import cypher
from pipeline.graph.cypher import embed as embed_cypher
from pipeline.graph.cypher import scope as scope_cypher
from pipeline.graph.model import KEYED_LABELS
from pipeline.graph.store import GraphStore
from schemas.keys import scope_token

BACKFILL_PAGE = 2000


def init_schema(graph: GraphStore, vector_dimensions: int | None = None) -> list[str]:
    """Create every constraint and index that is missing, drop retired indexes, and backfill
    what new indexes rely on (`backfill`); returns the schema statements run.

    With `vector_dimensions` (the embedder's), the vector indexes too; None leaves them out.
    """
    statements = [*cypher.CONSTRAINTS, *cypher.INDEXES]
    if vector_dimensions is not None:
        statements += embed_cypher.vector_index_statements(vector_dimensions)
    with graph.session() as session:
        for statement in statements:
            # Schema changes cannot share a transaction with each other in Neo4j.
            session.run(statement).consume()
    backfill(graph)
    return statements


def backfill(graph: GraphStore, page: int = BACKFILL_PAGE) -> dict[str, int]:
    """Give episodes, commitments and closures written before they carried `channel_key`
    theirs, channels written before members were recorded their members, and nodes written
    before the search `scope` terms existed their terms; the count of the latter per label.

    Idempotent, and cheap once done (one count per label). A node written by an older worker
    during the backfill is caught by the next `memsync graph init`.
    """
    done: dict[str, int] = {}
    with graph.session() as session:
        # Batched transactions of its own: only an auto-commit statement may run them.
        session.run(scope_cypher.BACKFILL_CHANNEL_KEYS).consume()
        for statement in scope_cypher.BACKFILL_OBLIGATION_CHANNELS:
            session.run(statement).consume()
        session.run(scope_cypher.BACKFILL_MEMBERS).consume()
        for label, count in scope_cypher.COUNT_UNSCOPED.items():
            if not session.run(count).single(strict=True)["missing"]:
                continue
            done[label] = 0
            after = ""
            while True:
                rows = list(session.run(scope_cypher.UNSCOPED_PAGE[label], after=after, page=page))
                if not rows:
                    break
                after = rows[-1]["key"]
                updates = [
                    {
                        "key": r["key"],
                        "scope": " ".join(scope_token(*pair) for pair in r["sources"]),
                    }
                    for r in rows
                    if r["missing"]
                ]
                if updates:
                    session.execute_write(_set_scope, scope_cypher.SET_SCOPE[label], updates)
                    done[label] += len(updates)
    return done


def missing_constraints(graph: GraphStore) -> list[str]:
    """Labels whose `key` lacks a uniqueness constraint."""
    with graph.session(write=False) as session:
        present = {record["label"] for record in session.run(cypher.SHOW_KEY_CONSTRAINTS)}
    return [label for label in KEYED_LABELS if label not in present]


def require_schema(graph: GraphStore) -> None:
    """Refuse to write without the constraints that make MERGE safe under concurrency."""
    missing = missing_constraints(graph)
    if missing:
        raise ConfigurationError(
            f"uniqueness constraints missing for {', '.join(missing)}; run `memsync graph init`"
        )


def _set_scope(tx: neo4j.ManagedTransaction, statement: str, rows: list[dict[str, Any]]) -> None:
    tx.run(statement, rows=rows).consume()
