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

import functools
import logging
import math
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import neo4j
from neo4j.exceptions import ClientError

from pipeline.embedder import Embedder
from pipeline.errors import ConfigurationError
from pipeline.graph.cypher import search as search_cypher
from pipeline.graph.cypher.search import per_label
from pipeline.graph.model import (
    COMMITMENT,
    EPISODE,
    FACT,
    FULLTEXT_INDEXES,
    SUMMARY,
    VECTOR_INDEXES,
)
from pipeline.graph.store import GraphStore, instant
from pipeline.graph.vectorcache import Group
from pipeline.rank import (
    Passage,
    Unit,
    Window,
    combine,
    context_scores,
    group,
    normalise,
    runs,
    select,
)
from schemas.keys import channel_key, participant_key, scope_token
from schemas.recall import RecallItem, RecallKind, RecallQuery

log = logging.getLogger(__name__)

# Each node's kind and its row as read, by key.
Rows = dict[str, tuple[RecallKind, dict[str, Any]]]

DM_POLICIES: Final = ("never", "same_people")
LABELS: Final[dict[RecallKind, str]] = {
    "episode": EPISODE,
    "fact": FACT,
    "commitment": COMMITMENT,
    "summary": SUMMARY,
}
KINDS: Final[dict[str, RecallKind]] = {label: kind for kind, label in LABELS.items()}
# How far each retriever is trusted, as the weight of its normalised scores. Keyword matching
# is the stronger signal with a static embedder (measured recall@10 on long conversations:
# BM25 0.58, a small dense model 0.35-0.48), so a vector match alone counts half a keyword
# match; agreeing, they add up.
KEYWORD_WEIGHT: Final = 1.0
VECTOR_WEIGHT: Final = 0.5
# Each retriever's list is fetched this many times deeper than the budget (at least
# _MIN_FETCH): the context scores need the weaker hits around a strong one too.
_FETCH_FACTOR: Final = 3
_MIN_FETCH: Final = 30
_FILTERED_OVERSAMPLE: Final = 4
# Without the reader's vector cache, vector search runs as two parallel parts, messages and what
# was distilled from them, each sizing its scope (a statement) to choose its plan. With it, one
# part: the cache proposes candidates of both, checked in one statement.
_VECTOR_GROUPS: Final[tuple[tuple[RecallKind, ...], ...]] = (
    ("episode",),
    ("fact", "commitment", "summary"),
)
# The statement that sizes each kind's scope (summaries need none: one per channel).
_SIZING: Final[dict[RecallKind, str]] = {
    "episode": search_cypher.EPISODE_SCOPE_SIZE,
    "fact": search_cypher.MEMORY_SCOPE_SIZE,
    "commitment": search_cypher.MEMORY_SCOPE_SIZE,
}
INDEX_STATUS_SECONDS: Final = 10.0
SCOPE_SIZE_SECONDS: Final = 10.0
_SCOPE_SIZE_ENTRIES: Final = 10_000
# Up to this many embedded nodes in scope, vector search computes exact cosine over all of them
# (a scan of a few thousand short vectors costs about what the index does, and misses nothing);
# beyond it the tenant-wide index is asked for enough neighbours that the scope filter after it
# is likely to leave the depth needed (the agent's share of the index decides), at most
# _MAX_VECTOR_K.
EXACT_VECTOR_MAX: Final = 2000
# Recall held to a channel of up to this many episodes scans the channel exactly instead.
EXACT_CHANNEL_MAX: Final = EXACT_VECTOR_MAX
# The channel's best this many times deeper than needed are checked for the agent's own.
_CHANNEL_OVERSAMPLE: Final = 2
_MAX_VECTOR_K: Final = 1000
# Neighbours asked of the index beyond the agent's expected share: its share of the nearest is
# not its share of the whole.
_INDEX_MARGIN: Final = 1.5


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
        fetch = max(query.limit * _FETCH_FACTOR, _MIN_FETCH)
        dimensions = embedder.dimensions if embedder else None
        ask = _Ask(graph, query, params, fetch, online, dimensions)
        return _search(ask, session, lucene, embedder)


