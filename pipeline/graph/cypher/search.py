"""Recall's statements: full-text and vector search per label, each restricted to what one agent
may see (the vector search either through the index or, over a small scope, by exact cosine),
the neighbours of a hit, and the recent-episodes fallback; plus the Lucene query builder, so
user text never reaches Lucene's syntax unescaped."""

from __future__ import annotations

import functools
import re
from datetime import timedelta
from typing import Final

from pipeline.english.terms import ANALYSER_STOP_WORDS, QUESTION_WORDS
from pipeline.graph.cypher.adjacency import adjacent
from pipeline.graph.cypher.instant import micros
from pipeline.graph.model import (
    ABOUT,
    AGENT_NODE,
    CHANNEL,
    COMMITMENT,
    EPISODE,
    EVIDENCE,
    FACT,
    IN,
    KNOWS,
    MEMBER_OF,
    OBSERVED,
    OF,
    OWED_BY_REL,
    OWED_TO,
    PARTICIPANT,
    SAID,
    SEGMENT,
    SUMMARISED,
    SUMMARY,
    SUPERSEDED_BY,
)
from pipeline.segment import SITTING_GAP

# -- Lucene ---------------------------------------------------------------------------------------

# Every character Lucene's classic query parser treats as syntax.
_LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')
_OPERATORS = frozenset({"AND", "OR", "NOT", "TO"})
# Lucene refuses more than 1024 clauses; a question never needs this many words (with one
# phrase per adjacent pair, the query stays under 2 * MAX_TERMS clauses).
MAX_TERMS: Final = 64


def _bare(word: str) -> str:
    """A word as the question-word list spells it: lower case, letters and digits only."""
    return "".join(ch for ch in word.lower() if ch.isalnum())


def lucene_query(text: str | None) -> str | None:
    """The user's words as a Lucene query: each escaped, any one may match (OR, ranked by BM25),
    plus each pair of adjacent words as a phrase, so text that has them together ranks higher.

    Words without a letter or digit, the parser's operator words (the English analyser ignores
    them anyway) and QUESTION_WORDS are dropped. None when no word is left beyond those and the
    analyser's stop words ("what is it?"): nothing says what to look for, so recall falls back
    to recency.
    """
    if not text:
        return None
    words = [w for w in text.split() if any(ch.isalnum() for ch in w)]
    kept = [w for w in words if _bare(w) not in QUESTION_WORDS][:MAX_TERMS]
    if not {_bare(w) for w in kept} - ANALYSER_STOP_WORDS:
        return None
    terms = [_LUCENE_SPECIAL.sub(r"\\\1", w.lower() if w in _OPERATORS else w) for w in kept]
    # Inside quotes every term keeps its escapes (a quote in a word is \", never the phrase's end).
    # A phrase holding one of the analyser's stop words would match with a gap where the word
    # was, so none is built from them.
    phrases = [
        f'"{terms[i]} {terms[i + 1]}"'
        for i in range(len(kept) - 1)
        if not {_bare(kept[i]), _bare(kept[i + 1])} & ANALYSER_STOP_WORDS
    ]
    return " ".join(terms + phrases)


def content_query(lucene: str) -> str:
    """`lucene` asked of an episode's content alone (not its speaker's label). A full-text query
    over several fields adds up each field's score, so this is the content's part of it."""
    return f"content:({lucene})"


def scoped_query(lucene: str, terms: list[str]) -> str:
    """`lucene` held to nodes carrying every one of the scope terms (schemas/keys.py
    scope_token). The terms are required but weigh nothing (boost 0), so scores stay those of
    the words; and the words stay required too, or a bare scope match would be a hit."""
    required = " ".join(f"+scope:{term}^0" for term in terms)
    return f"{required} +({lucene})"


# -- scope: what one agent may see ----------------------------------------------------------------


def observed_by_agent(node: str) -> str:
    """The episode `node` is one the agent `$agent_key` observed (checked from the episode's few
    OBSERVED edges, never by walking everything the agent observed)."""
    return f"EXISTS {{ (:{AGENT_NODE} {{key: $agent_key}})-[:{OBSERVED}]->({node}) }}"


