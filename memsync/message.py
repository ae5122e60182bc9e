"""Celery protocol-2 task messages built and published with kombu alone.

The producer runs inside the platform's process and must not import Celery, so it writes the
message Celery's `send_task` would: the same body, headers and properties, on the anonymous
exchange with the queue's name as routing key (how Celery routes to a direct queue), persistent.
The reconciler's re-send (workers/worker/reconcile.py) publishes through the same function, so the
producer's messages and the re-sent ones cannot drift apart.
"""

from __future__ import annotations

import os
import reprlib
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kombu import Exchange, Producer, Queue

from memsync.inflight import sent_now
from memsync.settings import INGEST_QUEUE

INGEST_TASK = "memsync.ingest"
SERIALIZER = "json"
# AMQP's "persistent"; Celery's task_default_delivery_mode.
PERSISTENT = 2
# Celery's argsrepr_maxsize and kwargsrepr_maxsize: the repr shown by Flower and in worker logs.
REPR_MAXSIZE = 1024

_repr = reprlib.Repr()
_repr.maxlevel = 4
_repr.maxstring = 200
_repr.maxother = 200


@dataclass(frozen=True)
class TaskMessage:
    """What one task publish sends: body, headers (Celery's protocol 2) and properties."""

    task_id: str
    body: tuple[Any, ...]
    headers: dict[str, Any]
    properties: dict[str, Any]


def task_message(
    name: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    *,
    headers: Mapping[str, Any] | None = None,
) -> TaskMessage:
    """The protocol-2 message for running task `name` with these arguments, published now."""
    task_id = str(uuid.uuid4())
    kwargs = dict(kwargs or {})
    args = tuple(args)
    base: dict[str, Any] = {
        "lang": "py",
        "task": name,
        "id": task_id,
        "shadow": None,
        "eta": None,
        "expires": None,
        "group": None,
        "group_index": None,
        "retries": 0,
        "timelimit": [None, None],
        "root_id": task_id,
        "parent_id": None,
        "argsrepr": _bounded_repr(args),
        "kwargsrepr": _bounded_repr(kwargs),
        # Celery's anonymous node name: the pid is read per message, so a forked child tells.
        "origin": f"gen{os.getpid()}@{socket.gethostname()}",
        "ignore_result": None,
        "replaced_task_nesting": 0,
        "stamped_headers": None,
        "stamps": {},
        **sent_now(),
        **(headers or {}),
    }
    embed = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
    return TaskMessage(
        task_id=task_id,
        body=(args, kwargs, embed),
        headers=base,
        properties={"correlation_id": task_id, "reply_to": ""},
    )


def task_queue(name: str) -> Queue:
    """A memsync queue as the workers declare it (workers/worker/config.py): its own direct
    exchange and routing key, both named after it."""
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


def publish_ingest(
    producer: Producer,
    batch: Sequence[Mapping[str, Any]],
    *,
    retry: bool = False,
    retry_policy: Mapping[str, Any] | None = None,
) -> str:
    """Publish one `memsync.ingest` task for a batch of turns; returns the task id.

    The queue is declared as Celery declares it before a send (kombu does that once per
    connection), so a broker no worker has seen yet still routes the message to it.
    """
    message = task_message(INGEST_TASK, ([dict(turn) for turn in batch],))
    producer.publish(
        message.body,
        exchange="",
        routing_key=INGEST_QUEUE,
        serializer=SERIALIZER,
        retry=retry,
        retry_policy=dict(retry_policy) if retry_policy else None,
        delivery_mode=PERSISTENT,
        declare=[task_queue(INGEST_QUEUE)],
        headers=message.headers,
        **message.properties,
    )
    return message.task_id


def _bounded_repr(value: object) -> str:
    # reprlib bounds the work on a large batch; the cut bounds the header's size.
    text = _repr.repr(value)
    return text if len(text) <= REPR_MAXSIZE else text[: REPR_MAXSIZE - 3] + "..."