def _search(
    ask: _Ask, session: neo4j.Session, lucene: str, embedder: Embedder | None
) -> list[RecallItem]:
    """Both retrievers (the vector one in its own thread), fused, then the hits' neighbours."""
    graph, query, params, fetch = ask.graph, ask.query, ask.params, ask.fetch
    by_meaning = embedder is not None and _can_embed(query, ask.online)
    keyword = query.mode != "vector" or not by_meaning
    keyword_rows: Rows = {}
    vector_rows: Rows = {}
    lists: list[tuple[dict[str, float], float]] = []
    # Independent work runs at once: the query's embedding, then vector search over episodes
    # and over the distilled kinds (each in a thread with its own session, sizing its scope
    # while the embedding is made), while this thread asks Lucene. A hybrid recall waits for
    # its slowest part, not for the sum.
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="memsync-recall") as pool:
        meaning: list[Future[dict[str, float]]] = []
        if by_meaning and embedder is not None:
            embedding = pool.submit(embedder.embed, [query.query or ""])
            parts = (
                [tuple(k for group in _VECTOR_GROUPS for k in group)]
                if graph.vectors.enabled
                else _VECTOR_GROUPS
            )
            meaning = [
                pool.submit(_vector_search, ask, embedding, kinds, vector_rows)
                for kinds in parts
                if set(kinds) & set(query.kinds)
            ]
        if keyword:
            found = _keyword_search(ask, session, lucene, keyword_rows)
            lists.append((normalise(found), KEYWORD_WEIGHT))
        if meaning:
            found = {key: score for part in meaning for key, score in part.result().items()}
            # The weakest candidate fetched stands for what was not: it maps to zero.
            floor = sorted(found.values(), reverse=True)[:fetch][-1] if found else 0.0
            lists.append((normalise(found, floor=floor), VECTOR_WEIGHT))
    rows = {**vector_rows, **keyword_rows}
    relevance = combine(lists)
    hits = sorted(
        (k for k in relevance if rows[k][0] == "episode"), key=lambda k: (-relevance[k], k)
    )[: query.limit]
    around = _neighbours(session, hits, params, query.neighbours)
    return _answer(query, relevance, rows, hits, around)


def _answer(
    query: RecallQuery,
    relevance: dict[str, float],
    rows: dict[str, tuple[RecallKind, dict[str, Any]]],
    hits: Sequence[str],
    around: list[dict[str, Any]],
) -> list[RecallItem]:
    """Score messages with their context, fill the budget, and show the chosen ones as windows."""
    passages = {key: _passage(rows[key][1]) for key in hits}
    sequences: dict[str, list[Passage]] = {key: [passages[key]] for key in hits}
    for row in around:
        passages.setdefault(row["key"], _passage(row))
        rows.setdefault(row["key"], ("episode", row))
        sequences[row["hit_key"]].append(passages[row["key"]])
    stretches = runs(
        passages, ([p.key for p in sorted(seq, key=_order)] for seq in sequences.values())
    )
    scores = context_scores(relevance, stretches, query.neighbours)
    units = [Unit(key, scores[key], (p.id,), message=p) for key, p in passages.items()]
    units += [
        # A summary row has no evidence column (it rests on no single message).
        Unit(key, score, tuple(rows[key][1].get("evidence") or ()))
        for key, score in relevance.items()
        if rows[key][0] != "episode"
    ]
    chosen = select(units, query.limit)
    matched = [key for key in passages if relevance.get(key, 0.0) > 0.0]
    return [_finish(shown, rows) for shown in group(chosen, stretches, matched)]


def _order(p: Passage) -> tuple[str, Any, str]:
    return p.order


@dataclass(frozen=True)
class _Ask:
    """One recall as both retrievers see it."""

    graph: GraphStore
    query: RecallQuery
    params: dict[str, Any]
    fetch: int
    online: set[str]
    # The embedder's vector size (None without one): the vector cache is sized by it.
    dimensions: int | None = None


