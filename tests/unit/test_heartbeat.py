"""Worker liveness bookkeeping, the dead-holder sweep and the deaf-consumer decision.

kombu's Redis channel runs here on fakeredis (a private in-memory server per test), so the
transport's real QoS and restore code is exercised without a Redis process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from kombu import Exchange, Queue
from kombu.messaging import Producer

from memsync import keys
from memsync.settings import SYNC_QUEUE, Settings
from pipeline.errors import BrokerUnavailable, RetryableError
from tests.unit.fakebroker import fake_channel
from workers.worker import heartbeat
from workers.worker.heartbeat import DeafnessWatch, Keeper


@pytest.fixture()
def channel() -> Iterator[Any]:
    with fake_channel() as chan:
        Queue(SYNC_QUEUE, Exchange(SYNC_QUEUE), SYNC_QUEUE)(chan).declare()
        yield chan


def publish(chan: Any, body: Any, priority: int = 0) -> None:
    Producer(chan).publish(
        body, exchange=SYNC_QUEUE, routing_key=SYNC_QUEUE, serializer="json", priority=priority
    )


def client_of(chan: Any) -> Any:
    return chan._create_client()


def held(chan: Any, holder: heartbeat.Holder) -> set[bytes]:
    members: set[bytes] = client_of(chan).smembers(heartbeat.held_key(holder.id))
    return members


def kill(chan: Any, holder: heartbeat.Holder) -> None:
    """What a worker's death looks like from Redis once its alive key has expired."""
    client_of(chan).delete(heartbeat.alive_key(holder.id))
    heartbeat.deactivate()


def test_delivery_is_recorded_for_the_holder_and_ack_releases_it(channel: Any) -> None:
    holder = heartbeat.activate("w1@host", ttl=30)
    publish(channel, {"n": 1})
    message = channel.basic_get(SYNC_QUEUE, no_ack=False)
    client = client_of(channel)
    assert held(channel, holder) == {message.delivery_tag.encode()}
    assert client.smembers(heartbeat.HOLDERS_KEY) == {holder.id.encode()}
    assert 0 < client.ttl(heartbeat.alive_key(holder.id)) <= 30
    assert client.hexists("unacked", message.delivery_tag)

    message.ack()
    assert held(channel, holder) == set()
    assert client.hlen("unacked") == 0
    assert client.zcard("unacked_index") == 0


def test_reject_with_requeue_releases_the_tag(channel: Any) -> None:
    holder = heartbeat.activate("w1@host", ttl=30)
    publish(channel, {"n": 1})
    message = channel.basic_get(SYNC_QUEUE, no_ack=False)
    message.reject(requeue=True)
    assert held(channel, holder) == set()
    assert client_of(channel).llen(SYNC_QUEUE) == 1


def test_outside_a_worker_the_transport_keeps_only_kombus_bookkeeping(channel: Any) -> None:
    publish(channel, {"n": 1})
    message = channel.basic_get(SYNC_QUEUE, no_ack=False)
    client = client_of(channel)
    assert client.hexists("unacked", message.delivery_tag)
    # A publisher rings the queue's doorbell (memsync/doorbell.py); nothing of a holder exists.
    assert client.keys("memsync:*") == [keys.queue_doorbell(SYNC_QUEUE).encode()]


def test_a_dead_holders_messages_return_exactly_as_kombu_restores_them(channel: Any) -> None:
    holder = heartbeat.activate("w1@host", ttl=30)
    publish(channel, {"n": 1}, priority=3)
    message = channel.basic_get(SYNC_QUEUE, no_ack=False)
    client = client_of(channel)
    raw = client.hget("unacked", message.delivery_tag)
    kill(channel, holder)

    report = heartbeat.sweep(client, channel)
    assert report.dead == [holder.id]
    assert report.restored == 1
    level = channel._q_for_pri(SYNC_QUEUE, 3)  # kombu keeps priority levels in sibling lists
    assert client.llen(SYNC_QUEUE) == 0
    swept = client.lrange(level, 0, -1)
    assert len(swept) == 1
    assert client.hlen("unacked") == 0
    assert client.zcard("unacked_index") == 0
    assert client.exists(heartbeat.held_key(holder.id)) == 0
    assert client.smembers(heartbeat.HOLDERS_KEY) == set()

    # kombu's own restore of the same unacked entry pushes the same bytes to the same list.
    client.delete(level)
    client.hset("unacked", message.delivery_tag, raw)
    client.zadd("unacked_index", {message.delivery_tag: 1.0})
    channel.qos.restore_by_tag(message.delivery_tag)
    assert client.lrange(level, 0, -1) == swept


