"""The Redis transport with two guards, each against an error that stops a stock worker.

1. A queue item that is not a JSON message envelope makes kombu raise out of the consumer loop
   ("Unrecoverable error"). Here it goes, as text, to the dead-letter store with the reason.
   So do task messages a stock worker would drop with only a log line (a content type other
   than JSON, an unregistered task name, a body that does not decode to Celery's protocol-2
   [args, kwargs, embed]) or hold unsafely (an ETA beyond what the visibility timeout allows).
2. A broker connection loss makes kombu fail while giving back the unacked messages of the
   closed channel (its connection is gone), which stops the worker. Here that give-back waits
   for the next channel to the same broker, which gives back every such message no running task
   holds: Celery dropped the tasks waiting out a retry countdown and the prefetched ones, so
   without it they would wait out the visibility timeout (an hour by default). An ack or reject
   that arrives through a closed channel (a task that outlived the reconnect) is settled through
   a live channel instead.
3. kombu's BRPOP loses the message of a worker killed between the pop and its record in
   `unacked`. Here a worker pops by an atomic move into its own staging list (the reliable pop,
   below), so a message is always in its queue, a staging list or `unacked`.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import deque
from dataclasses import dataclass
from queue import Empty
from typing import Any

import redis
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads

from memsync import doorbell, keys
from memsync.doorbell import RingingChannel, RingingTransport
from pipeline.errors import DeadLetterUnavailable
from workers.state.deadletter import DeadLetterStore, unreadable_letters
from workers.worker import heartbeat
from workers.worker.envelope import (
    envelope_problem,
    is_task_queue,
    max_eta_seconds,
    unreadable_reason,
)
from workers.worker.popcycle import SCAN_LUA, PendingMove, PopCycle, scan_keys

log = logging.getLogger("memsync.transport")


class GuardedRedis(redis.Redis):
    """A Redis client that screens items popped by the consumer's BRPOP (and, through
    `problem` and `_dead_letter`, those the reliable pop moves; see Channel._brpop_read)."""

    def parse_response(self, connection: Any, command_name: str | bytes, **options: Any) -> Any:
        reply = super().parse_response(connection, command_name, **options)  # type: ignore[no-untyped-call]
        if command_name == "BRPOP" and reply:
            queue, body = reply
            reason = self.problem(queue, body)
            if reason is not None:
                self._dead_letter(queue, body, reason)
                return None  # kombu reads "nothing popped" and polls again
        return reply

    def problem(self, queue: bytes | str, body: bytes | str) -> str | None:
        """Why an item popped from `queue` must not be delivered (None: deliver it)."""
        if is_task_queue(queue):
            from workers.worker import runtime  # the worker side; read per item, never at import

            bound = max_eta_seconds(runtime.settings())
            return envelope_problem(body, time.time(), bound)
        return unreadable_reason(body)

    def _dead_letter(self, queue: bytes | str, body: bytes | str, reason: str) -> bool:
        """Store the item as a dead letter; False if the store was unavailable (item lost)."""
        raw = body if isinstance(body, bytes) else body.encode()
        letters = unreadable_letters(
            queue.decode() if isinstance(queue, bytes) else queue,
            "decode",
            raw,
            ValueError(f"unreadable queue item: {reason}"),
        )
        try:
            DeadLetterStore(self).put(letters)
        except DeadLetterUnavailable:
            log.critical("unreadable queue item of %d bytes lost: %s", len(raw), reason)
            return False
        log.error("unreadable queue item dead-lettered as %s: %s", letters[0].id, reason)
        return True


# -- the reliable pop ----------------------------------------------------------------------------
#
# kombu's BRPOP takes a message out of Redis before the worker records it in `unacked`: a worker
# killed in between loses it. Here a worker pops by atomically moving the item into its own
# staging list, and records it in `unacked` in the same MULTI that removes it from staging, so a
# message is always in exactly one of: its queue, a holder's staging list, `unacked`. A holder's
# staging lists go back to their queues when it starts a fresh poll (its own leftovers) or when it
# is dead (the heartbeat sweep). One command per poller round, as kombu's poller expects: a
# non-blocking scan of every queue key (a script), and, once that finds nothing, a short BRPOP on
# the doorbells of every queue (memsync/doorbell.py), so an idle worker wakes at once for a message
# on any of them, then scans again.

# How long a worker keeps the reliable pop off after Redis refused its commands (an old server
# without LMOVE, scripts refused while out of memory), consuming with kombu's BRPOP meanwhile.
MOVE_REFUSED_BACKOFF = 30.0
# Ack/reject calls on a closed channel that could not be settled yet, retried by the next channel
# that starts polling; beyond this many the oldest are left to the visibility timeout.
UNSETTLED_LIMIT = 10_000
# The longest a fanout (pub/sub) read may wait once the poller says its socket is readable:
# enough for the rest of a reply already on its way, short enough that a false alarm costs the
# event loop no more than this.
PUBSUB_READ_SECONDS = 0.25


@dataclass(frozen=True)
class Staged:
    """A delivered item still in a staging list, until QoS.append records it as unacked."""

    key: str
    raw: bytes


# Delivery tag -> its staged item, between _brpop_read and QoS.append (the consumer's thread;
# module-level because kombu may append through another channel of the same transport).
_staged: dict[str, Staged] = {}
# (broker, tag, requeue) of what a closed channel could not settle yet: acks and rejects, and
# (as requeues) the unacked messages it could not give back when it closed.
_unsettled: deque[tuple[tuple[Any, ...], str, bool]] = deque(maxlen=UNSETTLED_LIMIT)
_channels: weakref.WeakSet[Channel] = weakref.WeakSet()


class QoS(kombu_redis.QoS):
    """kombu's ack emulation, plus a record of which worker holds each unacked message, so the
    messages of a worker that stopped beating go back at once (workers/worker/heartbeat.py); the
    move of a staged item into `unacked`; and acks and rejects that survive a closed channel."""

    def append(self, message: Any, delivery_tag: str) -> None:
        holder = heartbeat.active_holder()
        staged = _staged.pop(delivery_tag, None)
        if holder is None and staged is None:  # not a worker process: kombu's own bookkeeping
            super().append(message, delivery_tag)
            return
        delivery = message.delivery_info
        with self.pipe_or_acquire() as pipe:
            # kombu's append, with the holder's record and the staging removal in the same MULTI:
            # a worker killed just after this still has every tag it was handed on record, and
            # the item is never both staged and unacked.
            pipe.zadd(self.unacked_index_key, {delivery_tag: time.time()})
            pipe.hset(
                self.unacked_key,
                delivery_tag,
                dumps([message._raw, delivery["exchange"], delivery["routing_key"]]),
            )
            if holder is not None:
                heartbeat.record_held(pipe, holder, delivery_tag)
            if staged is not None:
                pipe.lrem(staged.key, 1, staged.raw)
            pipe.execute()
            virtual.QoS.append(self, message, delivery_tag)
        if holder is not None:
            heartbeat.note_delivery()

    def _remove_from_indices(self, delivery_tag: str, pipe: Any = None) -> Any:
        # Every path that settles a tag (ack, reject, restore) goes through here.
        pipe = super()._remove_from_indices(delivery_tag, pipe)  # type: ignore[misc]
        holder = heartbeat.active_holder()
        if holder is not None:
            heartbeat.record_released(pipe, holder, delivery_tag)
        return pipe

    def ack(self, delivery_tag: str) -> None:
        if self.channel.connection is None:  # closed (a reconnect replaced it): settle elsewhere
            settle_elsewhere(self.channel, delivery_tag, requeue=False)
            virtual.QoS.ack(self, delivery_tag)
            return
        super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        if self.channel.connection is None:
            settle_elsewhere(self.channel, delivery_tag, requeue=requeue)
            virtual.QoS.ack(self, delivery_tag)  # kombu's reject drops the local record so too
            return
        super().reject(delivery_tag, requeue)

    def restore_unacked(self, client: Any = None) -> Any:
        try:
            return super().restore_unacked(client)
        except AttributeError:
            # After a connection loss the consumer closes a channel whose connection info is
            # already gone, and kombu then fails here, which stops the worker. The messages are
            # still in Redis's unacked set: the next channel gives them back (retry_unsettled).
            delivered = self._delivered
            broker = getattr(self.channel, "broker", None)
            if delivered and broker is not None:
                _unsettled.extend((broker, tag, True) for tag in delivered)
            log.warning(
                "could not give back %d unacked message(s) at disconnect; the next connection "
                "gives back those no running task holds",
                len(delivered or ()),
            )
            if delivered is not None:
                delivered.clear()
            return None


def settle_elsewhere(stale: Channel, tag: str, *, requeue: bool) -> None:
    """Ack or reject `tag` for a closed channel: the message is still in Redis's `unacked`, so any
    live channel to the same broker settles it by tag; failing that a one-off client acks it; and
    failing that it waits for the next channel to start (or the visibility timeout)."""
    if _settle_through_live_channel(stale.broker, tag, requeue=requeue):
        return
    if not requeue and _ack_with_fresh_client(stale, tag):
        return
    _unsettled.append((stale.broker, tag, requeue))
    log.warning(
        "could not %s message %s of a closed channel now; retried when the consumer polls "
        "again, else it returns after the visibility timeout",
        "requeue" if requeue else "ack",
        tag,
    )


def _settle_through_live_channel(broker: tuple[Any, ...], tag: str, *, requeue: bool) -> bool:
    for channel in list(_channels):
        if channel.connection is None or channel.closed or channel.broker != broker:
            continue
        try:
            if requeue:
                channel.qos.restore_by_tag(tag)  # type: ignore[attr-defined]
            else:
                channel.qos._remove_from_indices(tag).execute()  # type: ignore[attr-defined]
        except Exception as exc:  # that channel is failing too: try the next way
            log.debug("settling %s through a live channel failed: %s", tag, exc)
            continue
        return True
    return False


def _ack_with_fresh_client(stale: Channel, tag: str) -> bool:
    # Requeueing needs the exchange bindings, which only a live channel can read; an ack only
    # removes the tag from kombu's indices (and the holder's set).
    try:
        pool = redis.ConnectionPool(**stale.fallback_params)
        client = redis.Redis(connection_pool=pool)
        try:
            with client.pipeline() as pipe:
                pipe.zrem(stale.unacked_index_key, tag)
                pipe.hdel(stale.unacked_key, tag)
                holder = heartbeat.active_holder()
                if holder is not None:
                    heartbeat.record_released(pipe, holder, tag)
                pipe.execute()
        finally:
            client.close()
            pool.disconnect()
    except Exception as exc:  # the broker is away: the caller keeps it for later
        log.debug("acking %s with a fresh client failed: %s", tag, exc)
        return False
    return True


def retry_unsettled(channel: Channel) -> None:
    """Settle, through this live channel, what closed channels to its broker left unsettled. A
    message a task is still running is left to that task, which settles it when it ends."""
    running = running_tags()
    settled = 0
    for _ in range(len(_unsettled)):
        broker, tag, requeue = _unsettled.popleft()
        if broker == channel.broker and tag not in running:
            if _settle_through_live_channel(broker, tag, requeue=requeue):
                settled += 1
                continue
            _unsettled.appendleft((broker, tag, requeue))
            break  # this channel is failing as well: the next poll tries again
        _unsettled.append((broker, tag, requeue))
    if settled:
        log.warning("settled %d message(s) that closed connections left unacked", settled)


def running_tags() -> frozenset[str]:
    """Delivery tags of the tasks this worker is running now (Celery's own record of them)."""
    from celery.worker import state  # the consumer's process; read per call, never at import

    tags = (getattr(request.message, "delivery_tag", None) for request in state.active_requests)
    return frozenset(tag for tag in tags if isinstance(tag, str))


class Channel(RingingChannel):
    QoS = QoS

    _pending_move: PendingMove | None = None
    _staging_suspect = True  # a new channel first gives back what its holder left staged
    _moves_refused_until = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._pop_cycle = PopCycle()
        super().__init__(*args, **kwargs)
        # Kept so acks after close (connection None) can still reach the broker.
        self.fallback_params: dict[str, Any] = self._connparams()  # type: ignore[attr-defined]
        self.broker: tuple[Any, ...] = tuple(
            self.fallback_params.get(k) for k in ("host", "port", "path", "db")
        )
        _channels.add(self)

    # -- the reliable pop (see the section comment above) --

    def _reliable_holder(self) -> heartbeat.Holder | None:
        """This worker's holder when this channel pops by moving, else None (kombu's BRPOP):
        outside workers, with a global key prefix, for queues other than memsync's task queues
        (pidbox replies, mingle), and for a while after Redis refused a move."""
        holder = heartbeat.active_holder()
        if holder is None or self.global_keyprefix:
            return None
        queues = self.active_queues
        if not queues or not all(is_task_queue(q) for q in queues):
            return None
        if time.monotonic() < self._moves_refused_until:
            return None
        return holder

    def _brpop_start(self, timeout: float | None = None) -> None:
        if _unsettled:
            retry_unsettled(self)
        holder = self._reliable_holder()
        if holder is None:
            self._pending_move = None
            super()._brpop_start(timeout)  # type: ignore[misc]
            return
        if self._staging_suspect:
            self._recover_staging(holder)
        queues = self._queue_cycle.consume(len(self.active_queues))  # type: ignore[attr-defined]
        if not queues:
            return
        connection = self.client.connection
        if self._pop_cycle.blocking:
            wait = timeout or self.brpop_timeout or 1
            pending = PendingMove("WAIT", holder.id)
            args: list[Any] = ["BRPOP", *(keys.queue_doorbell(q) for q in queues), wait]
        else:
            lists = scan_keys(queues, self._q_for_pri, self.priority_steps)  # type: ignore[attr-defined]
            staging = [heartbeat.staging_key(holder.id, k) for k in lists]
            pending = PendingMove("EVAL", holder.id)
            args = [
                "EVAL", SCAN_LUA, 2 * len(lists), *lists, *staging,
                heartbeat.staging_index_key(holder.id), heartbeat.HOLDERS_KEY, holder.id,
                heartbeat.alive_key(holder.id), holder.node, holder.ttl,
            ]  # fmt: skip
        self._in_poll = connection
        self._brpop_sent_at = time.monotonic()
        self._pending_move = pending
        connection.send_command(*args)

    def _brpop_read(self, **options: Any) -> Any:
        pending, self._pending_move = self._pending_move, None
        if pending is None:
            return super()._brpop_read(**options)  # type: ignore[misc]
        try:
            try:
                reply = self.client.parse_response(
                    self.client.connection, pending.command, **options
                )
            except self.connection_errors:  # type: ignore[attr-defined]
                # As kombu: disconnect so the next round reconnects; whatever the lost reply
                # moved is staged, and the next round gives it back first.
                self._staging_suspect = True
                self.client.connection.disconnect()
                raise
            except self.ResponseError as exc:
                self._moves_refused_until = time.monotonic() + MOVE_REFUSED_BACKOFF
                log.warning(
                    "Redis refused the reliable pop (%s): popping with BRPOP for %.0fs",
                    exc,
                    MOVE_REFUSED_BACKOFF,
                )
                raise Empty() from None
            popped = pending.popped(reply)
            self._pop_cycle.popped(popped is not None)
            if popped is None:
                raise Empty()
            return self._deliver_staged(pending.holder, *popped)
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()  # type: ignore[attr-defined]

    def _deliver_staged(self, holder: str, key: str, item: bytes) -> bool:
        staging = heartbeat.staging_key(holder, key)
        if self._screened_out(key, item, staging):
            raise Empty()
        dest = key.rsplit(self.sep, 1)[0]
        self._queue_cycle.rotate(dest)  # type: ignore[attr-defined]
        payload = loads(bytes_to_str(item))
        tag = payload["properties"]["delivery_tag"]  # screened: every envelope has one
        _staged[tag] = Staged(staging, item)
        try:
            self.connection._deliver(payload, dest)
        except BaseException:
            _staged.pop(tag, None)
            self._staging_suspect = True  # not recorded: the next round gives it back
            raise
        if _staged.pop(tag, None) is not None:
            # Delivered without an append (a no_ack consumer): consumed, as BRPOP would have.
            self._unstage(staging, item)
        return True

    def _screened_out(self, key: str, item: bytes, staging: str) -> bool:
        """Dead-letter an item the consumer must not see (GuardedRedis's screening), then take
        it out of staging; True when it was screened out."""
        client = self.client
        if not isinstance(client, GuardedRedis):
            return False
        reason = client.problem(key, item)
        if reason is None:
            return False
        if client._dead_letter(key, item, reason):
            self._unstage(staging, item)
        else:
            log.warning("the unreadable item stays staged; it is given back on reconnect")
        return True

    def _unstage(self, staging: str, item: bytes) -> None:
        with self.conn_or_acquire() as client:
            client.lrem(staging, 1, item)

    def _recover_staging(self, holder: heartbeat.Holder) -> None:
        """Give back to their queues the items this holder left staged (a reply lost with its
        connection, a delivery that failed): no pop of this holder is outstanding now."""
        try:
            with self.conn_or_acquire() as client:
                moved = heartbeat.restore_staging(client, holder.id, only_if_dead=False)
        except self.ResponseError as exc:
            log.warning("could not give back staged messages now (%s)", exc)
            moved = 0
        self._staging_suspect = False
        if moved > 0:
            log.warning("gave back %d staged message(s) whose delivery was cut off", moved)

    def _on_connection_disconnect(self, connection: Any) -> None:
        if self._in_poll is connection and self._pending_move is not None:
            self._pending_move = None
            self._staging_suspect = True
        super()._on_connection_disconnect(connection)  # type: ignore[misc]

    # -- the heartbeat sweep's view of kombu's restore --

    def restore_plan(self, raw: bytes | str) -> list[tuple[str, str]]:
        """The pushes kombu's restore_by_tag makes for one `unacked` entry: (list, body) pairs.

        The same code (`_do_restore_message`) fills a recording pipe instead of a real one, so a
        sweep restores a message exactly as kombu would (redelivered flags, priority list).
        Raises a connection error if the bindings cannot be read.
        """
        message, exchange, routing_key = loads(raw if isinstance(raw, str) else raw.decode())
        recorder = _PushRecorder()
        # kombu's own, not this class's: the sweep rings the doorbells itself.
        super()._do_restore_message(  # type: ignore[misc]
            message, exchange, routing_key, recorder, leftmost=False
        )
        return recorder.pushes

    def _do_restore_message(
        self, payload: Any, exchange: str, routing_key: str, pipe: Any, leftmost: bool = False
    ) -> None:
        """kombu's restore of one message (visibility timeout, disconnect, rejected with
        requeue), ringing the doorbell of each queue it goes back to."""
        super()._do_restore_message(  # type: ignore[misc]
            payload, exchange, routing_key, _RingingPushes(pipe), leftmost
        )

    def _get_client(self) -> Any:
        client = super()._get_client()  # type: ignore[misc]
        # A global key prefix needs kombu's own client class; keep it untouched then.
        return GuardedRedis if client is redis.Redis else client

    # -- fanout (pub/sub) reads --

    def _receive_one(self, c: Any) -> Any:
        """One fanout reply, read without blocking.

        kombu reads it with redis-py's blocking `parse_response()`, which since redis-py 8 waits
        with no timeout at all. A poll that reports the pub/sub socket readable with no whole
        reply behind it (seen right after a Redis restart) then froze the worker's event loop
        for good: no task, no reconnect, SIGTERM logged but never acted on.
        """
        return super()._receive_one(_NonBlockingPubSub(c))  # type: ignore[misc]


class _NonBlockingPubSub:
    """A redis-py PubSub whose `parse_response` waits at most PUBSUB_READ_SECONDS, then gives
    None (nothing read); everything else reaches the real one."""

    def __init__(self, pubsub: Any) -> None:
        object.__setattr__(self, "_pubsub", pubsub)

    def parse_response(self, block: bool = True, timeout: float = 0.0) -> Any:
        return self._pubsub.parse_response(block=False, timeout=PUBSUB_READ_SECONDS)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pubsub, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._pubsub, name, value)


class _RingingPushes:
    """A pipeline (or client) whose pushes onto a queue also ring that queue's doorbell, after
    the push, so a client sending at once wakes no one before the message is there."""

    def __init__(self, pipe: Any) -> None:
        self._pipe = pipe

    def rpush(self, key: str, value: str) -> Any:
        return self._ringing(self._pipe.rpush(key, value), key)

    def lpush(self, key: str, value: str) -> Any:
        return self._ringing(self._pipe.lpush(key, value), key)

    def _ringing(self, pushed: Any, key: str) -> Any:
        doorbell.ring(self._pipe, key)
        return pushed


class _PushRecorder:
    """Stands in for a pipeline in Channel.restore_plan: records the right-pushes it is given."""

    def __init__(self) -> None:
        self.pushes: list[tuple[str, str]] = []

    def rpush(self, key: str, value: str) -> _PushRecorder:
        self.pushes.append((key, value))
        return self

    def lpush(self, key: str, value: str) -> _PushRecorder:
        raise AssertionError("restore_plan asks for right pushes only")


class Transport(RingingTransport):
    Channel = Channel
