"""The reconciler: re-sends turns that stayed unsettled too long (a message lost by the broker).

It runs inside every worker on a timer (one sweep at a time across workers, by a Redis lock),
and on demand as `memsync reconcile`. Re-sending is safe: every write is idempotent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from celery import bootsteps

from workers.inflight import InFlight
from workers.ledger import Ledger

log = logging.getLogger("memsync.reconcile")

LOCK_KEY = "memsync:reconcile:lock"


@dataclass
class SweepReport:
    resent: list[str] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)


def sweep(
    inflight: InFlight,
    ledger: Ledger,
    send: Callable[[list[dict[str, Any]]], None],
    older_than: float,
) -> SweepReport:
    """Settle what the ledger shows finished; send the rest again as ingest tasks."""
    report = SweepReport()
    due = inflight.due(older_than)
    if not due:
        return report
    statuses = ledger.statuses(
        [(str(p.get("tenant", "default")), str(p["event_id"])) for _, p in due]
    )
    for (tid, payload), status in zip(due, statuses, strict=True):
        if status.finished:
            report.settled.append(tid)
        else:
            send([payload])
            report.resent.append(tid)
    inflight.untrack(report.settled)
    inflight.touch(report.resent)
    return report


class ReconcileStep(bootsteps.StartStopStep):
    """A worker bootstep: sweep every MEMSYNC_RECONCILE_INTERVAL seconds from a small thread.

    A thread rather than the worker's timer, because the consumer resets its event loop (and
    the timer entries on it) each time it reconnects to the broker.
    """

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, worker: Any) -> None:
        self.thread = threading.Thread(
            target=self._loop, args=(worker.hostname,), name="memsync-reconcile", daemon=True
        )
        self.thread.start()

    def stop(self, worker: Any) -> None:
        self.stopping.set()

    def _loop(self, hostname: str) -> None:
        from workers import runtime

        interval = runtime.settings().reconcile_interval
        while not self.stopping.wait(interval):
            self._tick(hostname)

    def _tick(self, hostname: str) -> None:
        from workers import runtime

        settings = runtime.settings()
        client = runtime.redis_client()
        try:
            if not client.set(LOCK_KEY, hostname, nx=True, ex=settings.reconcile_interval):
                return
            report = sweep(
                InFlight(client), runtime.ledger(), _send_ingest, settings.reconcile_after
            )
        except Exception as exc:  # the next tick tries again; a sweep must never stop a worker
            log.warning("reconcile sweep failed: %s", exc)
            return
        if report.resent:
            log.warning("re-sent %d unsettled turn(s): %s", len(report.resent), report.resent[:5])


def _send_ingest(payload: list[dict[str, Any]]) -> None:
    from workers.app import app
    from workers.settings import INGEST_QUEUE

    app.send_task("memsync.ingest", args=(payload,), queue=INGEST_QUEUE)
