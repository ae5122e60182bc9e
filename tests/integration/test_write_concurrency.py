"""Two sync transactions on one busy channel never wait on each other's locks (real Neo4j).

A transaction writes a batch of a channel's turns and stays open; a second batch of the same
channel, speakers and agents must commit meanwhile. Before, the second waited for the first:
unconditional SETs on the shared participant and channel nodes, and MERGEs of new SAID, IN and
OBSERVED edges, write-locked the speakers, the channel and the agents until commit.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, cast

import neo4j
import pytest

from pipeline.extract import RulesExtractor
from pipeline.graph.memoryrows import plan_memory
from pipeline.graph.reader import tenant_counts
from pipeline.graph.store import GraphStore
from pipeline.graph.writer import _write_batch, plan_batch, write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.records import SyncJob

pytestmark = pytest.mark.integration

PEOPLE = [
    {"id": "u-ana", "kind": "human", "display_name": "Ana", "handle": "ana"},
    {"id": "u-bo", "kind": "human", "display_name": "Bo", "handle": "bo"},
    {"id": "a-one", "kind": "agent", "display_name": "One", "handle": "one"},
    {"id": "a-two", "kind": "agent", "display_name": "Two", "handle": "two"},
    {"id": "a-three", "kind": "agent", "display_name": "Three", "handle": "three"},
]
# What the speakers say while the channel warms up, and in each of the two concurrent batches:
# the same people and agents, but memory in distinct slots (a fact restated in both batches at
# once is one node, and that transaction waits, as it must).
WARM = ("I prefer window seats", "I'll send the deck by Friday", "ok, sounds good")
FIRST = ("I live in Lisbon", "I'll send report {i} by Friday", "ok {i}")
SECOND = ("I'm allergic to peanuts", "I'll book room {i} by Monday", "fine {i}")
# Each speaker past Neo4j's dense-node threshold (50 edges), as in any channel in use: edges are
# then added to a node without write-locking it, which this test relies on.
WARM_TURNS = 120


def turn(tenant: str, index: int, sayings: tuple[str, ...]) -> dict[str, Any]:
    speaker = PEOPLE[index % 2]["id"]
    return {
        "schema_version": 1,
        "event_id": f"e-{index}",
        "tenant": tenant,
        "channel": {"id": "ch-busy", "kind": "group", "title": "Busy"},
        "participants": PEOPLE,
        "messages": [
            {
                "id": f"m-{index}",
                "role": "user",
                "sender_id": speaker,
                "content": f"{sayings[index % len(sayings)].format(i=index)} ({index})",
                "created_at": f"2026-11-26T10:{index // 60:02d}:{index % 60:02d}Z",
            },
            {
                "id": f"r-{index}",
                "role": "assistant",
                "sender_id": "a-one",
                "content": f"Noted ({index}).",
                "created_at": f"2026-11-26T10:{index // 60:02d}:{index % 60:02d}.500Z",
            },
        ],
    }


def jobs_for(tenant: str, indexes: range, sayings: tuple[str, ...] = WARM) -> list[SyncJob]:
    policy = DirectoryTrustPolicy("open", {})
    events = [validate_event(turn(tenant, i, sayings)) for i in indexes]
    return ingest_turns(events, {}, policy).jobs


def test_two_batches_of_one_channel_write_at_once(graph: GraphStore) -> None:
    tenant = f"w{uuid.uuid4().hex[:10]}"
    extractor = RulesExtractor()
    warm = jobs_for(tenant, range(WARM_TURNS))
    write_sync_jobs(graph, warm, memorize(warm, extractor, BUILTIN_LENSES))

    first = jobs_for(tenant, range(WARM_TURNS, WARM_TURNS + 10), FIRST)
    second = jobs_for(tenant, range(WARM_TURNS + 10, WARM_TURNS + 20), SECOND)
    done = threading.Event()
    errors: list[BaseException] = []

    def write_second() -> None:
        try:
            write_sync_jobs(graph, second, memorize(second, extractor, BUILTIN_LENSES))
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)
        finally:
            done.set()

    with graph.session() as session:
        tx = session.begin_transaction()
        try:
            memory = plan_memory(memorize(first, extractor, BUILTIN_LENSES))
            _write_batch(cast(neo4j.ManagedTransaction, tx), plan_batch(first), memory)
            writer = threading.Thread(target=write_second, daemon=True)
            writer.start()
            # A generous deadline on a condition: a blocked writer waits for the commit below.
            finished = done.wait(timeout=120)
            if finished:
                tx.commit()
        finally:
            if not tx.closed():
                tx.rollback()
    writer.join(timeout=60)
    assert finished, "the second batch waited for the first transaction's locks"
    assert not errors, errors
    counts = tenant_counts(graph, tenant)
    # Every turn has two messages, each observed by all three agents.
    assert counts["episodes"] == 2 * (WARM_TURNS + 20)
    assert counts["observed"] == 3 * 2 * (WARM_TURNS + 20)


def test_rewriting_a_batch_changes_nothing(graph: GraphStore) -> None:
    """A redelivered batch (episodes and memory already stored) adds no node or edge."""
    tenant = f"w{uuid.uuid4().hex[:10]}"
    extractor = RulesExtractor()
    jobs = jobs_for(tenant, range(12))
    memories = memorize(jobs, extractor, BUILTIN_LENSES)
    write_sync_jobs(graph, jobs, memories)
    before = tenant_counts(graph, tenant), _edges(graph, tenant)
    write_sync_jobs(graph, jobs, memories)
    assert (tenant_counts(graph, tenant), _edges(graph, tenant)) == before
    assert before[1]["KNOWS"] > 0 and before[1]["OWED_BY"] > 0


def _edges(graph: GraphStore, tenant: str) -> dict[str, int]:
    with graph.session() as session:
        rows = session.run(
            "MATCH (n {tenant: $tenant})-[r]->() RETURN type(r) AS kind, count(r) AS n",
            tenant=tenant,
        )
        return {row["kind"]: row["n"] for row in rows}


def test_no_write_flag_is_left_behind(graph: GraphStore) -> None:
    tenant = f"w{uuid.uuid4().hex[:10]}"
    jobs = jobs_for(tenant, range(6))
    write_sync_jobs(graph, jobs, memorize(jobs, RulesExtractor(), BUILTIN_LENSES))
    with graph.session() as session:
        left = session.run(
            "MATCH (n {tenant: $tenant}) WHERE n._fresh IS NOT NULL OR n._owner_lock IS NOT NULL "
            "RETURN count(n) AS n",
            tenant=tenant,
        ).single(strict=True)["n"]
    assert left == 0, f"{left} nodes kept a write flag"
