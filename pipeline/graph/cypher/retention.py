"""The retention sweep's statements: expired facts, and raw episodes past the retention age
that nothing needs any more (no memory cites them, every observer's summary covers them)."""

from __future__ import annotations

from typing import Final

from pipeline.graph.cypher.embed import requeue_neighbours
from pipeline.graph.model import AGENT, EPISODE, EVIDENCE, FACT, OBSERVED, SUMMARY

EXPIRED_FACTS: Final = f"""
MATCH (f:{FACT})
WHERE f.expires_at < $now AND ($tenant IS NULL OR f.tenant = $tenant)
WITH f LIMIT $batch
RETURN collect(f.key) AS keys
"""

COUNT_EXPIRED_FACTS: Final = f"""
MATCH (f:{FACT})
WHERE f.expires_at < $now AND ($tenant IS NULL OR f.tenant = $tenant)
RETURN count(f) AS expired
"""

# An episode may go when no fact, commitment or closure cites it (it is their provenance, and
# the DM audience rule reads its channel) and the current summary of every agent that observed
# it covers it (its words live on there; an unfolded one would be lost).
_DROPPABLE = f"""
NOT EXISTS {{ (e)<-[:{EVIDENCE}]-() }}
AND NOT EXISTS {{
  MATCH (a:{AGENT})-[:{OBSERVED}]->(e)
  WHERE NOT EXISTS {{
    MATCH (s:{SUMMARY})
    WHERE s.agent_key = a.key AND s.channel_key = e.channel_key AND s.current = true
      AND (s.covers_until > e.created_at
           OR (s.covers_until = e.created_at AND s.covers_until_key >= e.key))
  }}
}}"""

# One page of episodes older than the cutoff after the cursor, each with whether it may go;
# the cursor walks past kept ones, so a sweep reads each old episode once.
OLD_EPISODES: Final = f"""
MATCH (e:{EPISODE})
WHERE e.created_at < $cutoff AND ($tenant IS NULL OR e.tenant = $tenant)
  AND ($after_time IS NULL OR e.created_at > $after_time
       OR (e.created_at = $after_time AND e.key > $after_key))
WITH e ORDER BY e.created_at, e.key LIMIT $page
RETURN e.key AS key, e.created_at AS created_at, {_DROPPABLE} AS droppable
"""

# The check again at deletion, in the deleting transaction: a page read a moment ago may be stale.
# The messages beside them are queued to be embedded again (their vectors hold the words of
# the messages that go).
DELETE_EPISODES: Final = f"""
UNWIND $keys AS key
MATCH (e:{EPISODE} {{key: key}})
WHERE e.created_at < $cutoff AND {_DROPPABLE}
WITH collect(e) AS episodes
{requeue_neighbours("episodes")}
FOREACH (e IN episodes | DETACH DELETE e)
RETURN size(episodes) AS deleted
"""
