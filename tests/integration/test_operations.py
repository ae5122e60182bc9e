"""Operator commands on real services: dlq list/show/replay/purge, spool status/flush, refusals."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from memsync.producer import Producer
from memsync.settings import Settings
from pipeline.graph.reader import tenant_counts
from pipeline.graph.store import GraphStore
from tests.integration.report import send_task
from tests.integration.test_spine import dm_turn
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.deadletter import DeadLetterStore, letters_for
from workers.state.inflight import PAYLOADS_KEY, InFlight
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def cli(
    settings: Settings, *args: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.cli.main", *args],
        env={**worker_env(settings), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )


def wait_for(predicate: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def test_dlq_commands_end_to_end(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger, tenant: str
) -> None:
    store = DeadLetterStore(redis.Redis.from_url(settings.broker_url))
    bad = dm_turn(tenant)
    bad["event_id"] = "ev-dlq"
    bad["messages"][0]["role"] = "wizard"
    send_task(settings.broker_url, "memsync.ingest", [bad])
    wait_for(lambda: any(x.event_id == "ev-dlq" and x.tenant == tenant for x in store.entries()))

    listed = cli(settings, "dlq", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    entry = next(e for e in json.loads(listed.stdout) if e["tenant"] == tenant)
    assert entry["stage"] == "ingest" and entry["permanent"] is True
    assert entry["payload"] == [bad] and entry["queue"] == "memsync.ingest"
    assert entry["idempotency_key"] == f"{tenant}:ev-dlq:ingest"
    assert "messages.0.role" in entry["error"] and entry["traceback"]

    shown = cli(settings, "dlq", "show", entry["id"])
    assert shown.returncode == 0 and json.loads(shown.stdout)["id"] == entry["id"]
    assert entry["id"] in cli(settings, "dlq", "list").stdout

    # An operator fixes the payload's cause elsewhere; here we fix the entry and replay it.
    fixed = store.get(entry["id"])
    assert fixed is not None
    good = dm_turn(tenant)
    good["event_id"] = "ev-dlq"
    store.put([fixed.model_copy(update={"payload": [good]})])
    dry = cli(settings, "dlq", "replay", entry["id"], "--dry-run")
    assert dry.returncode == 0 and "would replay 1" in dry.stdout
    assert store.get(entry["id"]) is not None
    done = cli(settings, "dlq", "replay", entry["id"])
    assert done.returncode == 0 and "replayed 1" in done.stdout, done.stderr
    wait_for(lambda: store.get(entry["id"]) is None)  # success removes the entry
    wait_for(lambda: ledger.statuses([(tenant, "ev-dlq")])[0].complete)
    assert tenant_counts(graph, tenant)["episodes"] == 2

    missing = cli(settings, "dlq", "replay", "no-such-id")
    assert missing.returncode == 1 and "no dead letter no-such-id" in missing.stderr


def test_dlq_purge(settings: Settings, tenant: str) -> None:
    store = DeadLetterStore(redis.Redis.from_url(settings.broker_url))
    letters = letters_for(
        task="memsync.ingest",
        queue="memsync.ingest",
        stage="ingest",
        payload=[{"tenant": tenant, "event_id": f"old-{i}"} for i in range(3)],
        error=ValueError("boom"),
        permanent=True,
        attempts=1,
        worker="test",
    )
    store.put(letters)
    one = cli(settings, "dlq", "purge", letters[0].id)
    assert one.returncode == 0 and "purged 1" in one.stdout
    time.sleep(1.1)
    rest = cli(settings, "dlq", "purge", "--older-than", "1s")
    assert rest.returncode == 0
    assert all(store.get(x.id) is None for x in letters)
    bad = cli(settings, "dlq", "purge", "--older-than", "soon")
    assert bad.returncode == 2 and "duration" in bad.stderr


def test_spool_survives_a_producer_restart(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    ledger: Ledger,
    tenant: str,
    tmp_path: Path,
) -> None:
    """Events spooled while the broker was unreachable are published by the next producer."""
    unreachable = settings.model_copy(
        update={"broker_url": f"redis://127.0.0.1:{services.free_port()}/0", "spool_dir": tmp_path}
    )
    first = Producer(unreachable)
    turns = [dm_turn(tenant) for _ in range(3)]
    for index, turn in enumerate(turns):
        turn["event_id"] = f"ev-spool-{index}"
        turn["channel"]["id"] = f"dm-{index}"
        first.emit(turn)
    assert first.flush(timeout=30)
    first.close()
    assert first.spool_status().events == 3  # the process "ends" with its events on disk

    status = cli(settings, "spool", "status", MEMSYNC_SPOOL_DIR=str(tmp_path))
    assert status.returncode == 0 and "3/" in status.stdout
    flushed = cli(settings, "spool", "flush", MEMSYNC_SPOOL_DIR=str(tmp_path))
    assert flushed.returncode == 0 and "published 3" in flushed.stdout, flushed.stderr
    wait_for(
        lambda: all(s.complete for s in ledger.statuses([(tenant, t["event_id"]) for t in turns]))
    )
    assert tenant_counts(graph, tenant)["episodes"] == 6


def test_worker_refuses_unsafe_visibility_timeout(settings: Settings) -> None:
    started = subprocess.run(
        [sys.executable, "-m", "workers.cli.main", "worker"],
        env={
            **worker_env(settings),
            "MEMSYNC_VISIBILITY_TIMEOUT": "100",
            "MEMSYNC_TASK_TIME_LIMIT": "300",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert started.returncode != 0
    assert "MEMSYNC_VISIBILITY_TIMEOUT" in started.stderr + started.stdout


def test_reconcile_resends_a_turn_the_broker_lost(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    ledger: Ledger,
    tenant: str,
) -> None:
    """A turn recorded as sent whose message never arrived is sent again, then settled."""
    client = redis.Redis.from_url(settings.broker_url)
    lost = dm_turn(tenant)
    lost["event_id"] = "ev-lost"
    InFlight(client).track([lost])  # as the producer does, minus the message the broker lost
    done = cli(settings, "reconcile", "--older-than", "0s")
    assert done.returncode == 0 and "re-sent 1 " in done.stdout, done.stdout + done.stderr
    wait_for(lambda: ledger.statuses([(tenant, "ev-lost")])[0].complete)
    assert tenant_counts(graph, tenant)["episodes"] == 2
    wait_for(lambda: client.hget(PAYLOADS_KEY, f"{tenant}/ev-lost") is None)  # settled
