"""Flower on memsync's monitor app: its queue-length view reads the real queues of a real Redis.

Against the worker app Flower refuses ("'redis' broker is not supported"), because memsync's
transport, named by import path, becomes the broker URL's scheme; workers/worker/monitor.py
gives monitors the same settings on kombu's own transport. No worker consumes this module's
Redis, so the messages sent here stay queued and their count is known.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.settings import INGEST_QUEUE, SYNC_QUEUE, Settings
from tests.integration.report import send_task
from workers.cli.demo import worker_env
from workers.local import services

pytestmark = pytest.mark.integration

QUEUED = 7


@pytest.fixture(scope="module")
def flower(
    settings: Settings, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    port = services.free_port()
    log = tmp_path_factory.mktemp("flower") / "flower.log"
    own = settings.model_copy(update={"broker_url": redis_url})
    args = [sys.executable, "-m", "celery", "-A", "workers.worker.monitor", "flower",
            "--address=127.0.0.1", f"--port={port}"]  # fmt: skip
    # Flower 2 serves its API to authenticated users only, unless told otherwise (loopback here).
    env = {**worker_env(own), "FLOWER_UNAUTHENTICATED_API": "true"}
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 90
        while not _get(port, "/healthcheck"):
            assert process.poll() is None, _tail(log)
            assert time.monotonic() < deadline, _tail(log)
            time.sleep(0.3)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=60)


def _get(port: int, path: str) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            body: bytes = response.read()
            return body.decode()
    except (urllib.error.URLError, OSError):
        return None


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def test_flower_counts_the_queued_messages(flower: int, redis_url: str) -> None:
    for number in range(QUEUED):
        send_task(redis_url, "memsync.ingest", [{"event_id": f"e-{number}"}])
    send_task(redis_url, "memsync.sync", [], queue=SYNC_QUEUE)
    body = _get(flower, "/api/queues/length")
    assert body is not None
    lengths = {q["name"]: q["messages"] for q in json.loads(body)["active_queues"]}
    assert lengths[INGEST_QUEUE] == QUEUED
    assert lengths[SYNC_QUEUE] == 1
    broker_page = _get(flower, "/broker")
    assert broker_page is not None and INGEST_QUEUE in broker_page
