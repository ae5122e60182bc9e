"""The periodic retention sweep (pipeline/graph/retention.py) inside every worker, one at a time
across workers by a Redis lock, every MEMSYNC_SWEEP_INTERVAL seconds (0: never); the same
sweep runs on demand as `memsync graph sweep`."""

from __future__ import annotations

import logging

from memsync import keys
from pipeline.graph.retention import sweep
from workers.worker import runtime
from workers.worker.periodic import PeriodicStep

log = logging.getLogger("memsync.sweep")


class SweepStep(PeriodicStep):
    """A worker bootstep: the retention sweep every MEMSYNC_SWEEP_INTERVAL seconds (0: never)."""

    thread_name = "memsync-sweep"
    fallback_interval = 3600.0

    def interval(self) -> float:
        return float(runtime.settings().sweep_interval)

    def tick(self, hostname: str) -> None:
        tick(hostname)


def tick(hostname: str) -> bool:
    """One sweep if no other worker holds the lock this interval; whether it ran."""
    settings = runtime.settings()
    client = runtime.redis_client()
    # The lock lapses by itself, so one sweep per interval at most, whoever runs it.
    if not client.set(keys.RETENTION_LOCK, hostname, nx=True, ex=max(settings.sweep_interval, 60)):
        return False
    report = sweep(runtime.graph(), retention_days=settings.episode_retention_days)
    if report.facts_expired or report.episodes_deleted:
        log.warning(
            "retention sweep deleted %d expired fact(s) and %d old episode(s); kept %d",
            report.facts_expired,
            report.episodes_deleted,
            report.episodes_kept,
        )
    return True
