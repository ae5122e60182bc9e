"""The platform side: `emit_turn(event)` validates, buffers and returns without network I/O."""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from celery import Celery

from pipeline.errors import BufferFull
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from workers.settings import INGEST_QUEUE, Settings

log = logging.getLogger("memsync.producer")

_STOP = object()


class Producer:
    """A bounded in-memory buffer drained by one background publisher thread.

    `emit` raises InvalidEvent (naming the field) for a bad event and BufferFull when the buffer
    is full; it never waits on the broker. The publisher sends events in batches, one ingest task
    per batch, and keeps a batch it could not publish until the broker answers again.
    """

    def __init__(self, settings: Settings, app: Celery | None = None) -> None:
        if app is None:
            from workers import runtime
            from workers.app import app as default_app

            runtime.configure(settings)
            app = default_app
        self.app = app
        self.settings = settings
        self._buffer: queue.Queue[Any] = queue.Queue(maxsize=settings.producer_buffer)
        self._pending = 0
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._start_lock = threading.Lock()

    def emit(self, event: TurnEvent | Mapping[str, Any] | str | bytes) -> str:
        """Validate and buffer one turn; returns its event id at once."""
        if self._closed:
            raise RuntimeError("producer is closed")
        turn = validate_event(event)
        payload = turn.model_dump(mode="json", exclude_none=True)
        with self._idle:
            self._pending += 1
        try:
            self._buffer.put_nowait(payload)
        except queue.Full:
            self._done(1)
            raise BufferFull(
                f"producer buffer is full ({self.settings.producer_buffer} events); "
                "raise MEMSYNC_PRODUCER_BUFFER or check the broker"
            ) from None
        self._ensure_thread()
        return turn.event_id

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every buffered event is published; False if the timeout came first."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def close(self, timeout: float = 10.0) -> bool:
        """Publish what is buffered (up to `timeout`) and stop the publisher thread."""
        flushed = self.flush(timeout)
        self._closed = True
        if self._thread is not None:
            self._buffer.put(_STOP)
            self._thread.join(timeout=max(timeout, 1.0))
        if not flushed:
            log.error("producer closed with %d events unpublished", self._pending)
        return flushed

    @property
    def pending(self) -> int:
        return self._pending

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="memsync-publisher", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            first = self._buffer.get()
            if first is _STOP:
                return
            batch = [first]
            while len(batch) < self.settings.producer_batch:
                try:
                    item = self._buffer.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    self._buffer.put(_STOP)
                    break
                batch.append(item)
            self._publish_until_sent(batch)
            self._done(len(batch))

    def _publish_until_sent(self, batch: list[Any]) -> None:
        delay = 0.2
        while True:
            try:
                self.app.send_task(
                    "memsync.ingest",
                    args=[batch],
                    queue=INGEST_QUEUE,
                    retry=True,
                    retry_policy={
                        "max_retries": 2,
                        "interval_start": 0,
                        "interval_step": 0.5,
                        "interval_max": 1,
                    },
                )
                return
            except Exception as exc:  # kombu raises many types; all mean "not published yet"
                if self._closed:
                    log.error("dropping publish retry at close: %d events unsent", len(batch))
                    return
                log.warning("broker unavailable, will retry %d events: %s", len(batch), exc)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _done(self, count: int) -> None:
        with self._idle:
            self._pending -= count
            if self._pending <= 0:
                self._idle.notify_all()


_default: Producer | None = None
_default_lock = threading.Lock()


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
