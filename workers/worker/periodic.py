"""A worker bootstep that runs a tick every interval from a small thread of its own.

A thread rather than the worker's timer, because the consumer resets its event loop (and the
timer entries on it) each time it reconnects to the broker. Each tick passes the fork gate
(workers/worker/forkgate.py); a failing tick is logged and the next one tries again.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, ClassVar

from celery import bootsteps

from workers.worker import forkgate

log = logging.getLogger("memsync.worker")


class PeriodicStep(bootsteps.StartStopStep):
    """Subclasses name the thread, say the interval (0: do not run) and do the tick."""

    thread_name: ClassVar[str] = "memsync-periodic"
    fallback_interval: ClassVar[float] = 60.0

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def interval(self) -> float:
        raise NotImplementedError

    def tick(self, hostname: str) -> None:
        raise NotImplementedError

    def prepare(self, worker: Any) -> None:
        """Hook: what the ticks need from the worker, set up before the thread starts."""

    def start(self, worker: Any) -> None:
        if not self._interval():
            return
        self.prepare(worker)
        self.thread = threading.Thread(
            target=self._loop, args=(worker.hostname,), name=self.thread_name, daemon=True
        )
        self.thread.start()

    def stop(self, worker: Any) -> None:
        self.stopping.set()

    def _loop(self, hostname: str) -> None:
        while not self.stopping.wait(self._interval() or self.fallback_interval):
            try:
                with forkgate.working():
                    self.tick(hostname)
            except Exception:  # the next tick tries again; this thread must never end early
                log.exception("%s tick failed", self.thread_name)

    def _interval(self) -> float:
        try:
            return self.interval()
        except Exception:  # settings were checked at start; a later failure must not stop us
            log.exception(
                "%s interval unreadable; using %ss", self.thread_name, self.fallback_interval
            )
            return self.fallback_interval
