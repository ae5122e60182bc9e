"""All Celery and kombu configuration, derived from Settings in one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kombu import Exchange, Queue

from memsync.settings import EMBED_QUEUE, FOLD_QUEUE, INGEST_QUEUE, SYNC_QUEUE, Settings


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration memsync's delivery guarantees rely on."""
    timeout = settings.broker_timeout
    transport = {
        # Unacked messages come back after this long; it must exceed the longest task plus retries.
        "visibility_timeout": settings.visibility_timeout,
        # Look for such messages every `restore_interval` seconds (kombu's default is ~100 s).
        "unacked_restore_interval": settings.restore_interval,
        "unacked_restore_throttle": 1,
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "socket_keepalive": True,
        "retry_on_timeout": True,
        "health_check_interval": 25,
    }
    config: dict[str, Any] = {
        "broker_url": settings.broker_url,
        "broker_transport_options": transport,
        # Celery reads the visibility timeout from each of these; keep them equal.
        "result_backend_transport_options": {"visibility_timeout": settings.visibility_timeout},
        "broker_connection_timeout": timeout,
        "broker_connection_retry_on_startup": True,
        "broker_pool_limit": 10,
        # JSON only: a payload from the queue is data, never code.
        "task_serializer": "json",
        "result_serializer": "json",
        "event_serializer": "json",
        "accept_content": ["json"],
        # No result backend on the hot path; progress lives in the ledger.
        "result_backend": None,
        "task_ignore_result": True,
        "task_store_errors_even_if_ignored": False,
        # At-least-once: ack after the work, requeue if the worker dies mid-task.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # Left running on a broker connection loss: terminating a task mid-write corrupts its
        # Neo4j connection, while letting it finish only risks a redelivered duplicate, which
        # idempotent writes absorb.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        # Annotations match exact task names (or "*"), not patterns.
        "task_annotations": {
            name: {
                "max_retries": settings.max_retries,
                "retry_backoff_max": settings.retry_backoff_max,
            }
            for name in ("memsync.ingest", "memsync.sync")
        },
        # Only a hard limit: the soft limit's asynchronous exception can land while a pool child
        # is sending its result and garble the pool's pipe, which stops the worker. A child past
        # the hard limit is killed and its message requeued (reject_on_worker_lost).
        "task_time_limit": settings.task_time_limit,
        "task_default_queue": INGEST_QUEUE,
        # Each queue on its own exchange and key: left to Celery's defaults, both would bind to
        # the default queue's exchange and key, and `celery report` would show sync behind it.
        "task_queues": tuple(
            Queue(name, Exchange(name, type="direct"), routing_key=name)
            for name in (INGEST_QUEUE, SYNC_QUEUE, EMBED_QUEUE, FOLD_QUEUE)
        ),
        "task_routes": {
            "memsync.ingest": {"queue": INGEST_QUEUE},
            "memsync.sync": {"queue": SYNC_QUEUE},
            "memsync.embed": {"queue": EMBED_QUEUE},
            "memsync.fold": {"queue": FOLD_QUEUE},
        },
        "task_create_missing_queues": False,
        "worker_concurrency": settings.worker_concurrency,
    }
    if settings.broker_url.startswith(("redis://", "rediss://")):
        config["broker_transport"] = "workers.worker.transport:Transport"
    return config


def monitor_config(settings: Settings) -> dict[str, Any]:
    """The configuration for monitors (Flower, `celery events`): the workers' own, on kombu's
    stock Redis transport. memsync's transport changes only how workers take messages; named
    by its import path it gives the broker URL a scheme monitors cannot read."""
    config = celery_config(settings)
    config.pop("broker_transport", None)
    return config


def delivery_problems(conf: Mapping[str, Any]) -> list[str]:
    """Why these delivery settings could duplicate or lose work; empty when they are sound.

    With Redis, a message a worker holds unacked (running, or waiting out a retry countdown)
    is handed to another worker once the visibility timeout passes, so the timeout must exceed
    the longest task plus the largest retry countdown.
    """
    problems = []
    longest = int(conf.get("task_time_limit") or 0)
    annotations = conf.get("task_annotations") or {}
    countdown = max(
        [int(a.get("retry_backoff_max", 600)) for a in annotations.values() if isinstance(a, dict)]
        or [600]
    )
    needed = longest + countdown
    for option in ("broker_transport_options", "result_backend_transport_options"):
        value = (conf.get(option) or {}).get("visibility_timeout")
        if value is None:
            problems.append(f"{option}.visibility_timeout is not set (MEMSYNC_VISIBILITY_TIMEOUT)")
        elif int(value) <= needed:
            problems.append(
                f"{option}.visibility_timeout is {value}s but must exceed the task time limit "
                f"({longest}s, MEMSYNC_TASK_TIME_LIMIT) plus the largest retry countdown "
                f"({countdown}s, MEMSYNC_RETRY_BACKOFF_MAX): raise MEMSYNC_VISIBILITY_TIMEOUT "
                f"above {needed} or lower the other two"
            )
    if not longest:
        problems.append("task_time_limit is not set (MEMSYNC_TASK_TIME_LIMIT)")
    return problems
