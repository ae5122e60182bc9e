"""The task base never lets a message be dropped because its retry could not be published."""

from __future__ import annotations

from typing import Any

import pytest
from celery import Celery
from celery.exceptions import Reject

from pipeline.errors import BrokerUnavailable
from workers.local import services
from workers.worker.taskbase import MemsyncTask


def test_a_retry_that_cannot_be_published_requeues_the_message() -> None:
    # Nothing listens on this port: publishing the retry fails as it does while Redis is down.
    app = Celery(
        "unit",
        broker=f"redis://127.0.0.1:{services.free_port()}/0",
        set_as_current=False,
    )
    app.conf.update(
        task_publish_retry=False,
        broker_connection_timeout=0.5,
        broker_connection_retry=False,
        broker_transport_options={"socket_connect_timeout": 0.5, "max_retries": 0},
    )
    calls: list[Any] = []

    @app.task(
        name="unit.flaky",
        bind=True,
        base=MemsyncTask,
        autoretry_for=(BrokerUnavailable,),
        max_retries=5,
    )
    def flaky(self: MemsyncTask, payload: Any) -> None:
        calls.append(payload)
        raise BrokerUnavailable("Redis went away after the graph write")

    flaky.push_request(id="t-1", retries=0, called_directly=False, delivery_info={})
    try:
        with pytest.raises(Reject) as raised:
            flaky([{"event_id": "e-1"}])
    finally:
        flaky.pop_request()
    # Celery itself would raise Reject(requeue=False) here, and the message would be dropped.
    assert getattr(raised.value, "requeue", None) is True
    assert calls == [[{"event_id": "e-1"}]]
