"""Celery signal handlers: per-process resources after fork, schema check at worker start."""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import worker_init, worker_process_init, worker_process_shutdown

from pipeline.errors import ConfigurationError
from pipeline.graph.schema import require_schema
from workers import runtime

log = logging.getLogger("memsync.worker")


@worker_init.connect
def check_schema(**_: Any) -> None:
    """Refuse to start a worker whose graph lacks the uniqueness constraints MERGE relies on."""
    graph = runtime.graph()
    try:
        require_schema(graph)
    except ConfigurationError as exc:
        log.critical("%s", exc)
        raise SystemExit(f"memsync worker: {exc}") from None
    finally:
        runtime.close()


@worker_process_init.connect
def open_resources(**_: Any) -> None:
    """Each pool child opens its own Neo4j driver and Redis client; inherited ones are dropped."""
    runtime.reset()
    runtime.graph()


@worker_process_shutdown.connect
def close_resources(**_: Any) -> None:
    runtime.close()
