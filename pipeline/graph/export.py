"""`memsync export --participant`: everything memsync holds of one person, as plain data."""

from __future__ import annotations

from typing import Any

import neo4j

from pipeline.graph.cypher import export as export_cypher
from pipeline.graph.cypher import forget as forget_cypher
from pipeline.graph.erasure import list_erasures
from pipeline.graph.store import GraphStore, native
from schemas.keys import participant_key

EXPORT_VERSION = 1


def export_participant(graph: GraphStore, tenant: str, participant_id: str) -> dict[str, Any]:
    """The participant, the channels they were in, the messages they said, the facts about them
    or stated by them (with provenance) and the commitments owed by or to them, in a fixed
    order; and the erasure records naming them. A participant memsync holds nothing of gives
    empty lists."""
    key = participant_key(tenant, participant_id)
    with graph.session(write=False) as session:

        def read(tx: neo4j.ManagedTransaction) -> dict[str, Any]:
            agents = [r["key"] for r in tx.run(forget_cypher.TENANT_AGENTS, tenant=tenant)]
            person = tx.run(export_cypher.EXPORT_PARTICIPANT, key=key).single()
            return {
                "participant": person["participant"] if person else None,
                "channels": [r["channel"] for r in tx.run(export_cypher.EXPORT_CHANNELS, key=key)],
                "episodes": [r["episode"] for r in tx.run(export_cypher.EXPORT_EPISODES, key=key)],
                "facts": [
                    r["fact"] for r in tx.run(export_cypher.EXPORT_FACTS, key=key, agents=agents)
                ],
                "commitments": [
                    r["commitment"]
                    for r in tx.run(export_cypher.EXPORT_COMMITMENTS, key=key, agents=agents)
                ],
            }

        found = native(session.execute_read(read))
    erasures = list_erasures(graph, tenant, ("participant", key))
    return {
        "export_version": EXPORT_VERSION,
        "tenant": tenant,
        "participant_id": participant_id,
        **found,
        "erasures": [e.model_dump(mode="json", exclude={"pending_pairs", "log"}) for e in erasures],
    }