def doorbell(chan: Any) -> int:
    return int(client_of(chan).llen(keys.queue_doorbell(SYNC_QUEUE)))


def test_a_message_put_back_rings_its_queues_doorbell(channel: Any) -> None:
    """The sweep's restore and kombu's own (rejected with requeue, restored by tag) each wake
    an idle worker, as a publish does, instead of leaving it to its wait's end."""
    holder = heartbeat.activate("w1@host", ttl=30)
    client = client_of(channel)
    for n in range(3):
        publish(channel, {"n": n})
    first, second, third = (channel.basic_get(SYNC_QUEUE, no_ack=False) for _ in range(3))
    client.delete(keys.queue_doorbell(SYNC_QUEUE))

    first.reject(requeue=True)
    assert (client.llen(SYNC_QUEUE), doorbell(channel)) == (1, 1)
    channel.qos.restore_by_tag(second.delivery_tag)
    assert (client.llen(SYNC_QUEUE), doorbell(channel)) == (2, 2)
    kill(channel, holder)
    assert heartbeat.sweep(client, channel).restored == 1
    assert (client.llen(SYNC_QUEUE), doorbell(channel)) == (3, 3)
    assert third.delivery_tag.encode() not in client.hkeys("unacked")


def test_the_sweep_leaves_live_holders_and_queued_messages_alone(channel: Any) -> None:
    holder = heartbeat.activate("w1@host", ttl=30)
    for n in range(3):
        publish(channel, {"n": n})
    message = channel.basic_get(SYNC_QUEUE, no_ack=False)
    client = client_of(channel)
    # Delivered long ago: a visibility-style sweep would take it; a live holder keeps it.
    client.zadd("unacked_index", {message.delivery_tag: 1.0})

    report = heartbeat.sweep(client, channel)
    assert report.dead == []
    assert client.llen(SYNC_QUEUE) == 2
    assert client.hexists("unacked", message.delivery_tag)
    assert held(channel, holder) == {message.delivery_tag.encode()}


def test_a_tag_already_acked_is_not_sent_again(channel: Any) -> None:
    holder = heartbeat.activate("w1@host", ttl=30)
    publish(channel, {"n": 1})
    message = channel.basic_get(SYNC_QUEUE, no_ack=False)
    client = client_of(channel)
    # The ack landed in kombu's indices but the worker died before its own record was updated.
    client.hdel("unacked", message.delivery_tag)
    client.zrem("unacked_index", message.delivery_tag)
    kill(channel, holder)

    report = heartbeat.sweep(client, channel)
    assert (report.restored, report.already_acked) == (0, 1)
    assert client.llen(SYNC_QUEUE) == 0
    assert client.smembers(heartbeat.HOLDERS_KEY) == set()


def test_many_held_tags_are_restored_in_batches(channel: Any) -> None:
    holder = heartbeat.activate("w1@host", ttl=30)
    for n in range(7):
        publish(channel, {"n": n})
    tags = {channel.basic_get(SYNC_QUEUE, no_ack=False).delivery_tag for _ in range(7)}
    client = client_of(channel)
    kill(channel, holder)

    report = heartbeat.sweep(client, channel, batch=3)
    assert report.restored == 7
    bodies = client.lrange(SYNC_QUEUE, 0, -1)
    assert {json.loads(b)["properties"]["delivery_tag"] for b in bodies} == tags


def test_holder_ids_are_unique_per_start_and_absent_in_forked_children() -> None:
    first = heartbeat.activate("w1@host", ttl=30)
    second = heartbeat.activate("w1@host", ttl=30)
    assert first.id != second.id
    assert heartbeat.alive_key(first.id) != heartbeat.alive_key(second.id)
    heartbeat._holder_pid = -1  # as a pool child sees its parent's state after fork
    assert heartbeat.active_holder() is None
    heartbeat.deactivate()


def test_holder_keys_cannot_collide() -> None:
    assert heartbeat.alive_key("a:held") != heartbeat.held_key("a")
    assert ":" not in heartbeat.alive_key("x:y@h/1/2").removeprefix("memsync:worker:")[:-6]