# Episodes the agent observed, of the tenant, in the channel when one is given, said by
# `about`, inside the time window. Every episode has channel_key: `memsync graph init` gives it
# to those written before it existed (cypher/scope.py).
_EPISODE_FILTER = f"""e.tenant = $tenant
  AND ($channel_key IS NULL OR e.channel_key = $channel_key)
  AND ($about_key IS NULL OR EXISTS {{ (:{PARTICIPANT} {{key: $about_key}})-[:{SAID}]->(e) }})
  AND ($since IS NULL OR e.created_at >= $since)
  AND ($until IS NULL OR e.created_at < $until)
"""

_EPISODE_SCOPE = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{OBSERVED}]->(e:{EPISODE})
WHERE {_EPISODE_FILTER}"""

_EPISODE_FIELDS = f"""
RETURN e.key AS key, e.id AS id, e.content AS text, e.speaker_label AS speaker_label,
       coalesce(e.speaker_id, head([(s:{PARTICIPANT})-[:{SAID}]->(e) | s.id])) AS speaker_id,
       {micros("e.created_at")} AS created_at,
       e.channel_key AS channel_key,
       head([(e)-[:{IN}]->(c:{CHANNEL}) | c.id]) AS channel_id"""

_EPISODE_RETURN = f"""{_EPISODE_FIELDS}, score
ORDER BY score DESC, key
LIMIT $limit
"""


def audience_filter(node: str) -> str:
    """Relationship memory may enter the target channel only if its audience could have heard it.

    Evidence in the target channel itself or in a public channel is fine. Evidence in a group
    channel, or in a DM under `dm_policy = 'same_people'`, is fine when everyone in the target
    channel (other than the recalling agent) is a member of that channel too; evidence only in
    DMs under `never` stays in its DM. Members are the MEMBER_OF edges: everyone a turn listed,
    spoken or not. A public target channel, whose readers are not all known, and one with no
    members recorded admit nothing from elsewhere: an unknown audience errs towards not telling.
    """
    return f"""
  AND ($channel_key IS NULL OR EXISTS {{
    MATCH ({node})-[:{EVIDENCE}]->(:{EPISODE})-[:{IN}]->(src:{CHANNEL})
    WHERE src.key = $channel_key OR src.kind = 'public'
       OR ((src.kind <> 'dm' OR $dm_policy = 'same_people')
           AND EXISTS {{
             MATCH (target:{CHANNEL} {{key: $channel_key}})<-[:{MEMBER_OF}]-(:{PARTICIPANT})
             WHERE target.kind <> 'public'
           }}
           AND NOT EXISTS {{
             MATCH (:{CHANNEL} {{key: $channel_key}})<-[:{MEMBER_OF}]-(member:{PARTICIPANT})
             WHERE member.key <> $agent_key AND NOT EXISTS {{ (member)-[:{MEMBER_OF}]->(src) }}
           }})
  }})
"""


# Per label (facts and commitments): the node's own edge from the agent.
_OWN: Final = {
    FACT: f"MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(f:{FACT})",
    COMMITMENT: f"MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{KNOWS}]->(m:{COMMITMENT})",
}

_FACT_SCOPE = f"""
{_OWN[FACT]}
WHERE f.tenant = $tenant
  AND ($include_stale OR (f.superseded_at IS NULL
                          AND (f.expires_at IS NULL OR f.expires_at > datetime())))
  AND ($about_key IS NULL OR EXISTS {{ (f)-[:{ABOUT}]->(:{PARTICIPANT} {{key: $about_key}}) }})
  AND ($sources IS NULL OR f.source IN $sources)
  AND ($since IS NULL OR f.stated_at >= $since)
  AND ($until IS NULL OR f.stated_at < $until)
{audience_filter("f")}
"""


def _evidence(node: str) -> str:
    """The platform ids of a node's evidence episodes in time order, and the first one's channel."""
    return f"""
COLLECT {{
  MATCH ({node})-[:{EVIDENCE}]->(ev:{EPISODE}) RETURN ev.id ORDER BY ev.created_at, ev.key
}} AS evidence,
head(COLLECT {{
  MATCH ({node})-[:{EVIDENCE}]->(ev:{EPISODE})-[:{IN}]->(c:{CHANNEL})
  RETURN c.id ORDER BY ev.created_at, ev.key
}}) AS channel_id"""


_FACT_RETURN = f"""
OPTIONAL MATCH (by:{PARTICIPANT} {{key: f.stated_by}})
RETURN f.key AS key, f.text AS text, f.source AS source, {micros("f.stated_at")} AS created_at,
       by.label AS speaker_label, by.id AS speaker_id,
       f.superseded_at IS NULL AND (f.expires_at IS NULL OR f.expires_at > datetime()) AS current,
       {_evidence("f")}, score
