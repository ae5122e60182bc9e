"""The sync writer's statements: one UNWIND per kind of row, in one transaction per batch."""

from __future__ import annotations

from typing import Final

from pipeline.graph.model import (
    ABOUT,
    AGENT,
    AGENT_NODE,
    CHANNEL,
    CLOSED_BY,
    CLOSURE,
    COMMITMENT,
    EPISODE,
    EVIDENCE,
    FACT,
    IN,
    KNOWS,
    OBSERVED,
    OWED_BY_REL,
    OWED_TO,
    OWNED_BY,
    PARTICIPANT,
    SAID,
    SUPERSEDED_BY,
)

# -- writer: one sync batch, each statement an UNWIND over rows sorted by key --------------------

MERGE_PARTICIPANTS: Final = f"""
UNWIND $rows AS row
MERGE (p:{PARTICIPANT} {{key: row.key}})
ON CREATE SET p.tenant = row.tenant, p.id = row.id, p.kind = row.kind
SET p += CASE WHEN row.provisional AND p.label IS NOT NULL THEN {{}}
              ELSE {{display_name: row.display_name, handle: row.handle, label: row.label}} END,
    p.anonymous = row.anonymous
"""

MARK_AGENTS: Final = f"""
UNWIND $keys AS key
MATCH (p:{PARTICIPANT} {{key: key}})
SET p:{AGENT}
"""

# Ownership is set once, by the first claim: the agent node is write-locked before its OWNED_BY
# edges are read, so two concurrent first claims serialise and the second sees the first.
# Returns the recorded owner of every claimed agent, for the writer to refuse mismatched claims.
MERGE_OWNERS: Final = f"""
UNWIND $rows AS row
MATCH (a:{AGENT_NODE} {{key: row.agent_key}})
SET a._owner_lock = true
REMOVE a._owner_lock
WITH a, row
OPTIONAL MATCH (a)-[:{OWNED_BY}]->(cur:{PARTICIPANT})
WITH a, row, min(cur.key) AS current
FOREACH (_ IN CASE WHEN current IS NULL THEN [1] ELSE [] END |
  MERGE (o:{PARTICIPANT} {{key: row.owner_key}})
  ON CREATE SET o.tenant = row.tenant, o.id = row.owner_id, o.kind = 'human'
  MERGE (a)-[:{OWNED_BY}]->(o)
  SET a.owner_key = row.owner_key
)
RETURN a.key AS agent_key, coalesce(current, row.owner_key) AS owner_key
"""

# The operator's word: replaces whatever owner an agent had (creating the agent if unseen).
OWN_AGENT: Final = f"""
MERGE (a:{PARTICIPANT} {{key: $agent_key}})
ON CREATE SET a.tenant = $tenant, a.id = $agent_id, a.kind = 'agent'
SET a:{AGENT}
WITH a
OPTIONAL MATCH (a)-[old:{OWNED_BY}]->(prev:{PARTICIPANT})
WITH a, collect(old) AS olds, collect(prev.id) AS previous
FOREACH (r IN olds | DELETE r)
MERGE (o:{PARTICIPANT} {{key: $owner_key}})
ON CREATE SET o.tenant = $tenant, o.id = $owner_id, o.kind = 'human'
MERGE (a)-[:{OWNED_BY}]->(o)
SET a.owner_key = $owner_key
RETURN previous
"""

MERGE_CHANNELS: Final = f"""
UNWIND $rows AS row
MERGE (c:{CHANNEL} {{key: row.key}})
ON CREATE SET c.tenant = row.tenant, c.id = row.id
SET c.kind = row.kind, c.title = coalesce(row.title, c.title)
"""

# The first write of a message wins: a row whose (speaker, text) fingerprint differs from the
# stored one adds no SAID or IN edge and is returned, so nobody is credited with text they never
# saw. An episode stored before fingerprints counts as the same when its text and speaker match.
MERGE_EPISODES: Final = f"""
UNWIND $rows AS row
MATCH (s:{PARTICIPANT} {{key: row.speaker_key}})
MATCH (c:{CHANNEL} {{key: row.channel_key}})
MERGE (e:{EPISODE} {{key: row.key}})
ON CREATE SET e.tenant = row.tenant, e.id = row.id, e.role = row.role, e.content = row.content,
              e.speaker_label = row.speaker_label, e.speaker_id = row.speaker_id,
              e.fingerprint = row.fingerprint, e.created_at = row.created_at,
              e.channel_key = row.channel_key, e.embed_pending = true
WITH s, c, e, row,
     CASE WHEN e.fingerprint IS NULL
          THEN e.content = row.content AND EXISTS {{ MATCH (s)-[:{SAID}]->(e) }}
          ELSE e.fingerprint = row.fingerprint END AS same
FOREACH (_ IN CASE WHEN same THEN [1] ELSE [] END |
  SET e.fingerprint = row.fingerprint, e.speaker_id = coalesce(e.speaker_id, row.speaker_id)
  MERGE (s)-[:{SAID}]->(e)
  MERGE (e)-[:{IN}]->(c)
)
WITH row, same
WHERE NOT same
RETURN row.key AS key
"""

