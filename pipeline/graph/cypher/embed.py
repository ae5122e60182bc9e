"""Embedding statements: vector indexes, the backlog (nodes marked embed_pending) and the store."""

from __future__ import annotations

from typing import Final

from pipeline.graph.cypher.adjacency import adjacent
from pipeline.graph.cypher.instant import micros
from pipeline.graph.model import (
    AGENT,
    COMMITMENT,
    EPISODE,
    EVIDENCE,
    FACT,
    OBSERVED,
    SUMMARY,
    VECTOR_INDEXES,
)

# Labels whose nodes are embedded, in the order a backlog is drained (episodes first: recall
# reads them most).
EMBEDDED_LABELS: Final = (EPISODE, FACT, COMMITMENT, SUMMARY)


def vector_index_statements(dimensions: int) -> list[str]:
    """CREATE VECTOR INDEX for every embedded label, cosine, at the embedder's dimension count.

    The count is written into the statement (index options cannot be parameters), so it must be
    a positive integer and nothing else.
    """
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0:
        raise ValueError(f"vector dimensions must be a positive integer, got {dimensions!r}")
    return [
        f"CREATE VECTOR INDEX {name} IF NOT EXISTS FOR (n:{label}) ON n.embedding "
        f"OPTIONS {{indexConfig: {{`vector.dimensions`: {dimensions}, "
        f"`vector.similarity_function`: 'cosine'}}}}"
        for label, name in VECTOR_INDEXES.items()
    ]


# Existing vector indexes, with their dimension counts, to check against the embedder's.
SHOW_VECTOR_INDEXES: Final = (
    "SHOW VECTOR INDEXES YIELD name, options "
    "RETURN name, options.indexConfig['vector.dimensions'] AS dimensions"
)


def _pending(label: str, text: str, speaker: str) -> str:
    return (
        f"MATCH (n:{label}) WHERE n.embed_pending = true "
        f"RETURN n.key AS key, {text} AS text, {speaker} AS speaker_label LIMIT $limit"
    )


# Up to $limit nodes of one label still waiting for a vector, with what to embed: an episode's
# content and speaker label (the caller composes the labelled text), other nodes' text.
PENDING: Final = {
    EPISODE: _pending(EPISODE, "coalesce(n.content, '')", "n.speaker_label"),
    FACT: _pending(FACT, "coalesce(n.text, '')", "null"),
    COMMITMENT: _pending(COMMITMENT, "coalesce(n.text, '')", "null"),
    SUMMARY: _pending(SUMMARY, "coalesce(n.text, '')", "null"),
}


def _store(label: str, text: str, speaker: str) -> str:
    # A node whose text changed since it was read keeps embed_pending (and its old vector, if
    # any) so the next pass embeds the new text; only matching rows are marked done. The
    # procedure stores 32-bit floats: half the bytes of a plain list property, and exact cosine
    # over a scope reads every vector in it.
    return f"""
UNWIND $rows AS row
MATCH (n:{label} {{key: row.key}})
WHERE n.embed_pending = true AND {text} = row.text
  AND coalesce({speaker}, '') = coalesce(row.speaker_label, '')
CALL db.create.setNodeVectorProperty(n, 'embedding', row.embedding)
SET n.embedded_with = $model, n.embedded_at = timestamp()
REMOVE n.embed_pending
RETURN count(n) AS stored
"""


STORE: Final = {
    EPISODE: _store(EPISODE, "coalesce(n.content, '')", "n.speaker_label"),
    FACT: _store(FACT, "coalesce(n.text, '')", "null"),
    COMMITMENT: _store(COMMITMENT, "coalesce(n.text, '')", "null"),
    SUMMARY: _store(SUMMARY, "coalesce(n.text, '')", "null"),
}

# How many nodes of each label wait for a vector (index-backed count per label).
BACKLOG: Final = {
    label: f"MATCH (n:{label}) WHERE n.embed_pending = true RETURN count(n) AS pending"
    for label in EMBEDDED_LABELS
}

# When the episode waiting longest for a vector was written (or last gained an observer, which
# sends it back to wait), in microseconds; null when none waits. Reads every waiting episode.
OLDEST_WAITING: Final = f"""
MATCH (e:{EPISODE}) WHERE e.embed_pending = true
CALL (e) {{
  MATCH (e)<-[o:{OBSERVED}]-()
  RETURN max(o.synced_at) AS written
}}
WITH min(written) AS oldest
RETURN {micros("oldest")} AS oldest
"""

# Of these episode keys, how many (with the facts and commitments citing them) still wait.
PENDING_FOR_EPISODES: Final = f"""
UNWIND $keys AS key
MATCH (e:{EPISODE} {{key: key}})
OPTIONAL MATCH (m)-[:{EVIDENCE}]->(e) WHERE m.embed_pending = true
RETURN count(DISTINCT CASE WHEN e.embed_pending = true THEN e END) + count(DISTINCT m) AS pending
"""


