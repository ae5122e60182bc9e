"""`memsync graph init`: constraints and indexes (idempotent), and the check workers run."""

from __future__ import annotations

from pipeline.errors import ConfigurationError
from pipeline.graph import cypher
from pipeline.graph.cypher import embed as embed_cypher
from pipeline.graph.model import KEYED_LABELS
from pipeline.graph.store import GraphStore


def init_schema(graph: GraphStore, vector_dimensions: int | None = None) -> list[str]:
    """Create every constraint and index that is missing; returns the statements run.

    With `vector_dimensions` (the embedder's), the vector indexes too; None leaves them out.
    """
    statements = [*cypher.CONSTRAINTS, *cypher.INDEXES]
    if vector_dimensions is not None:
        statements += embed_cypher.vector_index_statements(vector_dimensions)
    with graph.session() as session:
        for statement in statements:
            # Schema changes cannot share a transaction with each other in Neo4j.
            session.run(statement).consume()
    return statements


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