ORDER BY score DESC, key
LIMIT $limit
"""

_COMMITMENT_SCOPE = f"""
{_OWN[COMMITMENT]}
WHERE m.tenant = $tenant
  AND ($include_closed OR m.status = 'open')
  AND ($about_key IS NULL
       OR EXISTS {{ (m)-[:{OWED_BY_REL}|{OWED_TO}]->(:{PARTICIPANT} {{key: $about_key}}) }})
  AND ($sources IS NULL OR m.source IN $sources)
  AND ($since IS NULL OR m.opened_at >= $since)
  AND ($until IS NULL OR m.opened_at < $until)
{audience_filter("m")}
"""

# The message a commitment answers: the latest before its first evidence, in the same sitting
# of that channel, said by someone else and observed by the agent ("I'll do that for you" names
# nothing without it); sought only for a commitment (`m`) whose text points back (`$points_back`).
# The time bound is part of the index seek, so a long monologue before the commitment costs at
# most one sitting's messages.
_MINUTE: Final = timedelta(minutes=1)
_ASKED_BY_OTHER = (
    "coalesce(p.speaker_id, '') <> coalesce(ev.speaker_id, '')"
    f" AND p.created_at >= ev.created_at - duration({{minutes: {SITTING_GAP // _MINUTE}}})"
    f" AND {observed_by_agent('p')}"
)
ASKED: Final = f"""
MATCH (m)-[:{EVIDENCE}]->(ev:{EPISODE})
WHERE m.text =~ $points_back
WITH ev ORDER BY ev.created_at, ev.key LIMIT 1
CALL (ev) {{{adjacent("ev", "p", before=True, where=_ASKED_BY_OTHER)}
}}
RETURN {{label: p.speaker_label, text: p.content}} AS asked
"""


def replaced_values(commitment: str, subjects: str) -> str:
    """Subquery rows (`change`): values the open commitment `commitment` quotes that changed after
    it was made ("I will track the 2000 EUR budget", then "my budget is 2500 EUR").

    The agent's facts about `subjects` (a list expression) whose value its text contains and
    that a later statement replaced, each with the current replacement, the ids of the messages
    stating it and the channel of the latest, if the audience may hear it. A seek of the
    (agent_key, subject_key, slot) index per subject; commas are dropped on both sides here
    (a superset: "2,000 EUR" and "2000 EUR" are one value), whole words and only thousands'
    commas are checked by the caller (pipeline/context.py `quotes`).

    Its variables are named apart from those of the statements it goes into (`c`, `m`, `ev`),
    and it aggregates only in COLLECT subqueries: an aggregating function here made Neo4j read
    the enclosing RETURN as an aggregation.
    """
    return f"""
MATCH (was:{FACT})
WHERE {commitment}.status = 'open' AND was.agent_key = $agent_key
  AND was.subject_key IN {subjects}
  AND was.slot IS NOT NULL AND was.tenant = $tenant
  AND was.superseded_at > {commitment}.opened_at
  AND replace(toLower({commitment}.text), ',', '') CONTAINS replace(toLower(was.value), ',', '')
MATCH (was)-[:{SUPERSEDED_BY}]->+(now:{FACT})
WHERE now.superseded_at IS NULL
{audience_filter("now")}
RETURN {{value: was.value, was: was.text, now: now.text,
        evidence: COLLECT {{
          MATCH (now)-[:{EVIDENCE}]->(stated:{EPISODE})
          RETURN stated.id ORDER BY stated.created_at, stated.key
        }},
        said_in: COLLECT {{
          MATCH (now)-[:{EVIDENCE}]->(stated:{EPISODE})-[:{IN}]->(stated_in:{CHANNEL})
          RETURN stated_in.id ORDER BY stated.created_at DESC, stated.key DESC LIMIT 1
        }}[0]}} AS change
