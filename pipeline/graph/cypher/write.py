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
    MEMBER_OF,
    OBSERVED,
    OWED_BY_REL,
    OWED_TO,
    OWNED_BY,
    PARTICIPANT,
    SAID,
    SUPERSEDED_BY,
)

# -- writer: one sync batch, each statement an UNWIND over rows sorted by key --------------------


def _from_epoch_us(value: str) -> str:
    """A UTC datetime from microseconds since 1970 (see writer.epoch_us)."""
    return f"datetime({{epochSeconds: {value} / 1000000, nanosecond: {value} % 1000000 * 1000}})"


def _differs(stored: str, given: str) -> str:
    """Null-safe inequality: a stored null and a given null are the same."""
    return f"coalesce({stored}, '\\u0000') <> coalesce({given}, '\\u0000')"


# Shared nodes (participants, channels, agents) are written only when something changed: a SET,
# even of the value already stored, write-locks the node until commit, and every transaction of
# a busy channel touches the same few nodes, so unconditional SETs would serialise them all.
MERGE_PARTICIPANTS: Final = f"""
UNWIND $rows AS row
MERGE (p:{PARTICIPANT} {{key: row.key}})
ON CREATE SET p.tenant = row.tenant, p.id = row.id, p.kind = row.kind
WITH p, row, row.provisional AND p.label IS NOT NULL AS keep_names
WHERE {_differs("p.anonymous", "row.anonymous")}
   OR (NOT keep_names AND ({_differs("p.display_name", "row.display_name")}
                           OR {_differs("p.handle", "row.handle")}
                           OR {_differs("p.label", "row.label")}))
SET p += CASE WHEN keep_names THEN {{}}
              ELSE {{display_name: row.display_name, handle: row.handle, label: row.label}} END,
    p.anonymous = row.anonymous
"""

MARK_AGENTS: Final = f"""
UNWIND $keys AS key
MATCH (p:{PARTICIPANT} {{key: key}})
WHERE NOT p:{AGENT}
SET p:{AGENT}
"""

# Ownership is set once, by the first claim. An agent with an owner is only read; one without is
# write-locked before its OWNED_BY edges are read again, so two concurrent first claims
# serialise and the second sees the first. Returns the recorded owner of every claimed agent,
# for the writer to refuse mismatched claims.
MERGE_OWNERS: Final = f"""
UNWIND $rows AS row
MATCH (a:{AGENT_NODE} {{key: row.agent_key}})
OPTIONAL MATCH (a)-[:{OWNED_BY}]->(seen:{PARTICIPANT})
WITH a, row, min(seen.key) AS seen
OPTIONAL CALL (a, row, seen) {{
  WITH a, row WHERE seen IS NULL
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
  RETURN coalesce(current, row.owner_key) AS claimed
}}
RETURN a.key AS agent_key, coalesce(seen, claimed) AS owner_key
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
WITH c, row
WHERE {_differs("c.kind", "row.kind")}
   OR (row.title IS NOT NULL AND {_differs("c.title", "row.title")})
SET c.kind = row.kind, c.title = coalesce(row.title, c.title)
"""

# Who was listed in a turn of a channel, spoken or silent. Almost every row is already there;
# the check before the MERGE keeps those rows to a read, since creating the edge write-locks the
# participant and the channel, which every transaction of the channel shares.
MERGE_MEMBERS: Final = f"""
UNWIND $rows AS row
MATCH (p:{PARTICIPANT} {{key: row.participant_key}})
MATCH (c:{CHANNEL} {{key: row.channel_key}})
WITH p, c WHERE NOT EXISTS {{ (p)-[:{MEMBER_OF}]->(c) }}
MERGE (p)-[:{MEMBER_OF}]->(c)
"""

# Who was listed in a turn no agent remembers, kept only as the channel's audience: a node is
# created bare when new and never renamed or re-kinded, since such a turn teaches nothing.
MERGE_LISTED: Final = f"""
UNWIND $rows AS row
MERGE (p:{PARTICIPANT} {{key: row.key}})
ON CREATE SET p.tenant = row.tenant, p.id = row.id, p.kind = row.kind
"""

MERGE_LISTED_CHANNELS: Final = f"""
UNWIND $rows AS row
MERGE (c:{CHANNEL} {{key: row.key}})
ON CREATE SET c.tenant = row.tenant, c.id = row.id, c.kind = row.kind, c.title = row.title
"""

