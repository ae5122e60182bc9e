"""Worker liveness: a killed worker's unacked messages come back in seconds, not after an hour.

Workers ack late, so kombu keeps every delivered message in Redis (`unacked`, `unacked_index`)
until it is acked, and gives it back only after the visibility timeout (an hour by default,
because it must outlast the longest task plus the largest retry countdown). Here each worker
process, while it runs, refreshes a short-lived key (`alive`) from a small thread, and the
transport's QoS records in a per-worker set which delivery tags that worker holds. Any live
worker sweeps (one at a time, under a lock): a holder whose key has expired is dead, and its
messages go back to their queues exactly as kombu's own restore sends them. Messages that are
only queued, or held by a live worker, are never touched, however old.

The same thread watches the consumer: one that receives nothing while its queues hold messages
and it has room for more is deaf (a broker restart can leave it so without any error), and is
made to reconnect through Celery's own connection-loss path.

The transport pops with an atomic move into per-holder staging lists
(workers/worker/transport.py), so a message is always in its queue, a holder's staging list or
`unacked`; the sweep gives a dead holder's staging lists back to their queues too.
Keys: memsync/keys.py (`worker_*`, `HOLDERS`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from celery import bootsteps
from kombu.utils.encoding import bytes_to_str

from memsync import doorbell, keys
from memsync.settings import Settings
from pipeline.errors import BrokerUnavailable, ConfigurationError, RetryableError
from workers.worker import forkgate

log = logging.getLogger("memsync.heartbeat")

HOLDERS_KEY = keys.HOLDERS
SWEEP_LOCK_KEY = keys.HOLDER_SWEEP_LOCK
# Tags restored per transaction: small, so a transaction's watch window stays short while other
# workers ack (every ack changes the watched `unacked` hash).
SWEEP_BATCH = 50
SWEEP_ATTEMPTS = 50
# Redis errors that pass: a broker away, slow, or still replaying its AOF (BusyLoadingError).
REDIS_PASSING: tuple[type[Exception], ...] = (
    redis.BusyLoadingError,
    redis.ConnectionError,
    redis.TimeoutError,
    OSError,
)


# -- keys -----------------------------------------------------------------------------------------


alive_key = keys.worker_alive
held_key = keys.worker_held
staging_index_key = keys.worker_staging_index
staging_key = keys.worker_staging

# Gives back every item in a holder's staging lists to the queue it was moved from, at the end
# Redis pops from (as kombu's restore does for `unacked`), and forgets the emptied lists; all in
# one script, so no pop can land between the liveness check and the moves. KEYS[1]: the staging
# index, KEYS[2]: the alive key; ARGV[1] "1": only if the holder is dead (the sweep), "0": the
# holder itself, at a point where it has no pop outstanding. Returns the items moved, -1 if alive.
RESTORE_STAGING_LUA = """
if ARGV[1] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local moved = 0
local index = redis.call('HGETALL', KEYS[1])
for i = 1, #index, 2 do
  while redis.call('LMOVE', index[i], index[i + 1], 'LEFT', 'RIGHT') do moved = moved + 1 end
  redis.call('HDEL', KEYS[1], index[i])
end
return moved
"""


def restore_staging(client: Any, holder: str, *, only_if_dead: bool) -> int:
    """Move a holder's staged items back to their queues; -1 (nothing moved) if `only_if_dead`
    and the holder is alive."""
    keys_ = [staging_index_key(holder), alive_key(holder)]
    queues = set(client.hvals(keys_[0]))
    if not queues:
        return 0  # nothing was ever staged (or all was given back): no script to run
    moved: int = client.eval(RESTORE_STAGING_LUA, len(keys_), *keys_, "1" if only_if_dead else "0")
    if moved > 0:
        # Ring the queues read from the index just before the script. One first staged to in
        # between was given back too but rings nothing: a worker takes it within its wait.
        with client.pipeline(transaction=False) as pipe:
            for queue in sorted(queues):
                doorbell.ring(pipe, bytes_to_str(queue))
            pipe.execute()
    return int(moved)


# -- this process as a holder ---------------------------------------------------------------------


@dataclass(frozen=True)
class Holder:
    """This worker process's identity in Redis: unique per process start, so a restarted worker
    under the same node name never inherits (or shields) the dead one's messages."""

    id: str
    node: str
    ttl: int


_holder: Holder | None = None
_holder_pid: int | None = None
_last_delivery = 0.0


def new_holder_id(node: str) -> str:
    return f"{node}/{os.getpid()}/{uuid.uuid4().hex[:12]}"


