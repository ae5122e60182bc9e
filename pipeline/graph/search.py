"""Recall by meaning and by keyword: an agent's memory searched within what it may see.

Keyword (Lucene full-text) and, when an embedder and embeddings exist, vector searches run per
kind of memory; their rankings are fused (reciprocal rank fusion), episode hits grow into
windows with their neighbouring messages, and the answer fits a budget of `limit` messages.
Everything is scoped by the agent's own edges (OBSERVED, KNOWS, SUMMARISED) and its tenant, so
another agent's or tenant's memory cannot appear.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import neo4j
from neo4j.exceptions import ClientError

from pipeline.embedder import Embedder
from pipeline.errors import ConfigurationError
from pipeline.graph.cypher import search as search_cypher
from pipeline.graph.model import (
    COMMITMENT,
    EPISODE,
    FACT,
    FULLTEXT_INDEXES,
    SUMMARY,
    VECTOR_INDEXES,
)
from pipeline.graph.store import GraphStore
from pipeline.rank import Passage, Window, fuse, windows, within_budget
from schemas.keys import channel_key, participant_key
from schemas.recall import RecallItem, RecallKind, RecallQuery

log = logging.getLogger(__name__)

DM_POLICIES: Final = ("never", "same_people")
LABELS: Final[dict[RecallKind, str]] = {
    "episode": EPISODE,
    "fact": FACT,
    "commitment": COMMITMENT,
    "summary": SUMMARY,
}
# When scores tie (RRF gives every list's top the same score), distilled memory comes first.
_KIND_ORDER: Final[dict[RecallKind, int]] = {"fact": 0, "commitment": 1, "summary": 2, "episode": 3}
# Each ranked list is fetched deeper than the budget, so fusion has something to agree on.
_MIN_FETCH: Final = 20
# The vector index spans all tenants and agents; ask it for this many times more neighbours
# than needed, since the scope filter runs after it.
_VECTOR_OVERSAMPLE: Final = 10
_MAX_VECTOR_K: Final = 1000


@dataclass(frozen=True)
class _Candidate:
    """A ranked answer before the budget: an episode window, or a finished item of another kind."""

    score: float
    tie: tuple[int, str]
    evidence: tuple[str, ...]
    window: Window | None = None
    item: RecallItem | None = None

    def shrink(self) -> _Candidate | None:
        smaller = self.window.shrink() if self.window is not None else None
        if smaller is None:
            return None
        return _Candidate(self.score, self.tie, smaller.evidence, window=smaller)


def recall(
    graph: GraphStore, query: RecallQuery, *, embedder: Embedder | None, dm_policy: str
) -> list[RecallItem]:
    """What the agent remembers that answers `query`, best first, within its budget of messages.

    Keyword-only when there is no embedder, no vector index yet, or no embeddings in scope;
    the most recent episodes when the query has no searchable words.
    """
    if dm_policy not in DM_POLICIES:
        raise ConfigurationError(
            f"dm_memory_policy must be one of {', '.join(DM_POLICIES)} (got {dm_policy!r})"
        )
    params = _scope_params(query, dm_policy)
    lucene = search_cypher.lucene_query(query.query)
    with graph.session(write=False) as session:
        online = {r["name"] for r in session.run(search_cypher.ONLINE_SEARCH_INDEXES)}
        vector = _query_vector(query, embedder, online)
        keyword = lucene is not None and (query.mode != "vector" or vector is None)
        if not keyword and vector is None:
            return _recent(session, query, params)
        rows: dict[str, tuple[RecallKind, dict[str, Any]]] = {}
        rankings: list[list[str]] = []
        fetch = max(query.limit * 2, _MIN_FETCH)
        for kind in query.kinds:
            label = LABELS[kind]
            if keyword and FULLTEXT_INDEXES[label] in online:
                found = _run(
                    session,
                    search_cypher.KEYWORD_SEARCH[label],
                    {**params, "index": FULLTEXT_INDEXES[label], "lucene": lucene, "limit": fetch},
                )
                rankings.append(_collect(kind, found, rows))
            if vector is not None and VECTOR_INDEXES[label] in online:
                found = _vector_rows(session, label, params, vector, fetch)
                rankings.append(_collect(kind, found, rows))
        scores = fuse(rankings)
        hits = sorted(
            (k for k in scores if rows[k][0] == "episode"), key=lambda k: (-scores[k], k)
        )[: query.limit]
        around = _neighbours(session, hits, params, query.neighbours)
    candidates = _episode_candidates(hits, scores, rows, around)
    candidates += [
        _Candidate(
            scores[key],
            (_KIND_ORDER[kind], key),
            tuple(row["evidence"]),
            item=_memory_item(kind, row, scores[key]),
        )
        for key, (kind, row) in rows.items()
        if kind != "episode"
    ]
    candidates.sort(key=lambda c: (-c.score, c.tie))
    chosen = within_budget(candidates, query.limit, shrink=_Candidate.shrink)
    return [_finish(c, rows) for c in chosen]


def _scope_params(query: RecallQuery, dm_policy: str) -> dict[str, Any]:
    return {
        "tenant": query.tenant,
        "agent_key": participant_key(query.tenant, query.agent_id),
        "channel_key": channel_key(query.tenant, query.channel_id) if query.channel_id else None,
        "about_key": participant_key(query.tenant, query.about) if query.about else None,
        "since": query.since,
        "until": query.until,
        "sources": list(query.sources) if query.sources else None,
        "include_stale": query.include_stale,
        "include_closed": query.include_closed,
        "dm_policy": dm_policy,
    }


def _query_vector(
    query: RecallQuery, embedder: Embedder | None, online: set[str]
) -> list[float] | None:
    """The query's embedding, when meaning can be searched at all (embedder, index, words)."""
    if query.mode == "keyword" or embedder is None or not (query.query or "").strip():
        return None
    if not any(VECTOR_INDEXES[LABELS[k]] in online for k in query.kinds):
        return None
    return embedder.embed([query.query or ""])[0]