"""


# Who was in the channel a commitment `m` was made in (the first 64 members): whose facts its
# text may quote ("I will track the 2000 EUR budget" names nobody).
_MADE_AMONG: Final = f"""COLLECT {{
  MATCH (m)-[:{EVIDENCE}]->(:{EPISODE})-[:{IN}]->(:{CHANNEL})<-[:{MEMBER_OF}]-(member:{PARTICIPANT})
  RETURN DISTINCT member.key AS member_key LIMIT 64
}}"""
# What commitment `m` quotes that was replaced since (`replaced_values` rows), looked for among
# the facts about its parties and the people it was made among.
OWED_CHANGES: Final = (
    f"COLLECT {{{replaced_values('m', '[m.owed_by_key, m.owed_to_key] + ' + _MADE_AMONG)}}}"
)
# The audience parameters of an operator's view (`memsync facts`, the inspector): no channel,
# so every replacement is named wherever it was said.
NO_AUDIENCE: Final = {"channel_key": None, "dm_policy": "never"}

_COMMITMENT_RETURN = f"""
OPTIONAL MATCH (by:{PARTICIPANT} {{key: m.owed_by_key}})
RETURN m.key AS key, m.text AS text, m.source AS source, {micros("m.opened_at")} AS created_at,
       m.status AS status, by.label AS speaker_label, by.id AS speaker_id,
       m.status = 'open' AS current, {_evidence("m")}, COLLECT {{{ASKED}}} AS asked, score
ORDER BY score DESC, key
LIMIT $limit
"""

# Only the current version of the agent's summary of a channel (one node per version, the
# newest flagged current: pipeline/graph/summaries.py); `about` keeps channels the participant
# spoke in.
_SUMMARY_SCOPE = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{SUMMARISED}]->(s:{SUMMARY})-[:{OF}]->(c:{CHANNEL})
WHERE s.tenant = $tenant AND s.current = true
  AND ($channel_key IS NULL OR c.key = $channel_key)
  AND ($about_key IS NULL OR EXISTS {{
    MATCH (:{PARTICIPANT} {{key: $about_key}})-[:{SAID}]->(:{EPISODE})-[:{IN}]->(c)
  }})
  AND ($since IS NULL OR s.covers_until >= $since)
"""

_SUMMARY_RETURN = f"""
RETURN s.key AS key, s.text AS text, {micros("s.covers_until")} AS created_at, c.id AS channel_id,
       c.key AS channel_key, score
ORDER BY score DESC, key
LIMIT $limit
"""

# Lucene returns only its `$k` best, so `$lucene` must already hold the query to the agent's
# scope terms (scoped_query); the graph filter after it is the authority on what may be seen.
_FULLTEXT = "CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $k}) YIELD node, score\n"
# The vector index spans every tenant and agent: it is asked for `$k` (oversampled) neighbours
# and the scope filter keeps the agent's own.
_VECTOR = "CALL db.index.vector.queryNodes($index, $k, $vector) YIELD node, score\n"

# Per label: the node's variable, what the scope filter binds that the return needs, the
# scope filter, and the return.
_SCOPES: Final = {
    EPISODE: ("e", "e", _EPISODE_SCOPE, _EPISODE_RETURN),
    FACT: ("f", "f", _FACT_SCOPE, _FACT_RETURN),
    COMMITMENT: ("m", "m", _COMMITMENT_SCOPE, _COMMITMENT_RETURN),
    SUMMARY: ("s", "s, c", _SUMMARY_SCOPE, _SUMMARY_RETURN),
}


def _search(source: str, label: str) -> str:
    var, bound, scope, tail = _SCOPES[label]
    return (
        f"{source}WITH node AS {var}, score WHERE {var}:{label}\n{scope}WITH {bound}, score{tail}"
    )


def _exact(scope: str, label: str) -> str:
    # `embedded_with` (a short string, set with every vector) says a node has a vector without
    # reading the vector itself: the cosine reads it once.
    var, bound, _, tail = _SCOPES[label]
    return (
        f"{scope}  AND {var}.embedded_with IS NOT NULL\n"
        f"WITH {bound}, vector.similarity.cosine({var}.embedding, $vector) AS score{tail}"
    )


