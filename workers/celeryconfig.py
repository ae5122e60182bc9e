"""All Celery and kombu configuration, derived from Settings in one place."""

from __future__ import annotations

from typing import Any

from kombu import Queue

from workers.settings import INGEST_QUEUE, SYNC_QUEUE, Settings


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration memsync's delivery guarantees rely on."""
    timeout = settings.broker_timeout
    transport = {
        # Unacked messages come back after this long; it must exceed the longest task plus retries.
        "visibility_timeout": settings.visibility_timeout,
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "socket_keepalive": True,
        "retry_on_timeout": True,
        "health_check_interval": 25,
    }
    config: dict[str, Any] = {
        "broker_url": settings.broker_url,
        "broker_transport_options": transport,
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
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "task_time_limit": settings.task_time_limit,
        "task_soft_time_limit": max(settings.task_time_limit - 10, 5),
        "task_default_queue": INGEST_QUEUE,
        "task_queues": (Queue(INGEST_QUEUE), Queue(SYNC_QUEUE)),
        "task_routes": {
            "memsync.ingest": {"queue": INGEST_QUEUE},
            "memsync.sync": {"queue": SYNC_QUEUE},
        },
        "task_create_missing_queues": False,
        "worker_concurrency": settings.worker_concurrency,
    }
    if settings.broker_url.startswith(("redis://", "rediss://")):
        config["broker_transport"] = "workers.transport:Transport"
    return config