# The first write of a message wins: a row whose (speaker, text) fingerprint differs from the
# stored one adds no SAID or IN edge and is returned, so nobody is credited with text they never
# saw. An episode stored before fingerprints counts as the same when its text and speaker match.
# An episode this statement creates gets its edges by CREATE and is returned as fresh: no other
# transaction can hold edges to it, and a MERGE of a missing edge would write-lock the speaker and
# the channel, which every transaction of the channel shares. `_fresh` never outlives the row.
MERGE_EPISODES: Final = f"""
UNWIND $rows AS row
MATCH (s:{PARTICIPANT} {{key: row.speaker_key}})
MATCH (c:{CHANNEL} {{key: row.channel_key}})
MERGE (e:{EPISODE} {{key: row.key}})
ON CREATE SET e.tenant = row.tenant, e.id = row.id, e.role = row.role, e.content = row.content,
              e.speaker_label = row.speaker_label, e.speaker_id = row.speaker_id,
              e.fingerprint = row.fingerprint, e.created_at = {_from_epoch_us("row.created_us")},
              e.channel_key = row.channel_key, e.embed_pending = true, e._fresh = true
WITH s, c, e, row, e._fresh IS NOT NULL AS fresh
FOREACH (_ IN CASE WHEN fresh THEN [1] ELSE [] END |
  CREATE (s)-[:{SAID}]->(e)
  CREATE (e)-[:{IN}]->(c)
  REMOVE e._fresh
)
WITH s, c, e, row, fresh,
     CASE WHEN fresh THEN true
          WHEN e.fingerprint IS NULL
          THEN e.content = row.content AND EXISTS {{ MATCH (s)-[:{SAID}]->(e) }}
          ELSE e.fingerprint = row.fingerprint END AS same
FOREACH (_ IN CASE WHEN same AND NOT fresh THEN [1] ELSE [] END |
  SET e.fingerprint = row.fingerprint, e.speaker_id = coalesce(e.speaker_id, row.speaker_id)
  MERGE (s)-[:{SAID}]->(e)
  MERGE (e)-[:{IN}]->(c)
)
WITH row, same, fresh
WHERE fresh OR NOT same
RETURN row.key AS key, fresh
"""

# One row per episode with all its observers of the batch. Each observer adds its own, the
# channel's and the speaker's scope terms to the episode (once each: every term is 20 digits,
# so a term is in the string only as a whole term), for scoped keyword search. An episode
# created in this transaction (`fresh`) gets its OBSERVED edges by CREATE, as in
# MERGE_EPISODES, and its whole scope string at once. An older episode that gains an observer
# loses its vector and waits to be embedded again: a vector in conversation may hold words of
# neighbours the new observer never heard (pipeline/graph/contextvectors.py).
MERGE_OBSERVED: Final = f"""
UNWIND $rows AS row
MATCH (e:{EPISODE} {{key: row.episode_key}})
CALL (e, row) {{
  UNWIND row.observers AS o
  MATCH (a:{AGENT_NODE} {{key: o.agent_key}})
  FOREACH (_ IN CASE WHEN row.fresh THEN [1] ELSE [] END |
    CREATE (a)-[:{OBSERVED} {{synced_at: $synced_at, event_id: o.event_id}}]->(e)
  )
  FOREACH (_ IN CASE WHEN row.fresh THEN [] ELSE [1] END |
    MERGE (a)-[r:{OBSERVED}]->(e)
    ON CREATE SET r.synced_at = $synced_at, r.event_id = o.event_id,
                  e.embed_pending = true, e.embedding = null, e.embedded_with = null,
                  e.embedded_next = null
  )
}}
SET e.scope = CASE WHEN row.fresh THEN row.scope
                   ELSE reduce(s = coalesce(e.scope, ''), t IN row.terms |
                               CASE WHEN s CONTAINS t THEN s ELSE trim(s + ' ' + t) END) END
"""

# -- writer: memory (facts, commitments), in the same transaction as the episodes they cite --------


def _subject(person: str, channel: str, key: str) -> str:
    """Find the participant or channel `key` names, looking in one index only.

    `$channels` holds the batch's channel keys. A write query's unique-index lookup of a key that
    is not there locks the key (so nothing can create it meanwhile): looking for a participant's
    key among channels would serialise every transaction with memory about that participant.
    """
    return (
        f"OPTIONAL MATCH ({person}:{PARTICIPANT} "
        f"{{key: CASE WHEN {key} IN $channels THEN null ELSE {key} END}})\n"
        f"OPTIONAL MATCH ({channel}:{CHANNEL} "
        f"{{key: CASE WHEN {key} IN $channels THEN {key} END}})"
    )