def _exact_then_filter(label: str) -> str:
    """Exact cosine over the agent's own nodes, then the full scope filter on the `$k` best only:
    the DM audience rule walks each node's evidence, which costs more than the cosine."""
    var, bound, scope, tail = _SCOPES[label]
    return (
        f"{_OWN[label]}\nWHERE {var}.embedded_with IS NOT NULL\n"
        f"WITH {var}, vector.similarity.cosine({var}.embedding, $vector) AS score\n"
        f"ORDER BY score DESC LIMIT $k\n{scope}WITH {bound}, score{tail}"
    )


# Per label: the keyword (full-text) and vector statements, each scoped to the agent.
KEYWORD_SEARCH: Final = {label: _search(_FULLTEXT, label) for label in _SCOPES}
VECTOR_SEARCH: Final = {label: _search(_VECTOR, label) for label in _SCOPES}
# The agent's segments (pipeline/segment.py) that match, with the episodes each covers: recall
# ranks a message partly by its segment's score. Segments are the agent's own by key.
SEGMENT_KEYWORD_SEARCH: Final = f"""{_FULLTEXT}WITH node AS s, score
WHERE s:{SEGMENT} AND s.tenant = $tenant AND s.agent_key = $agent_key
  AND ($channel_key IS NULL OR s.channel_key = $channel_key)
RETURN s.key AS key, coalesce(s.episode_keys, []) AS covers, score
ORDER BY score DESC, key
LIMIT $limit
"""
# The same words asked of what episodes say alone (content_query), not of who said them, under
# the same scope: recall lets a neighbour pass on only that part of its keyword score, and the
# best of these are candidates too, so a question naming someone does not crowd out, with
# everything that person said, the message that says what was asked.
SAID_PART: Final = "Said"
SAID_KEYWORD_SEARCH: Final = _search(_FULLTEXT, EPISODE)
# Per label (episodes, facts, commitments): the reader's vector cache proposed `$candidates`
# (key, score); the agent's whole scope is checked here, on the nodes as they are now.
CACHED_VECTOR_SEARCH: Final = {
    label: _search(
        "UNWIND $candidates AS candidate\n"
        f"MATCH (node:{label} {{key: candidate.key}}) WHERE node.embedded_with IS NOT NULL\n"
        "WITH node, candidate.score AS score\n",
        label,
    )
    for label in (EPISODE, FACT, COMMITMENT)
}
# Per label: exact cosine over everything in the agent's scope (no index, no oversampling), for
# scopes small enough to scan; scores on the vector index's scale ((1 + cosine) / 2).
EXACT_VECTOR_SEARCH: Final = {
    label: _exact_then_filter(label) if label in _OWN else _exact(_SCOPES[label][2], label)
    for label in _SCOPES
}
# Exact cosine over one channel's episodes (found through the channel_key index), for an agent
# too big to scan whose recall is held to a small channel.
EXACT_CHANNEL_VECTOR_SEARCH: Final = _exact(
    f"""
MATCH (e:{EPISODE})
WHERE e.channel_key = $channel_key AND e.created_at IS NOT NULL
  AND {observed_by_agent("e")}
  AND {_EPISODE_FILTER}""",
    EPISODE,
)
# The same when recall is held to nothing but the channel: the cosine runs over the channel's
# embedded episodes first, and only its `$k` best are checked against the agent's OBSERVED
# edges (checking every episode's edges cost as much as the cosines). An agent usually
# remembers most of a channel it is in; when fewer than `$limit` of the `$k` pass, search.py
# runs EXACT_CHANNEL_VECTOR_SEARCH instead.
CHANNEL_VECTOR_THEN_SCOPE: Final = f"""
MATCH (e:{EPISODE})
WHERE e.channel_key = $channel_key AND e.created_at IS NOT NULL AND e.embedded_with IS NOT NULL
WITH e, vector.similarity.cosine(e.embedding, $vector) AS score
ORDER BY score DESC LIMIT $k
WITH e, score WHERE e.tenant = $tenant AND {observed_by_agent("e")}{_EPISODE_RETURN}"""
# What _EPISODE_FIELDS returns, as a search part and the neighbour statement name it.
_EPISODE_COLUMNS: Final = "key id text speaker_label speaker_id created_at channel_key channel_id"
# What each label's search statement returns, so one statement can carry several labels' rows.
_COLUMNS: Final = {
    EPISODE: f"{_EPISODE_COLUMNS} score",
    FACT: "key text source created_at speaker_label speaker_id current evidence channel_id score",
    COMMITMENT: "key text source created_at status speaker_label speaker_id current evidence "
    "channel_id asked score",
    SUMMARY: "key text created_at channel_id channel_key score",
    SEGMENT: "key covers score",
    SAID_PART: f"{_EPISODE_COLUMNS} score",
}
# The parameters that differ between labels; a combined statement names them per label.
_PER_LABEL = re.compile(r"\$(index|lucene|k|limit|candidates)\b")


