"""Celery signal handlers: per-process resources after fork, schema check at worker start."""

from __future__ import annotations

import logging
from typing import Any

from celery.exceptions import Ignore, Reject, Retry
from celery.signals import (
    task_failure,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
)

from pipeline.errors import ConfigurationError
from pipeline.graph.schema import require_schema
from workers.worker import runtime
from workers.worker.config import delivery_problems
from workers.worker.taskbase import DEAD_LETTERED, MemsyncTask

log = logging.getLogger("memsync.worker")


@worker_init.connect
def check_before_start(sender: Any = None, **_: Any) -> None:
    """Refuse to start on delivery settings that could duplicate work, or a graph without the
    uniqueness constraints MERGE relies on."""
    conf = sender.app.conf if sender is not None else None
    problems = delivery_problems(conf) if conf is not None else []
    if problems:
        for problem in problems:
            log.critical("%s", problem)
        raise SystemExit("memsync worker: " + "; ".join(problems))
    graph = runtime.graph()
    try:
        require_schema(graph)
    except ConfigurationError as exc:
        log.critical("%s", exc)
        raise SystemExit(f"memsync worker: {exc}") from None
    finally:
        runtime.close()


@task_failure.connect
def dead_letter_unhandled(
    sender: Any = None,
    task_id: str | None = None,
    exception: BaseException | None = None,
    args: Any = None,
    kwargs: Any = None,
    **_: Any,
) -> None:
    """Failures the task never saw (hard time limit, lost pool child not requeued) get a letter."""
    if exception is None or getattr(exception, DEAD_LETTERED, False):
        return
    if isinstance(exception, Retry | Ignore):
        return  # retried, or deliberately dropped: not a failure to keep
    if isinstance(exception, Reject) and getattr(exception, "requeue", False):
        return  # back in its queue
    if not isinstance(sender, MemsyncTask):
        return
    payload = args[0] if args else (kwargs or {}).get("payload")
    try:
        sender.dead_letter(payload, exception)
    except Reject:
        log.critical("task %s failed and could not be dead-lettered: %s", task_id, exception)


@worker_process_init.connect
def open_resources(**_: Any) -> None:
    """Each pool child opens its own Neo4j driver and Redis client; inherited ones are dropped."""
    runtime.reset()
    runtime.graph()


@worker_process_shutdown.connect
def close_resources(**_: Any) -> None:
    runtime.close()
