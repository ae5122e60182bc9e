"""The memory inspector's read-only statements: tenants, an agent's facts (with provenance and
what superseded them), commitments, summaries and channels, and a channel's timeline."""

from __future__ import annotations

from typing import Final

from pipeline.graph.cypher.search import OWED_CHANGES, observed_by_agent
from pipeline.graph.model import (
    ABOUT,
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
    OF,
    OWED_BY_REL,
    OWED_TO,
    PARTICIPANT,
    SUMMARY,
    SUPERSEDED_BY,
)

# Tenants that have at least one agent (agents are few beside episodes).
INSPECT_TENANTS: Final = f"""
MATCH (a:{AGENT})
WITH DISTINCT a.tenant AS tenant
WHERE tenant IS NOT NULL
RETURN tenant ORDER BY tenant LIMIT $limit
"""

INSPECT_AGENT: Final = f"""
MATCH (a:{AGENT_NODE} {{key: $agent_key}})
RETURN a.id AS id, a.label AS label, a.tenant AS tenant
"""


def _provenance(node: str) -> str:
    """Return items: a node's evidence message ids in time order and the channels they were in."""
    return f"""COLLECT {{
  MATCH ({node})-[:{EVIDENCE}]->(ev:{EPISODE}) RETURN ev.id ORDER BY ev.created_at, ev.key
}} AS evidence,
COLLECT {{
  MATCH ({node})-[:{EVIDENCE}]->(:{EPISODE})-[:{IN}]->(src:{CHANNEL})
  RETURN DISTINCT src.id AS id ORDER BY id
}} AS learnt_in"""


# Every fact the agent knows, current or not, with who stated it, whom it is about, and (for a
# superseded one) the fact that replaced it. Explicit fields: a fact also holds its embedding.
INSPECT_FACTS: Final = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(f:{FACT})
WITH f ORDER BY f.subject_key, f.slot, f.stated_at, f.key LIMIT $limit
OPTIONAL MATCH (f)-[:{SUPERSEDED_BY}]->(n:{FACT})
OPTIONAL MATCH (by:{PARTICIPANT} {{key: f.stated_by}})
RETURN f.key AS key, f.kind AS kind, f.predicate AS predicate, f.value AS value,
       f.text AS text, f.source AS source, f.confidence AS confidence,
       f.stated_at AS stated_at, coalesce(f.last_confirmed, f.stated_at) AS last_confirmed,
       f.expires_at AS expires_at, f.superseded_at AS superseded_at,
       coalesce(by.label, by.id, f.stated_by) AS stated_by,
       COLLECT {{
         MATCH (f)-[:{ABOUT}]->(s) RETURN coalesce(s.label, s.title, s.id) AS name ORDER BY name
       }} AS about,
       n.key AS superseded_by_key, n.text AS superseded_by_text,
       {_provenance("f")}
"""

INSPECT_COMMITMENTS: Final = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(m:{COMMITMENT})
WITH m ORDER BY m.opened_at DESC, m.key LIMIT $limit
OPTIONAL MATCH (m)-[:{OWED_BY_REL}]->(by:{PARTICIPANT})
OPTIONAL MATCH (m)-[:{OWED_TO}]->(to)
RETURN m.key AS key, m.text AS text, coalesce(m.status, 'open') AS status, m.due AS due,
       m.opened_at AS opened_at, m.closed_at AS closed_at, m.source AS source,
       coalesce(by.label, by.id, m.owed_by_key) AS owed_by,
       coalesce(to.label, to.title, to.id, m.owed_to_key) AS owed_to,
       {OWED_CHANGES} AS changed, {_provenance("m")}
"""

# The agent's current summary of each channel.
INSPECT_SUMMARIES: Final = f"""
MATCH (s:{SUMMARY})
WHERE s.agent_key = $agent_key AND s.current = true AND s.tenant = $tenant
OPTIONAL MATCH (s)-[:{OF}]->(c:{CHANNEL})
RETURN coalesce(c.id, s.channel_key) AS channel_id, c.title AS channel_title, s.text AS text,
       s.version AS version, s.covers_until AS covers_until
ORDER BY channel_id LIMIT $limit
"""

# The channels the agent observed anything in (its OBSERVED edges, read once each).
INSPECT_AGENT_CHANNELS: Final = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{OBSERVED}]->(e:{EPISODE})
WITH e.channel_key AS channel_key, count(e) AS episodes
MATCH (c:{CHANNEL} {{key: channel_key}})
RETURN c.id AS id, c.kind AS kind, c.title AS title, episodes
ORDER BY id LIMIT $limit
"""

INSPECT_CHANNEL: Final = f"""
MATCH (c:{CHANNEL} {{key: $channel_key}})
RETURN c.id AS id, c.kind AS kind, c.title AS title
"""

_TIMELINE_FIELDS = f"""
WITH e ORDER BY e.channel_key DESC, e.created_at DESC LIMIT $limit
RETURN e.id AS id, e.role AS role, e.content AS content, e.speaker_label AS speaker_label,
       e.speaker_id AS speaker_id, e.created_at AS created_at,
       COLLECT {{
         MATCH (o:{AGENT})-[:{OBSERVED}]->(e) RETURN coalesce(o.label, o.id) AS name ORDER BY name
       }} AS observers
ORDER BY created_at, id
"""

# The channel's latest `$limit` episodes, oldest first (the (channel_key, created_at) index is
# sought in its own order: a predicate on each property and an ORDER BY naming both).
INSPECT_TIMELINE: Final = f"""
MATCH (e:{EPISODE})
WHERE e.channel_key = $channel_key AND e.created_at IS NOT NULL
{_TIMELINE_FIELDS}"""

# The same, only what the agent `$agent_key` observed.
INSPECT_AGENT_TIMELINE: Final = f"""
MATCH (e:{EPISODE})
WHERE e.channel_key = $channel_key AND e.created_at IS NOT NULL AND {observed_by_agent("e")}
{_TIMELINE_FIELDS}"""
