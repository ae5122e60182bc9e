"""How a reader's calls went: counts by outcome and wall time in buckets, per call (recall,
build_context). A Memory keeps one; memsync/metrics.py reads it at scrape time, so the reading
path itself needs no metrics library and costs a lock and a clock read a call."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from pydantic import ValidationError

# Upper bounds in seconds: recall's target is 50 ms at p95, and a cold reader's first calls
# take seconds (its model and vector cache load).
BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# ok; invalid: the caller's request was refused (a field named); error: anything else raised.
Outcome = Literal["ok", "invalid", "error"]
OUTCOMES: Final[tuple[Outcome, ...]] = ("ok", "invalid", "error")


@dataclass
class CallFigures:
    """One call's figures: `counts[i]` calls took at most BUCKETS[i] and more than the bound
    before it; the last counts those over every bound."""

    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    seconds: float = 0.0
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))


class ReadStats:
    """Per call name, its figures so far; safe to record from several threads at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, CallFigures] = {}

    @contextmanager
    def timed(self, call: str) -> Iterator[None]:
        """Count the block as one `call`: invalid if it raises a validation error, an error if
        it raises anything else (the exception goes on either way)."""
        start = time.perf_counter()
        outcome: Outcome = "error"
        try:
            yield
            outcome = "ok"
        except ValidationError:
            outcome = "invalid"
            raise
        finally:
            self.record(call, time.perf_counter() - start, outcome)

    def record(self, call: str, seconds: float, outcome: Outcome) -> None:
        with self._lock:
            figures = self._calls.setdefault(call, CallFigures())
            figures.outcomes[outcome] += 1
            figures.seconds += seconds
            figures.counts[bisect.bisect_left(BUCKETS, seconds)] += 1

    def snapshot(self) -> dict[str, CallFigures]:
        """A copy of every call's figures, as of now."""
        with self._lock:
            return {
                call: replace(figures, outcomes=dict(figures.outcomes), counts=list(figures.counts))
                for call, figures in self._calls.items()
            }