@pytest.mark.parametrize(
    ("ttl", "interval", "sound"), [(30, 10.0, True), (20, 10.0, True), (15, 10.0, False)]
)
def test_ttl_must_cover_two_intervals(ttl: int, interval: float, sound: bool) -> None:
    settings = Settings(heartbeat_ttl=ttl, heartbeat_interval=interval)
    assert (heartbeat.heartbeat_problems(settings) == []) is sound


def test_defaults_restore_a_killed_workers_messages_well_within_two_minutes() -> None:
    s = Settings()
    assert heartbeat.heartbeat_problems(s) == []
    # Dead after the TTL, swept within one interval more, with time left to run the work.
    assert s.heartbeat_ttl + 2 * s.heartbeat_interval <= 60


# -- the deaf-consumer decision -------------------------------------------------------------------


def test_deaf_only_after_a_full_window_of_waiting_messages_room_and_silence() -> None:
    watch = DeafnessWatch(after=30)
    assert not watch.observe(100, queued=5, has_room=True, last_delivery=0)
    assert not watch.observe(120, queued=5, has_room=True, last_delivery=0)
    assert watch.observe(130, queued=5, has_room=True, last_delivery=0)
    # After a forced reconnect a fresh window is needed.
    assert not watch.observe(131, queued=5, has_room=True, last_delivery=0)


def test_not_deaf_when_the_queues_are_empty_or_the_pool_is_full() -> None:
    watch = DeafnessWatch(after=30)
    assert not watch.observe(100, queued=0, has_room=True, last_delivery=0)
    assert not watch.observe(200, queued=0, has_room=True, last_delivery=0)
    assert not watch.observe(300, queued=9, has_room=False, last_delivery=0)
    assert not watch.observe(400, queued=9, has_room=False, last_delivery=0)
    # A busy worker that just freed a slot is not deaf: the window starts now.
    assert not watch.observe(401, queued=9, has_room=True, last_delivery=0)
    assert not watch.observe(430, queued=9, has_room=True, last_delivery=0)
    assert watch.observe(431, queued=9, has_room=True, last_delivery=0)


def test_a_delivery_restarts_the_window() -> None:
    watch = DeafnessWatch(after=30)
    assert not watch.observe(100, queued=5, has_room=True, last_delivery=0)
    assert not watch.observe(125, queued=5, has_room=True, last_delivery=120)
    assert not watch.observe(140, queued=5, has_room=True, last_delivery=120)
    assert watch.observe(150, queued=5, has_room=True, last_delivery=120)


def test_the_forced_error_takes_celerys_connection_loss_path() -> None:
    from kombu.transport.redis import Transport as KombuTransport

    assert issubclass(heartbeat.ConsumerDeaf, KombuTransport.connection_errors)
    hub = FakeHub()
    heartbeat.force_reconnect(hub, "deaf")
    with pytest.raises(heartbeat.ConsumerDeaf, match="deaf"):
        hub.ready[0]()


# -- the tick: beat, grace, sweep, watch, and passing broker errors ------------------------------


@dataclass
class FakeHub:
    ready: list[Any] = field(default_factory=list)

    def call_soon(self, callback: Any, *args: Any) -> None:
        self.ready.append(callback)


@dataclass
class FakeQoS:
    room: bool = True

    def can_consume(self) -> bool:
        return self.room


@dataclass
class FakeConsumer:
    """The attributes of a Celery consumer the watchdog reads."""

    hub: FakeHub
    qos: FakeQoS
    connection: object = field(default_factory=object)

    @property
    def task_consumer(self) -> Any:
        return type(
            "TaskConsumer",
            (),
            {"queues": [Queue(SYNC_QUEUE)], "channel": type("C", (), {"qos": self.qos})()},
        )()


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


