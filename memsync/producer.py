"""The platform side: `emit_turn(event)` validates, buffers and returns without network I/O.

It runs inside the platform's process and imports nothing of the worker side (no Celery, no
extraction): task messages are written with kombu alone (memsync/message.py).
"""

from __future__ import annotations

import atexit
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

import redis
from kombu import Connection
from kombu import Producer as KombuProducer
from kombu.exceptions import ContentDisallowed, EncodeError

from memsync import keys
from memsync.buffer import TurnBuffer
from memsync.doorbell import RingingTransport
from memsync.encoded import EncodedTurn, encode_turn
from memsync.inflight import InFlight
from memsync.message import publish_ingest
from memsync.settings import Settings
from memsync.spool import Spool, SpoolStatus
from memsync.tracing import Tracing
from pipeline.errors import BufferFull, SpoolFull
from pipeline.validate import validate_event
from schemas.event import TurnEvent

log = logging.getLogger("memsync.producer")

_SPOOL_RETRY_SECONDS = 1.0
# Refusals that say "the broker is not taking writes now" (a replica after failover, a cluster
# mid-resharding, missing ACL rights), not "this event cannot be taken": they are retried.
_TRANSIENT_REFUSALS = (
    redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.NoPermissionError,
)
# A member no turn_ref can equal (they are escaped): ZADD XX on it writes nothing.
_PROBE_MEMBER = "\x00memsync-write-probe"
_PROBE_ATTEMPTS = 6
_PROBE_PAUSE_SECONDS = 0.2

Refusal = tuple[EncodedTurn, str]


def refused_for_content(exc: BaseException) -> bool:
    """True when the broker answered and refused what was sent (too large for its memory,
    unencodable), False for trouble reaching it (connection, timeout), which spooling waits out."""
    if isinstance(exc, EncodeError | ContentDisallowed):
        return True
    return isinstance(exc, redis.exceptions.ResponseError) and not isinstance(
        exc, _TRANSIENT_REFUSALS
    )


