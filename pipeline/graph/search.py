"""Recall by meaning and by keyword: an agent's memory searched within what it may see.

Each retriever (Lucene full-text; vector, when an embedder and embeddings exist) searches every
kind of memory; its lists are merged by its own scores, normalised and added with a weight per
retriever (pipeline/rank.py says why). Episode hits then score with their neighbouring
messages, the best messages and distilled items fill a budget of `limit` messages, and chosen
messages that follow each other are shown as one window. Everything is scoped by the agent's
own edges (OBSERVED, KNOWS, SUMMARISED) and its tenant, so another agent's or tenant's memory
cannot appear.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

import neo4j

from pipeline.embedder import Embedder
from pipeline.english.reference import POINTS_BACK_MATCH
from pipeline.errors import ConfigurationError
from pipeline.graph.cypher import search as search_cypher
from pipeline.graph.cypher.search import per_label
from pipeline.graph.meaning import VECTOR_GROUPS, vector_search
from pipeline.graph.model import (
    EPISODE,
    FULLTEXT_INDEXES,
    SEGMENT,
    SEGMENT_SEARCH,
    SUMMARY,
    VECTOR_INDEXES,
)
from pipeline.graph.retrieval import (
    LABELS,
    Ask,
    Rows,
    asked_line,
    kind_depth,
    oversample,
    quoted_changes,
    run_combined,
    search_row,
)
from pipeline.graph.store import GraphStore
from pipeline.rank import (
    Passage,
    Unit,
    combine,
    label_share,
    normalise,
    runs,
    segment_prior,
    select,
)
from pipeline.scores import score_messages
from pipeline.windows import Window, follow_revisions, group
from schemas.keys import channel_key, participant_key, scope_token
from schemas.recall import MAX_LIMIT, Change, RecallItem, RecallKind, RecallQuery

DM_POLICIES: Final = ("never", "same_people")
# How far each retriever is trusted, as the weight of its normalised scores; agreeing, they add
# up. Equal: with the default transformer neither is the weaker signal everywhere (keyword
# leads on FriendsQA, vectors on the blind long conversations, where a question's words often
# differ from the answer's). Half weight for vectors dated from the static embedder; equal was
# neutral on FriendsQA and better on the long set's dev half (docs/benchmarks.md).
KEYWORD_WEIGHT: Final = 1.0
VECTOR_WEIGHT: Final = 1.0
# Each retriever's list is fetched this many times deeper than the budget (at least
# _MIN_FETCH): the context scores need the weaker hits around a strong one too.
_FETCH_FACTOR: Final = 3
_MIN_FETCH: Final = 30
# How much deeper than the hits the content-only keyword search reads (label_share).
_SAID_DEPTH: Final = 2
INDEX_STATUS_SECONDS: Final = 10.0


def recall(
    graph: GraphStore, query: RecallQuery, *, embedder: Embedder | None, dm_policy: str
) -> list[RecallItem]:
    """What the agent remembers that answers `query`, best first, within its budget of messages.

    Keyword-only when there is no embedder, no vector index yet, or no embeddings in scope;
    the most recent episodes when the query names nothing to look for (no word beyond question
    and stop words).
    """
    if dm_policy not in DM_POLICIES:
        raise ConfigurationError(
            f"dm_memory_policy must be one of {', '.join(DM_POLICIES)} (got {dm_policy!r})"
        )
    params = _scope_params(query, dm_policy)
    lucene = search_cypher.lucene_query(query.query)
    # One session (one pooled connection) for everything this thread asks, and one for the
    # vector search's thread: taking a connection from the pool checks it first, which cost
    # more than some statements did.
    with graph.session(write=False) as session:
        online = _online_indexes(graph, session)
        if lucene is None:
            return _recent(session, query, params)
        # Excluded messages (the caller's recent window) match best of all, so each retriever
        # reads that many more candidates, up to MAX_LIMIT more.
        fetch = max(query.limit * _FETCH_FACTOR, _MIN_FETCH) + min(
            len(query.exclude_ids), MAX_LIMIT
        )
        dimensions = embedder.dimensions if embedder else None
        ask = Ask(graph, query, params, fetch, online, dimensions)
        return _search(ask, session, lucene, embedder)


def _search(
    ask: Ask, session: neo4j.Session, lucene: str, embedder: Embedder | None
) -> list[RecallItem]:
    """Both retrievers (the vector one in its own thread), fused, then the hits' neighbours."""
    graph, query, params, fetch = ask.graph, ask.query, ask.params, ask.fetch
    by_meaning = embedder is not None and _can_embed(query, ask.online)
    keyword = query.mode != "vector" or not by_meaning
    keyword_rows: Rows = {}
    vector_rows: Rows = {}
    segments: dict[str, tuple[float, list[str]]] = {}
    said: dict[str, float] = {}
    lists: list[tuple[dict[str, float], float]] = []
    labelled: dict[str, float] = {}
    # Independent work runs at once: the query's embedding, then vector search over episodes
    # and over the distilled kinds (each in a thread with its own session, sizing its scope
    # while the embedding is made), while this thread asks Lucene. A hybrid recall waits for
    # its slowest part, not for the sum.
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="memsync-recall") as pool:
        meaning: list[Future[dict[str, float]]] = []
        if by_meaning and embedder is not None:
            embedding = pool.submit(embedder.embed, [query.query or ""])
            parts = (
                [tuple(k for group in VECTOR_GROUPS for k in group)]
                if graph.vectors.enabled
                else VECTOR_GROUPS
            )
            meaning = [
                pool.submit(vector_search, ask, embedding, kinds, vector_rows)
                for kinds in parts
                if set(kinds) & set(query.kinds)
            ]
        if keyword:
            found = _keyword_search(
                ask, session, lucene, keyword_rows, segments=segments, said=said
            )
            lists.append((normalise(found), KEYWORD_WEIGHT))
            # Only messages pass relevance on; a fact's share here is never read.
            labelled = label_share(found, said, KEYWORD_WEIGHT)
        if meaning:
            found = {key: score for part in meaning for key, score in part.result().items()}
            # The weakest candidate fetched stands for what was not: it maps to zero.
            floor = sorted(found.values(), reverse=True)[:fetch][-1] if found else 0.0
            lists.append((normalise(found, floor=floor), VECTOR_WEIGHT))
    rows = {**vector_rows, **keyword_rows}
    relevance = segment_prior(combine(lists), segments)
    hits = _hits(query, relevance, rows)
    around, changed, replaced_by, replacing = _neighbours(
        session, hits, params, query.neighbours, owed=_owed(query, relevance, rows), rows=rows
    )
    passed = {k: max(0.0, v - labelled.get(k, 0.0)) for k, v in relevance.items()}
    return _answer(
        query,
        relevance,
        rows,
        hits,
        around,
        passed=passed,
        changed=changed,
        replaced_by=replaced_by,
        replacing=replacing,
    )


