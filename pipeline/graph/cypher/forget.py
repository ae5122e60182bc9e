"""Forgetting's statements: tombstones and audit records, selecting what a participant, agent
or channel leaves behind, deleting it in bounded batches, and replacing summaries.

Selections return keys (at most `$batch`); the deletions that follow run in the same
transaction, with the repairs the deleted nodes call for (supersession, commitment status).
"""

from __future__ import annotations

from typing import Final

from pipeline.graph.cypher.embed import requeue_neighbours
from pipeline.graph.model import (
    ABOUT,
    AGENT,
    AGENT_NODE,
    CHANNEL,
    CLOSED_BY,
    CLOSURE,
    COMMITMENT,
    EPISODE,
    ERASURE,
    EVIDENCE,
    FACT,
    IN,
    OBSERVED,
    OF,
    OWED_BY_REL,
    OWED_TO,
    OWNED_BY,
    PARTICIPANT,
    SAID,
    SUMMARISED,
    SUMMARY,
    TRUSTS,
)

# -- tombstones and audit -------------------------------------------------------------------------

# The writer's check, first in every sync transaction: which of the batch's participants are
# erased. A seek of the plain subject_hash index, which locks nothing (see cypher/schema.py).
ERASED_SUBJECTS: Final = f"""
UNWIND $hashes AS h
MATCH (x:{ERASURE} {{subject_hash: h}})
WHERE x.blocking = true
RETURN DISTINCT h AS hash
"""

# One record per (tenant, scope, subject): created by the first run, updated by every run.
RECORD_ERASURE: Final = f"""
MERGE (x:{ERASURE} {{key: $key}})
ON CREATE SET x.tenant = $tenant, x.scope = $scope, x.subject_hash = $hash, x.first_at = $now,
              x.runs = 0, x.pending_pairs = [], x.log = []
SET x.last_at = $now, x.runs = x.runs + 1, x.command = $command,
    x.blocking = coalesce(x.blocking, false) OR $blocking
RETURN x.runs AS runs
"""

FIND_ERASURE: Final = f"""
MATCH (x:{ERASURE} {{key: $key}})
RETURN x.runs AS runs, x.pending_pairs AS pending_pairs
"""

# Summary pairs still to rebuild survive a crash here, so a second run finishes them.
ADD_PENDING_PAIRS: Final = f"""
MATCH (x:{ERASURE} {{key: $key}})
SET x.pending_pairs = reduce(acc = coalesce(x.pending_pairs, []), p IN $pairs |
                             CASE WHEN p IN acc THEN acc ELSE acc + p END)
"""

# The run's counts, added to the totals (`deleted_<kind>`), and its line appended to the log.
FINISH_ERASURE: Final = f"""
MATCH (x:{ERASURE} {{key: $key}})
SET x += $totals, x.pending_pairs = $pending, x.log = coalesce(x.log, []) + $line
"""

LIST_ERASURES: Final = f"""
MATCH (x:{ERASURE})
WHERE ($tenant IS NULL OR x.tenant = $tenant) AND ($hash IS NULL OR x.subject_hash = $hash)
RETURN x {{.*}} AS erasure
ORDER BY x.first_at, x.key
"""

# Every transaction running now but this listing's own: the barrier after a tombstone waits
# for these (a sync that began before the tombstone may not have seen it).
RUNNING_TRANSACTIONS: Final = """
SHOW TRANSACTIONS YIELD transactionId, currentQuery
WHERE NOT currentQuery STARTS WITH 'SHOW TRANSACTIONS'
RETURN transactionId AS id
"""

# -- subjects -------------------------------------------------------------------------------------

FIND_PARTICIPANT: Final = f"""
MATCH (p:{PARTICIPANT} {{key: $key}})
RETURN p.key AS key, p:{AGENT} AS agent
"""

FIND_CHANNEL: Final = f"""
MATCH (c:{CHANNEL} {{key: $key}})
RETURN c.key AS key
"""

TENANT_AGENTS: Final = f"""
MATCH (a:{AGENT})
WHERE a.tenant = $tenant
RETURN a.key AS key ORDER BY key
"""

