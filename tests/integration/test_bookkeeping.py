"""Bookkeeping on real Redis and a real worker: ids shaped like other keys, the reconciler
meeting a broken in-flight entry, and a purge that takes payloads off Redis's disk."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from memsync import keys
from memsync.producer import Producer
from memsync.settings import Settings
from tests.integration.test_operations import cli, wait_for
from tests.integration.test_spine import dm_turn
from workers.local import services
from workers.state.deadletter import DeadLetterStore
from workers.state.inflight import InFlight
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

# Event ids that, under the old layout, named another key of another type (WRONGTYPE).
NASTY_IDS = [
    "ev-plain",
    "ev-plain:synced",
    "ev-plain:dead",
    "ev:synced",
    "a/b:dead",
    "ev%3Asynced",
    "x:y/z",
]


def test_event_ids_shaped_like_keys_are_synced_and_reconciled(
    worker: services.Service,
    settings: Settings,
    ledger: Ledger,
    producer: Producer,
    tenant: str,
) -> None:
    client = redis.Redis.from_url(settings.broker_url)
    events: list[Any] = []
    for event_id in NASTY_IDS:  # one flush: they travel in one ingest batch
        event = dm_turn(tenant)
        event["event_id"] = event_id
        events.append(event)
        producer.emit(event)
    assert producer.flush(timeout=30)
    turns = [(tenant, event_id) for event_id in NASTY_IDS]
    statuses = ledger.wait(turns, timeout=120)
    assert all(s.complete and s.expected == 1 for s in statuses), statuses
    assert all(s.untrusted == 0 and s.dead == 0 for s in statuses), statuses
    letters = [x for x in DeadLetterStore(client).entries() if x.tenant == tenant]
    assert letters == []

    # A stale copy of a finished turn, and an in-flight entry that is no turn at all.
    InFlight(client).track([events[1]])
    junk_ref = f"{tenant}/junk"
    client.hset(keys.INFLIGHT_PAYLOADS, junk_ref, b"\xff not json " + tenant.encode())
    client.zadd(keys.INFLIGHT_SINCE, {junk_ref: 0})

    done = cli(settings, "reconcile", "--older-than", "0s")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped " in done.stdout and "moved to the dead letters" in done.stdout, done.stdout
    stale_ref = keys.turn_ref(tenant, "ev-plain:synced")
    assert client.hget(keys.INFLIGHT_PAYLOADS, stale_ref) is None  # settled, not re-sent
    assert client.hget(keys.INFLIGHT_PAYLOADS, junk_ref) is None  # moved, not lost:
    moved = [
        x
        for x in DeadLetterStore(client).entries()
        if x.stage == "reconcile" and tenant in str(x.payload)
    ]
    assert len(moved) == 1 and not moved[0].replayable
    DeadLetterStore(client).remove([moved[0].id])
    assert ledger.stats()["reconcile.skipped"] >= 1


def _aof_files(client: redis.Redis) -> list[Path]:
    config = cast(dict[str, str], client.config_get("dir"))
    subdir = cast(dict[str, str], client.config_get("appenddirname"))
    folder = Path(config["dir"]) / subdir.get("appenddirname", "")
    return [p for p in folder.glob("*") if p.is_file()] if folder.is_dir() else []


def _on_disk(client: redis.Redis, marker: bytes) -> bool:
    return any(marker in p.read_bytes() for p in _aof_files(client))


def test_purge_rewrites_the_append_only_file(
    worker: services.Service, settings: Settings, tenant: str
) -> None:
    client = redis.Redis.from_url(settings.broker_url)
    info = client.info("persistence")
    if not info.get("aof_enabled"):
        pytest.skip("this Redis runs without AOF")
    marker = f"secret-{uuid.uuid4().hex}".encode()
    ref = f"{tenant}/junk"
    client.hset(keys.INFLIGHT_PAYLOADS, ref, b"\xff " + marker)
    client.zadd(keys.INFLIGHT_SINCE, {ref: 0})
    done = cli(settings, "reconcile", "--older-than", "0s")
    assert done.returncode == 0, done.stdout + done.stderr
    (letter,) = [
        x
        for x in DeadLetterStore(client).entries()
        if x.stage == "reconcile" and marker.decode() in str(x.payload)
    ]
    local = bool(_aof_files(client))  # a Redis named by MEMSYNC_TEST_BROKER_URL may be remote
    if local:
        wait_for(lambda: _on_disk(client, marker))
    wait_for(lambda: not client.info("persistence")["aof_rewrite_in_progress"])
    rewrites = int(client.info("persistence")["aof_rewrites"])

    purged = cli(settings, "dlq", "purge", letter.id)

    assert purged.returncode == 0, purged.stdout + purged.stderr
    assert "purged 1 dead letter(s)" in purged.stdout
    assert "AOF rewrite started" in purged.stdout, purged.stdout
    wait_for(lambda: int(client.info("persistence")["aof_rewrites"]) > rewrites)
    wait_for(lambda: not client.info("persistence")["aof_rewrite_in_progress"])
    assert client.info("persistence")["aof_last_bgrewrite_status"] == "ok"
    if local:
        wait_for(lambda: not _on_disk(client, marker))  # old files go once the rewrite is done