def _keyword_search(ask: _Ask, session: neo4j.Session, lucene: str, rows: Rows) -> dict[str, float]:
    """Lucene's BM25 scores across every kind asked for, each held to the agent's scope, in one
    statement (one round trip for all kinds)."""
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
        depth = _depth(kind, fetch, query)
        values[per_label("limit", label)] = depth
        values[per_label("k", label)] = depth * _oversample(label, query)
    return _run_combined(session, ask, parts, values, rows)


def _vector_search(
    ask: _Ask,
    embedding: Future[list[list[float]]],
    kinds: Sequence[RecallKind],
    rows: Rows,
) -> dict[str, float]:
    """Cosine scores across `kinds` (those asked for), in one statement: the vector cache's
    proposals where it holds the scope, else exact over a scope small enough, else the index.
    The query's `embedding` is awaited only once the plan is made. `rows` may be shared with
    another thread: each key is written by one kind."""
    with ask.graph.session(write=False) as session:
        return _search_by_meaning(ask, session, embedding, kinds, rows)


def _search_by_meaning(
    ask: _Ask,
    session: neo4j.Session,
    embedding: Future[list[list[float]]],
    kinds: Sequence[RecallKind],
    rows: Rows,
) -> dict[str, float]:
    query, fetch, online = ask.query, ask.fetch, ask.online
    wanted = [k for k in kinds if k in query.kinds and VECTOR_INDEXES[LABELS[k]] in online]
    if not wanted:
        return {}
    cacheable = [k for k in wanted if _cacheable(k, query)]
    # The cache catches up (or the scopes are sized, for a plan without it) while the query's
    # embedding is made.
    fresh = _refresh(ask, session, cacheable)
    sizes: dict[str, dict[str, Any]] = {}
    for kind in wanted:
        if kind != "summary" and kind not in fresh:
            sizes.setdefault(_SIZING[kind], _scope_size(ask, session, _SIZING[kind]))
    vector = embedding.result()[0]
    cached = _cached(ask, [k for k in cacheable if k in fresh], vector)
    parts: list[tuple[str, str]] = []
    values: dict[str, Any] = {}
    retry: _Plan | None = None
    for kind in wanted:
        label = LABELS[kind]
        if kind in cached:
            parts.append((label, search_cypher.CACHED_VECTOR_SEARCH[label]))
            values[per_label("candidates", label)] = cached[kind]
            values[per_label("limit", label)] = _depth(kind, fetch, query)
            continue
        size: dict[str, Any] = {}
        if kind != "summary":
            sizing = _SIZING[kind]
            size = sizes.get(sizing) or sizes.setdefault(sizing, _scope_size(ask, session, sizing))
        plan = _vector_plan(kind, size, ask)
        parts.append((label, plan.statement))
        values.update(plan.values(label))
        retry = plan.fallback or retry
    values["vector"] = vector
    try:
        found = _run_combined(session, ask, parts, values, rows)
        if retry is not None and len([key for key in found if rows[key][0] == "episode"]) < _depth(
            "episode", fetch, query
        ):
            # Too few of the channel's best were the agent's own: scan its own instead.
            again = {"vector": vector, **retry.values(EPISODE)}
            found.update(_run_combined(session, ask, [(EPISODE, retry.statement)], again, rows))
        return found
    except ClientError as exc:
        # Vectors of another size (the embedder changed, `memsync graph reembed` not yet run):
        # keyword results still stand. Any other refusal is a bug and must be seen.
        if "dimension" not in (exc.message or "").lower():
            raise
        log.warning("vector search skipped: %s", exc.message)
        return {}


def _cacheable(kind: RecallKind, query: RecallQuery) -> bool:
    """Whether the reader's vector cache can propose this kind's candidates: not summaries (a
    handful per agent), nor messages held to a speaker or a time (the cache keeps neither)."""
    if kind == "summary":
        return False
    return kind != "episode" or not (query.about or query.since or query.until)