def activate(node: str, ttl: int) -> Holder:
    """Make this process a holder: from now on the transport records the tags it is handed."""
    global _holder, _holder_pid
    _holder = Holder(new_holder_id(node), node, ttl)
    _holder_pid = os.getpid()
    return _holder


def deactivate() -> None:
    global _holder, _holder_pid
    _holder, _holder_pid = None, None


def active_holder() -> Holder | None:
    """This process's holder, or None outside a worker (or in a forked pool child)."""
    if _holder is None or _holder_pid != os.getpid():
        return None
    return _holder


def note_delivery() -> None:
    """Called by the transport on each message handed to this process's consumer."""
    global _last_delivery
    _last_delivery = time.monotonic()


def last_delivery() -> float:
    """time.monotonic() of the latest delivery to this process's consumer (0.0: none yet)."""
    return _last_delivery


def record_held(pipe: Any, holder: Holder, tag: str) -> None:
    """Queue, on the transport's MULTI pipeline beside kombu's own unacked bookkeeping, the
    commands that say `holder` holds `tag` (and that it is alive, in case no beat landed yet)."""
    pipe.sadd(held_key(holder.id), tag)
    pipe.sadd(HOLDERS_KEY, holder.id)
    pipe.set(alive_key(holder.id), holder.node, ex=holder.ttl)


def record_released(pipe: Any, holder: Holder, tag: str) -> None:
    """Queue the command that says `holder` no longer holds `tag` (acked, rejected, restored)."""
    pipe.srem(held_key(holder.id), tag)


# -- the sweep ------------------------------------------------------------------------------------


@dataclass
class SweepReport:
    dead: list[str] = field(default_factory=list)
    restored: int = 0
    unstaged: int = 0
    already_acked: int = 0
    left_for_visibility_timeout: int = 0


def beat(client: Any, holder: Holder) -> None:
    """Renew this holder's alive key."""
    with broker_errors():
        client.set(alive_key(holder.id), holder.node, ex=holder.ttl)


def sweep(client: Any, channel: Any, *, batch: int = SWEEP_BATCH) -> SweepReport:
    """Give back to their queues the messages every dead holder held; drop dead holders.

    `channel` is a workers.worker.transport Channel on the same broker: it knows kombu's unacked
    keys and how kombu restores a message (see Channel.restore_plan).
    """
    report = SweepReport()
    with broker_errors():
        holders = sorted(_text(h) for h in client.smembers(HOLDERS_KEY))
        for holder in holders:
            if client.exists(alive_key(holder)):
                continue
            report.dead.append(holder)
            tags = sorted(_text(t) for t in client.smembers(held_key(holder)))
            for start in range(0, len(tags), batch):
                if not _restore_batch(client, channel, holder, tags[start : start + batch], report):
                    break  # the holder came back to life: what it holds is its own again
            report.unstaged += max(0, restore_staging(client, holder, only_if_dead=True))
            _forget_if_empty(client, holder)
    return report


def _restore_batch(
    client: Any, channel: Any, holder: str, tags: Sequence[str], report: SweepReport
) -> bool:
    """Restore these tags of a dead holder in one transaction; False if the holder is alive."""
    alive, held = alive_key(holder), held_key(holder)
    unacked, index = channel.unacked_key, channel.unacked_index_key
    for _ in range(SWEEP_ATTEMPTS):
        with client.pipeline() as pipe:
            try:
                # Watching `unacked` makes a concurrent ack or restore of any of these tags
                # abort this transaction, so an acked message is never sent again.
                pipe.watch(alive, held, unacked)
                if pipe.exists(alive):
                    return False
                raws = pipe.hmget(unacked, list(tags))
                entries = [
                    (t, raw, _plan(channel, t, raw)) for t, raw in zip(tags, raws, strict=True)
                ]
                pipe.multi()
                counts = _queue_restore(pipe, held, entries, unacked=unacked, index=index)
                pipe.execute()
            except redis.WatchError:
                continue
        report.restored += counts[0]
        report.already_acked += counts[1]
        report.left_for_visibility_timeout += counts[2]
        return True
    log.warning(
        "restoring %d message(s) of dead worker %s kept conflicting; next sweep", len(tags), holder
    )
    return True


def _queue_restore(
    pipe: Any,
    held: str,
    entries: Sequence[tuple[str, bytes | None, list[tuple[str, str]] | None]],
    *,
    unacked: str,
    index: str,
) -> tuple[int, int, int]:
    """Queue on a MULTI pipe the restore of each (tag, unacked entry, plan); return how many
    were restored, already acked, and left for the visibility timeout."""
    restored = acked = left = 0
    for tag, raw, plan in entries:
        pipe.srem(held, tag)
        if raw is None:
            acked += 1  # acked (or restored by the visibility timeout) meanwhile
        elif not plan:
            left += 1  # kombu could not route it: the visibility timeout still covers it
        else:
            # kombu's restore_by_tag: push each copy, then drop the tag from both indices.
            for queue, body in plan:
                pipe.rpush(queue, body)
                doorbell.ring(pipe, queue)
            pipe.zrem(index, tag)
            pipe.hdel(unacked, tag)
            restored += 1
    return restored, acked, left