def _run(session: neo4j.Session, statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [_native(dict(r)) for r in session.run(statement, params)]


def _vector_rows(
    session: neo4j.Session,
    label: str,
    params: dict[str, Any],
    vector: list[float],
    fetch: int,
) -> list[dict[str, Any]]:
    k = min(fetch * _VECTOR_OVERSAMPLE, _MAX_VECTOR_K)
    try:
        return _run(
            session,
            search_cypher.VECTOR_SEARCH[label],
            {**params, "index": VECTOR_INDEXES[label], "vector": vector, "k": k, "limit": fetch},
        )
    except ClientError as exc:
        # A vector index of another size (the embedder changed): keyword results still stand.
        log.warning("vector search on %s skipped: %s", VECTOR_INDEXES[label], exc.message)
        return []


def _collect(
    kind: RecallKind,
    found: list[dict[str, Any]],
    rows: dict[str, tuple[RecallKind, dict[str, Any]]],
) -> list[str]:
    for row in found:
        rows.setdefault(row["key"], (kind, row))
    return [row["key"] for row in found]


def _neighbours(
    session: neo4j.Session, hits: Sequence[str], params: dict[str, Any], window: int
) -> list[dict[str, Any]]:
    if not hits or window == 0:
        return []
    return _run(
        session,
        search_cypher.NEIGHBOURS,
        {"keys": list(hits), "agent_key": params["agent_key"], "window": window},
    )


def _passage(row: dict[str, Any]) -> Passage:
    return Passage(
        key=row["key"],
        id=row["id"],
        channel=row["channel_key"] or "",
        at=row["created_at"],
        speaker_label=row["speaker_label"],
        text=row["text"] or "",
    )


def _episode_candidates(
    hits: Sequence[str],
    scores: dict[str, float],
    rows: dict[str, tuple[RecallKind, dict[str, Any]]],
    around: list[dict[str, Any]],
) -> list[_Candidate]:
    passages = {key: _passage(rows[key][1]) for key in hits}
    neighbours: dict[str, list[str]] = {}
    for row in around:
        passages.setdefault(row["key"], _passage(row))
        rows.setdefault(row["key"], ("episode", row))
        neighbours.setdefault(row["hit_key"], []).append(row["key"])
    found = windows({k: scores[k] for k in hits}, passages, neighbours)
    return [
        _Candidate(w.score, (_KIND_ORDER["episode"], w.best.key), w.evidence, window=w)
        for w in found
    ]


def _memory_item(kind: RecallKind, row: dict[str, Any], score: float) -> RecallItem:
    return RecallItem(
        kind=kind,
        key=row["key"],
        text=row["text"] or "",
        score=score,
        evidence=list(row.get("evidence") or []),
        channel_id=row.get("channel_id"),
        speaker_label=row.get("speaker_label"),
        speaker_id=row.get("speaker_id"),
        created_at=row.get("created_at"),
        source=row.get("source"),
        status=row.get("status"),
        current=bool(row.get("current", True)),
    )


def _finish(
    candidate: _Candidate, rows: dict[str, tuple[RecallKind, dict[str, Any]]]
) -> RecallItem:
    if candidate.item is not None:
        return candidate.item
    window = candidate.window
    assert window is not None  # a candidate is a window or an item, by construction
    best = rows[window.best.key][1]
    return RecallItem(
        kind="episode",
        key=window.best.key,
        text=window.text,
        score=window.score,
        evidence=list(window.evidence),
        matched=[p.id for p in window.passages if p.key in window.hits],
        channel_id=best["channel_id"],
        speaker_label=best["speaker_label"],
        speaker_id=best["speaker_id"],
        created_at=best["created_at"],
    )


def _recent(session: neo4j.Session, query: RecallQuery, params: dict[str, Any]) -> list[RecallItem]:
    """No words to search: the agent's latest episodes in scope, newest first."""
    if "episode" not in query.kinds:
        return []
    found = _run(session, search_cypher.RECENT_EPISODES, {**params, "limit": query.limit})
    scores = fuse([[row["key"] for row in found]])
    return [
        RecallItem(
            kind="episode",
            key=row["key"],
            text=row["text"] or "",
            score=scores[row["key"]],
            evidence=[row["id"]],
            channel_id=row["channel_id"],
            speaker_label=row["speaker_label"],
            speaker_id=row["speaker_id"],
            created_at=row["created_at"],
        )
        for row in found
    ]


def _native(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.to_native() if hasattr(v, "to_native") else v for k, v in row.items()}