def _group(kind: RecallKind) -> Group:
    return "episode" if kind == "episode" else "memory"


def _refresh(ask: _Ask, session: neo4j.Session, kinds: Sequence[RecallKind]) -> set[RecallKind]:
    """Bring the vector cache's scopes of `kinds` (messages; facts and commitments) up to date,
    in one statement; the kinds whose scope is cached."""
    if not kinds or ask.dimensions is None or not ask.graph.vectors.enabled:
        return set()
    fresh = ask.graph.vectors.refresh_groups(
        session.run,
        sorted({_group(kind) for kind in kinds}),
        tenant=ask.query.tenant,
        agent_key=ask.params["agent_key"],
        dimensions=ask.dimensions,
        load=functools.partial(_read_all, ask.graph),
    )
    return {kind for kind in kinds if _group(kind) in fresh}


def _read_all(graph: GraphStore, statement: str, params: dict[str, Any]) -> list[Any]:
    """Every record of a read, in a session of its own (the vector cache's background loads)."""
    with graph.session(write=False) as session:
        return list(session.run(statement, params))


def _cached(
    ask: _Ask, kinds: Sequence[RecallKind], vector: Sequence[float]
) -> dict[RecallKind, list[dict[str, Any]]]:
    """Per kind, the vector cache's nearest in the agent's scope, deep enough that the scope
    check leaves the depth needed (none for a kind whose scope is not cached)."""
    query, params = ask.query, ask.params
    # Messages are held to the channel asked for; facts and commitments are told by label.
    tags = {kind: params["channel_key"] if kind == "episode" else LABELS[kind] for kind in kinds}
    result: dict[RecallKind, list[dict[str, Any]]] = {}
    for part in sorted({_group(kind) for kind in kinds}):
        mine = [k for k in kinds if _group(k) == part]
        wanted = {
            tags[k]: _depth(k, ask.fetch, query) * _oversample(LABELS[k], query) for k in mine
        }
        found = ask.graph.vectors.nearest(
            part,
            tenant=query.tenant,
            agent_key=params["agent_key"],
            vector=vector,
            wanted=wanted,
        )
        if found is not None:
            for k in mine:
                result[k] = [{"key": key, "score": score} for key, score in found[tags[k]]]
    return result


@dataclass(frozen=True)
class _Plan:
    """How one kind is searched by meaning: the statement, its parameters, and what to run
    instead when it finds too few."""

    statement: str
    params: dict[str, Any]
    fallback: _Plan | None = None

    def values(self, label: str) -> dict[str, Any]:
        return {per_label(name, label): value for name, value in self.params.items()}


def _vector_plan(kind: RecallKind, size: dict[str, Any], ask: _Ask) -> _Plan:
    """Exact cosine over the agent's scope when it is small enough to scan (or over the channel
    recall is held to), else the tenant-wide index, asked for enough neighbours that the scope
    filter after it is likely to leave `depth` of them: the agent's share of the index decides."""
    query, params = ask.query, ask.params
    label, depth = LABELS[kind], _depth(kind, ask.fetch, query)
    exact = _Plan(
        search_cypher.EXACT_VECTOR_SEARCH[label],
        {"limit": depth, "k": depth * _oversample(label, query)},
    )
    if kind == "summary":  # one current summary per channel
        return exact
    scope, indexed = (
        (size["episodes"], size["all_episodes"])
        if kind == "episode"
        else (size["memories"], size["all_memories"])
    )
    if scope <= EXACT_VECTOR_MAX:
        return exact
    channel = int(size.get("channel_episodes") or 0)
    if kind == "episode" and params["channel_key"] is not None and channel <= EXACT_CHANNEL_MAX:
        whole = _Plan(search_cypher.EXACT_CHANNEL_VECTOR_SEARCH, {"limit": depth})
        if query.about or query.since or query.until:
            return whole
        k = depth * _CHANNEL_OVERSAMPLE
        return _Plan(
            search_cypher.CHANNEL_VECTOR_THEN_SCOPE,
            {"limit": depth, "k": k},
            whole if channel > k else None,
        )
    share = max(scope, 1) / max(indexed, scope, 1)
    wanted = depth * _oversample(label, query) / share * _INDEX_MARGIN
    k = min(max(math.ceil(wanted), depth), _MAX_VECTOR_K)
    return _Plan(
        search_cypher.VECTOR_SEARCH[label],
        {"limit": depth, "k": k, "index": VECTOR_INDEXES[label]},
    )