# (agent, channel) pairs whose summaries may hold a participant's words.
PARTICIPANT_PAIRS: Final = f"""
MATCH (:{PARTICIPANT} {{key: $key}})-[:{SAID}]->(e:{EPISODE})<-[:{OBSERVED}]-(a:{AGENT})
RETURN DISTINCT a.key AS agent_key, e.channel_key AS channel_key
"""

AGENT_PAIRS: Final = f"""
MATCH (:{AGENT_NODE} {{key: $key}})-[:{SUMMARISED}]->(s:{SUMMARY})
RETURN DISTINCT s.agent_key AS agent_key, s.channel_key AS channel_key
"""

CHANNEL_PAIRS: Final = f"""
MATCH (:{CHANNEL} {{key: $key}})<-[:{OF}]-(s:{SUMMARY})
RETURN DISTINCT s.agent_key AS agent_key, s.channel_key AS channel_key
"""

# -- selections (keys, at most $batch) -------------------------------------------------------------

# Facts about the participant: by the (agent_key, subject_key, slot) index for each agent of
# the tenant, and by ABOUT edges.
FACTS_ABOUT: Final = f"""
CALL () {{
  MATCH (f:{FACT})
  WHERE f.agent_key IN $agents AND f.subject_key = $key AND f.slot IS NOT NULL
  RETURN f
  UNION
  MATCH (:{PARTICIPANT} {{key: $key}})<-[:{ABOUT}]-(f:{FACT})
  RETURN f
}}
WITH DISTINCT f LIMIT $batch
RETURN collect(f.key) AS keys
"""

# Every commitment owed by or to the participant `$key`, in the memories of `$agents`: a
# subquery returning `c` (shared with the export, which must list exactly what forget removes).
COMMITMENTS_OF_PERSON: Final = f"""
CALL () {{
  MATCH (c:{COMMITMENT})
  WHERE c.agent_key IN $agents AND c.owed_by_key = $key
  RETURN c
  UNION
  MATCH (:{PARTICIPANT} {{key: $key}})<-[:{OWED_BY_REL}|{OWED_TO}]-(c:{COMMITMENT})
  RETURN c
  UNION
  MATCH (c:{COMMITMENT})
  WHERE c.agent_key IN $agents AND c.owed_by_key IS NOT NULL AND c.owed_to_key = $key
  RETURN c
}}
"""

COMMITMENTS_OF: Final = f"""
{COMMITMENTS_OF_PERSON}
WITH DISTINCT c LIMIT $batch
RETURN collect(c.key) AS keys
"""

# Closures by the participant or said to them.
CLOSURES_OF: Final = f"""
CALL () {{
  MATCH (k:{CLOSURE})
  WHERE k.agent_key IN $agents AND k.owed_by_key = $key
  RETURN k
  UNION
  MATCH (k:{CLOSURE})
  WHERE k.agent_key IN $agents AND k.owed_to_key = $key
  RETURN k
}}
WITH DISTINCT k LIMIT $batch
RETURN collect(k.key) AS keys
"""

# What an agent knows, by its agent_key (the indexes lead with it).
AGENT_FACTS: Final = f"""
MATCH (f:{FACT})
WHERE f.agent_key = $key AND f.subject_key IS NOT NULL AND f.slot IS NOT NULL
WITH f LIMIT $batch
RETURN collect(f.key) AS keys
"""

AGENT_COMMITMENTS: Final = f"""
MATCH (c:{COMMITMENT})
WHERE c.agent_key = $key AND c.owed_by_key IS NOT NULL
WITH c LIMIT $batch
RETURN collect(c.key) AS keys
"""

AGENT_CLOSURES: Final = f"""
MATCH (k:{CLOSURE})
WHERE k.agent_key = $key AND k.owed_by_key IS NOT NULL
WITH k LIMIT $batch
RETURN collect(k.key) AS keys
"""