# New memory nodes get their edges by CREATE, for the reason given at MERGE_EPISODES; the agent
# and episode are matched first, so a node is never left half-written with its flag set.
MERGE_FACTS: Final = f"""
UNWIND $rows AS row
MATCH (a:{AGENT_NODE} {{key: row.props.agent_key}})
MATCH (e:{EPISODE} {{key: row.evidence_key}})
MERGE (f:{FACT} {{key: row.key}})
ON CREATE SET f += row.props, f.last_confirmed = row.props.stated_at, f.embed_pending = true,
              f._fresh = true
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
WITH a, e, f, row, f._fresh IS NOT NULL AS fresh
{_subject("p", "c", "row.props.subject_key")}
WITH a, e, f, row, fresh, [x IN [p, c] WHERE x IS NOT NULL] AS subjects
FOREACH (_ IN CASE WHEN fresh THEN [1] ELSE [] END |
  CREATE (a)-[:{KNOWS}]->(f)
  CREATE (f)-[:{EVIDENCE}]->(e)
  FOREACH (x IN subjects | CREATE (f)-[:{ABOUT}]->(x))
  REMOVE f._fresh
)
FOREACH (_ IN CASE WHEN fresh THEN [] ELSE [1] END |
  MERGE (a)-[:{KNOWS}]->(f)
  MERGE (f)-[:{EVIDENCE}]->(e)
  FOREACH (x IN subjects | MERGE (f)-[:{ABOUT}]->(x))
)
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
WITH DISTINCT f, newer, CASE WHEN newer IS NULL THEN null ELSE newer.last_confirmed END AS at
// Set only when it changes: a SET write-locks the fact even when the value is the same.
FOREACH (_ IN CASE WHEN (f.superseded_at IS NULL AND at IS NULL) OR f.superseded_at = at
                   THEN [] ELSE [1] END |
  SET f.superseded_at = at
)
WITH f, newer
WHERE newer IS NOT NULL
MERGE (f)-[:{SUPERSEDED_BY}]->(newer)
"""

MERGE_COMMITMENTS: Final = f"""
UNWIND $rows AS row
MATCH (a:{AGENT_NODE} {{key: row.props.agent_key}})
MATCH (e:{EPISODE} {{key: row.evidence_key}})
MATCH (by:{PARTICIPANT} {{key: row.props.owed_by_key}})
MERGE (c:{COMMITMENT} {{key: row.key}})
ON CREATE SET c += row.props, c.channel_key = e.channel_key, c.status = 'open',
              c.embed_pending = true, c._fresh = true
ON MATCH SET c.tenant = row.props.tenant, c.channel_key = coalesce(c.channel_key, e.channel_key)
WITH a, e, by, c, row, c._fresh IS NOT NULL AS fresh
{_subject("p", "ch", "row.props.owed_to_key")}
WITH a, e, by, c, fresh, [x IN [p, ch] WHERE x IS NOT NULL] AS owed
FOREACH (_ IN CASE WHEN fresh THEN [1] ELSE [] END |
  CREATE (a)-[:{KNOWS}]->(c)
  CREATE (c)-[:{EVIDENCE}]->(e)
  CREATE (c)-[:{OWED_BY_REL}]->(by)
  FOREACH (x IN owed | CREATE (c)-[:{OWED_TO}]->(x))
  REMOVE c._fresh
)
FOREACH (_ IN CASE WHEN fresh THEN [] ELSE [1] END |
  MERGE (a)-[:{KNOWS}]->(c)
  MERGE (c)-[:{EVIDENCE}]->(e)
  MERGE (c)-[:{OWED_BY_REL}]->(by)
  FOREACH (x IN owed | MERGE (c)-[:{OWED_TO}]->(x))
)
"""