def _hits(query: RecallQuery, relevance: dict[str, float], rows: Rows) -> list[str]:
    """The best-scoring messages, until `limit` of them may be shown: a message the caller
    excluded is kept as a hit (its neighbours are fetched and it lends them relevance) but does
    not count."""
    excluded = set(query.exclude_ids)
    ranked = sorted(
        (k for k in relevance if rows[k][0] == "episode"), key=lambda k: (-relevance[k], k)
    )
    hits: list[str] = []
    shown = 0
    for key in ranked:
        if shown >= query.limit:
            break
        hits.append(key)
        shown += rows[key][1]["id"] not in excluded
    return hits


def _answer(
    query: RecallQuery,
    relevance: dict[str, float],
    rows: dict[str, tuple[RecallKind, dict[str, Any]]],
    hits: Sequence[str],
    around: list[dict[str, Any]],
    *,
    passed: dict[str, float],
    changed: dict[str, list[Change]],
    replaced_by: dict[str, list[str]],
    replacing: Sequence[dict[str, Any]],
) -> list[RecallItem]:
    """Score the hits, their neighbours and the messages of `replacing` (fetched for the values
    they replaced) for the question (pipeline/scores.py), fill the budget, and show the chosen
    ones as windows."""
    passages = {key: _passage(rows[key][1]) for key in hits}
    sequences: dict[str, list[Passage]] = {key: [passages[key]] for key in hits}
    for row in around:
        passages.setdefault(row["key"], _passage(row))
        rows.setdefault(row["key"], ("episode", row))
        sequences[row["hit_key"]].append(passages[row["key"]])
    for row in replacing:
        passages.setdefault(row["key"], _passage(row))
        rows.setdefault(row["key"], ("episode", row))
        sequences.setdefault(row["key"], [passages[row["key"]]])
    stretches = runs(
        passages, ([p.key for p in sorted(seq, key=_order)] for seq in sequences.values())
    )
    scores, later = score_messages(
        query.query or "",
        passages,
        stretches,
        relevance,
        passed=passed,
        radius=query.neighbours,
        replaced_by=replaced_by,
    )
    excluded = set(query.exclude_ids)
    units = [
        Unit(key, scores[key], (p.id,), message=p, found=key in relevance)
        for key, p in passages.items()
        if p.id not in excluded
    ]
    units += [
        # A summary row has no evidence column (it rests on no single message).
        Unit(key, score, tuple(rows[key][1].get("evidence") or ()))
        for key, score in relevance.items()
        if rows[key][0] != "episode"
    ]
    chosen = select(units, query.limit, stretches)
    matched = [key for key in passages if relevance.get(key, 0.0) > 0.0]
    shown = follow_revisions(
        group(chosen, stretches, matched),
        later,
        {key: p for key, p in passages.items() if p.id not in excluded},
        stretches,
    )
    return [_finish(item, rows, changed) for item in shown]


