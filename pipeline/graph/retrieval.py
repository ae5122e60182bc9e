"""What recall's two retrievers share: one recall as they see it, the kinds of memory and their
labels, how deep each kind is read, and several labels' searches run as one statement."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import neo4j

from pipeline.context import quotes
from pipeline.graph.cypher import search as search_cypher
from pipeline.graph.model import (
    COMMITMENT,
    EPISODE,
    FACT,
    SEGMENT,
    SUMMARY,
)
from pipeline.graph.store import GraphStore, instant
from schemas.recall import Change, RecallKind, RecallQuery

# Each node's kind and its row as read, by key.
Rows = dict[str, tuple[RecallKind, dict[str, Any]]]

LABELS: Final[dict[RecallKind, str]] = {
    "episode": EPISODE,
    "fact": FACT,
    "commitment": COMMITMENT,
    "summary": SUMMARY,
}
KINDS: Final[dict[str, RecallKind]] = {label: kind for kind, label in LABELS.items()}
FILTERED_OVERSAMPLE: Final = 4


@dataclass(frozen=True)
class Ask:
    """One recall as both retrievers see it."""

    graph: GraphStore
    query: RecallQuery
    params: dict[str, Any]
    fetch: int
    online: set[str]
    # The embedder's vector size (None without one): the vector cache is sized by it.
    dimensions: int | None = None


def kind_depth(kind: RecallKind, fetch: int, query: RecallQuery) -> int:
    """How many candidates of a kind each retriever returns: messages `fetch` (the context
    scores need the weaker hits around a strong one), distilled items only as many as the
    budget could ever take."""
    return fetch if kind == "episode" else min(fetch, query.limit)


def run_combined(
    session: neo4j.Session,
    ask: Ask,
    parts: list[tuple[str, str]],
    values: dict[str, Any],
    rows: Rows,
    *,
    segments: dict[str, tuple[float, list[str]]] | None = None,
    content: Rows | None = None,
) -> dict[str, float]:
    """Run the parts as one statement; each row's score by key, its row kept in `rows` (a
    segment's score and covered episode keys go to `segments` instead, an episode found by its
    content alone to `content`)."""
    if not parts:
        return {}
    statement = search_cypher.combined(tuple(parts))
    found: dict[str, float] = {}
    for record in session.run(statement, {**ask.params, **values}):
        label: str = record["label"]
        if label == SEGMENT:
            if segments is not None:
                for segment in record["rows"]:
                    segments[segment["key"]] = (float(segment["score"]), list(segment["covers"]))
            continue
        if label == search_cypher.SAID_PART:
            if content is not None:
                content.update((raw["key"], ("episode", search_row(raw))) for raw in record["rows"])
            continue
        kind = KINDS[label]
        for raw in record["rows"]:
            row = search_row(raw)
            rows.setdefault(row["key"], (kind, row))
            found[row["key"]] = float(row["score"])
    return found


def oversample(label: str, query: RecallQuery) -> int:
    """How many times deeper than needed Lucene is read for `label`: the graph filter drops
    superseded, expired, closed and out-of-audience facts and commitments, and anything outside
    a time window, none of which the scope terms know."""
    if label in (FACT, COMMITMENT) or query.since is not None or query.until is not None:
        return FILTERED_OVERSAMPLE
    return 1


def asked_line(asked: list[dict[str, Any]] | None) -> str | None:
    """The line of the message a commitment answers, from its `asked` column (at most one row:
    sought only for a commitment whose text points back)."""
    if not asked:
        return None
    row = asked[0]
    return f"{row['label']}: {row['text']}" if row["label"] else str(row["text"])


def quoted_changes(row: dict[str, Any]) -> list[Change]:
    """A commitment's `changed` column (cypher/search.py `replaced_values`), kept where its text
    names the old value as whole words."""
    return [
        Change(was=c["was"], now=c["now"], evidence=list(c["evidence"]), said_in=c["said_in"])
        for c in row.get("changed") or []
        if quotes(row.get("text") or "", c["value"])
    ]


def search_row(row: dict[str, Any]) -> dict[str, Any]:
    """A search row as read, its instant (sent as microseconds: cypher/instant.py) a datetime."""
    row["created_at"] = instant(row.get("created_at"))
    return row