def drop_vector_index(name: str) -> str:
    """DROP INDEX for one of the vector indexes (names are the model's constants, never input)."""
    if name not in VECTOR_INDEXES.values():
        raise ValueError(f"not a memsync vector index: {name!r}")
    return f"DROP INDEX {name} IF EXISTS"


def _requeue(label: str) -> str:
    # The old vector goes with the mark: it lives in another model's space, so until the new
    # one is stored the node is found by keyword only, never by a meaningless cosine.
    return (
        f"MATCH (n:{label}) WHERE n.embedded_with IS NOT NULL AND n.embedded_with <> $model "
        "WITH n LIMIT $limit "
        "REMOVE n.embedding, n.embedded_with, n.embedded_next SET n.embed_pending = true "
        "RETURN count(n) AS requeued"
    )


# Up to $limit nodes of one label embedded by another model than $model, queued again.
REQUEUE: Final = {label: _requeue(label) for label in EMBEDDED_LABELS}


# Every agent that observed `a` also observed `b`, so `b`'s words may shape how `a` is found.
def _seen_with(a: str, b: str) -> str:
    return (
        f"NOT EXISTS {{ MATCH (o:{AGENT})-[:{OBSERVED}]->({a}) "
        f"WHERE NOT EXISTS {{ MATCH (o)-[:{OBSERVED}]->({b}) }} }}"
    )


def channel_neighbours(var: str, before: str, after: str) -> str:
    """Two subqueries binding `before` and `after` to the messages either side of episode `var`
    in its channel, by time (null at either end)."""
    return (
        f"OPTIONAL CALL ({var}) {{{adjacent(var, before, before=True)}\n}}\n"
        f"OPTIONAL CALL ({var}) {{{adjacent(var, after, before=False)}\n}}"
    )


def requeue_neighbours(episodes: str) -> str:
    """A subquery for a statement about to delete the list `episodes`: the messages beside them
    (not themselves deleted) lose their vectors and wait to be embedded again, since a vector
    in conversation holds its neighbours' words. Returns `requeued`."""
    return f"""CALL ({episodes}) {{
  UNWIND {episodes} AS gone
  {channel_neighbours("gone", "before", "after")}
  UNWIND [before, after] AS near
  WITH DISTINCT near
  WHERE near IS NOT NULL AND NOT near IN {episodes} AND near.embedding IS NOT NULL
  REMOVE near.embedding, near.embedded_with, near.embedded_next
  SET near.embed_pending = true
  RETURN count(near) AS requeued
}}"""


# Pending episodes with the messages either side of each in its channel, and whether each
# neighbour may lend its words to the episode's vector (and the episode to the earlier one's,
# when that one is already embedded without its next message).
PENDING_EPISODES_IN_CONTEXT: Final = f"""
MATCH (n:{EPISODE}) WHERE n.embed_pending = true
WITH n LIMIT $limit
{channel_neighbours("n", "p", "x")}
RETURN n.key AS key, coalesce(n.content, '') AS text, n.speaker_label AS speaker_label,
       p.key AS before_key, coalesce(p.content, '') AS before_text,
       p.speaker_label AS before_speaker,
       p IS NOT NULL AND {_seen_with("n", "p")} AS before_lends,
       p IS NOT NULL AND p.embed_pending IS NULL AND p.embedded_next IS NULL
         AND p.embedding IS NOT NULL AND {_seen_with("p", "n")} AS before_takes,
       x.key AS after_key, coalesce(x.content, '') AS after_text,
       x.speaker_label AS after_speaker,
       x IS NOT NULL AND {_seen_with("n", "x")} AS after_lends
"""

# Store an episode's vector (the sum of its own and its conversation pairs' unit vectors:
# cosine ignores length) and which next message it already holds, so that message's own pass
# does not add the pair twice.
STORE_EPISODES_IN_CONTEXT: Final = f"""
UNWIND $rows AS row
MATCH (n:{EPISODE} {{key: row.key}})
WHERE n.embed_pending = true AND coalesce(n.content, '') = row.text
  AND coalesce(n.speaker_label, '') = coalesce(row.speaker_label, '')
CALL db.create.setNodeVectorProperty(n, 'embedding', row.embedding)
SET n.embedded_with = $model, n.embedded_next = row.next_key, n.embedded_at = timestamp()
REMOVE n.embed_pending
RETURN count(n) AS stored
"""

# Add a later message's pair to an episode embedded before that message existed; at most once
# (embedded_next), and only to a vector of this model (a requeued node is re-read whole).
EXTEND_EPISODES: Final = f"""
UNWIND $rows AS row
MATCH (p:{EPISODE} {{key: row.key}})
WHERE p.embed_pending IS NULL AND p.embedded_next IS NULL AND p.embedded_with = $model
  AND p.embedding IS NOT NULL AND size(p.embedding) = size(row.pair)
WITH p, row, [i IN range(0, size(row.pair) - 1) | p.embedding[i] + row.pair[i]] AS summed
CALL db.create.setNodeVectorProperty(p, 'embedding', summed)
SET p.embedded_next = row.next_key, p.embedded_at = timestamp()
RETURN count(p) AS extended
"""
