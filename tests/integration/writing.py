"""Memory written and embedded in-process for read-side tests: the real stages, rules
extractor and writer (trust open), then every pending node embedded by the real batch code."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.embedder import Embedder
from pipeline.extract import RulesExtractor
from pipeline.graph.contextvectors import embed_batch
from pipeline.graph.cypher.bulkload import AWAIT_INDEXES
from pipeline.graph.embeddings import EMBEDDED_LABELS
from pipeline.graph.store import GraphStore
from pipeline.graph.writer import write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import DirectoryTrustPolicy
from schemas.event import TurnEvent


def write_open(graph: GraphStore, events: Sequence[TurnEvent]) -> None:
    jobs = ingest_turns(events, {}, DirectoryTrustPolicy("open", {})).jobs
    write_sync_jobs(graph, jobs, memorize(jobs, RulesExtractor(), BUILTIN_LENSES))


def embed_all(graph: GraphStore, embedder: Embedder) -> None:
    for label in EMBEDDED_LABELS:
        while embed_batch(graph, embedder, label, 256)[1]:
            pass


def searchable(graph: GraphStore, seconds: int = 120) -> None:
    """Wait until Neo4j's indexes hold what was written: its full-text and vector indexes take
    a committed write in after the commit, so a search right after may not see it yet."""
    with graph.session() as session:
        session.run(AWAIT_INDEXES, seconds=seconds).consume()
