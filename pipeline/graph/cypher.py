"""Every Cypher statement memsync runs. Labels and types are constants; values are parameters."""

from __future__ import annotations

from typing import Final

from pipeline.graph.model import (
    AGENT,
    CHANNEL,
    EPISODE,
    FACT,
    IN,
    KEYED_LABELS,
    OBSERVED,
    OWNED_BY,
    PARTICIPANT,
    SAID,
    TRUSTS,
)

# -- schema -------------------------------------------------------------------------------------

CONSTRAINTS: Final = tuple(
    f"CREATE CONSTRAINT {label.lower()}_key IF NOT EXISTS FOR (n:{label}) REQUIRE n.key IS UNIQUE"
    for label in KEYED_LABELS
)

INDEXES: Final = (
    f"CREATE INDEX participant_tenant_id IF NOT EXISTS FOR (n:{PARTICIPANT}) ON (n.tenant, n.id)",
    f"CREATE INDEX episode_created_at IF NOT EXISTS FOR (n:{EPISODE}) ON (n.created_at)",
    f"CREATE INDEX fact_agent_subject_predicate IF NOT EXISTS "
    f"FOR (n:{FACT}) ON (n.agent_key, n.subject_key, n.predicate)",
)

SHOW_KEY_CONSTRAINTS: Final = (
    "SHOW CONSTRAINTS YIELD labelsOrTypes, properties, type "
    "WHERE type = 'UNIQUENESS' AND properties = ['key'] "
    "RETURN labelsOrTypes[0] AS label"
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

MERGE_OWNERS: Final = f"""
UNWIND $rows AS row
MATCH (a:{AGENT} {{key: row.agent_key}})
MERGE (o:{PARTICIPANT} {{key: row.owner_key}})
ON CREATE SET o.tenant = row.tenant, o.id = row.owner_id, o.kind = 'human'
SET a.owner_key = row.owner_key
MERGE (a)-[:{OWNED_BY}]->(o)
"""

MERGE_CHANNELS: Final = f"""
UNWIND $rows AS row
MERGE (c:{CHANNEL} {{key: row.key}})
ON CREATE SET c.tenant = row.tenant, c.id = row.id
SET c.kind = row.kind, c.title = coalesce(row.title, c.title)
"""

MERGE_EPISODES: Final = f"""
UNWIND $rows AS row
MATCH (s:{PARTICIPANT} {{key: row.speaker_key}})
MATCH (c:{CHANNEL} {{key: row.channel_key}})
MERGE (e:{EPISODE} {{key: row.key}})
ON CREATE SET e.tenant = row.tenant, e.id = row.id, e.role = row.role, e.content = row.content,
              e.speaker_label = row.speaker_label, e.created_at = row.created_at
MERGE (s)-[:{SAID}]->(e)
MERGE (e)-[:{IN}]->(c)
"""

MERGE_OBSERVED: Final = f"""
UNWIND $rows AS row
MATCH (a:{AGENT} {{key: row.agent_key}})
MATCH (e:{EPISODE} {{key: row.episode_key}})
MERGE (a)-[r:{OBSERVED}]->(e)
ON CREATE SET r.synced_at = row.synced_at, r.event_id = row.event_id
"""

# -- trust directory ------------------------------------------------------------------------------

GRANT_TRUST: Final = f"""
MERGE (t:{PARTICIPANT} {{key: $truster_key}})
ON CREATE SET t.tenant = $tenant, t.id = $truster_id
MERGE (p:{PARTICIPANT} {{key: $trustee_key}})
ON CREATE SET p.tenant = $tenant, p.id = $trustee_id
MERGE (t)-[r:{TRUSTS}]->(p)
SET r.as = $kind, r.granted_at = datetime()
"""

REVOKE_TRUST: Final = f"""
MATCH (:{PARTICIPANT} {{key: $truster_key}})-[r:{TRUSTS}]->(:{PARTICIPANT} {{key: $trustee_key}})
DELETE r
RETURN count(r) AS revoked
"""

LIST_TRUST: Final = f"""
MATCH (t:{PARTICIPANT} {{tenant: $tenant}})-[r:{TRUSTS}]->(p:{PARTICIPANT})
WHERE $truster_key IS NULL OR t.key = $truster_key
RETURN t.id AS truster, p.id AS trustee, r.as AS as, toString(r.granted_at) AS granted_at
ORDER BY truster, trustee
"""

LOOKUP_TRUST: Final = f"""
UNWIND $keys AS key
MATCH (t:{PARTICIPANT} {{key: key}})
OPTIONAL MATCH (t)-[:{TRUSTS}]->(p:{PARTICIPANT})
OPTIONAL MATCH (t)-[:{OWNED_BY}]->(o:{PARTICIPANT})
RETURN t.key AS key, collect(DISTINCT p.key) AS trusted, head(collect(DISTINCT o.key)) AS owner
"""

# -- read side ------------------------------------------------------------------------------------

LOOKUP_PARTICIPANTS: Final = f"""
UNWIND $keys AS key
MATCH (p:{PARTICIPANT} {{key: key}})
WHERE p.label IS NOT NULL
RETURN p.key AS key, p.id AS id, p.display_name AS display_name, p.handle AS handle
"""

RECALL_EPISODES: Final = f"""
MATCH (a:{AGENT} {{key: $agent_key}})-[o:{OBSERVED}]->(e:{EPISODE})-[:{IN}]->(c:{CHANNEL})
WHERE $channel_key IS NULL OR c.key = $channel_key
WITH e, c, o
ORDER BY e.created_at DESC, e.key DESC
LIMIT $limit
RETURN e.key AS key, e.id AS id, e.role AS role, e.content AS content,
       e.speaker_label AS speaker_label, e.created_at AS created_at,
       c.id AS channel_id, c.title AS channel_title, o.synced_at AS synced_at
ORDER BY created_at, key
"""

LIST_AGENTS: Final = f"""
MATCH (a:{AGENT})
WHERE a.tenant = $tenant
OPTIONAL MATCH (a)-[o:{OBSERVED}]->()
RETURN a.key AS key, a.id AS id, a.label AS label, count(o) AS observed
ORDER BY a.id
"""

TENANT_COUNTS: Final = f"""
CALL () {{ MATCH (n:{PARTICIPANT} {{tenant: $tenant}}) RETURN count(n) AS participants }}
CALL () {{ MATCH (n:{AGENT} {{tenant: $tenant}}) RETURN count(n) AS agents }}
CALL () {{ MATCH (n:{CHANNEL} {{tenant: $tenant}}) RETURN count(n) AS channels }}
CALL () {{ MATCH (n:{EPISODE} {{tenant: $tenant}}) RETURN count(n) AS episodes }}
CALL () {{
  MATCH (:{PARTICIPANT} {{tenant: $tenant}})-[r:{SAID}]->() RETURN count(r) AS said
}}
CALL () {{
  MATCH (:{EPISODE} {{tenant: $tenant}})-[r:{IN}]->() RETURN count(r) AS in_channel
}}
CALL () {{
  MATCH (:{AGENT} {{tenant: $tenant}})-[r:{OBSERVED}]->() RETURN count(r) AS observed
}}
RETURN participants, agents, channels, episodes, said, in_channel, observed
"""

TENANT_EPISODES: Final = f"""
MATCH (e:{EPISODE} {{tenant: $tenant}})
OPTIONAL MATCH (s:{PARTICIPANT})-[:{SAID}]->(e)
OPTIONAL MATCH (e)-[:{IN}]->(c:{CHANNEL})
OPTIONAL MATCH (a:{AGENT})-[:{OBSERVED}]->(e)
RETURN e.key AS key, e.id AS id, e.role AS role, e.content AS content,
       e.speaker_label AS speaker_label, collect(DISTINCT s.id) AS speakers,
       collect(DISTINCT c.id) AS channels, collect(DISTINCT a.id) AS observers
ORDER BY key
"""

TENANT_OBSERVED: Final = f"""
MATCH (a:{AGENT} {{tenant: $tenant}})-[:{OBSERVED}]->(e:{EPISODE})
RETURN a.key AS agent_key, e.key AS episode_key
"""
