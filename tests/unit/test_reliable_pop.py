"""The pure parts of the reliable pop: staging key names, the scan/block cycle, reply parsing,
and when a channel pops by moving rather than with kombu's BRPOP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Exchange, Queue

from memsync import keys
from memsync.doorbell import DOORBELL_CAP, ring_commands
from memsync.settings import INGEST_QUEUE, SYNC_QUEUE, TASK_QUEUES
from tests.unit.fakebroker import fake_channel
from workers.worker import heartbeat
from workers.worker.popcycle import PendingMove, PopCycle, scan_keys

SEP = "\x06\x16"


def test_staging_keys_are_per_holder_and_queue_and_never_collide() -> None:
    holders = ["w1@host/1/a", "w1@host/1/b", "x:y@h/2/c", "w1@host%2F1%2Fa"]
    queues = [SYNC_QUEUE, INGEST_QUEUE, f"{SYNC_QUEUE}{SEP}3", "a:b", "a/b"]
    built = [keys.worker_staging(h, q) for h in holders for q in queues]
    others = [f(h) for h in holders for f in (keys.worker_alive, keys.worker_held)]
    index = [keys.worker_staging_index(h) for h in holders]
    every = built + others + index + list(keys.FIXED_KEYS)
    assert len(set(every)) == len(every)
    for key in built:
        assert key.count(":") == 4  # escaped holder and queue add no separator
        assert SEP not in key
    # All of one holder's keys share its escaped id as the third component.
    h = "x:y@h/2/c"
    assert {k.split(":")[2] for k in (keys.worker_alive(h), keys.worker_staging(h, "q"))} == {
        keys.escape(h)
    }
    assert heartbeat.staging_key is keys.worker_staging


def test_scan_keys_follow_kombus_brpop_order() -> None:
    def pri(queue: str, level: int) -> str:
        return f"{queue}{SEP}{level}" if level else queue

    assert scan_keys(["a", "b"], pri, [0, 3]) == ["a", "b", f"a{SEP}3", f"b{SEP}3"]


def test_scans_while_messages_come_then_waits_on_the_doorbells_then_scans() -> None:
    cycle = PopCycle()
    assert not cycle.blocking
    cycle.popped(True)  # a scan that moved a message: scan again
    assert not cycle.blocking
    cycle.popped(False)  # an empty scan: wait on the doorbells
    assert cycle.blocking
    cycle.popped(False)  # a doorbell rang or the wait ran out: scan
    assert not cycle.blocking
    cycle.popped(False)
    assert cycle.blocking


def test_replies_parse_to_the_queue_and_item() -> None:
    scan = PendingMove("EVAL", "h")
    assert scan.popped(None) is None
    assert scan.popped([b"memsync.sync", b"{}"]) == ("memsync.sync", b"{}")
    wait = PendingMove("WAIT", "h")
    assert wait.popped(None) is None
    # A doorbell's token is not a message: the scan after it moves one.
    assert wait.popped([keys.queue_doorbell(SYNC_QUEUE).encode(), b"1"]) is None


def test_doorbells_are_per_task_queue_and_never_collide_with_other_keys() -> None:
    bells = [keys.queue_doorbell(q) for q in sorted(TASK_QUEUES)]
    assert len(set(bells)) == len(TASK_QUEUES)
    assert not set(bells) & set(keys.FIXED_KEYS)
    push, trim = ring_commands(SYNC_QUEUE)
    assert push == ("lpush", (keys.queue_doorbell(SYNC_QUEUE), "1"))
    assert trim == ("ltrim", (keys.queue_doorbell(SYNC_QUEUE), 0, DOORBELL_CAP - 1))
    # A reply queue of `celery inspect` comes and goes: no doorbell is left behind for it.
    assert ring_commands("8f2c.reply.celery.pidbox") == []


@pytest.fixture()
def channel() -> Iterator[Any]:
    with fake_channel() as chan:
        yield chan


def consume(chan: Any, name: str) -> None:
    Queue(name, Exchange(name), name)(chan).declare()
    chan.basic_consume(name, no_ack=False, callback=lambda m: None, consumer_tag=name)


def test_only_a_worker_consuming_memsync_queues_pops_by_moving(channel: Any) -> None:
    consume(channel, SYNC_QUEUE)
    assert channel._reliable_holder() is None  # not a worker process
    holder = heartbeat.activate("w1@host", ttl=30)
    assert channel._reliable_holder() == holder
    consume(channel, INGEST_QUEUE)
    assert channel._reliable_holder() == holder
    consume(channel, "celery.pidbox.reply")  # anything else: kombu's own BRPOP
    assert channel._reliable_holder() is None


def test_a_refused_move_falls_back_to_brpop_for_a_while(channel: Any) -> None:
    consume(channel, SYNC_QUEUE)
    heartbeat.activate("w1@host", ttl=30)
    channel._moves_refused_until = float("inf")
    assert channel._reliable_holder() is None


def test_a_closed_channel_remembers_where_its_broker_is(channel: Any) -> None:
    assert channel.broker[:2] == ("127.0.0.1", 1)
    assert channel.fallback_params["db"] == 0
