"""The producer on real services: an event Redis refuses is set aside, and forking loses nothing."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from memsync import keys
from memsync.producer import Producer
from memsync.settings import INGEST_QUEUE, Settings
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

ROOT = services.PROJECT_ROOT


def turn(tenant: str, n: int, messages: int = 1, size: int = 20) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "event_id": f"ev-{n}",
        "tenant": tenant,
        "channel": {"id": "dm-1", "kind": "dm"},
        "participants": [
            {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"},
            {"id": "a-travel", "kind": "agent", "display_name": "Travel", "handle": "travel"},
        ],
        "messages": [
            {
                "id": f"m-{n}-{i}",
                "role": "user",
                "sender_id": "u-devon",
                "content": ("window seat " * (size // 12 + 1))[:size],
                "created_at": "2026-11-29T10:00:00Z",
            }
            for i in range(messages)
        ],
    }


@pytest.fixture()
def tight_memory(tmp_path: Path) -> Iterator[redis.Redis]:
    """A private Redis with about 1 MB of memory left and no eviction (a shared server under a
    memory limit would starve every other client, and their writes would eat the headroom)."""
    port = services.free_port()
    server = services.start_redis("127.0.0.1", port, tmp_path / "redis")
    client = redis.Redis(host="127.0.0.1", port=port)
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", used + 1024 * 1024)
    try:
        yield client
    finally:
        client.close()
        server.stop()


def queued_event_ids(client: redis.Redis) -> list[str]:
    """Event ids in the ingest queue, oldest message first."""
    ids: list[str] = []
    for raw in reversed(cast(list[bytes], client.lrange(INGEST_QUEUE, 0, -1))):
        args, _, _ = json.loads(base64.b64decode(json.loads(raw)["body"]))
        ids.extend(event["event_id"] for event in args[0])
    return ids


def test_an_event_redis_refuses_for_its_size_is_set_aside_and_blocks_nothing(
    settings: Settings, tenant: str, tight_memory: redis.Redis, tmp_path: Path
) -> None:
    # No worker consumes this server, so the queue shows exactly what was published.
    port = tight_memory.connection_pool.connection_kwargs["port"]
    url = f"redis://127.0.0.1:{port}/0"
    private = settings.model_copy(update={"broker_url": url, "spool_dir": tmp_path / "spool"})
    client = redis.Redis.from_url(url)
    client.delete(INGEST_QUEUE)
    small = [turn(tenant, n) for n in range(6)]
    big = turn(tenant, 99, messages=60, size=31_000)  # ~1.9 MB: over what Redis has left
    producer = Producer(private)
    try:
        for event in [*small[:3], big, *small[3:]]:
            producer.emit(event)
        assert producer.flush(timeout=60)
        refused = producer.spool.refused()
        status = producer.spool_status()
    finally:
        producer.close(timeout=10)
        tight_memory.config_set("maxmemory", 0)
    try:
        assert queued_event_ids(client) == [e["event_id"] for e in small]
        assert status.events == 0 and status.refused == 1  # nothing waits behind the culprit
        assert [r.payload["event_id"] for r in refused] == ["ev-99"]
        assert "OutOfMemoryError" in refused[0].reason
        # The refused event is not left in flight, where the reconciler would re-send it.
        assert not client.hexists(keys.INFLIGHT_PAYLOADS, keys.turn_ref(tenant, "ev-99"))
    finally:
        client.flushdb()
        client.close()


FORKING_PLATFORM = """
import os, sys
from tests.integration.test_producer import turn
from memsync.producer import default_producer, emit_turn

tenant, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    emit_turn(turn(tenant, i))
pid = os.fork()  # with the parent's events still buffered
if pid == 0:
    for i in range(n, n + m):
        emit_turn(turn(tenant, i))
    os._exit(0 if default_producer().close(timeout=30) else 3)
ok = default_producer().close(timeout=30)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status) or (0 if ok else 4))
"""


def test_a_process_that_forks_after_emitting_loses_and_duplicates_nothing(
    worker: services.Service, settings: Settings, ledger: Ledger, tenant: str
) -> None:
    n, m = 40, 25
    events_before = ledger.stats().get("events", 0)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FORKING_PLATFORM), tenant, str(n), str(m)],
        env=worker_env(settings),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    turns = [(tenant, f"ev-{i}") for i in range(n + m)]
    statuses = ledger.wait(turns, timeout=120)
    assert all(s.complete for s in statuses), [s for s in statuses if not s.complete]
    # Each turn was ingested once: the worker's event counter grew by exactly n + m.
    assert ledger.stats().get("events", 0) - events_before == n + m
