"""The retention sweep: expired facts are deleted (not only hidden at read time), and with
MEMSYNC_EPISODE_RETENTION_DAYS raw episodes older than that go once nothing needs them.

An episode is kept, whatever its age, while a fact, commitment or closure cites it (it is that
memory's provenance, and the rule that keeps DM-only memory out of group channels reads its
channel) or while an agent that observed it has no current summary covering it. Expired facts
go first, so the episodes only they cited can go in the same sweep. Runs from `memsync graph
sweep` and periodically in the workers (workers/worker/sweeping.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import neo4j
from pydantic import BaseModel, ConfigDict

from pipeline.graph.cypher import retention as retention_cypher
from pipeline.graph.forgetting import DEFAULT_BATCH
from pipeline.graph.pruning import delete_memory
from pipeline.graph.segments import repair_segments
from pipeline.graph.store import GraphStore, native


class SweepReport(BaseModel):
    """What a sweep deleted (or, dry, would delete) and what it kept."""

    model_config = ConfigDict(frozen=True)

    dry_run: bool
    facts_expired: int
    episodes_deleted: int
    # Past the retention age but kept: cited by memory, or not yet in every observer's summary.
    episodes_kept: int
    retention_days: float | None
    # Segments rebuilt without the deleted episodes' words (pipeline/graph/segments.py).
    segments_repaired: int = 0


def sweep(
    graph: GraphStore,
    *,
    retention_days: float | None,
    tenant: str | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    batch: int = DEFAULT_BATCH,
) -> SweepReport:
    """Delete expired facts, then (with `retention_days`) episodes past that age that nothing
    needs; one transaction per batch. Idempotent; a dry run changes nothing."""
    at = now or datetime.now(UTC)
    facts = _expired_facts(graph, at, tenant, dry_run, batch)
    deleted = kept = 0
    if retention_days is not None:
        cutoff = at - timedelta(days=retention_days)
        deleted, kept = _old_episodes(graph, cutoff, tenant, dry_run, batch)
    repaired = repair_segments(graph, tenant) if deleted and not dry_run else 0
    return SweepReport(
        dry_run=dry_run,
        facts_expired=facts,
        episodes_deleted=deleted,
        episodes_kept=kept,
        retention_days=retention_days,
        segments_repaired=repaired,
    )


def _expired_facts(
    graph: GraphStore, now: datetime, tenant: str | None, dry_run: bool, batch: int
) -> int:
    with graph.session() as session:
        if dry_run:
            record = session.run(retention_cypher.COUNT_EXPIRED_FACTS, now=now, tenant=tenant)
            return int(record.single(strict=True)["expired"])

        def work(tx: neo4j.ManagedTransaction) -> int:
            keys = list(
                tx.run(retention_cypher.EXPIRED_FACTS, now=now, tenant=tenant, batch=batch).single(
                    strict=True
                )["keys"]
            )
            if not keys:
                return 0
            # Supersession is restacked: an older fact of the slot may be current again.
            delete_memory(tx, facts=keys, everything=True)
            return len(keys)

        total = 0
        while moved := session.execute_write(work):
            total += moved
        return total


def _old_episodes(
    graph: GraphStore, cutoff: datetime, tenant: str | None, dry_run: bool, batch: int
) -> tuple[int, int]:
    deleted = kept = 0
    after: dict[str, Any] = {"after_time": None, "after_key": None}
    with graph.session() as session:
        while True:
            rows = [
                native(dict(r))
                for r in session.run(
                    retention_cypher.OLD_EPISODES, cutoff=cutoff, tenant=tenant, page=batch, **after
                )
            ]
            if not rows:
                return deleted, kept
            after = {"after_time": rows[-1]["created_at"], "after_key": rows[-1]["key"]}
            doomed = [r["key"] for r in rows if r["droppable"]]
            kept += len(rows) - len(doomed)
            if not doomed:
                continue
            if dry_run:
                deleted += len(doomed)
                continue
            gone: int = session.execute_write(_delete_episodes, doomed, cutoff)
            deleted += gone
            kept += len(doomed) - gone


def _delete_episodes(tx: neo4j.ManagedTransaction, keys: list[str], cutoff: datetime) -> int:
    record = tx.run(retention_cypher.DELETE_EPISODES, keys=keys, cutoff=cutoff).single(strict=True)
    return int(record["deleted"])
