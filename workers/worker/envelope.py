"""Screening of raw queue items: what memsync's workers accept as a task message, and why not.

A stock worker stops on an item that is not a message envelope, drops (with a log line) one whose
content type is not JSON, whose task is not registered or whose body does not decode, and holds
one with a far ETA past the visibility timeout. The transport dead-letters all of these instead,
with the reason this module gives.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any

from kombu.transport import redis as kombu_redis

from memsync.settings import TASK_QUEUES, Settings

# The tasks workers/worker/tasks.py, workers/worker/embedding.py and workers/worker/folding.py
# register. Items of TASK_QUEUES must be their messages (the reliable pop serves those queues);
# other queues a client of this transport pops (e.g. `celery inspect` reply queues) only need
# to be envelopes.
TASK_NAMES = frozenset({"memsync.ingest", "memsync.sync", "memsync.embed", "memsync.fold"})
ACCEPTED_CONTENT_TYPE = "application/json"


def unreadable_reason(body: bytes | str) -> str | None:
    """Why a raw queue item is not a message envelope kombu can deliver, or None if it is one."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"not JSON ({exc})"
    if not isinstance(payload, dict):
        return f"not a message envelope (a JSON {type(payload).__name__})"
    properties = payload.get("properties")
    if not isinstance(properties, dict) or "delivery_tag" not in properties:
        return "not a message envelope (no properties.delivery_tag)"
    return None


def max_eta_seconds(settings: Settings) -> float:
    """How far ahead a task message's ETA may lie for a worker to hold it safely.

    Redis hands an unacked message to another worker once the visibility timeout has passed since
    delivery. A worker holds an ETA message unacked until its ETA, then runs it for up to the task
    time limit, so the ETA must lie within (visibility timeout - task time limit) of delivery;
    further, the message runs twice or more. The worker refuses to start unless this exceeds the
    largest retry countdown, so memsync's own retries always pass.
    """
    return float(settings.visibility_timeout - settings.task_time_limit)


def envelope_problem(body: bytes | str, now: float, max_eta_seconds: float) -> str | None:
    """Why a raw item of a task queue is not a memsync task message a worker can run safely.

    `now` is the time of delivery (epoch seconds). None when the item is fine.
    """
    reason = unreadable_reason(body)
    if reason is not None:
        return reason
    envelope = json.loads(body)
    content_type = envelope.get("content-type")
    if content_type != ACCEPTED_CONTENT_TYPE:
        return f"content type {content_type!r} refused (only {ACCEPTED_CONTENT_TYPE} is accepted)"
    headers = envelope.get("headers")
    task = headers.get("task") if isinstance(headers, dict) else None
    if not isinstance(task, str):
        return "no task name in the headers (not a Celery protocol-2 message)"
    if task not in TASK_NAMES:
        return f"unregistered task {task!r} (known: {', '.join(sorted(TASK_NAMES))})"
    reason = _body_problem(envelope)
    if reason is not None:
        return reason
    assert isinstance(headers, dict)
    return _eta_problem(headers.get("eta"), now, max_eta_seconds)


def _body_problem(envelope: dict[str, Any]) -> str | None:
    body = envelope.get("body")
    if not isinstance(body, str):
        return f"message body is a JSON {type(body).__name__}, not a string"
    properties = envelope["properties"]
    encoding = properties.get("body_encoding")
    if encoding == "base64":
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as exc:
            return f"message body is not valid base64 ({exc})"
    elif encoding is None:
        raw = body.encode("utf-8", errors="surrogatepass")
    else:
        return f"unknown body encoding {encoding!r}"
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"message body is not JSON ({exc})"
    if (
        not isinstance(payload, list)
        or len(payload) != 3
        or not isinstance(payload[0], list)
        or not isinstance(payload[1], dict)
        or not isinstance(payload[2], dict | None)
    ):
        return "message body is not Celery protocol 2 ([args, kwargs, embed])"
    return None


def _eta_problem(eta: Any, now: float, bound: float) -> str | None:
    if eta is None:
        return None
    if not isinstance(eta, str):
        return f"eta {eta!r} is not an ISO 8601 time"
    try:
        when = datetime.fromisoformat(eta)
    except ValueError:
        return f"eta {eta!r} is not an ISO 8601 time"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # Celery's default (enable_utc) sends UTC
    ahead = when.timestamp() - now
    if ahead > bound:
        return (
            f"eta {eta} is {ahead:.0f}s ahead, beyond the {bound:.0f}s a worker can hold a "
            "message unacked (MEMSYNC_VISIBILITY_TIMEOUT - MEMSYNC_TASK_TIME_LIMIT): it would be "
            "redelivered and run more than once"
        )
    return None


def is_task_queue(queue: bytes | str) -> bool:
    name = queue.decode(errors="replace") if isinstance(queue, bytes) else queue
    # Priority levels live in sibling lists named queue + sep + level.
    return name.split(kombu_redis.Channel.sep, 1)[0] in TASK_QUEUES
