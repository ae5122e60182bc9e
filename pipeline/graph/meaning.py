"""Recall by meaning: how one recall's vector search is planned and run. The reader's vector
cache proposes candidates where it holds the agent's scope (pipeline/graph/vectorcache.py);
otherwise exact cosine over a scope small enough to scan, or the tenant-wide vector index asked
deep enough for the agent's share. Neo4j applies the agent's whole scope either way."""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final

import neo4j
from neo4j.exceptions import ClientError

from pipeline.graph.cypher import search as search_cypher
from pipeline.graph.cypher.search import per_label
from pipeline.graph.model import (
    EPISODE,
    VECTOR_INDEXES,
)
from pipeline.graph.retrieval import LABELS, Ask, Rows, kind_depth, oversample, run_combined
from pipeline.graph.store import GraphStore
from pipeline.graph.vectorcache import Group
from schemas.recall import RecallKind, RecallQuery

log = logging.getLogger(__name__)

# Without the reader's vector cache, vector search runs as two parallel parts, messages and what
# was distilled from them, each sizing its scope (a statement) to choose its plan. With it, one
# part: the cache proposes candidates of both, checked in one statement.
VECTOR_GROUPS: Final[tuple[tuple[RecallKind, ...], ...]] = (
    ("episode",),
    ("fact", "commitment", "summary"),
)
# The statement that sizes each kind's scope (summaries need none: one per channel).
_SIZING: Final[dict[RecallKind, str]] = {
    "episode": search_cypher.EPISODE_SCOPE_SIZE,
    "fact": search_cypher.MEMORY_SCOPE_SIZE,
    "commitment": search_cypher.MEMORY_SCOPE_SIZE,
}
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


def vector_search(
    ask: Ask,
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
    ask: Ask,
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
            values[per_label("limit", label)] = kind_depth(kind, fetch, query)
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
        found = run_combined(session, ask, parts, values, rows)
        if retry is not None and len(
            [key for key in found if rows[key][0] == "episode"]
        ) < kind_depth("episode", fetch, query):
            # Too few of the channel's best were the agent's own: scan its own instead.
            again = {"vector": vector, **retry.values(EPISODE)}
            found.update(run_combined(session, ask, [(EPISODE, retry.statement)], again, rows))
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


def _refresh(ask: Ask, session: neo4j.Session, kinds: Sequence[RecallKind]) -> set[RecallKind]:
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


def _read_all(graph: GraphStore, statement: str, params: dict[str, Any]) -> Iterator[Any]:
    """Every record of a read, streamed from a session of its own (the vector cache's
    background loads); the session closes when the records are used up or the reader stops."""
    with graph.session(write=False) as session:
        yield from session.run(statement, params)


def _cached(
    ask: Ask, kinds: Sequence[RecallKind], vector: Sequence[float]
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
            tags[k]: kind_depth(k, ask.fetch, query) * oversample(LABELS[k], query) for k in mine
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


def _vector_plan(kind: RecallKind, size: dict[str, Any], ask: Ask) -> _Plan:
    """Exact cosine over the agent's scope when it is small enough to scan (or over the channel
    recall is held to), else the tenant-wide index, asked for enough neighbours that the scope
    filter after it is likely to leave `depth` of them: the agent's share of the index decides."""
    query, params = ask.query, ask.params
    label, depth = LABELS[kind], kind_depth(kind, ask.fetch, query)
    exact = _Plan(
        search_cypher.EXACT_VECTOR_SEARCH[label],
        {"limit": depth, "k": depth * oversample(label, query)},
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
    wanted = depth * oversample(label, query) / share * _INDEX_MARGIN
    k = min(max(math.ceil(wanted), depth), _MAX_VECTOR_K)
    return _Plan(
        search_cypher.VECTOR_SEARCH[label],
        {"limit": depth, "k": k, "index": VECTOR_INDEXES[label]},
    )


def _scope_size(ask: Ask, session: neo4j.Session, sizing: str) -> dict[str, Any]:
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