def _plan(channel: Any, tag: str, raw: bytes | None) -> list[tuple[str, str]] | None:
    if raw is None:
        return None
    try:
        plan: list[tuple[str, str]] = channel.restore_plan(raw)
    except REDIS_PASSING:
        raise  # the broker went away mid-sweep: abort, the next sweep restores it
    except Exception as exc:  # the message stays in `unacked` for the visibility timeout
        log.error("cannot restore message %s of a dead worker: %s", tag, exc)
        return None
    return plan


def _forget_if_empty(client: Any, holder: str) -> None:
    alive, held, staging = alive_key(holder), held_key(holder), staging_index_key(holder)
    with client.pipeline() as pipe:
        try:
            pipe.watch(alive, held, staging)
            if pipe.exists(alive) or pipe.scard(held) or pipe.hlen(staging):
                return
            pipe.multi()
            pipe.srem(HOLDERS_KEY, holder)
            pipe.execute()
        except redis.WatchError:
            return  # it changed: the next sweep looks again


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@contextlib.contextmanager
def broker_errors() -> Iterator[None]:
    """Turn a passing Redis error (BusyLoadingError included) into BrokerUnavailable."""
    try:
        yield
    except REDIS_PASSING as exc:
        raise BrokerUnavailable(f"broker unavailable: {exc}") from exc


# -- deaf consumer --------------------------------------------------------------------------------


@dataclass
class DeafnessWatch:
    """Decides when a consumer is deaf: messages waited in its queues and it had room for more,
    continuously for `after` seconds, and in all that time nothing was delivered to it."""

    after: float
    starving_since: float | None = None

    def observe(self, now: float, *, queued: int, has_room: bool, last_delivery: float) -> bool:
        if queued <= 0 or not has_room:
            self.starving_since = None
            return False
        if self.starving_since is None:
            self.starving_since = now
        if now - max(self.starving_since, last_delivery) < self.after:
            return False
        self.starving_since = None  # a reconnect takes a while: measure a fresh window after it
        return True

    def reset(self) -> None:
        self.starving_since = None


@dataclass(frozen=True)
class ConsumerView:
    """What the watchdog reads from the worker's consumer (from another thread: reads only)."""

    queues: tuple[str, ...]
    has_room: bool
    hub: Any


def consumer_view(worker: Any) -> ConsumerView | None:
    """The consumer's queues, whether kombu would fetch another message now, and its event loop;
    None while it is not consuming (starting, reconnecting, stopping)."""
    consumer = getattr(worker, "consumer", None)
    task_consumer = getattr(consumer, "task_consumer", None)
    if consumer is None or task_consumer is None or getattr(consumer, "connection", None) is None:
        return None
    channel = getattr(task_consumer, "channel", None)
    qos = getattr(channel, "qos", None)
    hub = getattr(consumer, "hub", None)
    if qos is None or hub is None:
        return None
    try:
        names = tuple(q.name for q in task_consumer.queues)
        has_room = bool(qos.can_consume())
    except Exception:  # the consumer changed under us (it is restarting): look next time
        return None
    return ConsumerView(names, has_room, hub)


class ConsumerDeaf(redis.ConnectionError):
    """Raised inside the consumer's event loop so Celery's connection-loss path reconnects it."""


def force_reconnect(hub: Any, reason: str) -> None:
    """Make the consumer's own event loop raise a connection error (the thread-safe way in)."""

    def _raise() -> None:
        raise ConsumerDeaf(reason)

    hub.call_soon(_raise)


def queued(client: Any, queues: Iterable[str]) -> int:
    """How many messages wait in these queues."""
    with broker_errors(), client.pipeline(transaction=False) as pipe:
        for name in queues:
            pipe.llen(name)
        return sum(int(n) for n in pipe.execute())


# -- the worker thread ----------------------------------------------------------------------------


def heartbeat_problems(settings: Settings) -> list[str]:
    """Why these liveness settings could restore a live worker's messages; empty when sound."""
    if settings.heartbeat_ttl < 2 * settings.heartbeat_interval:
        return [
            f"MEMSYNC_HEARTBEAT_TTL ({settings.heartbeat_ttl}s) must be at least twice "
            f"MEMSYNC_HEARTBEAT_INTERVAL ({settings.heartbeat_interval}s), or one late beat "
            "makes a live worker look dead"
        ]
    return []


