"""Every Cypher statement memsync runs, in one package. Labels and types are constants from
`pipeline.graph.model`; values are always parameters."""

from __future__ import annotations

from pipeline.graph.cypher.directory import (
    AGENT_OWNERS,
    GRANT_TRUST,
    LIST_TRUST,
    LOOKUP_TRUST,
    REVOKE_TRUST,
)
from pipeline.graph.cypher.read import (
    AGENT_COMMITMENTS,
    LABEL_OWNERS,
    LIST_AGENTS,
    LOOKUP_PARTICIPANTS,
    RECALL_EPISODES,
    TENANT_COUNTS,
    TENANT_EPISODES,
    TENANT_OBSERVED,
)
from pipeline.graph.cypher.schema import (
    CONSTRAINTS,
    INDEXES,
    SHOW_KEY_CONSTRAINTS,
)
from pipeline.graph.cypher.write import (
    AGENT_FACTS,
    MARK_AGENTS,
    MERGE_CHANNELS,
    MERGE_CLOSURES,
    MERGE_COMMITMENTS,
    MERGE_EPISODES,
    MERGE_FACTS,
    MERGE_LISTED,
    MERGE_LISTED_CHANNELS,
    MERGE_MEMBERS,
    MERGE_OBSERVED,
    MERGE_OWNERS,
    MERGE_PARTICIPANTS,
    OWN_AGENT,
    RESOLVE_CLOSURES,
    RESTACK_FACTS,
    RESTATUS_COMMITMENTS,
    VERIFY_FACT,
)

__all__ = [
    "AGENT_COMMITMENTS",
    "AGENT_FACTS",
    "AGENT_OWNERS",
    "CONSTRAINTS",
    "GRANT_TRUST",
    "INDEXES",
    "LABEL_OWNERS",
    "LIST_AGENTS",
    "LIST_TRUST",
    "LOOKUP_PARTICIPANTS",
    "LOOKUP_TRUST",
    "MARK_AGENTS",
    "MERGE_CHANNELS",
    "MERGE_CLOSURES",
    "MERGE_COMMITMENTS",
    "MERGE_EPISODES",
    "MERGE_FACTS",
    "MERGE_LISTED",
    "MERGE_LISTED_CHANNELS",
    "MERGE_MEMBERS",
    "MERGE_OBSERVED",
    "MERGE_OWNERS",
    "MERGE_PARTICIPANTS",
    "OWN_AGENT",
    "RECALL_EPISODES",
    "RESOLVE_CLOSURES",
    "RESTACK_FACTS",
    "RESTATUS_COMMITMENTS",
    "REVOKE_TRUST",
    "SHOW_KEY_CONSTRAINTS",
    "TENANT_COUNTS",
    "TENANT_EPISODES",
    "TENANT_OBSERVED",
    "VERIFY_FACT",
]