# Each observer adds its own and the channel's scope terms to the episode (once each: every term
# is 20 digits, so a term is in the string only as a whole term), for scoped keyword search.
MERGE_OBSERVED: Final = f"""
UNWIND $rows AS row
MATCH (a:{AGENT_NODE} {{key: row.agent_key}})
MATCH (e:{EPISODE} {{key: row.episode_key}})
MERGE (a)-[r:{OBSERVED}]->(e)
ON CREATE SET r.synced_at = row.synced_at, r.event_id = row.event_id
SET e.scope = reduce(s = coalesce(e.scope, ''), t IN row.scope |
                     CASE WHEN s CONTAINS t THEN s ELSE trim(s + ' ' + t) END)
"""

# -- writer: memory (facts, commitments), in the same transaction as the episodes they cite --------

MERGE_FACTS: Final = f"""
UNWIND $rows AS row
MERGE (f:{FACT} {{key: row.key}})
ON CREATE SET f += row.props, f.last_confirmed = row.props.stated_at, f.embed_pending = true
ON MATCH SET
  f.tenant = row.props.tenant,
  f.last_confirmed = CASE WHEN row.props.stated_at > f.last_confirmed
                          THEN row.props.stated_at ELSE f.last_confirmed END,
  f.stated_at = CASE WHEN row.props.stated_at < f.stated_at
                     THEN row.props.stated_at ELSE f.stated_at END,
  f.source = CASE WHEN f.source = 'verified' THEN 'verified'
                  WHEN row.props.source = 'self_stated' THEN 'self_stated' ELSE f.source END,
  f.confidence = CASE WHEN row.props.confidence > f.confidence
                      THEN row.props.confidence ELSE f.confidence END,
  f.expires_at = CASE WHEN row.props.expires_at > f.expires_at
                      THEN row.props.expires_at ELSE f.expires_at END
WITH f, row
MATCH (a:{AGENT_NODE} {{key: row.props.agent_key}})
MATCH (e:{EPISODE} {{key: row.evidence_key}})
MERGE (a)-[:{KNOWS}]->(f)
MERGE (f)-[:{EVIDENCE}]->(e)
WITH f, row
OPTIONAL MATCH (p:{PARTICIPANT} {{key: row.props.subject_key}})
OPTIONAL MATCH (c:{CHANNEL} {{key: row.props.subject_key}})
FOREACH (x IN CASE WHEN p IS NULL THEN [] ELSE [p] END | MERGE (f)-[:{ABOUT}]->(x))
FOREACH (x IN CASE WHEN c IS NULL THEN [] ELSE [c] END | MERGE (f)-[:{ABOUT}]->(x))
"""

# Within one (agent, subject, slot) the most recently stated fact is current; each older one is
# superseded by the next, whatever order the turns arrived in. Recomputed for touched slots.
RESTACK_FACTS: Final = f"""
UNWIND $slots AS s
MATCH (f:{FACT} {{agent_key: s.agent_key, subject_key: s.subject_key, slot: s.slot}})
WITH s, f ORDER BY f.last_confirmed, f.key
WITH s, collect(f) AS facts
UNWIND range(0, size(facts) - 1) AS i
WITH facts[i] AS f, CASE WHEN i + 1 < size(facts) THEN facts[i + 1] END AS newer
OPTIONAL MATCH (f)-[old:{SUPERSEDED_BY}]->(x)
WHERE newer IS NULL OR x <> newer
DELETE old
WITH DISTINCT f, newer
SET f.superseded_at = CASE WHEN newer IS NULL THEN null ELSE newer.last_confirmed END
WITH f, newer
WHERE newer IS NOT NULL
MERGE (f)-[:{SUPERSEDED_BY}]->(newer)
"""

