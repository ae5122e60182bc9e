"""Deleting memory nodes (facts, commitments, closures) with the repairs they leave behind, in
the caller's transaction: forgetting and the retention sweep both delete through here."""

from __future__ import annotations

from collections import Counter

import neo4j

from pipeline.graph import cypher
from pipeline.graph.cypher import forget as forget_cypher


def delete_memory(
    tx: neo4j.ManagedTransaction,
    *,
    facts: list[str] | None = None,
    commitments: list[str] | None = None,
    closures: list[str] | None = None,
    everything: bool,
) -> Counter[str]:
    """Delete these memory nodes (`everything`) or those of them left without evidence, and
    repair what they leave: supersession of their slots, the status of commitments they closed,
    the picks of closures that closed a deleted commitment."""
    done: Counter[str] = Counter()
    touched: set[str] = set()
    if facts:
        record = tx.run(forget_cypher.DELETE_FACTS, keys=facts, all=everything).single(strict=True)
        done["facts"] += int(record["deleted"])
        slots = [s for s in record["slots"] if s["slot"] is not None]
        if slots:
            tx.run(cypher.RESTACK_FACTS, slots=slots).consume()
    if closures:
        record = tx.run(forget_cypher.DELETE_CLOSURES, keys=closures, all=everything).single(
            strict=True
        )
        done["closures"] += int(record["deleted"])
        touched.update(k for closed in record["touched"] for k in closed)
    if commitments:
        record = tx.run(forget_cypher.DELETE_COMMITMENTS, keys=commitments, all=everything).single(
            strict=True
        )
        done["commitments"] += int(record["deleted"])
        pairs = [p for p in record["pairs"] if p["owed_by_key"] is not None]
        if pairs:
            touched.update(r["key"] for r in tx.run(cypher.RESOLVE_CLOSURES, pairs=pairs))
    if touched:
        tx.run(cypher.RESTATUS_COMMITMENTS, keys=sorted(touched)).consume()
    return done
