"""The read side's lookups: names, recent episodes, facts, and operator views."""

from __future__ import annotations

from typing import Final

from pipeline.graph.cypher.search import OWED_CHANGES
from pipeline.graph.model import (
    AGENT,
    AGENT_NODE,
    CHANNEL,
    COMMITMENT,
    EPISODE,
    IN,
    KNOWS,
    OBSERVED,
    PARTICIPANT,
    SAID,
)

# -- read side ------------------------------------------------------------------------------------

LOOKUP_PARTICIPANTS: Final = f"""
UNWIND $keys AS key
MATCH (p:{PARTICIPANT} {{key: key}})
WHERE p.label IS NOT NULL
RETURN p.key AS key, p.id AS id, p.display_name AS display_name, p.handle AS handle
"""

# Who already carries each (tenant, label); several (an old race) resolve to the smallest key.
LABEL_OWNERS: Final = f"""
UNWIND $rows AS row
MATCH (p:{PARTICIPANT} {{tenant: row.tenant, label: row.label}})
RETURN row.tenant AS tenant, row.label AS label, min(p.key) AS key
"""

RECALL_EPISODES: Final = f"""
MATCH (a:{AGENT_NODE} {{key: $agent_key}})-[o:{OBSERVED}]->(e:{EPISODE})-[:{IN}]->(c:{CHANNEL})
WHERE $channel_key IS NULL OR c.key = $channel_key
WITH e, c, o
ORDER BY e.created_at DESC, e.key DESC
LIMIT $limit
RETURN e.key AS key, e.id AS id, e.role AS role, e.content AS content,
       e.speaker_label AS speaker_label,
       coalesce(e.speaker_id, head([(s:{PARTICIPANT})-[:{SAID}]->(e) | s.id])) AS speaker_id,
       e.created_at AS created_at,
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
       e.speaker_label AS speaker_label, e.speaker_id AS speaker_id,
       collect(DISTINCT s.id) AS speakers,
       collect(DISTINCT c.id) AS channels, collect(DISTINCT a.id) AS observers
ORDER BY key
"""

TENANT_OBSERVED: Final = f"""
MATCH (a:{AGENT} {{tenant: $tenant}})-[:{OBSERVED}]->(e:{EPISODE})
RETURN a.key AS agent_key, e.key AS episode_key
"""

# Every commitment the agent tracks, and what an open one quotes that was replaced since: an
# operator's view, so wherever the replacement was said (`$channel_key` is null).
AGENT_COMMITMENTS: Final = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(m:{COMMITMENT})
RETURN m {{.*}} AS commitment, {OWED_CHANGES} AS changed
ORDER BY m.opened_at, m.key
"""
