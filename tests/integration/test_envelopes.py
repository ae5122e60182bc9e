"""Task messages a stock Celery worker would drop with a log line, or run twice, are dead-lettered.

Stock Celery 5.7 (celery/worker/consumer/consumer.py, strategy.py) rejects a pickle/yaml message
(on_invalid_task) and an unregistered task (on_unknown_task), acks an undecodable one
(on_decode_error), and holds an ETA message unacked past the visibility timeout (redelivered).
Here each lands in the dead-letter store with its reason, and the worker goes on.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from memsync.producer import Producer
from memsync.settings import INGEST_QUEUE, Settings
from workers.local import services
from workers.state.deadletter import DeadLetterStore
from workers.state.ledger import Ledger
from workers.worker.app import app

pytestmark = pytest.mark.integration


def envelope(marker: str, *, task: str = "memsync.ingest", body: Any = None) -> dict[str, Any]:
    raw = json.dumps([[[]], {}, {}] if body is None else body).encode()
    return {
        "body": base64.b64encode(raw).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"lang": "py", "task": task, "id": marker, "retries": 0},
        "properties": {
            "correlation_id": marker,
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": INGEST_QUEUE},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": marker,
        },
    }


def turn(tenant: str) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "event_id": "ev-ok",
        "tenant": tenant,
        "channel": {"id": "dm-1", "kind": "dm"},
        "participants": [{"id": "u-1", "kind": "human"}, {"id": "a-1", "kind": "agent"}],
        "messages": [
            {"id": "m-1", "role": "user", "sender_id": "u-1", "content": "hello",
             "created_at": "2026-11-29T10:00:00Z"}
        ],
    }  # fmt: skip


def test_messages_stock_celery_would_drop_are_dead_lettered_with_a_reason(
    worker: services.Service, settings: Settings, ledger: Ledger, tenant: str
) -> None:
    client = redis.Redis.from_url(settings.broker_url)
    ids = {case: f"{tenant}-{case}-{uuid.uuid4().hex[:6]}" for case in
           ("pickle", "yaml", "unknown", "base64", "notjson", "shape", "eta")}  # fmt: skip
    pickle = envelope(ids["pickle"])
    pickle["content-type"] = "application/x-python-serialize"
    pickle["body"] = base64.b64encode(b"\x80\x04\x95garbage").decode()
    yaml = envelope(ids["yaml"])
    yaml["content-type"] = "application/x-yaml"
    bad64 = envelope(ids["base64"])
    bad64["body"] = "%%% not base64 %%%"
    notjson = envelope(ids["notjson"])
    notjson["body"] = base64.b64encode(b"{not json").decode()
    items = [
        pickle,
        yaml,
        envelope(ids["unknown"], task="memsync.delete_everything"),
        bad64,
        notjson,
        envelope(ids["shape"], body={"args": [1]}),
    ]
    for item in items:
        client.lpush(INGEST_QUEUE, json.dumps(item))
    # A real Celery message whose ETA lies beyond what the visibility timeout lets a worker hold.
    with app.connection_for_write(url=settings.broker_url) as connection:
        app.send_task(
            "memsync.ingest",
            args=([turn(tenant)],),
            queue=INGEST_QUEUE,
            task_id=ids["eta"],
            eta=datetime.now(UTC) + timedelta(seconds=settings.visibility_timeout + 600),
            producer=app.amqp.Producer(connection, auto_declare=False),
        )

    # A good turn sent afterwards is processed: the worker went past every bad item.
    producer = Producer(settings)
    try:
        producer.emit(turn(tenant))
        assert producer.flush(30)
    finally:
        producer.close(timeout=10)
    statuses = ledger.wait([(tenant, "ev-ok")], timeout=90)
    assert statuses[0].complete, statuses

    letters = [x for x in DeadLetterStore(client).entries() if x.stage == "decode"]
    reasons: dict[str, str] = {}
    for case, marker in ids.items():
        found = [x for x in letters if marker in str(x.payload)]
        assert len(found) == 1, (case, [x.error for x in letters])
        assert not found[0].replayable
        reasons[case] = found[0].error
    assert "application/x-python-serialize" in reasons["pickle"]
    assert "application/x-yaml" in reasons["yaml"]
    assert "unregistered task 'memsync.delete_everything'" in reasons["unknown"]
    assert "base64" in reasons["base64"]
    assert "not JSON" in reasons["notjson"]
    assert "protocol 2" in reasons["shape"]
    assert "ahead" in reasons["eta"] and "MEMSYNC_VISIBILITY_TIMEOUT" in reasons["eta"]
    assert worker.process.poll() is None, worker.log_tail(50)
    client.close()