def _depth(kind: RecallKind, fetch: int, query: RecallQuery) -> int:
    """How many candidates of a kind each retriever returns: messages `fetch` (the context
    scores need the weaker hits around a strong one), distilled items only as many as the
    budget could ever take."""
    return fetch if kind == "episode" else min(fetch, query.limit)


def _run_combined(
    session: neo4j.Session,
    ask: _Ask,
    parts: list[tuple[str, str]],
    values: dict[str, Any],
    rows: Rows,
) -> dict[str, float]:
    """Run the parts as one statement; each row's score by key, its row kept in `rows`."""
    if not parts:
        return {}
    statement = search_cypher.combined(tuple(parts))
    found: dict[str, float] = {}
    for record in session.run(statement, {**ask.params, **values}):
        kind, row = KINDS[record["label"]], _row(record["row"])
        rows.setdefault(row["key"], (kind, row))
        found[row["key"]] = float(row["score"])
    return found


def _scope_size(ask: _Ask, session: neo4j.Session, sizing: str) -> dict[str, Any]:
    """How big the agent's scope is (`sizing`'s counts), remembered for SCOPE_SIZE_SECONDS: it
    only chooses between exact cosine and the index, so a few seconds' staleness costs at most
    a slightly larger scan."""
    params = ask.params
    cache = ask.graph.scope_sizes
    key = (sizing, params["agent_key"], params["channel_key"])
    now = time.monotonic()
    known = cache.get(key)
    if known is not None and now - known[0] < SCOPE_SIZE_SECONDS:
        return known[1]
    size = dict(session.run(sizing, params).single(strict=True))
    if len(cache) >= _SCOPE_SIZE_ENTRIES:
        cache.clear()
    cache[key] = (now, size)
    return size


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
    if query.channel_id and label in (EPISODE, SUMMARY):
        terms.append(scope_token("channel", channel_key(query.tenant, query.channel_id)))
    if query.about and label == EPISODE:
        terms.append(scope_token("speaker", participant_key(query.tenant, query.about)))
    return terms


def _oversample(label: str, query: RecallQuery) -> int:
    """How many times deeper than needed Lucene is read for `label`: the graph filter drops
    superseded, expired, closed and out-of-audience facts and commitments, and anything outside
    a time window, none of which the scope terms know."""
    if label in (FACT, COMMITMENT) or query.since is not None or query.until is not None:
        return _FILTERED_OVERSAMPLE
    return 1


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


def _can_embed(query: RecallQuery, online: set[str]) -> bool:
    """Whether meaning can be searched at all: asked for, words to embed, an index online."""
    if query.mode == "keyword" or not (query.query or "").strip():
        return False
    return any(VECTOR_INDEXES[LABELS[k]] in online for k in query.kinds)


def _run(session: neo4j.Session, statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [_row(dict(r)) for r in session.run(statement, params)]


def _row(row: dict[str, Any]) -> dict[str, Any]:
    """A search row as read, its instant (sent as microseconds: cypher/instant.py) a datetime."""
    row["created_at"] = instant(row.get("created_at"))
    return row


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


def _finish(shown: Unit | Window, rows: dict[str, tuple[RecallKind, dict[str, Any]]]) -> RecallItem:
    if isinstance(shown, Unit):
        kind, row = rows[shown.key]
        return _memory_item(kind, row, shown.score)
    best = rows[shown.lead][1]
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
