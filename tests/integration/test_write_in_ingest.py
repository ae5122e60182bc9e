"""Where a worker takes sync tasks too, its ingest task writes the agents' memory itself; a worker
on the ingest queue alone sends the jobs on as sync tasks. Both give the same graph. (A write in
ingest that fails is sent on as a sync task: test_isolation.py shows that path isolating the
one bad turn.)

Each run has a Redis database and workers of its own, so the session's worker takes none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from bench.syncload import workload
from memsync.settings import INGEST_QUEUE, SYNC_QUEUE, Settings
from pipeline.graph.reader import tenant_counts, tenant_observed
from pipeline.graph.store import GraphStore
from tests.datasets import TESTS_DATA_DIR
from tests.integration.report import send_task
from tests.integration.test_memory import memory_snapshot
from tests.integration.test_operations import wait_for
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

TURNS = 24
BATCHES = 4


def own_settings(settings: Settings, database: int) -> Settings:
    return settings.model_copy(
        update={
            "broker_url": settings.broker_url.rsplit("/", 1)[0] + f"/{database}",
            "trust_mode": "open",
        }
    )


def send_batches(own: Settings, tenant: str) -> list[tuple[str, str]]:
    """The same workload for any tenant, as BATCHES ingest tasks; the turns it holds."""
    events = [dict(e) for e in workload(TESTS_DATA_DIR, turns=TURNS, seed=11, tenant=tenant)]
    size = TURNS // BATCHES
    for start in range(0, TURNS, size):
        send_task(own.broker_url, "memsync.ingest", events[start : start + size])
    return [(tenant, str(e["event_id"])) for e in events]


def shape(graph: GraphStore, tenant: str) -> Any:
    """A tenant's memory with the tenant's name taken out, to compare two tenants' graphs
    (and the audience scope, a digest of tenant-qualified keys); properties in name order, as
    Neo4j keeps none."""
    memory = [
        (labels, sorted((k, v) for k, v in props.items() if k != "scope"), out)
        for labels, props, out in memory_snapshot(graph, tenant)
    ]
    found = (tenant_counts(graph, tenant), sorted(tenant_observed(graph, tenant)), memory)
    return repr(found).replace(tenant, "<tenant>")


def test_ingest_writes_in_place_and_matches_the_sync_task_path(
    settings: Settings, graph: GraphStore, tenant: str, tmp_path: Path
) -> None:
    fused = own_settings(settings, 6)
    split = own_settings(settings, 7)
    clients = [redis.Redis.from_url(s.broker_url) for s in (fused, split)]
    for client in clients:
        client.flushdb()
    here, there = f"{tenant}-here", f"{tenant}-there"

    # One worker on both queues: every batch is written by its ingest task, none sent on.
    worker = services.start_worker(worker_env(fused), tmp_path / "fused.log", name="fused")
    try:
        statuses = Ledger(clients[0]).wait(send_batches(fused, here), timeout=180)
    finally:
        worker.stop()
    assert all(s.complete for s in statuses), worker.log_tail(60)
    stats = Ledger(clients[0]).stats()
    assert stats.get("sync.in_ingest") == BATCHES, stats
    assert "sync.in_ingest_sent_on" not in stats, stats
    assert worker.process.returncode == 0, worker.log_tail(40)

    # A worker on the ingest queue alone sends every batch on; nothing is written until a
    # worker takes the sync queue.
    ingest_only = services.start_worker(
        worker_env(split), tmp_path / "ingest.log", name="ingest", queues=(INGEST_QUEUE,)
    )
    try:
        turns = send_batches(split, there)
        wait_for(lambda: clients[1].llen(SYNC_QUEUE) == BATCHES, timeout=120)
    finally:
        ingest_only.stop()
    assert not any(s.complete for s in Ledger(clients[1]).statuses(turns))
    assert tenant_counts(graph, there)["observed"] == 0
    sync_only = services.start_worker(
        worker_env(split), tmp_path / "sync.log", name="sync", queues=(SYNC_QUEUE,)
    )
    try:
        statuses = Ledger(clients[1]).wait(turns, timeout=180)
    finally:
        sync_only.stop()
    assert all(s.complete for s in statuses), sync_only.log_tail(60)
    stats = Ledger(clients[1]).stats()
    assert "sync.in_ingest" not in stats and "sync.in_ingest_sent_on" not in stats, stats

    assert tenant_counts(graph, here)["observed"] > 0
    assert shape(graph, here) == shape(graph, there)
    for client in clients:
        client.flushdb()
        client.close()
