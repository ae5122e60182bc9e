"""Backfills run by `memsync graph init` for what older versions did not write: an episode's
`channel_key` (recall's neighbour seeks rely on it), a channel's members (the audience rule of
relationship memory relies on them), and the `scope` search terms (which nodes lack them, the
keys their terms come from, and setting them)."""

from __future__ import annotations

from typing import Final

from pipeline.graph.model import (
    AGENT,
    CHANNEL,
    CLOSURE,
    COMMITMENT,
    EPISODE,
    EVIDENCE,
    FACT,
    IN,
    MEMBER_OF,
    OBSERVED,
    PARTICIPANT,
    SAID,
    SUMMARY,
)

# Only a current summary carries scope terms (WRITE_SUMMARY removes them from older versions).
_NEEDS_SCOPE: Final = {
    EPISODE: "n.scope IS NULL",
    FACT: "n.scope IS NULL",
    COMMITMENT: "n.scope IS NULL",
    SUMMARY: "n.scope IS NULL AND n.current = true",
}

# Where a node's terms come from, as [role, key] pairs (schemas/keys.py scope_token): an
# episode's channel, observing agents and speaker; the agent of a fact or commitment; the agent
# and channel of a summary.
_SOURCES: Final = {
    EPISODE: (
        "[['channel', n.channel_key]]"  # BACKFILL_CHANNEL_KEYS runs first
        f" + [(a:{AGENT})-[:{OBSERVED}]->(n) | ['agent', a.key]]"
        f" + [(s:{PARTICIPANT})-[:{SAID}]->(n) | ['speaker', s.key]]"
    ),
    FACT: "[['agent', n.agent_key]]",
    COMMITMENT: "[['agent', n.agent_key]]",
    SUMMARY: "[['agent', n.agent_key], ['channel', n.channel_key]]",
}

COUNT_UNSCOPED: Final = {
    label: f"MATCH (n:{label}) WHERE {where} RETURN count(n) AS missing"
    for label, where in _NEEDS_SCOPE.items()
}

# One page of nodes lacking terms, in key order after `$after` (the key constraint's index
# gives the order, so each page starts where the last ended instead of rescanning).
UNSCOPED_PAGE: Final = {
    label: f"""
MATCH (n:{label}) WHERE n.key > $after
WITH n ORDER BY n.key LIMIT $page
RETURN n.key AS key, {_NEEDS_SCOPE[label]} AS missing,
       [pair IN {_SOURCES[label]} WHERE pair[1] IS NOT NULL] AS sources
"""
    for label in _NEEDS_SCOPE
}

SET_SCOPE: Final = {
    label: f"UNWIND $rows AS row MATCH (n:{label} {{key: row.key}}) SET n.scope = row.scope"
    for label in _NEEDS_SCOPE
}


def _channel_from(label: str, path: str, source: str) -> str:
    """Set `channel_key` where a node of `label` lacks it, from what `path` leads to; in
    batches, so a large graph is not one huge transaction."""
    return f"""
MATCH (n:{label}) WHERE n.channel_key IS NULL
CALL (n) {{
  MATCH (n){path}
  WITH n, min({source}) AS channel_key
  SET n.channel_key = channel_key
}} IN TRANSACTIONS OF 5000 ROWS
"""


# An episode's channel, from its IN edge.
BACKFILL_CHANNEL_KEYS: Final = _channel_from(EPISODE, f"-[:{IN}]->(c:{CHANNEL})", "c.key")

# Commitments and closures written before they carried their channel take their evidence's:
# closures close only within it (RESOLVE_CLOSURES). After BACKFILL_CHANNEL_KEYS.
BACKFILL_OBLIGATION_CHANNELS: Final = tuple(
    _channel_from(label, f"-[:{EVIDENCE}]->(e:{EPISODE})", "e.channel_key")
    for label in (COMMITMENT, CLOSURE)
)

# A channel written before members were recorded gets, as its members, whoever spoke there and the
# agents that remember it (older versions kept no record of silent listeners).
BACKFILL_MEMBERS: Final = f"""
MATCH (c:{CHANNEL}) WHERE NOT EXISTS {{ (c)<-[:{MEMBER_OF}]-(:{PARTICIPANT}) }}
CALL (c) {{
  MATCH (c)<-[:{IN}]-(:{EPISODE})<-[:{SAID}|{OBSERVED}]-(p:{PARTICIPANT})
  WITH DISTINCT c, p
  MERGE (p)-[:{MEMBER_OF}]->(c)
}} IN TRANSACTIONS OF 50 ROWS
"""
