"""emit() encodes each turn once: the spool keeps that very text, the in-flight record too, and the
ingest message spliced from it decodes, as a worker decodes it, to the turns of the dict path."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import fakeredis
from kombu import Connection
from kombu import Producer as KombuProducer

from memsync import keys
from memsync.encoded import EncodedTurn, encode_turn
from memsync.inflight import InFlight
from memsync.message import publish_ingest
from memsync.producer import Producer
from memsync.settings import INGEST_QUEUE, Settings
from memsync.spool import Spool
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from tests.fuzzing import accepted_sample
from workers.worker.config import celery_config
from workers.worker.envelope import envelope_problem

EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def turn(n: int) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "event_id": f"e-{n}",
        "tenant": "acme",
        "channel": {"id": "c", "kind": "dm"},
        "participants": [{"id": "u", "kind": "human", "display_name": "Devon"}],
        "messages": [
            {
                "id": f"m-{n}",
                "role": "user",
                "sender_id": "u",
                "content": f'Noted {n}: window seat, café 🦉 \u2028 "quoted" \\ end',
                "created_at": "2026-11-29T10:00:00+02:00",
            }
        ],
    }


def as_worker_reads(event: TurnEvent) -> dict[str, Any]:
    """What the producer used to put in the message: the worker's view of a turn."""
    return event.model_dump(mode="json", exclude_none=True)


def test_the_encoded_text_holds_the_values_of_the_dict_path() -> None:
    events, _ = accepted_sample(300, seed=11)
    for event in events:
        encoded = encode_turn(event)
        assert json.loads(encoded.text) == as_worker_reads(event)
        assert (encoded.event_id, encoded.tenant) == (event.event_id, event.tenant)
        assert validate_event(encoded.text) == event


def test_a_spooled_row_is_the_text_emit_encoded_and_drains_into_the_workers_turns(
    tmp_path: Path,
) -> None:
    settings = Settings(spool_dir=tmp_path / "spool", broker_url="redis://x", producer_batch=8)
    producer = Producer(settings)

    def away(batch: list[EncodedTurn]) -> None:
        raise ConnectionError("broker away")

    producer._publish = away  # type: ignore[method-assign]
    raws = [turn(n) for n in range(3)]
    try:
        for raw in raws:
            producer.emit(raw)
        assert producer.flush(10)
    finally:
        producer.close(timeout=5)
    events = [validate_event(raw) for raw in raws]
    with closing(sqlite3.connect(settings.spool_dir / "spool.sqlite3")) as conn:
        rows = conn.execute("SELECT payload, event_id, tenant FROM events ORDER BY id").fetchall()
    assert rows == [(e.model_dump_json(exclude_none=True), e.event_id, e.tenant) for e in events]

    # Drained as the producer drains it, onto a broker, and taken off as a worker takes it.
    spool = Spool(settings.spool_dir)
    accept = celery_config(settings)["accept_content"]
    try:
        with Connection("memory://localhost/encoded-drain") as connection:
            drained: list[list[EncodedTurn]] = []

            def publish(batch: list[EncodedTurn]) -> None:
                drained.append(batch)
                publish_ingest(KombuProducer(connection, auto_declare=False), batch)

            assert spool.drain(publish) == 3
            queue = connection.SimpleQueue(INGEST_QUEUE, accept=accept)
            try:
                message = queue.get(timeout=5)
                message.ack()
            finally:
                queue.close()
    finally:
        spool.close()
    assert drained == [[encode_turn(e) for e in events]]
    assert message.content_type == "application/json"
    assert message.content_encoding == "utf-8"
    assert message.payload == [[[as_worker_reads(e) for e in events]], {}, EMBED]
    assert message.headers["argsrepr"] == "<3 turns: 'e-0', 'e-1', 'e-2'>"


def test_the_message_of_encoded_turns_passes_the_workers_screening() -> None:
    batch = [encode_turn(validate_event(turn(n))) for n in range(2)]
    with Connection("memory://localhost/encoded-screen") as connection:
        publish_ingest(KombuProducer(connection, auto_declare=False), batch)
        channel: Any = connection.default_channel
        item: dict[str, Any] = channel._get(INGEST_QUEUE)
    assert envelope_problem(json.dumps(item), 0.0, 3000.0) is None


def test_in_flight_keeps_the_encoded_text_as_it_is() -> None:
    client = fakeredis.FakeRedis()
    encoded = encode_turn(validate_event(turn(1)))
    InFlight(client).track([encoded])
    stored = client.hget(keys.INFLIGHT_PAYLOADS, keys.turn_ref("acme", "e-1"))
    assert stored == encoded.text.encode("utf-8")