class Producer:
    """A bounded in-memory buffer drained by one background publisher thread.

    `emit` raises InvalidEvent (naming the field) for a bad event and BufferFull when the buffer
    is full; it never waits on the broker. The publisher sends events in batches, one ingest task
    per batch, each publish bounded by MEMSYNC_PUBLISH_TIMEOUT. A batch that cannot be published
    goes to the durable spool, and while the spool holds anything new batches queue behind it, so
    events reach the broker in the order they were emitted, also across producer restarts.

    A batch the broker refuses for its content is split until the culprit events are found; the
    others are published and each culprit is set aside in the spool's refused table with the
    reason, so it never holds up the events behind it.

    Fork-safe: in a forked child the producer starts over empty (the parent's buffered events stay
    the parent's), with its own publisher thread, locks and connections.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.spool = Spool(
            settings.spool_dir,
            max_events=settings.spool_max_events,
            max_bytes=settings.spool_max_bytes,
        )
        self._closed = False
        self._final_status: SpoolStatus | None = None
        self._tracing = Tracing(settings.tracing)
        self._start()
        _live.add(self)

    def _start(self) -> None:
        """Fresh buffer, locks, connections and publisher thread (at creation and after fork)."""
        self.counters = {
            "emitted": 0,
            "buffer_full": 0,
            "published": 0,
            "spooled": 0,
            "spool_full": 0,
            "publish_failures": 0,
            "refused": 0,
        }
        self._buffer: TurnBuffer[EncodedTurn] = TurnBuffer(
            self.settings.producer_buffer, self.settings.producer_batch
        )
        self._pending = 0
        self._idle = threading.Condition()
        self._connection: Connection | None = None
        self._publish_lock = threading.Lock()
        self._retry_at = 0.0
        self._tracker: InFlight | None = None
        self._thread = threading.Thread(target=self._run, name="memsync-publisher", daemon=True)
        self._thread.start()

    def _after_fork_in_child(self) -> None:
        # The parent's sockets and SQLite connection stay open for the parent: the child drops
        # its references without closing them (closing could shut the parent's sockets down).
        _inherited.extend(x for x in (self._connection, self._tracker) if x is not None)
        if self._final_status is not None:  # closed before the fork: stays closed
            return
        self.spool.reopen_after_fork()
        self._start()

    def emit(self, event: TurnEvent | Mapping[str, Any] | str | bytes) -> str:
        """Validate and buffer one turn; returns its event id at once."""
        if self._closed:
            raise RuntimeError("producer is closed")
        turn = validate_event(event)
        # Encoded here, in the caller's thread: JSON encoding in the publisher thread would hold
        # the interpreter while callers wait to emit (the spool and the message take the text).
        encoded = encode_turn(turn)
        with self._idle:
            self._pending += 1
            self.counters["emitted"] += 1
        if not self._buffer.put(encoded):
            with self._idle:
                self.counters["buffer_full"] += 1
            self._done(1)
            raise BufferFull(
                f"producer buffer is full ({self.settings.producer_buffer} events); "
                "raise MEMSYNC_PRODUCER_BUFFER or check the broker and the spool"
            )
        return turn.event_id

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every emitted event is published or safely spooled; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def flush_spool(self) -> int:
        """Publish everything spooled now (refused events are set aside); raises if the broker is
        still away. Returns how many events left the spool."""
        return self.spool.drain(self._refusals, batch=self.settings.producer_batch)

    def close(self, timeout: float = 10.0) -> bool:
        """Hand every buffered event to the broker or the spool, then stop the publisher."""
        flushed = self.flush(timeout)
        self._closed = True
        self._buffer.close()
        self._thread.join(timeout=max(timeout, 1.0))
        if self._connection is not None:
            self._connection.release()
        if self._tracker is not None:
            self._tracker.client.close()
        self._final_status = self.spool.status()
        self.spool.close()
        if not flushed:
            log.error("producer closed with %d events neither published nor spooled", self._pending)
        return flushed

    @property
    def pending(self) -> int:
        return self._pending

    def spool_status(self) -> SpoolStatus:
        """The spool's size now (or when the producer closed)."""
        return self._final_status if self._final_status is not None else self.spool.status()

    def _run(self) -> None:
        while True:
            # Lingering for the batch to fill: at a steady rate of turns, publishing each as it
            # comes makes one-turn tasks, and a transaction per turn downstream.
            batch = self._buffer.take(
                idle=_SPOOL_RETRY_SECONDS, linger=self.settings.producer_linger
            )
            if batch is None:
                return
            if not batch:
                self._drain_spool()
                continue
            self._send(batch)
            self._done(len(batch))

    def _send(self, batch: list[EncodedTurn]) -> None:
        """Publish a batch, or spool it; never returns with the batch in neither place."""
        if self._drain_spool():
            refusals: list[Refusal] = []
            handled = [0]
            try:
                self._publish_or_refuse(batch, refusals, handled)
            except Exception as exc:  # kombu and redis raise many types; all mean "not sent"
                self._broker_down(exc)
            self._set_aside(refusals)
            # The halves before a failure are published or set aside; only the rest is spooled.
            batch = batch[handled[0] :]
            if not batch:
                return
        while True:
            try:
                self.spool.append(batch)
                self.counters["spooled"] += len(batch)
                return
            except (SpoolFull, sqlite3.OperationalError) as exc:
                # Holding the batch fills the buffer, so emit() raises BufferFull: loud, not lossy.
                self.counters["spool_full"] += 1
                log.error("%s", exc)
                time.sleep(_SPOOL_RETRY_SECONDS)
                self._drain_spool()

    def _drain_spool(self) -> bool:
        """Publish spooled events in order; True when the spool is empty afterwards.

        While the broker is known to be away, at most one attempt a second is made, so an outage
        costs one publish timeout per second rather than one per batch.
        """
        if len(self.spool) == 0:
            return True
        if time.monotonic() < self._retry_at:
            return False
        try:
            self.spool.drain(self._refusals, batch=self.settings.producer_batch)
        except Exception as exc:  # still away; the events stay spooled in order
            self._broker_down(exc)
            return False
        return True

    def _broker_down(self, exc: Exception) -> None:
        self.counters["publish_failures"] += 1
        self._retry_at = time.monotonic() + _SPOOL_RETRY_SECONDS
        log.warning("broker unavailable, spooling events: %s", exc)

    def _refusals(self, batch: list[EncodedTurn]) -> list[Refusal]:
        """Publish a batch (the spool's drain calls this); return what the broker refused."""
        refusals: list[Refusal] = []
        self._publish_or_refuse(batch, refusals, [0])
        return refusals

    def _publish_or_refuse(
        self, batch: list[EncodedTurn], refusals: list[Refusal], handled: list[int]
    ) -> None:
        """Publish a batch; add the events the broker refused for their content to `refusals`.

        A refused batch is halved until the culprits are single events, so every other event is
        published, in order; `handled[0]` counts the events of the batch published or refused so
        far. Trouble reaching the broker raises, as from `_publish`.
        """
        try:
            self._publish(batch)
            handled[0] += len(batch)
            return
        except Exception as exc:
            if not refused_for_content(exc):
                raise
            refusal = exc
        if len(batch) > 1:
            middle = len(batch) // 2
            self._publish_or_refuse(batch[:middle], refusals, handled)
            self._publish_or_refuse(batch[middle:], refusals, handled)
            return
        if not self._broker_takes_writes():
            # A full broker refuses every write, small or large: wait for it, as for an outage.
            raise refusal
        try:
            # Refused while Redis still counted a larger refused command against its memory (see
            # _broker_takes_writes), a small event goes through now; only a true culprit fails.
            self._publish(batch)
            handled[0] += 1
            return
        except Exception as exc:
            if not refused_for_content(exc):
                raise
            refusal = exc
        event = batch[0]
        # It may have been recorded as in flight before the broker refused the message itself.
        # That refusal counted the message's bytes against Redis's memory again, and the untrack
        # was refused for it once (OOM on HDEL, then every later event spooled as if the broker
        # were down): wait for room first, as before the retry above.
        self._broker_takes_writes()
        self._inflight().untrack([keys.turn_ref(event.tenant, event.event_id)])
        self.counters["refused"] += 1
        reason = f"{type(refusal).__name__}: {refusal}"
        log.error("broker refused event %s; set aside in the spool: %s", event.event_id, reason)
        refusals.append((event, reason))
        handled[0] += 1

    def _broker_takes_writes(self) -> bool:
        """Whether the broker accepts a small write now (a write that changes nothing).

        Right after refusing a large command Redis may still count that command's own bytes (its
        query buffer, freed by its periodic client cron) against maxmemory, so a failed probe is
        tried again for up to about a second before the broker is taken to be full.
        """
        for attempt in range(_PROBE_ATTEMPTS):
            try:
                self._inflight().client.zadd(keys.INFLIGHT_SINCE, {_PROBE_MEMBER: 0}, xx=True)
            except redis.RedisError:
                if attempt + 1 < _PROBE_ATTEMPTS:
                    time.sleep(_PROBE_PAUSE_SECONDS)
                continue
            return True
        return False

    def _set_aside(self, refusals: list[Refusal]) -> None:
        """Record refused events in the spool; they must not be lost, so this waits for room."""
        while refusals:
            try:
                self.spool.refuse(refusals)
                return
            except sqlite3.OperationalError as exc:
                log.error("could not record %d refused event(s): %s", len(refusals), exc)
                time.sleep(_SPOOL_RETRY_SECONDS)

    def _publish(self, batch: list[EncodedTurn]) -> None:
        with self._publish_lock:
            try:
                # Recorded before it is sent, so a message the broker loses is sent again.
                self._inflight().track(batch)
                connection = self._connect()
                tenants = {turn.tenant for turn in batch}
                attributes: dict[str, str | int] = {"memsync.turns": len(batch)}
                if len(tenants) == 1:
                    attributes["memsync.tenant"] = next(iter(tenants))
                with self._tracing.span("memsync.publish", kind="PRODUCER", attributes=attributes):
                    publish_ingest(
                        KombuProducer(connection, auto_declare=False),
                        batch,
                        headers=self._tracing.headers(),
                    )
            except Exception:
                self._reset_connection()
                raise
            self.counters["published"] += len(batch)

    def _inflight(self) -> InFlight:
        if self._tracker is None:
            bound = self.settings.publish_timeout
            self._tracker = InFlight(
                redis.Redis.from_url(
                    self.settings.broker_url, socket_timeout=bound, socket_connect_timeout=bound
                )
            )
        return self._tracker

    def _connect(self) -> Connection:
        if self._connection is None:
            bound = self.settings.publish_timeout
            url = self.settings.broker_url
            self._connection = Connection(
                url,
                # Each message rings its queue's doorbell, so an idle worker wakes at once.
                transport=RingingTransport if url.startswith(("redis://", "rediss://")) else None,
                connect_timeout=bound,
                transport_options={"socket_timeout": bound, "socket_connect_timeout": bound},
            )
        return self._connection

    def _reset_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.release()
            except Exception as exc:  # a broken connection may fail to close; it is dropped anyway
                log.debug("closing a failed broker connection: %s", exc)

    def _done(self, count: int) -> None:
        with self._idle:
            self._pending -= count
            if self._pending <= 0:
                self._idle.notify_all()


_default: Producer | None = None
_default_lock = threading.Lock()
# Producers alive in this process, so a forked child can restart each of them.
_live: weakref.WeakSet[Producer] = weakref.WeakSet()
# What a forked child inherited and must neither use nor close (see _after_fork_in_child).
_inherited: list[object] = []


def _after_fork_in_child() -> None:
    global _default_lock
    _default_lock = threading.Lock()  # the parent may have held it while forking
    for producer in list(_live):
        producer._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def default_producer() -> Producer:
    """The process-wide producer, built from the environment on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Producer(Settings())
            atexit.register(_default.close)
        return _default


def emit_turn(event: TurnEvent | Mapping[str, Any] | str | bytes) -> str:
    """Hand one turn to memsync; returns its event id at once, never waiting on the broker."""
    return default_producer().emit(event)
