"""Context assembly's statements: the channel, who is present in it, and the current facts and
open commitments about them that the channel's audience may hear (recall's DM rule)."""

from __future__ import annotations

from typing import Final

from pipeline.graph.cypher.search import audience_filter as audience
from pipeline.graph.cypher.search import observed_by_agent
from pipeline.graph.model import (
    AGENT,
    AGENT_NODE,
    CHANNEL,
    COMMITMENT,
    EPISODE,
    EVIDENCE,
    FACT,
    IN,
    KNOWS,
    OBSERVED,
    OWED_BY_REL,
    OWED_TO,
    PARTICIPANT,
    SAID,
)

CHANNEL_INFO: Final = f"""
OPTIONAL MATCH (c:{CHANNEL} {{key: $channel_key}})
OPTIONAL MATCH (a:{PARTICIPANT} {{key: $agent_key}})
RETURN c.id AS id, c.kind AS kind, c.title AS title, a.label AS agent_label
"""

# Present: whoever said, or (agents) observed, one of the channel's latest `$scan` episodes that
# this agent observed. The (channel_key, created_at) index is sought in its own order and left
# after `$scan` episodes: the planner needs a predicate on each property to seek it
# (`created_at IS NOT NULL`) and an ORDER BY naming both to take its order, or it reads the
# channel's whole history and sorts it.
PRESENT: Final = f"""
MATCH (e:{EPISODE})
WHERE e.channel_key = $channel_key AND e.created_at IS NOT NULL AND e.tenant = $tenant
  AND {observed_by_agent("e")}
WITH e ORDER BY e.channel_key DESC, e.created_at DESC LIMIT $scan
MATCH (p:{PARTICIPANT})-[:{SAID}|{OBSERVED}]->(e)
WHERE p.tenant = $tenant
WITH p, max(e.created_at) AS seen
RETURN p.key AS key, p.id AS id, coalesce(p.label, p.display_name, p.id) AS label,
       p:{AGENT} AS is_agent, seen
ORDER BY seen DESC, key
"""


def _provenance(node: str) -> str:
    """A node's evidence message ids in time order, and the distinct channels they were in."""
    return f"""
COLLECT {{
  MATCH ({node})-[:{EVIDENCE}]->(ev:{EPISODE}) RETURN ev.id ORDER BY ev.created_at, ev.key
}} AS evidence,
COLLECT {{
  MATCH ({node})-[:{EVIDENCE}]->(:{EPISODE})-[:{IN}]->(src:{CHANNEL})
  RETURN DISTINCT src.id AS id ORDER BY id
}} AS learnt_in"""


# Current facts (never superseded, not expired at $now) about the given subjects.
# A seek of the (agent_key, subject_key, slot) index per subject, not a walk over everything the
# agent knows (the planner seeks a composite index only with a predicate on each of its
# properties, hence `slot IS NOT NULL`); the KNOWS edge is still required.
FACTS: Final = f"""
MATCH (f:{FACT})
WHERE f.agent_key = $agent_key AND f.subject_key IN $subject_keys AND f.slot IS NOT NULL
  AND f.tenant = $tenant
  AND EXISTS {{ (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(f) }}
  AND f.superseded_at IS NULL AND (f.expires_at IS NULL OR f.expires_at > $now)
{audience("f")}
WITH f ORDER BY f.last_confirmed DESC, f.key LIMIT $limit
OPTIONAL MATCH (by:{PARTICIPANT} {{key: f.stated_by}})
RETURN f.key AS key, f.subject_key AS subject_key, f.text AS text, f.source AS source,
       by.id AS stated_by_id, by.label AS stated_by_label, f.stated_at AS stated_at,
       coalesce(f.last_confirmed, f.stated_at) AS last_confirmed, {_provenance("f")}
"""

# Open commitments owed by or to the given subjects (a channel key among them: owed to it).
COMMITMENTS: Final = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(m)
WHERE m:{COMMITMENT} AND m.tenant = $tenant AND m.status = 'open'
  AND (m.owed_by_key IN $subject_keys OR m.owed_to_key IN $subject_keys)
{audience("m")}
WITH m ORDER BY m.opened_at DESC, m.key LIMIT $limit
OPTIONAL MATCH (m)-[:{OWED_BY_REL}]->(by:{PARTICIPANT})
OPTIONAL MATCH (m)-[:{OWED_TO}]->(to)
RETURN m.key AS key, m.text AS text, m.source AS source, m.due AS due,
       m.opened_at AS opened_at, coalesce(by.id, m.owed_by_key) AS by_id,
       coalesce(by.label, by.id, m.owed_by_key) AS by_label,
       by:{AGENT} AS by_agent,
       to.id AS to_id, coalesce(to.label, to.title, to.id) AS to_label,
       to:{CHANNEL} AS to_channel, {_provenance("m")}
"""
