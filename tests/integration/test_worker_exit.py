"""`memsync worker` exits with the status Celery sets, so a supervisor restarts a failed worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.settings import Settings
from pipeline.graph.store import GraphStore
from tests.integration.test_operations import cli

pytestmark = pytest.mark.integration


def test_a_worker_stopped_by_an_unrecoverable_error_exits_non_zero(
    settings: Settings, graph: GraphStore, tmp_path: Path
) -> None:
    # A liveness TTL shorter than two beats makes the heartbeat step refuse to start: Celery logs
    # "Unrecoverable error" and stops the worker with a failure status.
    own = settings.model_copy(
        update={
            "broker_url": settings.broker_url.rsplit("/", 1)[0] + "/5",
            "heartbeat_interval": 10.0,
            "heartbeat_ttl": 2,
        }
    )
    done = cli(own, "worker", "-n", "exit-test@%h", timeout=180)
    output = done.stdout + done.stderr
    assert "Unrecoverable error" in output, output[-3000:]
    assert done.returncode != 0, output[-3000:]