class Flaky:
    """A client that fails as Redis does while it replays its AOF, until told otherwise."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.loading = True

    def __getattr__(self, name: str) -> Any:
        if self.loading:

            def fail(*_: Any, **__: Any) -> Any:
                raise redis.BusyLoadingError("Redis is loading the dataset in memory")

            return fail
        return getattr(self.inner, name)


def keeper_for(channel: Any, clock: Clock, consumer: FakeConsumer | None = None) -> Keeper:
    settings = Settings(heartbeat_interval=10, heartbeat_ttl=30, consumer_deaf_after=30)
    worker = type("Worker", (), {"consumer": consumer})()
    holder = heartbeat.activate("me@host", settings.heartbeat_ttl)
    return Keeper(worker, holder, settings, lambda: channel, clock=clock)


def test_busy_loading_is_a_passing_broker_error() -> None:
    with pytest.raises(BrokerUnavailable) as caught, heartbeat.broker_errors():
        raise redis.BusyLoadingError("loading")
    assert isinstance(caught.value, RetryableError)


def test_a_tick_survives_busy_loading_and_sweeps_only_after_a_full_ttl_up(channel: Any) -> None:
    # A dead worker's message waits in Redis.
    dead = heartbeat.activate("dead@host", ttl=30)
    publish(channel, {"n": 1})
    channel.basic_get(SYNC_QUEUE, no_ack=False)
    client = client_of(channel)
    kill(channel, dead)

    clock = Clock()
    keeper = keeper_for(channel, clock)
    flaky = Flaky(client)
    keeper._connect()
    keeper._client = flaky
    keeper.tick()  # Redis replays its AOF: the tick reports and returns
    assert keeper.failing and keeper.up_since is None

    flaky.loading = False
    keeper.tick()
    assert client.exists(heartbeat.alive_key(keeper.holder.id))
    # Up again, but other live workers may not have beaten yet: no sweep for one TTL.
    assert client.llen(SYNC_QUEUE) == 0
    clock.now += 29
    keeper.tick()
    assert client.llen(SYNC_QUEUE) == 0
    clock.now += 1
    keeper.tick()
    assert client.llen(SYNC_QUEUE) == 1
    assert client.hlen("unacked") == 0


def test_only_one_worker_sweeps_per_interval(channel: Any) -> None:
    client = client_of(channel)
    client.set(heartbeat.SWEEP_LOCK_KEY, "someone-else", ex=10)
    dead = heartbeat.activate("dead@host", ttl=30)
    publish(channel, {"n": 1})
    channel.basic_get(SYNC_QUEUE, no_ack=False)
    kill(channel, dead)
    clock = Clock()
    keeper = keeper_for(channel, clock)
    keeper.tick()
    clock.now += 30
    keeper.tick()
    assert client.llen(SYNC_QUEUE) == 0  # the other worker holds the lock
    client.delete(heartbeat.SWEEP_LOCK_KEY)
    keeper.tick()
    assert client.llen(SYNC_QUEUE) == 1


def test_the_watchdog_reconnects_a_deaf_consumer(
    channel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(heartbeat, "_last_delivery", 0.0)  # earlier tests' deliveries
    publish(channel, {"n": 1})  # waits in the queue; nothing consumes it
    hub = FakeHub()
    clock = Clock()
    keeper = keeper_for(channel, clock, FakeConsumer(hub, FakeQoS(room=True)))
    keeper.tick()
    clock.now += 29
    keeper.tick()
    assert hub.ready == []
    clock.now += 1
    keeper.tick()
    assert len(hub.ready) == 1
    with pytest.raises(heartbeat.ConsumerDeaf):
        hub.ready[0]()


def test_the_watchdog_leaves_a_full_worker_alone(channel: Any) -> None:
    publish(channel, {"n": 1})
    hub = FakeHub()
    clock = Clock()
    keeper = keeper_for(channel, clock, FakeConsumer(hub, FakeQoS(room=False)))
    for _ in range(5):
        keeper.tick()
        clock.now += 30
    assert hub.ready == []


def test_a_stopping_worker_beats_on_but_neither_sweeps_nor_watches(channel: Any) -> None:
    dead = heartbeat.activate("dead@host", ttl=30)
    publish(channel, {"n": 1})
    channel.basic_get(SYNC_QUEUE, no_ack=False)
    kill(channel, dead)
    client = client_of(channel)
    clock = Clock()
    keeper = keeper_for(channel, clock)
    keeper.stopping.set()
    keeper.tick()
    clock.now += 60
    client.delete(heartbeat.alive_key(keeper.holder.id))
    keeper.tick()
    assert client.exists(heartbeat.alive_key(keeper.holder.id))
    assert client.llen(SYNC_QUEUE) == 0
