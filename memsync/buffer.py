"""The producer's buffer: bounded, and waking its publisher once a batch rather than once a turn.

Why: a thread woken from inside emit() is often run by the operating system on the caller's own
core, switching the caller out; on a busy machine the caller then waits a scheduler slice of
whatever else runs there (milliseconds) before emit() returns. A queue.Queue wakes a waiting
consumer on every put, and a lingering publisher is always waiting. Here a put wakes the
publisher only when the buffer goes from empty to one turn (it may be idle) or reaches a batch.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class TurnBuffer(Generic[T]):
    """A bounded FIFO for one consumer that takes batches of up to `batch` items."""

    def __init__(self, capacity: int, batch: int) -> None:
        self._capacity = capacity
        # A buffer smaller than a batch is full before a batch is: that ends the linger too.
        self._batch = min(batch, capacity)
        self._items: deque[T] = deque()
        # A plain lock: taking it uncontended wakes nobody, and emit() only ever holds it briefly.
        self._ready = threading.Condition(threading.Lock())
        self._closed = False

    def put(self, item: T) -> bool:
        """Add an item; False when the buffer is full (nothing added)."""
        with self._ready:
            if len(self._items) >= self._capacity:
                return False
            self._items.append(item)
            size = len(self._items)
            if size in (1, self._batch):
                self._ready.notify()
        return True

    def close(self) -> None:
        """No more items: the consumer takes what is left, then gets None."""
        with self._ready:
            self._closed = True
            self._ready.notify()

    def take(self, *, idle: float, linger: float) -> list[T] | None:
        """The next batch, oldest first.

        Waits up to `idle` seconds for a first item ([] when none came), then up to `linger`
        seconds more for the batch to fill. None once the buffer is closed and empty.
        """
        with self._ready:
            if not self._items and not self._closed:
                self._ready.wait(idle)
            if not self._items:
                return None if self._closed else []
            deadline = time.monotonic() + linger
            while len(self._items) < self._batch and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._ready.wait(left)
            count = min(self._batch, len(self._items))
            return [self._items.popleft() for _ in range(count)]