# Facts the participant stated that someone else stated too: they stay, credited to the
# earliest other speaker (their provenance must not keep pointing at the forgotten one).
REATTRIBUTE_FACTS: Final = f"""
MATCH (:{PARTICIPANT} {{key: $key}})-[:{SAID}]->(:{EPISODE})<-[:{EVIDENCE}]-(f:{FACT})
WHERE f.stated_by = $key AND EXISTS {{
  MATCH (f)-[:{EVIDENCE}]->(:{EPISODE})<-[:{SAID}]-(o:{PARTICIPANT}) WHERE o.key <> $key
}}
WITH DISTINCT f LIMIT $batch
CALL (f) {{
  MATCH (f)-[:{EVIDENCE}]->(e:{EPISODE})<-[:{SAID}]-(o:{PARTICIPANT})
  WHERE o.key <> $key
  RETURN o, e ORDER BY e.created_at, e.key LIMIT 1
}}
SET f.stated_by = o.key, f.stated_at = e.created_at,
    f.source = CASE WHEN f.source = 'verified' THEN 'verified'
                    WHEN o.key = f.subject_key AND NOT o:{AGENT} THEN 'self_stated'
                    ELSE 'peer_stated' END
RETURN count(f) AS changed
"""

# -- deleting episodes (with the memory that cited them) ------------------------------------------


def _cited_and_deleted(match: str) -> str:
    """Delete a batch of episodes; return the keys of the memory nodes that cited them, for
    `DELETE_*` (with `all: false`) to drop those left without evidence. The messages beside
    them lose their vectors and wait to be embedded again: a vector in conversation holds its
    neighbours' words (pipeline/graph/contextvectors.py)."""
    return f"""
{match}
WITH e LIMIT $batch
WITH collect(e) AS episodes
CALL (episodes) {{
  UNWIND episodes AS e
  OPTIONAL MATCH (m)-[:{EVIDENCE}]->(e)
  WITH DISTINCT m WHERE m IS NOT NULL
  RETURN collect(CASE WHEN m:{FACT} THEN m.key END) AS facts,
         collect(CASE WHEN m:{COMMITMENT} THEN m.key END) AS commitments,
         collect(CASE WHEN m:{CLOSURE} THEN m.key END) AS closures
}}
{requeue_neighbours("episodes")}
FOREACH (e IN episodes | DETACH DELETE e)
RETURN size(episodes) AS deleted, facts, commitments, closures
"""


PARTICIPANT_EPISODES: Final = _cited_and_deleted(
    f"MATCH (:{PARTICIPANT} {{key: $key}})-[:{SAID}]->(e:{EPISODE})"
)
CHANNEL_EPISODES: Final = _cited_and_deleted(
    f"MATCH (:{CHANNEL} {{key: $key}})<-[:{IN}]-(e:{EPISODE})"
)

# An agent's OBSERVED edges; an episode nobody observes any more is nobody's memory: it goes.
AGENT_OBSERVED: Final = f"""
MATCH (:{AGENT_NODE} {{key: $key}})-[o:{OBSERVED}]->(e:{EPISODE})
WITH o, e LIMIT $batch
DELETE o
RETURN count(*) AS deleted, collect(e.key) AS episodes
"""

ORPHAN_EPISODES: Final = f"""
UNWIND $keys AS key
MATCH (e:{EPISODE} {{key: key}})
WHERE NOT EXISTS {{ (:{AGENT})-[:{OBSERVED}]->(e) }} AND NOT EXISTS {{ ()-[:{EVIDENCE}]->(e) }}
DETACH DELETE e
RETURN count(*) AS deleted
"""

# -- deleting memory nodes, with their repairs -----------------------------------------------------

# `$all`: delete every listed node; otherwise only those left without evidence. Returns the
# supersession slots to restack (RESTACK_FACTS).
DELETE_FACTS: Final = f"""
UNWIND $keys AS key
MATCH (f:{FACT} {{key: key}})
WHERE $all OR NOT EXISTS {{ (f)-[:{EVIDENCE}]->(:{EPISODE}) }}
WITH f, {{agent_key: f.agent_key, subject_key: f.subject_key, slot: f.slot}} AS slot
DETACH DELETE f
RETURN collect(DISTINCT slot) AS slots, count(*) AS deleted
"""

# Returns the (agent, owed_by) pairs whose closures may now pick another commitment
# (RESOLVE_CLOSURES), from the earliest deleted commitment's opening on.
DELETE_COMMITMENTS: Final = f"""
UNWIND $keys AS key
MATCH (c:{COMMITMENT} {{key: key}})
WHERE $all OR NOT EXISTS {{ (c)-[:{EVIDENCE}]->(:{EPISODE}) }}
WITH c, c.agent_key AS agent_key, c.owed_by_key AS owed_by_key, c.opened_at AS opened_at
DETACH DELETE c
WITH agent_key, owed_by_key, min(opened_at) AS since, count(*) AS n
RETURN collect({{agent_key: agent_key, owed_by_key: owed_by_key, since: since}}) AS pairs,
       sum(n) AS deleted
"""

