"""The bench process's own garbage collections, timed, so a slow emit() can be told apart.

Python's cyclic collector runs in whichever thread allocates past its threshold, emit() included,
and a full (generation 2) collection takes as long as the process holds objects: in a bench
holding a whole workload, tens to hundreds of milliseconds. The emit benches report how much of
their slowest call such a collection took, so a pause of the calling process is not read as a
wait on memsync.
"""

from __future__ import annotations

import gc
import time
from types import TracebackType
from typing import Any


class Collections:
    """While entered, every full collection's (start, end) in perf_counter_ns."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []
        self._started: int | None = None

    def __enter__(self) -> Collections:
        gc.callbacks.append(self._seen)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        gc.callbacks.remove(self._seen)

    def _seen(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter_ns()
        elif self._started is not None:
            self.spans.append((self._started, time.perf_counter_ns()))
            self._started = None

    def within(self, start: int, end: int) -> int:
        """Nanoseconds of full collections between `start` and `end`."""
        return sum(max(0, min(end, b) - max(start, a)) for a, b in self.spans)


def slowest_call(starts: list[int], took: list[int], collections: Collections) -> dict[str, float]:
    """The slowest call (ms) and how much of it full collections took (ms); empty if no call."""
    if not took:
        return {}
    i = max(range(len(took)), key=took.__getitem__)
    return {
        "ms": took[i] / 1e6,
        "full_gc_ms": collections.within(starts[i], starts[i] + took[i]) / 1e6,
        "full_gcs": float(len(collections.spans)),
    }
