"""A small bounded cache whose entries expire: the worker's participant-name and trust caches."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """At most `max_entries` values, each readable for `ttl` seconds after it was stored.

    The least recently used entry is evicted when the cache is full, so a worker that sees many
    distinct participants keeps a bounded working set instead of growing for ever. Expired entries
    are dropped when read. One lock guards every operation: tasks in a pool process (and a
    threaded pool) may share the cache.
    """

    def __init__(
        self,
        max_entries: int,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if ttl < 0:
            raise ValueError("ttl must not be negative")
        self.max_entries = max_entries
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def configure(self, max_entries: int, ttl: float) -> None:
        """Apply new bounds (settings may change between uses), evicting down to the new size."""
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        with self._lock:
            self.max_entries = max_entries
            self.ttl = ttl
            self._evict()

    def get(self, key: K) -> V | None:
        """The live value for `key`, or None if absent or expired (an expired entry is dropped)."""
        with self._lock:
            return self._get(key, self._clock())

    def get_many(self, keys: Iterable[K]) -> dict[K, V]:
        """The live values among `keys`, read at one instant."""
        with self._lock:
            now = self._clock()
            found: dict[K, V] = {}
            for key in keys:
                value = self._get(key, now)
                if value is not None:
                    found[key] = value
            return found

    def put(self, key: K, value: V) -> None:
        """Store `value`, fresh for `ttl` seconds, evicting the least recently used if full."""
        with self._lock:
            self._entries[key] = (self._clock(), value)
            self._entries.move_to_end(key)
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        """Entries held, including expired ones not read since they expired."""
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return self._get(key, self._clock()) is not None  # type: ignore[arg-type]

    def _get(self, key: K, now: float) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        stored, value = entry
        if now - stored >= self.ttl:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def _evict(self) -> None:
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
