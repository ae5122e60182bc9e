"""Screening of task-queue items: what a stock Celery worker would drop or run twice is caught.

A stock Celery 5.7 worker handles these cases without dead-lettering anything:
- content type pickle/yaml: `message.payload` raises ContentDisallowed in the strategy, and
  `on_invalid_task` rejects the message (gone, one error log line);
- an unregistered task name: `on_unknown_task` rejects it (gone);
- bad base64 or a body that is not JSON: `on_decode_error` acks it (gone); a JSON body of the
  wrong shape fails in the pool child while unpacking [args, kwargs, embed] (acked, gone);
- an ETA beyond the visibility timeout: held unacked in memory, so Redis hands it to another
  worker when the timeout passes, and it runs more than once.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from memsync.settings import Settings
from workers.worker.envelope import TASK_NAMES, envelope_problem, is_task_queue, max_eta_seconds

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC).timestamp()
BOUND = 3300.0


def envelope(
    *,
    task: Any = "memsync.ingest",
    body: Any = None,
    content_type: Any = "application/json",
    eta: Any = None,
    encoding: Any = "base64",
) -> dict[str, Any]:
    """A protocol-2 envelope as kombu's Redis transport stores it."""
    if body is None:
        body = [[[{"event_id": "e-1"}]], {}, {"callbacks": None, "chain": None}]
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return {
        "body": base64.b64encode(raw).decode() if encoding == "base64" else raw.decode(),
        "content-encoding": "utf-8",
        "content-type": content_type,
        "headers": {"lang": "py", "task": task, "id": "t-1", "eta": eta, "retries": 0},
        "properties": {
            "correlation_id": "t-1",
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": "memsync.ingest"},
            "priority": 0,
            "body_encoding": encoding,
            "delivery_tag": "tag-1",
        },
    }


def problem(env: dict[str, Any]) -> str | None:
    return envelope_problem(json.dumps(env).encode(), NOW, BOUND)


def iso(seconds_ahead: float) -> str:
    return datetime.fromtimestamp(NOW + seconds_ahead, UTC).isoformat()


def test_a_celery_message_passes() -> None:
    assert problem(envelope()) is None
    assert problem(envelope(task="memsync.sync")) is None


def test_a_message_sent_by_celery_itself_passes() -> None:
    from kombu import Connection

    from workers.worker.app import app

    with Connection("memory://") as connection:
        producer = app.amqp.Producer(connection, auto_declare=True)
        app.send_task("memsync.sync", args=([{"x": 1}],), queue="memsync.sync", producer=producer)
        message = connection.SimpleQueue("memsync.sync").get(timeout=1)
        env = {
            "body": base64.b64encode(cast(bytes, message.body)).decode(),
            "content-encoding": message.content_encoding,
            "content-type": message.content_type,
            "headers": message.headers,
            "properties": {**message.properties, "delivery_tag": "tag-1"},
        }
    assert envelope_problem(json.dumps(env), NOW, BOUND) is None


@pytest.mark.parametrize(
    "content_type",
    ["application/x-python-serialize", "application/x-yaml", "application/x-msgpack", None],
)
def test_content_other_than_json_is_refused(content_type: Any) -> None:
    reason = problem(envelope(content_type=content_type))
    assert reason is not None and "content type" in reason and repr(content_type) in reason


def test_unregistered_task_is_named() -> None:
    reason = problem(envelope(task="celery.backend_cleanup"))
    assert reason is not None and "unregistered task 'celery.backend_cleanup'" in reason


@pytest.mark.parametrize("task", [None, 42])
def test_missing_task_name_is_refused(task: Any) -> None:
    reason = problem(envelope(task=task))
    assert reason is not None and "no task name" in reason


def test_task_names_are_the_registered_ones() -> None:
    import workers.worker.tasks  # noqa: F401  (registers the tasks)
    from workers.worker.app import app

    assert {name for name in app.tasks if name.startswith("memsync.")} == TASK_NAMES


def test_bad_base64_is_refused() -> None:
    env = envelope()
    env["body"] = "not*base64!"
    reason = problem(env)
    assert reason is not None and "base64" in reason


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"\x80\x04pickled", "not JSON"),
        (b"{truncated", "not JSON"),
        ({"args": [], "kwargs": {}}, "protocol 2"),
        ([[1], {}], "protocol 2"),
        (["args", {}, {}], "protocol 2"),
        ([[1], [], {}], "protocol 2"),
        ([[1], {}, []], "protocol 2"),
        (42, "protocol 2"),
    ],
)
def test_body_not_in_protocol_2_shape_is_refused(body: Any, expected: str) -> None:
    reason = problem(envelope(body=body))
    assert reason is not None and expected in reason


def test_unencoded_body_is_read_as_is() -> None:
    assert problem(envelope(encoding=None)) is None
    reason = problem(envelope(encoding=None, body=b"[1, 2]"))
    assert reason is not None and "protocol 2" in reason


def test_unknown_body_encoding_is_refused() -> None:
    env = envelope()
    env["properties"]["body_encoding"] = "rot13"
    reason = problem(env)
    assert reason is not None and "rot13" in reason


def test_body_that_is_not_a_string_is_refused() -> None:
    env = envelope()
    env["body"] = {"inline": True}
    reason = problem(env)
    assert reason is not None and "not a string" in reason


def test_eta_within_the_bound_passes_and_beyond_it_is_refused() -> None:
    assert problem(envelope(eta=iso(-60))) is None  # overdue: runs now
    assert problem(envelope(eta=iso(600))) is None  # a retry countdown
    assert problem(envelope(eta=iso(BOUND))) is None
    reason = problem(envelope(eta=iso(BOUND + 5)))
    assert reason is not None and "ahead" in reason and "MEMSYNC_VISIBILITY_TIMEOUT" in reason
    far = problem(envelope(eta=iso(30 * 86400)))
    assert far is not None and "2592000s ahead" in far


def test_naive_eta_is_read_as_utc_and_garbage_eta_is_refused() -> None:
    naive = datetime.fromtimestamp(NOW + BOUND + 100, UTC).replace(tzinfo=None).isoformat()
    assert problem(envelope(eta=naive)) is not None
    assert problem(envelope(eta=naive.replace("2026", "2025"))) is None
    for bad in ("tomorrow", 12345):
        reason = problem(envelope(eta=bad))
        assert reason is not None and "ISO 8601" in reason


def test_non_envelopes_keep_their_reasons() -> None:
    assert "not JSON" in (envelope_problem(b"\x00not json{", NOW, BOUND) or "")
    assert "not a message envelope" in (envelope_problem(b"[1]", NOW, BOUND) or "")


def test_eta_bound_leaves_room_for_the_longest_task_and_every_retry() -> None:
    settings = Settings(visibility_timeout=3600, task_time_limit=300, retry_backoff_max=600)
    assert max_eta_seconds(settings) == 3300
    assert max_eta_seconds(settings) > settings.retry_backoff_max
    assert max_eta_seconds(Settings(visibility_timeout=7200)) == 7200 - 300


def test_task_queues_include_priority_levels_and_nothing_else() -> None:
    assert is_task_queue(b"memsync.ingest")
    assert is_task_queue("memsync.sync\x06\x163")
    assert not is_task_queue(b"c0ffee.reply.celery.pidbox")
    assert not is_task_queue(b"memsync.ingestion")
    assert not is_task_queue(b"celery")


def test_unreadable_bytes_are_reported_not_raised() -> None:
    env = envelope()
    text = json.dumps(env)
    assert envelope_problem(text, NOW, BOUND) is None
    assert envelope_problem(text.encode() + b"\xff", NOW, BOUND) is not None