# Closures are stored on their own, so one that arrives before its commitment still finds it.
MERGE_CLOSURES: Final = f"""
UNWIND $rows AS row
MATCH (e:{EPISODE} {{key: row.props.evidence_key}})
MERGE (k:{CLOSURE} {{key: row.key}})
ON CREATE SET k += row.props, k.channel_key = e.channel_key, k._fresh = true
ON MATCH SET k.channel_key = coalesce(k.channel_key, e.channel_key)
WITH e, k, k._fresh IS NOT NULL AS fresh
FOREACH (_ IN CASE WHEN fresh THEN [1] ELSE [] END |
  CREATE (k)-[:{EVIDENCE}]->(e)
  REMOVE k._fresh
)
FOREACH (_ IN CASE WHEN fresh THEN [] ELSE [1] END | MERGE (k)-[:{EVIDENCE}]->(e))
"""


def _overlaps(k: str, c: str) -> str:
    """Closure k names commitment c: a bare "done", or either wording contains the other."""
    return (
        f"({k}.value = '' OR toLower({c}.value) CONTAINS {k}.value "
        f"OR {k}.value CONTAINS toLower({c}.value))"
    )


def _acted(k: str, c: str) -> str:
    """Closure k, a tool call's act, names commitment c: one of k's word stems begins a word of
    c."""
    return f"any(w IN split({k}.value, ' ') WHERE (' ' + toLower({c}.value)) CONTAINS (' ' + w))"


# A closure closes the speaker's most recent commitment opened before it whose wording overlaps
# (or simply the most recent one, for a bare "done") among those promised in its channel or to
# the one it is said to (Devon's DM closes what was promised to Devon in the team channel; an
# agent serving many customers closes one customer's promise in that customer's conversation
# only); the latest such closure sets the status. A tool call's act (`by_call`) closes every
# promise of its channel that names the act: an agent that asked "shall I cancel it?" three
# times has cancelled once. Each search is an index seek on the pair and the channel, or the
# pair and the one owed.
# Only closures from `since` on (the earliest commitment or closure the batch adds to the pair)
# can change their pick, so only they are resolved again: a commitment opened at t can take
# over closures made after t, and a new closure picks among every stored commitment. Whatever
# order the turns arrive in, each closure ends on the same pick. Returns the commitments whose
# closures changed, for RESTATUS_COMMITMENTS. The cost follows the batch, not the history.
RESOLVE_CLOSURES: Final = f"""
UNWIND $pairs AS p
MATCH (k:{CLOSURE} {{agent_key: p.agent_key, owed_by_key: p.owed_by_key}})
WHERE k.closed_at >= p.since
OPTIONAL CALL (k) {{
  MATCH (c:{COMMITMENT} {{agent_key: k.agent_key, owed_by_key: k.owed_by_key,
                        channel_key: k.channel_key}})
  WHERE c.opened_at <= k.closed_at
    AND CASE WHEN k.by_call THEN {_acted("k", "c")} ELSE {_overlaps("k", "c")} END
  RETURN c
  UNION
  MATCH (c:{COMMITMENT} {{agent_key: k.agent_key, owed_by_key: k.owed_by_key,
                        owed_to_key: k.owed_to_key}})
  WHERE c.opened_at <= k.closed_at AND {_overlaps("k", "c")}
  RETURN c
}}
WITH k, c ORDER BY c.opened_at DESC, c.key DESC
WITH k, collect(c) AS found
WITH k, CASE WHEN k.by_call THEN found ELSE found[0..1] END AS targets
OPTIONAL MATCH (prev:{COMMITMENT})-[old:{CLOSED_BY}]->(k)
WITH k, targets, collect(prev) AS prevs, collect(old) AS olds
FOREACH (i IN range(0, size(olds) - 1) |
  FOREACH (_ IN CASE WHEN prevs[i] IN targets THEN [] ELSE [1] END | DELETE olds[i])
)
FOREACH (t IN targets | MERGE (t)-[:{CLOSED_BY}]->(k))
WITH targets, prevs
UNWIND targets + prevs AS touched
WITH DISTINCT touched
RETURN touched.key AS key
"""

# A commitment's status and closing time come from the latest closure that closes it.
RESTATUS_COMMITMENTS: Final = f"""
UNWIND $keys AS key
MATCH (c:{COMMITMENT} {{key: key}})
OPTIONAL MATCH (c)-[:{CLOSED_BY}]->(k:{CLOSURE})
WITH c, k ORDER BY k.closed_at, k.key
WITH c, collect(k) AS closures
WITH c, coalesce(closures[-1].status, 'open') AS status, closures[-1].closed_at AS at
WHERE c.status IS NULL OR c.status <> status
   OR NOT ((c.closed_at IS NULL AND at IS NULL) OR c.closed_at = at)
SET c.status = status, c.closed_at = at
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