class Keeper:
    """The work of one tick: beat, then (once Redis has been reachable for a whole TTL, so every
    live worker had the chance to beat) sweep dead holders and watch the consumer."""

    def __init__(
        self,
        worker: Any,
        holder: Holder,
        settings: Settings,
        channel_factory: Callable[[], Any],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.worker = worker
        self.holder = holder
        self.settings = settings
        self.channel_factory = channel_factory
        self.clock = clock
        self.watch = DeafnessWatch(settings.consumer_deaf_after)
        self.stopping = threading.Event()
        self.up_since: float | None = None
        self.failing = False
        self._channel: Any = None
        self._client: Any = None

    def tick(self) -> None:
        try:
            client = self._connect()
            beat(client, self.holder)
        except RetryableError as exc:
            self._lost(exc)
            return
        now = self.clock()
        if self.failing:
            log.info("heartbeat to the broker resumed")
            self.failing = False
        if self.up_since is None:
            self.up_since = now
        if self.stopping.is_set():
            return  # stopping: keep beating (running tasks still hold messages), nothing else
        try:
            if now - self.up_since >= self.holder.ttl:
                self._sweep(client)
            self._watch(client, now)
        except RetryableError as exc:
            self._lost(exc)

    def _connect(self) -> Any:
        if self._client is None:
            try:
                self._channel = self.channel_factory()
                self._client = self._channel._create_client()
            except Exception as exc:  # kombu raises its own or redis's errors while connecting
                self._channel = None
                raise BrokerUnavailable(f"broker unavailable: {exc}") from exc
        return self._client

    def _lost(self, exc: Exception) -> None:
        if not self.failing:
            log.warning("heartbeat to the broker failed, retrying every tick: %s", exc)
        self.failing = True
        self.up_since = None
        self.watch.reset()

    def _sweep(self, client: Any) -> None:
        with broker_errors():
            interval = max(1, round(self.settings.heartbeat_interval))
            if not client.set(SWEEP_LOCK_KEY, self.holder.id, nx=True, ex=interval):
                return
        report = sweep(client, self._channel)
        if report.dead:
            log.warning(
                "worker(s) %s stopped beating: restored %d unacked and %d staged message(s), "
                "%d already acked, %d left for the visibility timeout",
                ", ".join(report.dead),
                report.restored,
                report.unstaged,
                report.already_acked,
                report.left_for_visibility_timeout,
            )

    def _watch(self, client: Any, now: float) -> None:
        view = consumer_view(self.worker)
        if view is None:
            self.watch.reset()
            return
        waiting = queued(client, view.queues)
        if self.watch.observe(
            now, queued=waiting, has_room=view.has_room, last_delivery=last_delivery()
        ):
            reason = (
                f"consumer received nothing for {self.watch.after:.0f}s while {waiting} message(s) "
                f"waited in {', '.join(view.queues)} and it had room: reconnecting"
            )
            log.warning("%s", reason)
            force_reconnect(view.hub, reason)


class HeartbeatStep(bootsteps.StartStopStep):
    """A worker bootstep: beat, sweep and watch every MEMSYNC_HEARTBEAT_INTERVAL seconds.

    A thread rather than the worker's timer, because the consumer resets its event loop (and
    the timer entries on it) each time it reconnects, and a deaf loop must not silence the beat.
    """

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.keeper: Keeper | None = None
        self.thread: threading.Thread | None = None

    def start(self, worker: Any) -> None:
        from workers.worker import runtime

        settings = runtime.settings()
        problems = heartbeat_problems(settings)
        if problems:
            raise ConfigurationError("; ".join(problems))
        holder = activate(worker.hostname, settings.heartbeat_ttl)
        self.keeper = Keeper(
            worker, holder, settings, functools.partial(_broker_channel, worker.app)
        )
        self.thread = threading.Thread(
            target=self._loop, args=(self.keeper,), name="memsync-heartbeat", daemon=True
        )
        self.thread.start()

    def stop(self, worker: Any) -> None:
        if self.keeper is not None:
            self.keeper.stopping.set()

    @staticmethod
    def _loop(keeper: Keeper) -> None:
        interval = keeper.settings.heartbeat_interval
        while True:  # a daemon thread: it beats until the process ends
            started = time.monotonic()
            try:
                with forkgate.working():
                    keeper.tick()
            except Exception:  # a tick must never end the beat
                log.exception("heartbeat tick failed")
            time.sleep(max(0.0, interval - (time.monotonic() - started)))


def _broker_channel(app: Any) -> Any:
    """A channel of this thread's own broker connection (never the consumer's)."""
    return app.connection_for_write().channel()
