"""Graph vocabulary: every label and relationship type memsync uses, as constants."""

from __future__ import annotations

from typing import Final

PARTICIPANT: Final = "Participant"
AGENT: Final = "Agent"
CHANNEL: Final = "Channel"
EPISODE: Final = "Episode"
FACT: Final = "Fact"
COMMITMENT: Final = "Commitment"
# A stored "done"/"cancel that": kept on its own so it closes its commitment in any arrival order.
CLOSURE: Final = "Closure"
SUMMARY: Final = "Summary"
# A stretch of one agent's messages of one channel, searched by keyword as one document (derived
# from its episodes: pipeline/segment.py); recall ranks a message partly by its stretch.
SEGMENT: Final = "Segment"
# The audit record (and, for a participant, the tombstone) of `memsync forget`: no content, only
# a hash of the forgotten key (pipeline/graph/erasure.py).
ERASURE: Final = "Erasure"
# An agent looked up by key: the key's uniqueness constraint (and index) is on Participant, so a
# pattern naming Agent alone would scan every agent of every tenant.
AGENT_NODE: Final = f"{PARTICIPANT}:{AGENT}"

SAID: Final = "SAID"
IN: Final = "IN"
# A participant listed in a turn of a channel (spoken or not): the channel's audience, which
# decides where relationship memory learnt there may surface (cypher/search.py audience_filter).
MEMBER_OF: Final = "MEMBER_OF"
OBSERVED: Final = "OBSERVED"
KNOWS: Final = "KNOWS"
ABOUT: Final = "ABOUT"
EVIDENCE: Final = "EVIDENCE"
SUPERSEDED_BY: Final = "SUPERSEDED_BY"
OWED_BY_REL: Final = "OWED_BY"
OWED_TO: Final = "OWED_TO"
CLOSED_BY: Final = "CLOSED_BY"
TRUSTS: Final = "TRUSTS"
OWNED_BY: Final = "OWNED_BY"
SUMMARISED: Final = "SUMMARISED"
OF: Final = "OF"

# The ways one participant may trust another (the `as` property of TRUSTS).
TRUST_KINDS: Final = ("friend", "team", "connected")

# Every node label whose `key` carries a uniqueness constraint.
KEYED_LABELS: Final = (
    PARTICIPANT,
    CHANNEL,
    EPISODE,
    FACT,
    COMMITMENT,
    CLOSURE,
    SUMMARY,
    ERASURE,
    SEGMENT,
)

# Search indexes per label: full-text (Lucene, English analyser) and vector (cosine).
# Each full-text index also holds the node's `scope` terms (schemas/keys.py scope_token): the
# observing agents and the channel of an episode, the owning agent of the rest.
FULLTEXT_INDEXES: Final = {
    EPISODE: "episode_search",
    FACT: "fact_search",
    COMMITMENT: "commitment_search",
    SUMMARY: "summary_search",
}
SEGMENT_SEARCH: Final = "segment_search"
# Full-text indexes of earlier versions (text only, no scope), dropped by `memsync graph init`.
RETIRED_INDEXES: Final = ("episode_text", "fact_text", "commitment_text", "summary_text")
VECTOR_INDEXES: Final = {
    EPISODE: "episode_embedding",
    FACT: "fact_embedding",
    COMMITMENT: "commitment_embedding",
    SUMMARY: "summary_embedding",
}

GRAPH_MODEL_VERSION: Final = 1
