"""Context assembly's statements: the channel, who is present in it, and the current facts and
open commitments about them that the channel's audience may hear (recall's DM rule)."""

from __future__ import annotations

from typing import Final

from pipeline.graph.cypher.instant import micros
from pipeline.graph.cypher.search import ASKED, observed_by_agent, replaced_values
from pipeline.graph.cypher.search import audience_filter as audience
from pipeline.graph.cypher.summary import CURRENT_SUMMARY_MATCH
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

# Present: whoever said, or (agents) observed, one of the channel's latest `$scan` episodes that
# this agent observed. The (channel_key, created_at) index is sought in its own order and left
# after `$scan` episodes: the planner needs a predicate on each property to seek it
# (`created_at IS NOT NULL`) and an ORDER BY naming both to take its order, or it reads the
# channel's whole history and sorts it.
_PRESENT = f"""
MATCH (e:{EPISODE})
WHERE e.channel_key = $channel_key AND e.created_at IS NOT NULL AND e.tenant = $tenant
  AND {observed_by_agent("e")}
WITH e ORDER BY e.channel_key DESC, e.created_at DESC LIMIT $scan
MATCH (p:{PARTICIPANT})-[:{SAID}|{OBSERVED}]->(e)
WHERE p.tenant = $tenant
WITH p, max(e.created_at) AS seen ORDER BY seen DESC, p.key
RETURN {{key: p.key, id: p.id, label: coalesce(p.label, p.display_name, p.id),
        is_agent: p:{AGENT}}} AS row
"""


def _provenance(node: str) -> str:
    """Map entries: a node's evidence message ids in time order, and the distinct channels
    they were in."""
    return f"""
evidence: COLLECT {{
  MATCH ({node})-[:{EVIDENCE}]->(ev:{EPISODE}) RETURN ev.id ORDER BY ev.created_at, ev.key
}},
learnt_in: COLLECT {{
  MATCH ({node})-[:{EVIDENCE}]->(:{EPISODE})-[:{IN}]->(src:{CHANNEL})
  RETURN DISTINCT src.id AS id ORDER BY id
}}"""


# Current facts (never superseded, not expired at $now) about the subjects (`subject_keys`).
# A seek of the (agent_key, subject_key, slot) index per subject, not a walk over everything the
# agent knows (the planner seeks a composite index only with a predicate on each of its
# properties, hence `slot IS NOT NULL`); the KNOWS edge is still required.
_FACTS = f"""
MATCH (f:{FACT})
WHERE f.agent_key = $agent_key AND f.subject_key IN subject_keys AND f.slot IS NOT NULL
  AND f.tenant = $tenant
  AND EXISTS {{ (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(f) }}
  AND f.superseded_at IS NULL AND (f.expires_at IS NULL OR f.expires_at > $now)
{audience("f")}
WITH f ORDER BY f.last_confirmed DESC, f.key LIMIT $limit
OPTIONAL MATCH (by:{PARTICIPANT} {{key: f.stated_by}})
RETURN {{key: f.key, subject_key: f.subject_key, text: f.text, source: f.source,
        stated_by_id: by.id, stated_by_label: by.label, stated_at: {micros("f.stated_at")},
        last_confirmed: {micros("coalesce(f.last_confirmed, f.stated_at)")},
        {_provenance("f")}}} AS row
"""

# Open commitments owed by or to the subjects (a channel key among them: owed to it).
_COMMITMENTS = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(m)
WHERE m:{COMMITMENT} AND m.tenant = $tenant AND m.status = 'open'
  AND (m.owed_by_key IN subject_keys OR m.owed_to_key IN subject_keys)
{audience("m")}
WITH m ORDER BY m.opened_at DESC, m.key LIMIT $limit
OPTIONAL MATCH (m)-[:{OWED_BY_REL}]->(by:{PARTICIPANT})
OPTIONAL MATCH (m)-[:{OWED_TO}]->(to)
RETURN {{key: m.key, text: m.text, source: m.source, due: {micros("m.due")},
        opened_at: {micros("m.opened_at")},
        by_id: coalesce(by.id, m.owed_by_key), by_label: coalesce(by.label, by.id, m.owed_by_key),
        by_agent: by:{AGENT}, to_id: to.id, to_label: coalesce(to.label, to.title, to.id),
        to_channel: to:{CHANNEL}, asked: COLLECT {{{ASKED}}},
        changed: COLLECT {{{replaced_values("m", "subject_keys")}}}, {_provenance("m")}}} AS row
"""

# The agent's current summary of the channel, as a list of at most one.
_SUMMARY = f"""{CURRENT_SUMMARY_MATCH}
RETURN {{key: s.key, text: s.text, version: s.version,
        covers_until: {micros("s.covers_until")}}} AS row
"""

# Everything in one round trip: the channel, the agent's label, who is present, the facts and
# commitments about them (the subjects: those present, the agent itself and the channel), and
# the channel's summary (a statement of its own cost a session and a transaction a call: as
# much of the reader's CPU as the rest of this one).
STRUCTURE: Final = f"""
OPTIONAL MATCH (c:{CHANNEL} {{key: $channel_key}})
OPTIONAL MATCH (a:{PARTICIPANT} {{key: $agent_key}})
WITH c, a, COLLECT {{{_PRESENT}}} AS present
WITH c, a, present, [row IN present | row.key] + [$agent_key, $channel_key] AS subject_keys
RETURN c.id AS id, c.kind AS kind, c.title AS title, a.label AS agent_label, present,
       COLLECT {{{_FACTS}}} AS facts,
       COLLECT {{{_COMMITMENTS}}} AS commitments,
       COLLECT {{{_SUMMARY}}} AS summary
"""