MERGE_COMMITMENTS: Final = f"""
UNWIND $rows AS row
MERGE (c:{COMMITMENT} {{key: row.key}})
ON CREATE SET c += row.props, c.status = 'open', c.embed_pending = true
SET c.tenant = row.props.tenant
WITH c, row
MATCH (a:{AGENT_NODE} {{key: row.props.agent_key}})
MATCH (e:{EPISODE} {{key: row.evidence_key}})
MATCH (by:{PARTICIPANT} {{key: row.props.owed_by_key}})
MERGE (a)-[:{KNOWS}]->(c)
MERGE (c)-[:{EVIDENCE}]->(e)
MERGE (c)-[:{OWED_BY_REL}]->(by)
WITH c, row
OPTIONAL MATCH (p:{PARTICIPANT} {{key: row.props.owed_to_key}})
OPTIONAL MATCH (ch:{CHANNEL} {{key: row.props.owed_to_key}})
FOREACH (x IN CASE WHEN p IS NULL THEN [] ELSE [p] END | MERGE (c)-[:{OWED_TO}]->(x))
FOREACH (x IN CASE WHEN ch IS NULL THEN [] ELSE [ch] END | MERGE (c)-[:{OWED_TO}]->(x))
"""

# Closures are stored on their own, so one that arrives before its commitment still finds it.
MERGE_CLOSURES: Final = f"""
UNWIND $rows AS row
MERGE (k:{CLOSURE} {{key: row.key}})
ON CREATE SET k += row.props
WITH k, row
MATCH (e:{EPISODE} {{key: row.props.evidence_key}})
MERGE (k)-[:{EVIDENCE}]->(e)
"""


def _overlaps(k: str, c: str) -> str:
    """Closure k names commitment c: a bare "done", or either wording contains the other."""
    return (
        f"({k}.value = '' OR toLower({c}.value) CONTAINS {k}.value "
        f"OR {k}.value CONTAINS toLower({c}.value))"
    )


# A closure closes the speaker's most recent commitment opened before it whose wording overlaps
# (or simply the most recent one, for a bare "done"); the latest such closure sets the status.
# Recomputed from every stored commitment and closure of the touched (agent, owed_by) pairs,
# like RESTACK_FACTS, so the outcome is the same whatever order the turns arrived in.
RESOLVE_COMMITMENTS: Final = f"""
UNWIND $pairs AS p
MATCH (c:{COMMITMENT} {{agent_key: p.agent_key, owed_by_key: p.owed_by_key}})
CALL (c) {{
  OPTIONAL MATCH (k:{CLOSURE} {{agent_key: c.agent_key, owed_by_key: c.owed_by_key}})
  WHERE c.opened_at <= k.closed_at AND {_overlaps("k", "c")}
    AND NOT EXISTS {{
      MATCH (d:{COMMITMENT} {{agent_key: c.agent_key, owed_by_key: c.owed_by_key}})
      WHERE d.opened_at <= k.closed_at AND {_overlaps("k", "d")}
        AND (d.opened_at > c.opened_at OR (d.opened_at = c.opened_at AND d.key > c.key))
    }}
  WITH k ORDER BY k.closed_at, k.key
  RETURN collect(k) AS closures
}}
WITH c, closures, closures[-1] AS last
SET c.status = coalesce(last.status, 'open'), c.closed_at = last.closed_at
WITH c, closures
OPTIONAL MATCH (c)-[old:{CLOSED_BY}]->(x)
WHERE NOT x IN closures
DELETE old
WITH DISTINCT c, closures
FOREACH (k IN closures | MERGE (c)-[:{CLOSED_BY}]->(k))
"""

VERIFY_FACT: Final = f"""
MATCH (f:{FACT} {{key: $key}})
SET f.source = 'verified', f.verified_at = datetime()
RETURN count(f) AS verified
"""

AGENT_FACTS: Final = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(f:{FACT})
WHERE $all OR f.superseded_at IS NULL
OPTIONAL MATCH (f)-[:{SUPERSEDED_BY}]->(n:{FACT})
RETURN f {{.*}} AS fact, n.key AS superseded_by
ORDER BY f.subject_key, f.slot, f.last_confirmed
"""

AGENT_COMMITMENTS: Final = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(c:{COMMITMENT})
RETURN c {{.*}} AS commitment
ORDER BY c.opened_at
"""