def per_label(name: str, label: str) -> str:
    """The name parameter `name` of `label`'s part takes in a combined statement (as
    `combined` renames it)."""
    return f"{name}_{label}"


@functools.cache
def combined(parts: tuple[tuple[str, str], ...]) -> str:
    """One statement running each (label, statement) part as its own subquery, one record per
    part: its label and its rows as a list (several searches in one round trip, and a handful
    of records instead of one per row, each of which costs the driver more than its decoding).
    Each part's `$index`, `$lucene`, `$k` and `$limit` become `per_label(name, label)`; the
    scope parameters are shared. Labels are the model's constants, never input."""
    if not parts:
        raise ValueError("a combined search needs at least one part")
    return "\nUNION ALL\n".join(
        as_one_record(_PER_LABEL.sub(rf"$\1_{label}", statement), _COLUMNS[label], label)
        for label, statement in parts
    )


def as_one_record(statement: str, columns: str, label: str | None = None) -> str:
    """`statement` returning its rows (maps of the named `columns`) as one list in one record,
    `rows`, with `label` beside it when given: the driver's cost is per record, not per row."""
    tag = "" if label is None else f"'{label}' AS label, "
    return f"{collected(statement, columns)}RETURN {tag}rows"


def collected(statement: str, columns: str, *, into: str = "rows", carry: str = "") -> str:
    """`statement`'s rows (maps of the named `columns`) collected into `into`, for a statement
    to go on from; `carry` names earlier variables the statement reads. One row either way,
    the list empty when the statement finds nothing."""
    row = ", ".join(f"{column}: {column}" for column in columns.split())
    if not carry:
        return f"CALL () {{{statement}}}\nWITH collect({{{row}}}) AS {into}\n"
    # Collected inside: a subquery with no rows would drop the one row the statement carries.
    return (
        f"CALL ({carry}) {{\n  CALL ({carry}) {{{statement}}}\n"
        f"  RETURN collect({{{row}}}) AS {into}\n}}\n"
    )


# How big the agent's scope is, to choose between exact cosine and the vector index, and how
# big the index is. Messages: the agent's episodes (its OBSERVED degree), when recall is held to
# a channel the channel's (an index count), and all episodes (the label's count, kept by the
# store). Distilled memories: its facts and commitments (its KNOWS degree), and all of them.
EPISODE_SCOPE_SIZE: Final = f"""
OPTIONAL MATCH (a:{AGENT_NODE} {{key: $agent_key}})
CALL () {{ MATCH (n:{EPISODE}) RETURN count(n) AS all_episodes }}
RETURN COUNT {{ (a)-[:{OBSERVED}]->() }} AS episodes, all_episodes,
       CASE WHEN $channel_key IS NULL THEN NULL
            ELSE COUNT {{
              MATCH (e:{EPISODE})
              WHERE e.channel_key = $channel_key AND e.created_at IS NOT NULL
            }} END
         AS channel_episodes
"""
MEMORY_SCOPE_SIZE: Final = f"""
OPTIONAL MATCH (a:{AGENT_NODE} {{key: $agent_key}})
CALL () {{ MATCH (n:{FACT}) RETURN count(n) AS facts }}
CALL () {{ MATCH (n:{COMMITMENT}) RETURN count(n) AS commitments }}
RETURN COUNT {{ (a)-[:{KNOWS}]->() }} AS memories, facts + commitments AS all_memories
"""

# The search indexes and their states (only an ONLINE one can be queried).
SEARCH_INDEXES: Final = """
SHOW INDEXES YIELD name, type, state
WHERE type IN ['FULLTEXT', 'VECTOR']
RETURN name, state
"""


# The episodes just before and after each hit in its channel, by time, that the agent also
# observed (pipeline/graph/cypher/adjacency.py: index order, so a seek stops after `$window`).
_OBSERVED_N = observed_by_agent("n")


