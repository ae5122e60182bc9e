"""The reliable pop on a real Redis: a popped message is always in exactly one place (its queue, a
holder's staging list, or `unacked`); staged messages come back (a dead holder's by the sweep
and a real worker, a live holder's lost reply by its next poll); and acks or rejects through a
channel closed by a reconnect settle the message instead of stopping the worker."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from queue import Empty
from typing import Any

import pytest
import redis
from kombu import Connection, Exchange, Queue
from kombu.messaging import Producer as KombuProducer

from memsync import keys
from memsync.producer import Producer
from memsync.settings import INGEST_QUEUE, SYNC_QUEUE, Settings
from tests.integration.cluster import Cluster
from tests.integration.load import audit, expected_observed, load_turns, wait_until
from workers.state.ledger import Ledger
from workers.worker import heartbeat, popcycle, runtime, transport

pytestmark = pytest.mark.integration


@pytest.fixture()
def client(fresh_redis: redis.Redis) -> redis.Redis:
    return fresh_redis


@pytest.fixture()
def holder(redis_url: str) -> Iterator[heartbeat.Holder]:
    runtime.configure(Settings(broker_url=redis_url))  # the screening reads the ETA bound
    yield heartbeat.activate(f"pop-{uuid.uuid4().hex[:6]}@test", ttl=30)
    heartbeat.deactivate()


def connect(url: str) -> Any:
    return Connection(url, transport=transport.Transport)


def declare(chan: Any) -> None:
    Queue(SYNC_QUEUE, Exchange(SYNC_QUEUE), SYNC_QUEUE)(chan).declare()


def publish(chan: Any, ids: list[str], queue: str = SYNC_QUEUE) -> None:
    for task_id in ids:
        KombuProducer(chan).publish(
            [[{"n": task_id}], {}, {"callbacks": None, "errbacks": None, "chain": None}],
            exchange=queue,
            routing_key=queue,
            serializer="json",
            headers={"task": "memsync.sync", "id": task_id},
        )


def task_id(raw: bytes | str) -> str:
    envelope = json.loads(raw)
    found: str = envelope["headers"]["id"]
    return found


def places(client: redis.Redis, chan: Any) -> dict[str, list[str]]:
    """Every place a message can be, by task id."""
    found: dict[str, list[str]] = {}
    for pri in chan.priority_steps:
        key = chan._q_for_pri(SYNC_QUEUE, pri)
        for raw in client.lrange(key, 0, -1):
            found.setdefault(task_id(raw), []).append("queue")
    for key in client.scan_iter(match="memsync:worker:*:staging:*"):
        for raw in client.lrange(key, 0, -1):
            found.setdefault(task_id(raw), []).append("staging")
    for entry in client.hvals("unacked"):
        payload = json.loads(entry)[0]
        found.setdefault(payload["headers"]["id"], []).append("unacked")
    return found


def staged(client: redis.Redis, holder: heartbeat.Holder) -> int:
    return sum(int(client.llen(k)) for k in client.hkeys(heartbeat.staging_index_key(holder.id)))


def poll_until(condition: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.timeout(60)
def test_every_popped_message_is_in_exactly_one_place(
    redis_url: str, client: redis.Redis, holder: heartbeat.Holder
) -> None:
    ids = [f"t{i}" for i in range(5)]
    got: list[Any] = []
    with connect(redis_url) as conn:
        chan: Any = conn.channel()
        declare(chan)
        publish(chan, ids)
        chan.basic_consume(SYNC_QUEUE, no_ack=False, callback=got.append, consumer_tag="c")
        for n in range(1, len(ids) + 1):
            conn.transport.cycle._register_BRPOP(chan)  # sends the scan, as the event loop does
            # The scan has run on Redis: one message is staged, none is lost or doubled.
            poll_until(lambda: staged(client, holder) == 1, "the scan staged nothing")
            assert sorted(places(client, chan)) == ids
            assert all(len(p) == 1 for p in places(client, chan).values())
            assert chan._brpop_read() is True
            assert len(got) == n
            where = places(client, chan)
            assert all(len(p) == 1 for p in where.values()), where
            assert sorted(where) == ids
            assert sum(p == ["unacked"] for p in where.values()) == n
            assert staged(client, holder) == 0
        assert client.smembers(heartbeat.held_key(holder.id)) == {
            m.delivery_tag.encode() for m in got
        }
        for message in got:
            message.ack()
        assert places(client, chan) == {}
        assert client.scard(heartbeat.held_key(holder.id)) == 0


@pytest.mark.timeout(60)
def test_an_empty_scan_then_a_doorbell_wakes_the_wait_for_any_queue(
    redis_url: str, client: redis.Redis, holder: heartbeat.Holder
) -> None:
    got: list[Any] = []
    with connect(redis_url) as conn:
        chan: Any = conn.channel()
        declare(chan)
        Queue(INGEST_QUEUE, Exchange(INGEST_QUEUE), INGEST_QUEUE)(chan).declare()
        # Two queues, a message on each in turn: a wait on one queue alone misses one of them.
        chan.basic_consume(INGEST_QUEUE, no_ack=False, callback=got.append, consumer_tag="i")
        chan.basic_consume(SYNC_QUEUE, no_ack=False, callback=got.append, consumer_tag="c")
        # A wait far longer than the test may take, so only a doorbell can end it in time.
        chan.brpop_timeout = 50
        for task, queue in (("late", INGEST_QUEUE), ("later", SYNC_QUEUE)):
            conn.transport.cycle._register_BRPOP(chan)
            with pytest.raises(Empty):
                chan._brpop_read()  # nothing queued: the scan moved nothing
            assert chan._pop_cycle.blocking
            conn.transport.cycle._register_BRPOP(chan)  # now a BRPOP waits on the doorbells
            poll_until(lambda: int(client.info("clients")["blocked_clients"]) == 1, "no wait")
            publish(chan, [task], queue)
            poll_until(
                lambda: int(client.info("clients")["blocked_clients"]) == 0, "the bell woke no one"
            )
            with pytest.raises(Empty):
                chan._brpop_read()  # the doorbell rang: nothing moved yet, a scan is next
            assert not chan._pop_cycle.blocking
            conn.transport.cycle._register_BRPOP(chan)
            assert chan._brpop_read() is True
        assert [m.headers["id"] for m in got] == ["late", "later"]
        assert sorted(places(client, chan)) == ["late", "later"]
        for message in got:
            message.ack()
        # The tokens were taken by the waits: nothing is left to wake a worker for nothing.
        assert client.llen(keys.queue_doorbell(INGEST_QUEUE)) == 0
        assert client.llen(keys.queue_doorbell(SYNC_QUEUE)) == 0


@pytest.mark.timeout(60)
def test_a_live_holders_lost_reply_is_given_back_by_its_next_poll(
    redis_url: str, client: redis.Redis, holder: heartbeat.Holder
) -> None:
    got: list[Any] = []
    with connect(redis_url) as conn:
        chan: Any = conn.channel()
        declare(chan)
        publish(chan, ["lost-reply"])
        chan.basic_consume(SYNC_QUEUE, no_ack=False, callback=got.append, consumer_tag="c")
        conn.transport.cycle._register_BRPOP(chan)
        poll_until(lambda: staged(client, holder) == 1, "the scan staged nothing")
        chan.client.connection.disconnect()  # the reply is lost with its connection
        assert places(client, chan) == {"lost-reply": ["staging"]}
        conn.drain_events(timeout=5)  # reconnects, gives the staged item back, pops it again
        assert [m.headers["id"] for m in got] == ["lost-reply"]
        assert places(client, chan) == {"lost-reply": ["unacked"]}
        got[0].ack()


def stale_message(redis_url: str) -> Any:
    """A message delivered on a channel that was then closed, as a reconnect leaves it (the
    close could not restore it: it is still unacked in Redis)."""
    conn = connect(redis_url)
    chan: Any = conn.channel()
    declare(chan)
    publish(chan, ["stale"])
    message = chan.basic_get(SYNC_QUEUE, no_ack=False)
    assert message is not None
    chan.qos.restore_at_shutdown = False
    conn.close()
    assert chan.connection is None
    return message


@pytest.mark.timeout(60)
@pytest.mark.parametrize("with_live_channel", [True, False])
def test_ack_through_a_closed_channel_settles_the_message(
    redis_url: str, client: redis.Redis, holder: heartbeat.Holder, with_live_channel: bool
) -> None:
    message = stale_message(redis_url)
    assert client.hlen("unacked") == 1
    with connect(redis_url) as live:
        if with_live_channel:
            live.channel()
        message.ack()  # the stock transport raised AttributeError('NoneType'...'client') here
    assert client.hlen("unacked") == 0
    assert client.zcard("unacked_index") == 0
    assert client.llen(SYNC_QUEUE) == 0


@pytest.mark.timeout(60)
def test_reject_through_a_closed_channel_requeues_through_a_live_one(
    redis_url: str, client: redis.Redis, holder: heartbeat.Holder
) -> None:
    message = stale_message(redis_url)
    with connect(redis_url) as live:
        live.channel()
        message.reject(requeue=True)
    assert client.hlen("unacked") == 0
    assert client.llen(SYNC_QUEUE) == 1


@pytest.mark.timeout(60)
def test_a_requeue_with_no_live_channel_waits_for_the_next_poll(
    redis_url: str, client: redis.Redis, holder: heartbeat.Holder
) -> None:
    message = stale_message(redis_url)
    message.reject(requeue=True)  # no live channel: kept for later, nothing raised
    assert client.hlen("unacked") == 1
    got: list[Any] = []
    with connect(redis_url) as conn:
        chan: Any = conn.channel()
        chan.basic_consume(SYNC_QUEUE, no_ack=False, callback=got.append, consumer_tag="c")
        conn.drain_events(timeout=5)  # the poll settles the requeue, then pops the message
    assert [m.headers["id"] for m in got] == ["stale"]
    assert not transport._unsettled


@pytest.mark.timeout(60)
def test_what_a_closed_channel_could_not_give_back_the_next_one_does_unless_it_runs(
    redis_url: str, client: redis.Redis, holder: heartbeat.Holder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two messages delivered on a channel whose connection then went: Celery drops the tasks it
    # had not started (one here), and kombu's give-back on the closed channel fails.
    conn = connect(redis_url)
    chan: Any = conn.channel()
    declare(chan)
    publish(chan, ["dropped", "running"])
    messages = [chan.basic_get(SYNC_QUEUE, no_ack=False) for _ in range(2)]
    chan.qos.restore_at_shutdown = False
    conn.close()
    chan.qos.restore_unacked()  # kombu raised AttributeError here; nothing is given back yet
    assert client.hlen("unacked") == 2 and client.llen(SYNC_QUEUE) == 0
    running = next(m for m in messages if m.headers["id"] == "running")
    monkeypatch.setattr(transport, "running_tags", lambda: frozenset({running.delivery_tag}))
    got: list[Any] = []
    with connect(redis_url) as live:
        chan = live.channel()
        chan.basic_consume(SYNC_QUEUE, no_ack=False, callback=got.append, consumer_tag="c")
        live.drain_events(timeout=5)  # the poll gives back the dropped one, then pops it
        assert [m.headers["id"] for m in got] == ["dropped"]
        assert [tag for _, tag, _ in transport._unsettled] == [running.delivery_tag]
        running.ack()  # the running task ends: settled through the live channel
        monkeypatch.setattr(transport, "running_tags", frozenset)
        got[0].ack()
    assert client.hlen("unacked") == 0 and client.llen(SYNC_QUEUE) == 0
    with connect(redis_url) as conn:
        chan = conn.channel()
        chan.basic_consume(SYNC_QUEUE, no_ack=False, callback=got.append, consumer_tag="c")
        with pytest.raises(socket.timeout):
            conn.drain_events(timeout=1)  # a poll forgets the settled one, gives back nothing
    assert not transport._unsettled and len(got) == 1


# -- a dead holder's staging list, restored by the sweep of a real worker -------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("reliable"))
    c.settings = Settings(  # default delivery and heartbeat settings
        broker_url=c.settings.broker_url,
        neo4j_uri=c.settings.neo4j_uri,
        spool_dir=c.settings.spool_dir,
        trust_mode="open",
    )
    c.start_redis()
    c.start_neo4j()
    c.init_graph()
    yield c
    c.stop()


def ghost_pop(client: redis.Redis, ghost: str, queue: str) -> bytes:
    """What a worker killed right after its scan leaves behind: the item staged, never recorded
    as unacked, and no alive key."""
    keys = [queue, heartbeat.staging_key(ghost, queue)]
    reply = client.eval(
        popcycle.SCAN_LUA,
        len(keys),
        *keys,
        heartbeat.staging_index_key(ghost),
        heartbeat.HOLDERS_KEY,
        ghost,
        heartbeat.alive_key(ghost),
        "ghost@test",
        30,
    )
    assert reply is not None and reply[0] == queue.encode()
    client.delete(heartbeat.alive_key(ghost))
    item: bytes = reply[1]
    return item


@pytest.mark.timeout(60)
def test_a_dead_holders_staged_message_goes_back_with_a_ring(
    redis_url: str, client: redis.Redis
) -> None:
    with connect(redis_url) as conn:
        chan: Any = conn.channel()
        declare(chan)
        publish(chan, ["staged"])
    client.delete(keys.queue_doorbell(SYNC_QUEUE))
    ghost = f"ghost@test/1/{uuid.uuid4().hex[:12]}"
    item = ghost_pop(client, ghost, SYNC_QUEUE)
    assert client.llen(SYNC_QUEUE) == 0

    assert heartbeat.restore_staging(client, ghost, only_if_dead=True) == 1
    assert client.lrange(SYNC_QUEUE, 0, -1) == [item]
    # An idle worker blocked on the doorbell wakes for it at once.
    assert client.llen(keys.queue_doorbell(SYNC_QUEUE)) == 1
    assert heartbeat.restore_staging(client, ghost, only_if_dead=True) == 0
    assert client.llen(keys.queue_doorbell(SYNC_QUEUE)) == 1


@pytest.mark.timeout(400)
def test_a_dead_holders_staged_message_is_restored_and_processed(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(cluster.settings.broker_url)
    tenant = f"g{uuid.uuid4().hex[:10]}"
    turns = load_turns(tenant, 6)
    producer = Producer(cluster.settings)
    for turn in turns:
        producer.emit(turn)
    assert producer.flush(timeout=60)
    producer.close()
    poll_until(lambda: client.llen(INGEST_QUEUE) > 0, "nothing was queued", timeout=60)
    ghost = f"ghost@test/1/{uuid.uuid4().hex[:12]}"
    ghost_pop(client, ghost, INGEST_QUEUE)
    assert client.llen(heartbeat.staging_key(ghost, INGEST_QUEUE)) == 1

    worker = cluster.start_worker()
    statuses, _ = wait_until(Ledger(client), turns, timeout=180)
    assert all(s.complete for s in statuses), worker.log_tail(40)
    result = audit(cluster.graph(), tenant, expected_observed(turns))
    assert result.exact, result
    poll_until(lambda: not client.sismember(heartbeat.HOLDERS_KEY, ghost), "ghost kept", 60)
    assert client.exists(heartbeat.staging_key(ghost, INGEST_QUEUE)) == 0
    assert client.exists(heartbeat.staging_index_key(ghost)) == 0
    client.close()
