"""What the reader's vector cache reads (pipeline/graph/vectorcache.py): every vector in one
agent's scope, or only those stored since a watermark (`embedded_at`, epoch milliseconds set by
every embedding store, found through its range index)."""

from __future__ import annotations

from typing import Final

from pipeline.graph.model import AGENT_NODE, COMMITMENT, EPISODE, FACT, KNOWS, OBSERVED

_EPISODE_ROW = (
    "RETURN e.key AS key, e.embedding AS embedding, e.channel_key AS channel_key, "
    "e.embedded_at AS at"
)

# Every embedded episode the agent observed, through its OBSERVED edges.
ALL_EPISODE_VECTORS: Final = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{OBSERVED}]->(e:{EPISODE})
WHERE e.tenant = $tenant AND e.embedded_with IS NOT NULL
{_EPISODE_ROW}
"""

# Episodes embedded at or after `$from_ms` (all agents, found by the index), kept to the agent's.
NEW_EPISODE_VECTORS: Final = f"""
MATCH (e:{EPISODE}) USING INDEX e:{EPISODE}(embedded_at)
WHERE e.embedded_at >= $from_ms
WITH e WHERE e.tenant = $tenant AND e.embedded_with IS NOT NULL
  AND EXISTS {{ (:{AGENT_NODE} {{key: $agent_key}})-[:{OBSERVED}]->(e) }}
{_EPISODE_ROW}
"""

_MEMORY_ROW = (
    "RETURN n.key AS key, n.embedding AS embedding, "
    f"CASE WHEN n:{FACT} THEN '{FACT}' ELSE '{COMMITMENT}' END AS channel_key, n.embedded_at AS at"
)

# Every embedded fact and commitment the agent holds (its KNOWS edges). The label travels in
# the channel column: distilled memories have no channel, and the label is what tells them apart.
ALL_MEMORY_VECTORS: Final = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(n)
WHERE (n:{FACT} OR n:{COMMITMENT}) AND n.tenant = $tenant AND n.embedded_with IS NOT NULL
{_MEMORY_ROW}
"""

NEW_MEMORY_VECTORS: Final = f"""
CALL () {{
  MATCH (n:{FACT}) USING INDEX n:{FACT}(embedded_at) WHERE n.embedded_at >= $from_ms RETURN n
  UNION
  MATCH (n:{COMMITMENT}) USING INDEX n:{COMMITMENT}(embedded_at) WHERE n.embedded_at >= $from_ms
  RETURN n
}}
WITH n WHERE n.agent_key = $agent_key AND n.tenant = $tenant AND n.embedded_with IS NOT NULL
{_MEMORY_ROW}
"""

# Per group the cache holds: (every vector in scope, those stored since `$from_ms`).
READS: Final = {
    "episode": (ALL_EPISODE_VECTORS, NEW_EPISODE_VECTORS),
    "memory": (ALL_MEMORY_VECTORS, NEW_MEMORY_VECTORS),
}

# Per group, how many vectors in scope were stamped at or after `$from_ms`: the cache compares
# it with its own count, and reads the rows only when Neo4j has more (an embed transaction that
# stamped before the watermark but committed after the cache read past it); and Neo4j's clock,
# the one that stamps.
COUNTS: Final = {
    group: statement[: statement.rindex("RETURN ")]
    # Counted before the clock is read: beside an aggregate it would group, and no match
    # would give no row.
    + "WITH count(*) AS stamped RETURN stamped, timestamp() AS now\n"
    for group, (_, statement) in READS.items()
}

# Both groups' new vectors in one round trip (a recall refreshes both), each row tagged with its
# group and each group read from its own watermark (`$from_ms_episode`, `$from_ms_memory`).
NEW_VECTORS_BOTH: Final = "\nUNION ALL\n".join(
    f"CALL () {{{statement.replace('$from_ms', f'$from_ms_{group}')}}}\n"
    f"RETURN '{group}' AS part, key, embedding, channel_key, at"
    for group, (_, statement) in READS.items()
)