def _side(before: bool) -> str:
    return adjacent("hit", "n", before=before, where=_OBSERVED_N, limit="$window")


_NEIGHBOUR_ROWS: Final = f"""
UNWIND $keys AS hit_key
MATCH (hit:{EPISODE} {{key: hit_key}})
WHERE {observed_by_agent("hit")}
CALL (hit) {{{_side(before=True)}
  UNION{_side(before=False)}
}}
WITH hit, n AS e
WHERE ($since IS NULL OR e.created_at >= $since) AND ($until IS NULL OR e.created_at < $until)
{_EPISODE_FIELDS}, hit.key AS hit_key
"""
_NEIGHBOUR_COLUMNS: Final = f"{_EPISODE_COLUMNS} hit_key"
# Facts the agent learnt from the messages about to be shown (the hits and their neighbours)
# that a later statement replaced, each with the latest replacement stated in the same channel
# and the ids (and keys) of the messages stating it: so an old value in a window never reads
# as current. A replacement learnt in another channel is not named (it may not belong to this
# audience).
_CHANGED: Final = f"""
CALL (rows) {{
  UNWIND $keys + [row IN rows | row.key] AS shown_key
  WITH DISTINCT shown_key
  MATCH (e:{EPISODE} {{key: shown_key}})<-[:{EVIDENCE}]-(old:{FACT})
  WHERE old.agent_key = $agent_key AND old.superseded_at IS NOT NULL
  MATCH (old)-[:{SUPERSEDED_BY}]->+(new:{FACT})-[:{EVIDENCE}]->(later:{EPISODE})
  WHERE later.channel_key = e.channel_key AND {observed_by_agent("later")}
  WITH shown_key, old, new, collect(later.id) AS ids, collect(later.key) AS later_keys
  ORDER BY new.last_confirmed DESC, new.key
  WITH shown_key, old, collect({{now: new.text, evidence: ids, keys: later_keys}})[0] AS latest
  RETURN collect({{key: shown_key, was: old.text, now: latest.now, evidence: latest.evidence,
                  later: latest.keys}}) AS changed
}}
"""
# The messages stating those replacements that are not shown already (no retriever found them
# and no window reached them), inside the time window asked for: ranking puts each just above
# the message whose value it replaced.
_REPLACING_ROWS: Final = f"""
  UNWIND changed AS change
  UNWIND change.later AS later_key
  WITH DISTINCT later_key WHERE NOT later_key IN $keys + [row IN rows | row.key]
  MATCH (e:{EPISODE} {{key: later_key}})
  WHERE ($since IS NULL OR e.created_at >= $since) AND ($until IS NULL OR e.created_at < $until)
{_EPISODE_FIELDS}
"""
# Values quoted by the commitments that may be shown (`$commitment_keys`: the few that rank
# among the best `limit`) that were replaced since: read here, for those few, rather than in
# the search statements for every commitment row they return.
_OWED_CHANGED: Final = f"""
CALL () {{
  UNWIND $commitment_keys AS owed_key
  MATCH (m:{COMMITMENT} {{key: owed_key}})
  WITH m, {OWED_CHANGES} AS changes
  RETURN collect({{key: m.key, changed: changes}}) AS owed
}}
"""
# The hits' neighbours as one record (`rows`), what was since replaced among the messages they
# and the hits said (`changed`), the replacing messages not among them (`replacing`), and what
# the commitments asked about quote that was replaced (`owed`), in the same round trip.
NEIGHBOURS: Final = (
    f"{collected(_NEIGHBOUR_ROWS, _NEIGHBOUR_COLUMNS)}{_CHANGED}"
    f"{collected(_REPLACING_ROWS, _EPISODE_COLUMNS, into='replacing', carry='rows, changed')}"
    f"{_OWED_CHANGED}"
    "RETURN rows, changed, replacing, owed"
)

# No words to search for: the agent's most recent episodes in scope, newest first.
RECENT_EPISODES: Final = f"""
MATCH (:{AGENT_NODE} {{key: $agent_key}})-[:{OBSERVED}]->(e:{EPISODE})
WHERE {_EPISODE_FILTER}  AND NOT e.id IN $exclude_ids
WITH e ORDER BY e.created_at DESC, e.key DESC LIMIT $limit
{_EPISODE_FIELDS}, 0.0 AS score
ORDER BY created_at DESC, key DESC
"""