def _order(p: Passage) -> tuple[str, Any, str]:
    return p.order


def _keyword_search(
    ask: Ask,
    session: neo4j.Session,
    lucene: str,
    rows: Rows,
    *,
    segments: dict[str, tuple[float, list[str]]],
    said: dict[str, float],
) -> dict[str, float]:
    """Lucene's BM25 scores across every kind asked for, each held to the agent's scope, in one
    statement (one round trip for all kinds); the matching segments too, when messages are
    asked for."""
    query, fetch, online = ask.query, ask.fetch, ask.online
    parts: list[tuple[str, str]] = []
    values: dict[str, Any] = {}
    for kind in query.kinds:
        label = LABELS[kind]
        if FULLTEXT_INDEXES[label] not in online:
            continue
        parts.append((label, search_cypher.KEYWORD_SEARCH[label]))
        values[per_label("index", label)] = FULLTEXT_INDEXES[label]
        values[per_label("lucene", label)] = search_cypher.scoped_query(
            lucene, _scope_terms(label, query)
        )
        depth = kind_depth(kind, fetch, query)
        values[per_label("limit", label)] = depth
        values[per_label("k", label)] = depth * oversample(label, query)
    if "episode" in query.kinds and SEGMENT_SEARCH in online and parts:
        parts.append((SEGMENT, search_cypher.SEGMENT_KEYWORD_SEARCH))
        values[per_label("index", SEGMENT)] = SEGMENT_SEARCH
        values[per_label("lucene", SEGMENT)] = search_cypher.scoped_query(
            lucene, _scope_terms(SEGMENT, query)
        )
        values[per_label("limit", SEGMENT)] = fetch
        values[per_label("k", SEGMENT)] = fetch
    if "episode" in query.kinds and FULLTEXT_INDEXES[EPISODE] in online:
        part = search_cypher.SAID_PART
        parts.append((part, search_cypher.SAID_KEYWORD_SEARCH))
        values[per_label("index", part)] = FULLTEXT_INDEXES[EPISODE]
        values[per_label("lucene", part)] = search_cypher.scoped_query(
            search_cypher.content_query(lucene), _scope_terms(EPISODE, query)
        )
        # Deeper than the hits: a hit found mostly by its speaker's name may say little.
        depth = _SAID_DEPTH * fetch * oversample(EPISODE, query)
        values[per_label("limit", part)] = depth
        values[per_label("k", part)] = depth
    content: Rows = {}
    found = run_combined(session, ask, parts, values, rows, segments=segments, content=content)
    scores = {key: float(row["score"]) for key, (_, row) in content.items()}
    said.update(scores)
    # The best messages by what they say are candidates whatever their speaker: a question
    # naming a customer matches everything the customer said on the label, and those hits would
    # otherwise fill the list before the message saying what was asked (an agent's, say).
    for key in sorted(scores, key=lambda k: (-scores[k], k))[:fetch]:
        rows.setdefault(key, content[key])
        found[key] = max(found.get(key, 0.0), scores[key])
    return found


def _online_indexes(graph: GraphStore, session: neo4j.Session) -> set[str]:
    """The search indexes ready to query. When every full-text index exists and no search
    index is still populating, that is remembered for INDEX_STATUS_SECONDS (indexes go away
    only in an operator's upgrade); otherwise it is asked every time, so recall uses a new
    index as soon as it is online."""
    status = graph.index_status
    if status and time.monotonic() - status["at"] < INDEX_STATUS_SECONDS:
        return set(status["online"])
    states = {r["name"]: r["state"] for r in session.run(search_cypher.SEARCH_INDEXES)}
    online = {name for name, state in states.items() if state == "ONLINE"}
    if online == set(states) and online >= set(FULLTEXT_INDEXES.values()):
        graph.index_status.update(at=time.monotonic(), online=frozenset(online))
    return online


def _scope_terms(label: str, query: RecallQuery) -> list[str]:
    """The scope terms a keyword hit of `label` must carry: the agent's, and the channel's or
    speaker's when the query is held to one (writer.py and summaries.py write them)."""
    terms = [scope_token("agent", participant_key(query.tenant, query.agent_id))]
    if query.channel_id and label in (EPISODE, SUMMARY, SEGMENT):
        terms.append(scope_token("channel", channel_key(query.tenant, query.channel_id)))
    if query.about and label == EPISODE:
        terms.append(scope_token("speaker", participant_key(query.tenant, query.about)))
    return terms


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
        "exclude_ids": list(query.exclude_ids),
        "points_back": POINTS_BACK_MATCH,
    }


