"""The producer's kombu-only ingest message is the one Celery's `send_task` writes.

Both are published onto kombu's in-memory broker and the raw queue items compared, field by
field, apart from what differs per send (ids, times, the sender's node name, the reply queue) and
argsrepr, which is a summary of the batch (count and event ids) rather than the turns' repr.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from celery import Celery
from kombu import Connection
from kombu import Producer as KombuProducer

from memsync.inflight import SENT_AT_HEADER, sent_now
from memsync.message import payload_repr, publish_ingest
from memsync.settings import INGEST_QUEUE, Settings
from workers.worker.config import celery_config
from workers.worker.envelope import envelope_problem

BATCH = [{"event_id": "e-1", "tenant": "acme", "text": "Noted, Devon: window seat. é"}]
PER_SEND = {"id", "root_id", "origin", SENT_AT_HEADER}
SUMMARISED = {"argsrepr"}


def queued(connection: Connection) -> dict[str, Any]:
    """The one raw item on the ingest queue, taken off it."""
    channel: Any = connection.default_channel
    item: dict[str, Any] = channel._get(INGEST_QUEUE)
    return item


def celery_item(url: str) -> dict[str, Any]:
    app = Celery("memsync")
    app.conf.update(celery_config(Settings(broker_url=url)))
    app.conf.broker_transport = None  # the in-memory broker, not workers/worker/transport.py
    with app.connection_for_write(url=url) as connection:
        app.send_task(
            "memsync.ingest",
            args=(BATCH,),
            queue=INGEST_QUEUE,
            producer=app.amqp.Producer(connection, auto_declare=False),
            retry=False,
            headers=sent_now(),
        )
        return queued(connection)


def memsync_item(url: str) -> tuple[str, dict[str, Any]]:
    with Connection(url) as connection:
        task_id = publish_ingest(KombuProducer(connection, auto_declare=False), BATCH)
        return task_id, queued(connection)


def body_of(item: dict[str, Any]) -> Any:
    assert item["properties"]["body_encoding"] == "base64"
    return json.loads(base64.b64decode(item["body"]))


def test_the_ingest_message_matches_celerys_send_task() -> None:
    # kombu's memory broker is process-wide: each item is taken off as soon as it is sent.
    ours_id, ours = memsync_item("memory://localhost/h1-ours")
    theirs = celery_item("memory://localhost/h1-theirs")

    assert {k: v for k, v in ours["headers"].items() if k not in PER_SEND | SUMMARISED} == {
        k: v for k, v in theirs["headers"].items() if k not in PER_SEND | SUMMARISED
    }
    assert set(ours["headers"]) == set(theirs["headers"])
    assert ours["headers"]["argsrepr"] == "<1 turn: 'e-1'>"
    assert ours["headers"]["id"] == ours["headers"]["root_id"] == ours_id
    assert ours["headers"]["task"] == "memsync.ingest"
    assert abs(float(ours["headers"][SENT_AT_HEADER]) - time.time()) < 3600
    assert (
        body_of(ours)
        == body_of(theirs)
        == [
            [BATCH],
            {},
            {"callbacks": None, "errbacks": None, "chain": None, "chord": None},
        ]
    )
    for field in ("content-type", "content-encoding"):
        assert ours[field] == theirs[field]
    ours_props, theirs_props = ours["properties"], theirs["properties"]
    assert ours_props["correlation_id"] == ours_id
    assert ours_props["delivery_mode"] == theirs_props["delivery_mode"] == 2
    assert ours_props["delivery_info"] == theirs_props["delivery_info"]
    assert ours_props["priority"] == theirs_props["priority"]
    assert set(ours_props) == set(theirs_props)


def test_the_workers_transport_accepts_the_message() -> None:
    _, item = memsync_item("memory://localhost/h1-screen")
    assert envelope_problem(json.dumps(item), time.time(), 3000.0) is None


def test_a_large_batch_keeps_argsrepr_bounded() -> None:
    batch = [{"event_id": f"e-{n}", "text": "x" * 10_000} for n in range(200)]
    with Connection("memory://localhost/h1-large") as connection:
        publish_ingest(KombuProducer(connection, auto_declare=False), batch)
        item = queued(connection)
    argsrepr = item["headers"]["argsrepr"]
    assert len(argsrepr) <= 1024
    assert argsrepr.startswith("<200 turns: 'e-0', 'e-1', ") and argsrepr.endswith("...")
    assert "xxx" not in argsrepr  # never what was said
    assert body_of(item)[0] == [batch]


def test_a_job_payload_repr_names_events_and_agents_never_text() -> None:
    jobs = [
        {"event_id": f"e-{n}", "agent": {"key": "acme/a-1"}, "messages": [{"content": "x" * 500}]}
        for n in range(300)
    ]
    shown = payload_repr(jobs)
    assert shown.startswith("<300 items: 'e-0'@acme/a-1, 'e-1'@acme/a-1, ")
    assert len(shown) <= 1024 and "xxx" not in shown
    assert payload_repr({"weird": 1}) == "<1 item: ?>"
