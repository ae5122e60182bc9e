"""Erasure records: the content-free audit of `memsync forget`, and for a participant the
tombstone the sync writer respects, so a turn still in flight never brings them back.

An `:Erasure` node per (tenant, scope, subject) holds a hash of the forgotten key (never a
name, handle or text), when and by which command it ran, the counts per kind and a log line
per run. A participant's record is `blocking`: every sync transaction first asks which of its
participants are erased and drops their messages, their node and the memory about them or
owed by or to them (`without_erased`). Agent and channel erasures are resets, not bans.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import neo4j
from pydantic import BaseModel, ConfigDict

from pipeline.graph.cypher import forget as forget_cypher
from pipeline.graph.store import GraphStore, native
from schemas.keys import compose_key

if TYPE_CHECKING:
    from pipeline.graph.memoryrows import MemoryRows
    from pipeline.graph.writer import SyncBatch

Scope = Literal["participant", "agent", "channel"]


def subject_hash(scope: Scope, key: str) -> str:
    """What an erasure record keeps of the forgotten subject: a SHA-256 of its scope and key."""
    return hashlib.sha256(f"{scope}\0{key}".encode()).hexdigest()


def erasure_key(tenant: str, scope: Scope, key: str) -> str:
    return compose_key(tenant, "erasure", scope, subject_hash(scope, key))


class ErasureRecord(BaseModel):
    """One erasure record as listed: no content, the subject only as a hash."""

    model_config = ConfigDict(frozen=True)

    key: str
    tenant: str
    scope: str
    subject_hash: str
    blocking: bool
    first_at: datetime
    last_at: datetime
    runs: int
    command: str
    totals: dict[str, int]
    pending_pairs: list[str]
    log: list[dict[str, Any]]


# -- the writer's side ---------------------------------------------------------------------------


def erased_participants(tx: neo4j.ManagedTransaction, keys: Iterable[str]) -> set[str]:
    """Which of these participant keys carry a tombstone; read inside the sync transaction."""
    by_hash = {subject_hash("participant", k): k for k in set(keys)}
    if not by_hash:
        return set()
    result = tx.run(forget_cypher.ERASED_SUBJECTS, hashes=sorted(by_hash))
    return {by_hash[r["hash"]] for r in result}


def batch_subjects(batch: SyncBatch, memory: MemoryRows) -> set[str]:
    """Every participant key a sync batch names: its participants and its memory's subjects,
    speakers and obligees (someone addressed need not be a participant of the turn)."""
    found = {row["key"] for row in batch.participants}
    for row in (*memory.facts, *memory.commitments, *memory.closures):
        props = row.get("props", {})
        for field in ("subject_key", "stated_by", "owed_by_key", "owed_to_key"):
            value = props.get(field)
            if isinstance(value, str):
                found.add(value)
    return found


def without_erased(
    batch: SyncBatch, memory: MemoryRows, erased: set[str]
) -> tuple[SyncBatch, MemoryRows]:
    """The batch and memory rows with nothing of the erased participants: no node, no message
    they said (nor any sighting of it), no memory about them, stated by them, owed by or to
    them, or cited from their messages. Pure: it runs inside a retryable transaction function."""
    if not erased:
        return batch, memory
    dropped = {r["key"] for r in batch.episodes if r["speaker_key"] in erased}

    def kept_memory(row: Mapping[str, Any]) -> bool:
        props = row.get("props", {})
        evidence = row.get("evidence_key") or props.get("evidence_key")
        named = {
            props.get("subject_key"),
            props.get("stated_by"),
            props.get("owed_by_key"),
            props.get("owed_to_key"),
        }
        return evidence not in dropped and not (named & erased)

    new_batch = batch.model_copy(
        update={
            "participants": [r for r in batch.participants if r["key"] not in erased],
            "members": [r for r in batch.members if r["participant_key"] not in erased],
            "agents": [k for k in batch.agents if k not in erased],
            "owners": [
                r
                for r in batch.owners
                if r["owner_key"] not in erased and r["agent_key"] not in erased
            ],
            "episodes": [r for r in batch.episodes if r["key"] not in dropped],
            "observed": [r for r in batch.observed if r["episode_key"] not in dropped],
            "jobs": [
                {**job, "episodes": [k for k in job["episodes"] if k not in dropped]}
                for job in batch.jobs
            ],
        }
    )
    new_memory = memory.model_copy(
        update={
            "facts": [r for r in memory.facts if kept_memory(r)],
            "slots": [r for r in memory.slots if r["subject_key"] not in erased],
            "commitments": [r for r in memory.commitments if kept_memory(r)],
            "closures": [r for r in memory.closures if kept_memory(r)],
            "obligations": [r for r in memory.obligations if r["owed_by_key"] not in erased],
        }
    )
    return new_batch, new_memory


# -- the forgetting side ---------------------------------------------------------------------------


def record_erasure(
    graph: GraphStore, tenant: str, scope: Scope, key: str, command: str, *, blocking: bool
) -> int:
    """Create (or touch) the subject's record, committed before anything is deleted; the run
    number (1 for the first)."""
    params: dict[str, Any] = {
        "key": erasure_key(tenant, scope, key),
        "tenant": tenant,
        "scope": scope,
        "hash": subject_hash(scope, key),
        "now": datetime.now(UTC),
        "command": command,
        "blocking": blocking,
    }
    with graph.session() as session:
        record = session.execute_write(
            lambda tx: tx.run(forget_cypher.RECORD_ERASURE, **params).single(strict=True)
        )
    return int(record["runs"])


def erasure_exists(graph: GraphStore, tenant: str, scope: Scope, key: str) -> bool:
    with graph.session(write=False) as session:
        record = session.execute_read(
            lambda tx: tx.run(
                forget_cypher.FIND_ERASURE, key=erasure_key(tenant, scope, key)
            ).single()
        )
    return record is not None


def pending_pairs(graph: GraphStore, tenant: str, scope: Scope, key: str) -> list[str]:
    """Summary pairs (`agent_key channel_key`) a run noted and has not rebuilt yet."""
    with graph.session(write=False) as session:
        record = session.execute_read(
            lambda tx: tx.run(
                forget_cypher.FIND_ERASURE, key=erasure_key(tenant, scope, key)
            ).single()
        )
    return list(record["pending_pairs"] or []) if record is not None else []


def add_pending_pairs(
    graph: GraphStore, tenant: str, scope: Scope, key: str, pairs: Iterable[str]
) -> None:
    wanted = sorted(set(pairs))
    if not wanted:
        return
    with graph.session() as session:
        session.execute_write(
            lambda tx: tx.run(
                forget_cypher.ADD_PENDING_PAIRS, key=erasure_key(tenant, scope, key), pairs=wanted
            ).consume()
        )


def finish_erasure(
    graph: GraphStore,
    tenant: str,
    scope: Scope,
    key: str,
    *,
    command: str,
    counts: Mapping[str, int],
    pending: Iterable[str],
    previous: Mapping[str, int],
) -> None:
    """Add the run's counts to the record's totals, log the run, keep what is still pending."""
    totals = {f"deleted_{k}": int(previous.get(k, 0)) + int(v) for k, v in counts.items()}
    line = json.dumps(
        {"at": datetime.now(UTC).isoformat(), "command": command, "counts": dict(counts)},
        sort_keys=True,
    )
    with graph.session() as session:
        session.execute_write(
            lambda tx: tx.run(
                forget_cypher.FINISH_ERASURE,
                key=erasure_key(tenant, scope, key),
                totals=totals,
                pending=sorted(set(pending)),
                line=[line],
            ).consume()
        )


def list_erasures(
    graph: GraphStore, tenant: str | None = None, subject: tuple[Scope, str] | None = None
) -> list[ErasureRecord]:
    """Erasure records, oldest first; of one tenant, or of one subject (scope, key)."""
    wanted = subject_hash(*subject) if subject is not None else None
    with graph.session(write=False) as session:
        rows = session.execute_read(
            lambda tx: [
                native(r["erasure"])
                for r in tx.run(forget_cypher.LIST_ERASURES, tenant=tenant, hash=wanted)
            ]
        )
    return [_record(row) for row in rows]


def previous_totals(graph: GraphStore, tenant: str, scope: Scope, key: str) -> dict[str, int]:
    found = list_erasures(graph, tenant, (scope, key))
    return found[0].totals if found else {}


def _record(row: dict[str, Any]) -> ErasureRecord:
    totals = {
        k.removeprefix("deleted_"): int(v) for k, v in row.items() if k.startswith("deleted_")
    }
    return ErasureRecord(
        key=row["key"],
        tenant=row["tenant"],
        scope=row["scope"],
        subject_hash=row["subject_hash"],
        blocking=bool(row.get("blocking")),
        first_at=row["first_at"],
        last_at=row["last_at"],
        runs=int(row.get("runs") or 0),
        command=row.get("command") or "",
        totals=dict(sorted(totals.items())),
        pending_pairs=list(row.get("pending_pairs") or []),
        log=[json.loads(line) for line in row.get("log") or []],
    )


def wait_for_running_transactions(graph: GraphStore, timeout: float, poll: float = 0.1) -> bool:
    """Wait until every transaction running now has ended; False if some outlived `timeout`.

    Called after a tombstone commits: a sync transaction that began before it may have missed
    it, one that begins later cannot. Once those have ended, deleting catches all they wrote.
    """

    def running() -> set[str]:
        with graph.session(write=False) as session:
            return {r["id"] for r in session.run(forget_cypher.RUNNING_TRANSACTIONS)}

    before = running()
    deadline = time.monotonic() + timeout
    while before:
        before &= running()
        if not before:
            break
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True
