"""Celery protocol-2 task messages built and published with kombu alone.

The producer runs inside the platform's process and must not import Celery, so it writes the
message Celery's `send_task` would: the same body, headers and properties, on the anonymous
exchange with the queue's name as routing key (how Celery routes to a direct queue), persistent.
The reconciler's re-send (workers/worker/reconcile.py) publishes through the same function, so the
producer's messages and the re-sent ones cannot drift apart. The body is assembled from turns
already encoded as JSON (memsync/encoded.py), never serialised again.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kombu import Exchange, Producer, Queue

from memsync.encoded import EncodedTurn, encoded
from memsync.inflight import sent_now
from memsync.settings import INGEST_QUEUE

INGEST_TASK = "memsync.ingest"
# What Celery's json serializer labels its bodies with; the body is written here, already JSON.
CONTENT_TYPE = "application/json"
CONTENT_ENCODING = "utf-8"
# AMQP's "persistent"; Celery's task_default_delivery_mode.
PERSISTENT = 2
# Celery's argsrepr_maxsize and kwargsrepr_maxsize: the repr shown by Flower and in worker logs.
REPR_MAXSIZE = 1024

# The body's third part, Celery's "embed" of a task sent on its own (no callbacks, no canvas).
_EMBED = b'{"callbacks":null,"errbacks":null,"chain":null,"chord":null}'


@dataclass(frozen=True)
class TaskMessage:
    """What one task publish sends: body (JSON bytes), headers (Celery's protocol 2) and
    properties."""

    task_id: str
    body: bytes
    headers: dict[str, Any]
    properties: dict[str, Any]


def ingest_message(
    batch: Sequence[EncodedTurn | Mapping[str, Any]], headers: Mapping[str, Any] | None = None
) -> TaskMessage:
    """The `memsync.ingest` message for a batch of turns, published now.

    The body `[[turns], {}, embed]` is spliced from the turns' JSON texts, so an encoded turn is
    not encoded again (a mapping is encoded once here).
    """
    turns = [encoded(turn) for turn in batch]
    args = ",".join(turn.text for turn in turns).encode(CONTENT_ENCODING)
    body = b"".join((b"[[[", args, b"]],{},", _EMBED, b"]"))
    return task_message(INGEST_TASK, body, argsrepr=_turns_repr(turns), headers=headers)


def task_message(
    name: str,
    body: bytes,
    *,
    argsrepr: str,
    kwargsrepr: str = "{}",
    headers: Mapping[str, Any] | None = None,
) -> TaskMessage:
    """The protocol-2 message running task `name` with this JSON body, published now."""
    task_id = str(uuid.uuid4())
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
        "argsrepr": _bounded(argsrepr),
        "kwargsrepr": _bounded(kwargsrepr),
        # Celery's anonymous node name: the pid is read per message, so a forked child tells.
        "origin": f"gen{os.getpid()}@{socket.gethostname()}",
        "ignore_result": None,
        "replaced_task_nesting": 0,
        "stamped_headers": None,
        "stamps": {},
        **sent_now(),
        **(headers or {}),
    }
    return TaskMessage(
        task_id=task_id,
        body=body,
        headers=base,
        properties={"correlation_id": task_id, "reply_to": ""},
    )


def task_queue(name: str) -> Queue:
    """A memsync queue as the workers declare it (workers/worker/config.py): its own direct
    exchange and routing key, both named after it."""
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


def publish_ingest(
    producer: Producer,
    batch: Sequence[EncodedTurn | Mapping[str, Any]],
    *,
    retry: bool = False,
    retry_policy: Mapping[str, Any] | None = None,
    headers: Mapping[str, Any] | None = None,
) -> str:
    """Publish one `memsync.ingest` task for a batch of turns (with extra `headers`, e.g. a
    trace context); returns the task id.

    The body goes out as written (a content type given, kombu serialises nothing). The queue is
    declared as Celery declares it before a send (kombu does that once per connection), so a
    broker no worker has seen yet still routes the message to it.
    """
    message = ingest_message(batch, headers)
    producer.publish(
        message.body,
        exchange="",
        routing_key=INGEST_QUEUE,
        content_type=CONTENT_TYPE,
        content_encoding=CONTENT_ENCODING,
        retry=retry,
        retry_policy=dict(retry_policy) if retry_policy else None,
        delivery_mode=PERSISTENT,
        declare=[task_queue(INGEST_QUEUE)],
        headers=message.headers,
        **message.properties,
    )
    return message.task_id


def _turns_repr(turns: Sequence[EncodedTurn]) -> str:
    """argsrepr for a batch: how many turns and their event ids, never what was said."""
    shown: list[str] = []
    length = 0
    for turn in turns:
        if length > REPR_MAXSIZE:  # the rest would be cut anyway
            break
        shown.append(repr(turn.event_id))
        length += len(shown[-1]) + 2
    noun = "turn" if len(turns) == 1 else "turns"
    return f"<{len(turns)} {noun}: {', '.join(shown)}>"


def payload_repr(payload: object) -> str:
    """argsrepr for any memsync task payload (a list of turns or of agents' jobs): how many, and
    their event ids (with the agents, for jobs), never what was said."""
    items = payload if isinstance(payload, list) else [payload]
    shown: list[str] = []
    length = 0
    for item in items:
        if length > REPR_MAXSIZE:
            break
        event_id = item.get("event_id") if isinstance(item, dict) else None
        agents = _agent_keys(item)
        label = repr(event_id) if isinstance(event_id, str) else "?"
        shown.append(f"{label}@{'+'.join(agents)}" if agents else label)
        length += len(shown[-1]) + 2
    noun = "item" if len(items) == 1 else "items"
    return _bounded(f"<{len(items)} {noun}: {', '.join(shown)}>")


def _agent_keys(item: object) -> list[str]:
    """The agents' keys of a job item (one agent) or a turn's jobs item (several)."""
    if not isinstance(item, dict):
        return []
    agents = item.get("agents")
    found = agents if isinstance(agents, list) else [item.get("agent")]
    keys = [agent.get("key") for agent in found if isinstance(agent, dict)]
    return [key for key in keys if isinstance(key, str)]


def _bounded(text: str) -> str:
    return text if len(text) <= REPR_MAXSIZE else text[: REPR_MAXSIZE - 3] + "..."
