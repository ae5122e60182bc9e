"""Schema statements: uniqueness constraints and indexes, created by `memsync graph init`."""

from __future__ import annotations

from typing import Final

from pipeline.graph.model import (
    CLOSURE,
    COMMITMENT,
    EPISODE,
    ERASURE,
    FACT,
    FULLTEXT_INDEXES,
    KEYED_LABELS,
    PARTICIPANT,
    RETIRED_INDEXES,
    SEGMENT,
    SEGMENT_SEARCH,
    SUMMARY,
)

# -- schema -------------------------------------------------------------------------------------

CONSTRAINTS: Final = tuple(
    f"CREATE CONSTRAINT {label.lower()}_key IF NOT EXISTS FOR (n:{label}) REQUIRE n.key IS UNIQUE"
    for label in KEYED_LABELS
)

INDEXES: Final = (
    f"CREATE INDEX participant_tenant_id IF NOT EXISTS FOR (n:{PARTICIPANT}) ON (n.tenant, n.id)",
    f"CREATE INDEX participant_tenant_label IF NOT EXISTS "
    f"FOR (n:{PARTICIPANT}) ON (n.tenant, n.label)",
    f"CREATE INDEX episode_created_at IF NOT EXISTS FOR (n:{EPISODE}) ON (n.created_at)",
    f"CREATE INDEX fact_agent_subject_slot IF NOT EXISTS "
    f"FOR (n:{FACT}) ON (n.agent_key, n.subject_key, n.slot)",
    f"CREATE INDEX commitment_agent_owed_by IF NOT EXISTS "
    f"FOR (n:{COMMITMENT}) ON (n.agent_key, n.owed_by_key)",
    f"CREATE INDEX closure_agent_owed_by IF NOT EXISTS "
    f"FOR (n:{CLOSURE}) ON (n.agent_key, n.owed_by_key)",
    # A pair's closures from a time on, and its latest commitment opened before a closure.
    f"CREATE INDEX closure_agent_owed_by_time IF NOT EXISTS "
    f"FOR (n:{CLOSURE}) ON (n.agent_key, n.owed_by_key, n.closed_at)",
    f"CREATE INDEX commitment_agent_owed_by_time IF NOT EXISTS "
    f"FOR (n:{COMMITMENT}) ON (n.agent_key, n.owed_by_key, n.opened_at)",
    # What a closure may close: the pair's promises in its channel, or to the one it is said to.
    f"CREATE INDEX commitment_agent_owed_by_channel_time IF NOT EXISTS "
    f"FOR (n:{COMMITMENT}) ON (n.agent_key, n.owed_by_key, n.channel_key, n.opened_at)",
    f"CREATE INDEX commitment_agent_owed_by_to_time IF NOT EXISTS "
    f"FOR (n:{COMMITMENT}) ON (n.agent_key, n.owed_by_key, n.owed_to_key, n.opened_at)",
    # Neighbouring messages of a recalled one: a channel's episodes in time order.
    f"CREATE INDEX episode_channel_time IF NOT EXISTS "
    f"FOR (n:{EPISODE}) ON (n.channel_key, n.created_at)",
    # The embedding backlog: nodes written but not yet embedded.
    *(
        f"CREATE INDEX {label.lower()}_embed_pending IF NOT EXISTS "
        f"FOR (n:{label}) ON (n.embed_pending)"
        for label in (EPISODE, FACT, COMMITMENT, SUMMARY)
    ),
    # What was embedded since a moment: the readers' vector caches catch up through it.
    *(
        f"CREATE INDEX {label.lower()}_embedded_at IF NOT EXISTS FOR (n:{label}) ON (n.embedded_at)"
        for label in (EPISODE, FACT, COMMITMENT)
    ),
    # Recall by keyword: English analysis (stemming, stop words), so "seat preference" finds
    # "I prefer an aisle seat"; an episode is found by its speaker's label too. The `scope`
    # terms let a query keep to one agent's (or channel's) nodes inside Lucene.
    *(
        f"CREATE FULLTEXT INDEX {FULLTEXT_INDEXES[label]} IF NOT EXISTS FOR (n:{label}) "
        f"ON EACH [{', '.join(f'n.{p}' for p in (*properties, 'scope'))}] "
        "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}"
        for label, properties in (
            (EPISODE, ("content", "speaker_label")),
            (FACT, ("text",)),
            (COMMITMENT, ("text",)),
            (SUMMARY, ("text",)),
        )
    ),
    f"CREATE FULLTEXT INDEX {SEGMENT_SEARCH} IF NOT EXISTS FOR (n:{SEGMENT}) "
    "ON EACH [n.text, n.scope] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
    # A pair's last segment (pipeline/graph/segments.py), and a tenant's for erasure repairs.
    f"CREATE INDEX segment_agent_channel_seq IF NOT EXISTS "
    f"FOR (n:{SEGMENT}) ON (n.agent_key, n.channel_key, n.seq)",
    f"CREATE INDEX segment_tenant IF NOT EXISTS FOR (n:{SEGMENT}) ON (n.tenant)",
    *(f"DROP INDEX {name} IF EXISTS" for name in RETIRED_INDEXES),
    # The current rolling summary of (agent, channel) in one seek (pipeline/graph/summaries.py).
    f"CREATE INDEX summary_agent_channel_current IF NOT EXISTS "
    f"FOR (n:{SUMMARY}) ON (n.agent_key, n.channel_key, n.current)",
    # The writer's tombstone check (pipeline/graph/erasure.py): a plain index, so the lookup of
    # a hash nobody erased takes no lock (a unique-key lookup would, serialising writers).
    f"CREATE INDEX erasure_subject_hash IF NOT EXISTS FOR (n:{ERASURE}) ON (n.subject_hash)",
    f"CREATE INDEX erasure_tenant IF NOT EXISTS FOR (n:{ERASURE}) ON (n.tenant)",
    # The retention sweep's expired facts (pipeline/graph/retention.py).
    f"CREATE INDEX fact_expires_at IF NOT EXISTS FOR (n:{FACT}) ON (n.expires_at)",
)

SHOW_KEY_CONSTRAINTS: Final = (
    "SHOW CONSTRAINTS YIELD labelsOrTypes, properties, type "
    "WHERE type = 'UNIQUENESS' AND properties = ['key'] "
    "RETURN labelsOrTypes[0] AS label"
)

# The cheapest statement a server must answer: a readiness probe's round trip.
PING: Final = "RETURN 1 AS ok"