# Returns the commitments the deleted closures closed (RESTATUS_COMMITMENTS).
DELETE_CLOSURES: Final = f"""
UNWIND $keys AS key
MATCH (k:{CLOSURE} {{key: key}})
WHERE $all OR NOT EXISTS {{ (k)-[:{EVIDENCE}]->(:{EPISODE}) }}
OPTIONAL MATCH (c:{COMMITMENT})-[:{CLOSED_BY}]->(k)
WITH k, collect(c.key) AS closed
DETACH DELETE k
RETURN collect(closed) AS touched, count(*) AS deleted
"""

# -- deleting the subjects themselves ----------------------------------------------------------

# The participant and its edges (trust grants, ownership); agents it owned forget the owner.
DELETE_PARTICIPANT: Final = f"""
MATCH (p:{PARTICIPANT} {{key: $key}})
CALL (p) {{
  MATCH (a:{AGENT_NODE})-[:{OWNED_BY}]->(p)
  REMOVE a.owner_key
  RETURN count(a) AS owned
}}
DETACH DELETE p
RETURN count(*) AS deleted
"""

# The agent loses its trust grants and owner; the node itself goes unless other agents'
# memory still holds it (episodes it said, memory about it or owed by or to it).
DELETE_AGENT: Final = f"""
MATCH (a:{AGENT_NODE} {{key: $key}})
CALL (a) {{
  MATCH (a)-[r:{TRUSTS}|{OWNED_BY}]->()
  DELETE r
  RETURN count(r) AS edges
}}
REMOVE a.owner_key
WITH a, EXISTS {{ (a)-[:{SAID}]->(:{EPISODE}) }}
     OR EXISTS {{ (a)<-[:{ABOUT}|{OWED_BY_REL}|{OWED_TO}]-() }} AS referenced
CALL (a, referenced) {{
  WITH a, referenced WHERE NOT referenced
  DETACH DELETE a
  RETURN count(*) AS deleted
}}
RETURN deleted, referenced
"""

DELETE_CHANNEL: Final = f"""
MATCH (c:{CHANNEL} {{key: $key}})
DETACH DELETE c
RETURN count(*) AS deleted
"""

# -- summaries -----------------------------------------------------------------------------------

SUMMARY_VERSIONS: Final = f"""
MATCH (s:{SUMMARY})
WHERE s.agent_key = $agent_key AND s.channel_key = $channel_key AND s.current IS NOT NULL
RETURN count(s) AS versions
"""

# Every version of the pair goes (older versions are audit copies of the same text), then the
# rebuilt one is written as the next version, only over the version the rebuild read: a fold
# that raced past the lock writes nothing, like a fold that lost to another (cypher/summary.py).
REPLACE_SUMMARY: Final = f"""
OPTIONAL MATCH (cur:{SUMMARY})
WHERE cur.agent_key = $agent_key AND cur.channel_key = $channel_key AND cur.current = true
WITH collect(cur) AS currents
WHERE coalesce(head(currents).version, 0) = $expected_version
CALL () {{
  MATCH (old:{SUMMARY})
  WHERE old.agent_key = $agent_key AND old.channel_key = $channel_key AND old.current IS NOT NULL
  DETACH DELETE old
  RETURN count(*) AS removed
}}
CALL () {{
  WITH 1 AS go WHERE $props IS NOT NULL
  MATCH (a:{AGENT_NODE} {{key: $agent_key}})
  MATCH (c:{CHANNEL} {{key: $channel_key}})
  MERGE (s:{SUMMARY} {{key: $key}})
  ON CREATE SET s += $props, s.current = true,
                s.embed_pending = CASE WHEN $props.text <> '' THEN true END
  MERGE (a)-[:{SUMMARISED}]->(s)
  MERGE (s)-[:{OF}]->(c)
  RETURN count(s) AS written
}}
RETURN removed, written
"""