def _can_embed(query: RecallQuery, online: set[str]) -> bool:
    """Whether meaning can be searched at all: asked for, words to embed, an index online."""
    if query.mode == "keyword" or not (query.query or "").strip():
        return False
    return any(VECTOR_INDEXES[LABELS[k]] in online for k in query.kinds)


def _run(session: neo4j.Session, statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [search_row(dict(r)) for r in session.run(statement, params)]


def _owed(query: RecallQuery, relevance: dict[str, float], rows: Rows) -> list[str]:
    """The commitments among the best `limit` candidates: those that may be shown, whose quoted
    values are checked for replacements (a window takes a place or more, so no more can be)."""
    best = sorted(relevance, key=lambda k: (-relevance[k], k))[: query.limit]
    return [key for key in best if rows[key][0] == "commitment"]


def _neighbours(
    session: neo4j.Session,
    hits: Sequence[str],
    params: dict[str, Any],
    window: int,
    *,
    owed: Sequence[str],
    rows: Rows,
) -> tuple[
    list[dict[str, Any]], dict[str, list[Change]], dict[str, list[str]], list[dict[str, Any]]
]:
    """The hits' neighbours up to `window` either side; what was since replaced of what the
    hits and those neighbours said, and the keys of the messages that replaced it (both by
    episode key); and the rows of those messages not among the others, in one statement. The
    `owed` commitments' replaced values go into their rows (`changed`) on the way."""
    if not hits and not owed:
        return [], {}, {}, []
    record = session.run(
        search_cypher.NEIGHBOURS,
        {
            "keys": list(hits),
            "commitment_keys": list(owed),
            "agent_key": params["agent_key"],
            "tenant": params["tenant"],
            "channel_key": params["channel_key"],
            "dm_policy": params["dm_policy"],
            "window": window,
            # A neighbour outside the time window asked for is not shown either.
            "since": params["since"],
            "until": params["until"],
        },
    ).single(strict=True)
    changed: dict[str, list[Change]] = {}
    replaced_by: dict[str, list[str]] = {}
    for row in record["changed"]:
        change = Change(was=row["was"], now=row["now"], evidence=row["evidence"])
        changed.setdefault(row["key"], []).append(change)
        replaced_by.setdefault(row["key"], []).extend(row["later"])
    for entry in record["owed"]:
        rows[entry["key"]][1]["changed"] = entry["changed"]
    replacing = [search_row(row) for row in record["replacing"]]
    return [search_row(row) for row in record["rows"]], changed, replaced_by, replacing


def _passage(row: dict[str, Any]) -> Passage:
    return Passage(
        key=row["key"],
        id=row["id"],
        channel=row["channel_key"] or "",
        at=row["created_at"],
        speaker_label=row["speaker_label"],
        text=row["text"] or "",
    )


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
        in_reply_to=asked_line(row.get("asked")),
        changed=quoted_changes(row),
    )


def _finish(
    shown: Unit | Window,
    rows: dict[str, tuple[RecallKind, dict[str, Any]]],
    changed: dict[str, list[Change]],
) -> RecallItem:
    if isinstance(shown, Unit):
        kind, row = rows[shown.key]
        return _memory_item(kind, row, shown.score)
    best = rows[shown.lead][1]
    changes: list[Change] = []
    for passage in shown.passages:
        changes.extend(c for c in changed.get(passage.key, []) if c not in changes)
    return RecallItem(
        kind="episode",
        key=shown.lead,
        text=shown.text,
        score=shown.score,
        evidence=list(shown.evidence),
        matched=[p.id for p in shown.passages if p.key in shown.hits],
        channel_id=best["channel_id"],
        speaker_label=best["speaker_label"],
        speaker_id=best["speaker_id"],
        created_at=best["created_at"],
        changed=changes,
    )


def _recent(session: neo4j.Session, query: RecallQuery, params: dict[str, Any]) -> list[RecallItem]:
    """No words to search: the agent's latest episodes in scope, newest first."""
    if "episode" not in query.kinds:
        return []
    found = _run(session, search_cypher.RECENT_EPISODES, {**params, "limit": query.limit})
    # Nothing matched, so nothing is relevant: the score only keeps the order (newest first).
    return [
        RecallItem(
            kind="episode",
            key=row["key"],
            text=row["text"] or "",
            score=1.0 / rank,
            evidence=[row["id"]],
            channel_id=row["channel_id"],
            speaker_label=row["speaker_label"],
            speaker_id=row["speaker_id"],
            created_at=row["created_at"],
        )
        for rank, row in enumerate(found, start=1)
    ]
