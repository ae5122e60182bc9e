"""Benchmark-only statements (bench/bulkload.py, bench/latency.py): a bulk episode loader that
writes exactly what the writer's MERGE_EPISODES + MERGE_OBSERVED write (cypher/write.py), but
with CREATE, because a bench's keys are new by construction; and the probes the bench reads.
Nothing in memsync runs these."""

from __future__ import annotations

from typing import Final

from pipeline.graph.model import AGENT_NODE, CHANNEL, EPISODE, IN, OBSERVED, PARTICIPANT, SAID

# Mirrors MERGE_EPISODES (same properties, SAID and IN edges, embed_pending set) followed by
# MERGE_OBSERVED (one OBSERVED {synced_at, event_id} per observing agent) for new episodes only.
CREATE_EPISODES: Final = f"""
UNWIND $rows AS row
MATCH (s:{PARTICIPANT} {{key: row.speaker_key}})
MATCH (c:{CHANNEL} {{key: row.channel_key}})
CREATE (e:{EPISODE} {{key: row.key, tenant: row.tenant, id: row.id, role: row.role,
                      content: row.content, speaker_label: row.speaker_label,
                      speaker_id: row.speaker_id, fingerprint: row.fingerprint,
                      created_at: row.created_at, channel_key: row.channel_key,
                      embed_pending: true, scope: row.scope}})
CREATE (s)-[:{SAID}]->(e)
CREATE (e)-[:{IN}]->(c)
WITH e, row
UNWIND row.observers AS agent_key
MATCH (a:{AGENT_NODE} {{key: agent_key}})
CREATE (a)-[:{OBSERVED} {{synced_at: row.synced_at, event_id: row.event_id}}]->(e)
"""

# Waits until every index is ONLINE (or the timeout in seconds passes, which raises).
AWAIT_INDEXES: Final = "CALL db.awaitIndexes($seconds)"

# A tenant's episodes waiting for a vector, and the oldest one's time (the embedding lag).
EPISODE_LAG: Final = f"""
MATCH (e:{EPISODE})
WHERE e.embed_pending = true AND e.tenant = $tenant
RETURN count(e) AS pending, min(e.created_at) AS oldest
"""

# Property names and relationship patterns of one tenant, for the loader's shape check.
NODE_SHAPES: Final = """
MATCH (n) WHERE n.tenant = $tenant
WITH labels(n) AS labels, keys(n) AS props
UNWIND props AS prop
WITH labels, prop ORDER BY prop
RETURN labels, collect(DISTINCT prop) AS props
"""

RELATIONSHIP_SHAPES: Final = """
MATCH (a)-[r]->(b) WHERE a.tenant = $tenant AND b.tenant = $tenant
WITH labels(a) AS from, type(r) AS type, labels(b) AS to, keys(r) AS props
UNWIND (CASE WHEN props = [] THEN [null] ELSE props END) AS prop
WITH from, type, to, prop ORDER BY prop
RETURN from, type, to, collect(DISTINCT prop) AS props
"""
