"""Celery signal handlers: per-process resources after fork, schema check at worker start."""

from __future__ import annotations

import logging
from typing import Any

from celery._state import get_current_task
from celery.exceptions import Ignore, Reject, Retry
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    task_failure,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
)

from memsync.logs import use_json
from pipeline.errors import ConfigurationError
from pipeline.graph.schema import require_schema
from workers.worker import runtime, telemetry
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
    telemetry.install(runtime.settings())


@worker_process_shutdown.connect
def close_resources(**_: Any) -> None:
    runtime.close()
    telemetry.shutdown()


class _TaskIds(logging.Filter):
    """Adds the running task's id and name to a record (JSON logs carry them as fields)."""

    def filter(self, record: logging.LogRecord) -> bool:
        task = get_current_task()
        if task is not None and task.request.id and not hasattr(record, "task_id"):
            record.task_id = task.request.id
            record.task_name = task.name
        return True


@after_setup_logger.connect
@after_setup_task_logger.connect
def json_logs(logger: logging.Logger | None = None, **_: Any) -> None:
    """With MEMSYNC_LOG_FORMAT=json, every handler Celery set up writes JSON lines."""
    if logger is None or runtime.settings().log_format != "json":
        return
    for handler in logger.handlers:
        use_json(handler)
        if not any(isinstance(f, _TaskIds) for f in handler.filters):
            handler.addFilter(_TaskIds())
