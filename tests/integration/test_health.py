"""`memsync health` against real services: ready with Redis, Neo4j and a worker up; Neo4j
unreachable is reported by name, with exit 3, while Redis still reads as up."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memsync.settings import Settings
from tests.integration.test_cli_ops import _memsync
from workers.local import services

pytestmark = pytest.mark.integration


def _health(settings: Settings, *extra: str) -> tuple[int, dict[str, Any]]:
    done = _memsync(["health", "--json", *extra], settings)
    return done.returncode, json.loads(done.stdout)


def test_ready_when_redis_neo4j_and_a_worker_answer(
    settings: Settings, worker: services.Service
) -> None:
    code, report = _health(settings)
    checks = {c["name"]: c for c in report["checks"]}
    assert code == 0 and report["ready"] is True, report
    assert set(checks) == {"redis", "neo4j", "workers"}
    assert "search indexes online" in checks["neo4j"]["detail"]


def test_neo4j_down_is_named_and_exits_unreachable(settings: Settings) -> None:
    nowhere = settings.model_copy(update={"neo4j_uri": f"bolt://127.0.0.1:{services.free_port()}"})
    code, report = _health(nowhere, "--no-workers")
    checks = {c["name"]: c for c in report["checks"]}
    assert code == 3 and report["ready"] is False
    assert checks["redis"]["ok"] is True
    assert checks["neo4j"]["ok"] is False and checks["neo4j"]["unreachable"] is True
    assert "Neo4j" in checks["neo4j"]["detail"]
